"""Code that already dispatches per device type, and CUDA branches an NPU run may skip.

timm's loaders and distributed helpers test ``device.type == 'cuda'`` next to
``device.type == 'npu'``: the CUDA branch is one case of several, not a
hard-coded device, so the CUDA rules stay quiet about the test and about the
``torch.cuda`` calls it guards.

``if fabric.device.type == 'cuda': print(torch.cuda.max_memory_allocated())``
(litgpt) is an optional report: on an NPU the test is False and only the
report is missing, so neither the test nor the ``torch.cuda`` calls it guards
are findings. So are other branches an NPU run skips without losing anything:
an estimate whose result was first set to ``None`` ("unknown", litgpt
``utils.py``: ``fits_in_memory = None; if torch.cuda.is_available(): try: ...``),
a CUDA reseed after ``torch.manual_seed`` (which seeds every device, the NPU
included), a CUDA-graph step marker, and a check that only raises for a CUDA
case. A branch that does anything else (AMP, half precision, a fused kernel,
a device move, a return) decides what the NPU run does and stays reported.
"""
from __future__ import annotations

import ast
import operator
import re
from typing import Iterator, List, Optional, Sequence, Tuple

from ..walk import assign_targets, block_of, walk_tree
from .training import last_name
from .unused import never_read

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NPU = re.compile(r"npu(:\d+)?")
_CUDA = re.compile(r"cuda(:\d+)?")


def _compares_with(test: ast.AST, pattern: re.Pattern) -> bool:
    """``test`` holds a comparison with a string constant ``pattern`` matches (``x.type == 'npu'``), or a prefix
    test of a device string (``device.startswith('npu:')``)."""
    for node in walk_tree(test):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and isinstance(side.value, str) and pattern.fullmatch(side.value):
                    return True
                if isinstance(side, ast.Attribute) and side.attr.isupper() and pattern.fullmatch(side.attr.lower()):
                    return True  # an enum member: ``device_type == DeviceType.CUDA`` (llamafactory 0.9.5)
        elif isinstance(node, ast.Call) and _prefix_test(node, pattern):
            return True
    return False


def _prefix_test(call: ast.Call, pattern: re.Pattern) -> bool:
    """``device.startswith('cuda:')``: a device string tested for its type (open_clip 3.2.0
    open_clip_train/distributed.py:48-51 dispatches ``set_device`` so)."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "startswith" and len(call.args) == 1 and isinstance(
        call.args[0], ast.Constant) and isinstance(call.args[0].value, str) and bool(
        pattern.fullmatch(call.args[0].value.rstrip(":")))


_NPU_FLAG = re.compile(r"(^|_)(is|use|on|can_use)_npu($|_)")


def _npu_probe(node: ast.AST) -> bool:
    """A question that is True on an NPU machine: ``is_torch_npu_available()``, ``torch.npu.is_available()``,
    ``hasattr(torch, 'npu')``, or a flag named for it (``self.is_npu``, ``_CAN_USE_NPU_ATTN``)."""
    if isinstance(node, ast.Call):
        func = node.func
        name = (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")).lower()
        if name == "hasattr" and len(node.args) == 2:
            return isinstance(node.args[1], ast.Constant) and node.args[1].value == "npu"
        owner = func.value if isinstance(func, ast.Attribute) else None
        owner_name = (owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")).lower()
        return "avail" in name and ("npu" in name or owner_name == "npu")
    if isinstance(node, (ast.Name, ast.Attribute)):
        return bool(_NPU_FLAG.search((node.attr if isinstance(node, ast.Attribute) else node.id).lower()))
    return False


# ``npu`` as a word or a name's part (``'npu'``, ``torch.npu``, ``is_npu_available``, ``NPU``), not inside another
# word: ``input`` says "npu" too, and almost every file has an input
_NPU_WORD = re.compile(r"(?<![a-z])npu", re.IGNORECASE)


def _mentions_npu(lines: Sequence[str]) -> bool:
    """The text says ``npu`` in some case: every NPU case (a string, a name, ``hasattr(torch, 'npu')``) does, so
    code without it has none and is not walked (most files never say it)."""
    return any(_NPU_WORD.search(line) for line in lines if "pu" in line or "PU" in line)


def has_npu_branch(ctx) -> bool:
    """The function around the checked node also has an NPU case (``_npu_case``)."""
    return _npu_case(ctx.enclosing(*_FUNCTIONS), ctx)


def _npu_value(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(_NPU.fullmatch(node.value))


def _npu_case(function: Optional[ast.AST], ctx) -> bool:
    """``function`` also has an NPU case: a test for ``'npu'``, an NPU availability question, or the NPU device
    string as a value (xtuner 0.2.0 _lite/device.py:7-13: ``if torch.cuda.is_available(): device = "cuda"``, else
    ``import torch_npu`` and ``device = "npu"``): it chooses the NPU too (memoised per function)."""
    if function is None or not ctx.memo("npu_in_file", lambda c: _mentions_npu(c.lines)):
        return False
    return ctx.memo(f"npu_branch.{id(function)}", lambda c: _mentions_npu(
        c.lines[function.lineno - 1:function.end_lineno]) and (_compares_with(function, _NPU) or any(
        (isinstance(n, (ast.If, ast.IfExp)) and any(_npu_probe(t) for t in walk_tree(n.test))) or
        (isinstance(n, ast.BoolOp) and any(_npu_probe(v) for v in n.values)) or _npu_value(n)
        for n in walk_tree(function))))


def _test_holding(read, loose: bool) -> Tuple[Optional[ast.AST], int]:
    """The ``if`` whose test is ``read``, alone or ``and``-ed with more, and its position in ``read.path``; ``loose``:
    also a conditional expression or a ``while``, and the read negated or in an ``or``. (None, -1) where the read is
    used otherwise."""
    holders = (ast.If, ast.IfExp, ast.While) if loose else (ast.If,)
    child = read.node
    for position, parent in enumerate(read.path):
        if isinstance(parent, holders) and child is parent.test:
            return parent, position
        if not (isinstance(parent, (ast.BoolOp, ast.UnaryOp)) if loose else
                isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And)):
            return None, -1
        child = parent
    return None, -1


def _tested_in(read) -> Optional[ast.AST]:
    """The function whose ``if`` (or conditional expression) tests ``read``, or None."""
    holder, position = _test_holding(read, loose=True)
    return None if holder is None else next((p for p in read.path[position + 1:] if isinstance(p, _FUNCTIONS)), None)


def decided_with_npu_case(node: ast.AST, ctx) -> bool:
    """``node`` (a ``torch.cuda`` question) is bound to a name, local or module-level, whose every read is the test
    of a branch in a function that has an NPU case too (xtuner 0.2.0 utils/device.py:23, ``is_cuda_available =
    torch.cuda.is_available()`` read only by ``if is_cuda_available: ... elif is_npu_available: device = "npu"``):
    the code chooses the NPU where it asks."""
    parents = (parent for parent, _ in ctx.lineage(node))
    call, assign = next(parents, None), next(parents, None)
    if not (isinstance(call, ast.Call) and call.func is node and isinstance(assign, ast.Assign)
            and assign.value is call and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)):
        return False
    name = assign.targets[0]
    reads = ctx.model.reads(ctx.model.function(name) or ctx.tree, name.id)
    return bool(reads) and all(_npu_case(_tested_in(read), ctx) for read in reads)


# the NVIDIA compute capability (SM version): code that compares it picks kernels built for an NVIDIA architecture
_CAPABILITY = frozenset({"torch.cuda.get_device_capability", "torch.cuda.get_device_properties"})
# what an architecture gate may decide that the NPU also has: a precision
_PRECISION = re.compile(r"bf16|bfloat16|fp16|float16|half|precision|tf32|autocast|(^|\W|_)amp(\W|_|$)", re.I)


def _capability(expr: ast.AST, ctx) -> Optional[ast.Call]:
    """The call in ``torch.cuda.get_device_capability()[0]``, ``torch.cuda.get_device_properties(d).major``."""
    while isinstance(expr, (ast.Subscript, ast.Attribute)) and not (
            isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
        expr = expr.value
    return expr if isinstance(expr, ast.Call) and ctx.qualname(expr.func) in _CAPABILITY else None


def _protected(call: ast.Call, root: ast.AST, ctx) -> bool:
    """The capability is asked only where CUDA is there: ``and``-ed after a CUDA test in ``root``
    (``torch.cuda.is_available() and ...``), or of a tensor's own device (``get_device_capability(query.device)``,
    a kernel choice for that tensor, reached for CUDA tensors). Asked bare, it raises on a machine without CUDA."""
    if call.args and isinstance(call.args[0], ast.Attribute) and call.args[0].attr == "device":
        return True
    return isinstance(root, ast.BoolOp) and isinstance(root.op, ast.And) and any(
        _positive_cuda_test(value, ctx) for value in root.values if not any(n is call for n in walk_tree(value)))


def architecture_gate(node: ast.AST, ctx) -> bool:
    """``node`` is part of an expression that compares the NVIDIA compute capability with a version, ``and``-ed
    after ``torch.cuda.is_available()`` or asked of a tensor's device (torchtune 0.6.1 utils/_import_guard.py:13,
    flex attention from SM 7.5; diffusers 0.42.1 quantizers/gguf/utils.py:35, attention_dispatch.py:478): a gate for
    kernels built for an NVIDIA architecture (Triton, FP8, flash-attention), which no NPU has; the NPU run takes the
    portable path.
    A gate whose statement decides a precision (``use_bf16 = ... >= (8, 0)``) stays reported: the NPU has it; so
    does one that asks bare, which raises without CUDA (``_protected``)."""
    root, statement = node, None
    for parent, child in ctx.lineage(node):
        if isinstance(parent, ast.stmt):
            statement = parent
            break
        root = parent
    calls = [call for n in walk_tree(root) if isinstance(n, ast.Compare)
             for call in (_capability(side, ctx) for side in (n.left, *n.comparators)) if call is not None]
    if statement is None or not calls or not all(_protected(call, root, ctx) for call in calls):
        return False
    return not _PRECISION.search(ast.unparse(statement))


def in_cuda_test(node: ast.AST, ctx) -> bool:
    """``node`` is part of a CUDA test: ``x.type == 'cuda'``, ``torch.cuda.is_available()``, ``x.is_cuda``
    (``cuda_branch_test`` answers for the code such a test guards), in an ``if`` or kept in a flag
    (``cuda_support = torch.cuda.is_available() and torch.cuda.is_bf16_supported()``)."""
    holder = _test_holder(node, ctx)
    if holder is not None:
        return _positive_cuda_test(holder.test, ctx)
    root = node
    for parent, _ in ctx.lineage(node):
        if not isinstance(parent, _TEST_PARTS):
            return isinstance(parent, ast.Assign) and parent.value is root and _positive_cuda_test(root, ctx)
        root = parent
    return False


_TEST_PARTS = (ast.Call, ast.Attribute, ast.BoolOp, ast.Compare, ast.UnaryOp)


def unmet_cuda_request(node: ast.AST, ctx) -> bool:
    """``node`` is part of an ``if`` test that asks for a device named CUDA *and* finds CUDA missing: ``if
    device.type == "cuda" and not torch.cuda.is_available():`` (funasr 1.4.16 moss_transcribe_diarize/model.py:380,
    falling back to the CPU; anomalib 2.7.0 deploy/inferencers/torch_inferencer.py:163, raising a clear error). It
    handles a user who asked for CUDA where there is none; an NPU run asks for the NPU and never enters it.
    So is a test that finds an object off the CPU where CUDA is missing, when its branch raises nothing (chemprop
    2.2.1 models/model.py:254, ``not torch.cuda.is_available() and metric.device.type != "cpu"`` rebuilds a metric
    loaded from a GPU checkpoint): the code's own answer for a machine without CUDA, which an NPU machine is."""
    holder = _test_holder(node, ctx)
    if holder is None:
        return False
    test = next(parent for parent, _ in ctx.lineage(node) if parent is holder or (
        isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And)))
    if test is holder or not any(_negated_cuda_test(v, ctx) for v in test.values):
        return False
    return any(isinstance(v, ast.Compare) and _positive_cuda_test(v, ctx) for v in test.values) or (
        any(_off_cpu(v) for v in test.values) and not (isinstance(holder, ast.If) and any(
            isinstance(n, (ast.Raise, ast.Assert)) for s in holder.body for n in walk_tree(s))))


def _off_cpu(test: ast.AST) -> bool:
    """``x.device.type != "cpu"``, ``x.device != "cpu"``: the object sits on some accelerator."""
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.NotEq, ast.IsNot)) \
        and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "cpu" and isinstance(
            test.left, ast.Attribute) and "device" in (test.left.attr, getattr(test.left.value, "attr", ""))


def _test_holder(node: ast.AST, ctx) -> Optional[ast.AST]:
    """The ``if`` / ``x if ... else`` whose test ``node`` is part of (through calls, attributes, comparisons,
    ``and``/``or`` and ``not``), or None."""
    for parent, child in ctx.lineage(node):
        if isinstance(parent, (ast.If, ast.IfExp)):
            return parent if child is parent.test else None
        if not isinstance(parent, _TEST_PARTS):
            return None
    return None


# torch.cuda queries and housekeeping that change no result: memory and device statistics, profiling ranges
# (not synchronize or events: skipping them makes the NPU timings wrong, yolov5 torch_utils.py time_sync)
_DIAGNOSTIC_CUDA = re.compile(r"torch\.cuda\.(is_available|device_count|current_device|get_device_(name|properties|"
                              r"capability)|empty_cache|mem_get_info|utilization|nvtx\..*|"
                              # a debugging switch: warn or fail on synchronising calls (torch 2.13.0
                              # torch/cuda/__init__.py, set_sync_debug_mode; audiocraft 1.3.0 solvers/musicgen.py:308)
                              r"set_sync_debug_mode|get_sync_debug_mode|"
                              r"(max_)?memory_\w+|reset_(peak|max)_memory_\w+|memory_summary|"
                              # the memory profiler's history and snapshots (torchtune 0.6.1 recipes)
                              r"memory\._(record_memory_history|dump_snapshot|snapshot))")
# CUDA-graph step markers: without CUDA graphs there is no step to mark
_CUDAGRAPH_MARKERS = frozenset({"torch._inductor.cudagraph_mark_step_begin", "torch.compiler.cudagraph_mark_step_begin"})
# CUDA reseeds: redundant after torch.manual_seed, which seeds every device's generator (torch/random.py:
# manual_seed calls torch.cuda.manual_seed_all and _seed_custom_device, the NPU's)
_CUDA_RESEEDS = frozenset({"torch.cuda.manual_seed", "torch.cuda.manual_seed_all"})
# calls that only report: printing, logging, collecting a metric
_REPORTING = frozenset({"print", "log", "info", "debug", "warning", "warn", "write", "append", "setdefault", "format",
                        "round", "int", "float", "str", "len", "max", "min", "sum", "abs", "log_dict", "log_metrics",
                        # text only: a device name normalised to be matched (``props.name.lower()``)
                        "lower", "upper", "casefold", "strip", "startswith", "endswith",
                        # questions about an object (``if hasattr(torch, "version"): logger.info(...)``)
                        "hasattr", "getattr", "isinstance"})


# calls that show a value to a person: the console, a logger, a progress bar, a metrics writer
SHOWN_BY = frozenset({"print", "log", "info", "debug", "warning", "warn", "write", "log_dict", "log_metrics",
                       "add_scalar", "set_postfix", "set_description"})
_TYPING_WRAPPERS = frozenset({"typing.Union", "typing.Optional"})


def only_reported(node: ast.AST, qualname: str, ctx) -> bool:
    """``node`` is a CUDA statistic (``torch.cuda.max_memory_allocated()``, which is 0 where CUDA never started)
    whose value only goes into a report of the same statement: ``print(f"Memory used: {...} GB")`` (litgpt 0.5.13
    generate/sequentially.py:287), a message (an f-string with words) or an entry labelled with words
    (``"GPU Enabled": str(th.cuda.is_available())``, stable-baselines3 2.9.2 common/utils.py:615), or through a
    local name that only reports read (``shown_through_name``); text formatted with ``.format`` or ``%`` is a message
    too (funasr 1.4.16 train_utils/trainer.py:714-722). On an NPU only the figure is missing; nothing runs
    differently."""
    if not _DIAGNOSTIC_CUDA.fullmatch(qualname):
        return False
    if shown_through_name(node, ctx):
        return True
    for parent, child in ctx.lineage(node):
        if isinstance(parent, ast.Call) and child is not parent.func:
            func = parent.func
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in SHOWN_BY:
                return True
        if _formatted_into_words(parent, child):
            return True  # ``"GPU, memory: {:.3f} GB".format(...)``, ``"GPU memory: %.3f GB" % ...``
        if _message(parent) or (isinstance(parent, ast.Dict) and any(
                value is child and _message_text(key) for key, value in zip(parent.keys, parent.values))):
            return True  # words for a person: a message, an entry labelled ``"GPU Enabled"``
        if isinstance(parent, (ast.stmt, ast.Lambda, ast.comprehension)):
            return False
    return False


# the value of an assignment may pass through these on its way from the CUDA expression to the name: a choice, a
# comparison, arithmetic, a device built from a string, a conversion
_CARRIES = (ast.IfExp, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.JoinedStr, ast.FormattedValue,
            ast.keyword)
_CONVERSIONS = frozenset({"str", "int", "float", "round", "bool", "repr"})
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)


def _assigned_name(node: ast.AST, ctx, program: bool = False) -> Optional[ast.Name]:
    """The local name (of a function) that the statement holding ``node`` binds to a value carrying ``node``
    (``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")``): only choices, comparisons,
    arithmetic, f-strings, ``torch.device(...)`` and conversions lie between ``node`` and the name; None otherwise.
    ``program``: a module-level name too, of a module no other module imports (``ctx.program``), whose names no
    one else reads."""
    return _bound_name(ctx.lineage(node), ctx, program)


def _bound_name(lineage, ctx, program: bool, first: bool = True) -> Optional[ast.Name]:
    """``_assigned_name`` along ``lineage``, the (parent, child) pairs from a node outwards; ``first``: the node
    itself may be the function of the call that carries it (``torch.cuda.is_available`` in ``...()``)."""
    for parent, child in lineage:
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = assign_targets(parent)
            if child is not parent.value or len(targets) != 1 or not isinstance(targets[0], ast.Name):
                return None
            function = ctx.model.function(targets[0])
            if function is None:
                return targets[0] if program and ctx.model.scope(targets[0]) is ctx.model.module and \
                    ctx.program() else None
            return None if targets[0].id in ctx.model.scopes[id(function)].shared else targets[0]
        if isinstance(parent, ast.Call):
            if child is parent.func:
                if not first:
                    return None
            elif not (ctx.qualname(parent.func) == "torch.device" or (
                    isinstance(parent.func, ast.Name) and parent.func.id in _CONVERSIONS)):
                return None
        elif not isinstance(parent, _CARRIES):
            return None
        first = False
    return None


def _message_text(node: ast.AST) -> bool:
    """A string constant with a space in it: text for a person (a device string never has one)."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value


def _message(node: Optional[ast.AST]) -> bool:
    """An f-string with text for a person in it (``f"GPU Max Mem: {mb:.0f} MB"``, ignite 0.5.5
    handlers/fbresearch_logger.py:155): whatever it holds only becomes words."""
    return isinstance(node, ast.JoinedStr) and any(_message_text(part) for part in node.values)


def _formatted_into_words(parent: ast.AST, child: ast.AST) -> bool:
    """``parent`` formats ``child`` into text for a person: ``"Device: {}".format(child)``, ``"Device: %s" % child``."""
    if isinstance(parent, ast.Call):
        func = parent.func
        return child is not func and isinstance(func, ast.Attribute) and func.attr == "format" and \
            _message_text(func.value)
    return isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mod) and child is not parent.left and \
        _message_text(parent.left)


def _shown(read) -> bool:
    """A read whose ancestors (``read.path``, innermost first) only turn it into text for a person: an argument of a
    print, log or progress-bar call, directly or through ``str()``, a tuple, a dict, or a message it is formatted
    into (``f"Device: {device}"``, ``"Device: {}".format(device)``, ``"Device: %s" % device``)."""
    child = read.node
    for parent in read.path:
        if isinstance(parent, ast.Call):
            func = parent.func
            if child is func:
                return False
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in SHOWN_BY or _formatted_into_words(parent, child):
                return True
            if not (isinstance(func, ast.Name) and name in _CONVERSIONS):
                return False
        elif isinstance(parent, ast.JoinedStr):
            if _message(parent):
                return True
        elif isinstance(parent, ast.BinOp):
            if _formatted_into_words(parent, child):
                return True
            if not isinstance(parent.op, _ARITHMETIC):  # a difference of shown figures is shown (``{b - a} s``)
                return False
        elif not isinstance(parent, (ast.FormattedValue, ast.Tuple, ast.List, ast.Dict, ast.keyword, ast.Starred)):
            return False
        child = parent
    return False


def shown_through_name(node: ast.AST, ctx) -> bool:
    """``node`` (a CUDA device string, a ``torch.cuda`` question or statistic) is bound to a local name whose every
    read only shows it to a person: ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` read
    only by ``print(f"Device: {device}")`` (litgpt 0.5.13 api.py:703), ``pt_cuda_available =
    torch.cuda.is_available()`` read only in the text of an environment report (diffusers 0.42.1
    commands/env.py:80), or at the top of a program (coqui-tts 0.27.2 bin/train_encoder.py:37, ``num_gpus =
    torch.cuda.device_count()`` read only by ``print(" > Number of GPUs: ", num_gpus)``). On an NPU only the
    figure differs; nothing runs differently. Nor where nothing reads the name at all (``unused.never_read``). A
    name also read by anything else (``.to(device)``, an ``if``, a return, another call) is not."""
    name = _assigned_name(node, ctx, program=True)
    return name is not None and (_only_shown(name, ctx, _CARRIED_DEPTH) or never_read(ctx, name))


# how many local names a shown value may pass through (``memory_change = memory_after - memory_before``)
_CARRIED_DEPTH = 2


def _only_shown(name: ast.Name, ctx, depth: int) -> bool:
    """Every read of the local ``name`` shows it to a person, directly or through another local name bound to a
    value carrying it whose every read does (ms-swift 4.4.0 rlhf_trainers/utils.py:424-458, ``memory_after``
    logged, and logged again as ``memory_change = memory_after - memory_before``)."""
    reads = ctx.model.reads(ctx.model.function(name) or ctx.tree, name.id)
    return bool(reads) and all(_shown(read) or (depth > 0 and _shown_through(read, ctx, depth - 1)) for read in reads)


def _shown_through(read, ctx, depth: int) -> bool:
    """``read`` is carried into another local name that is only shown (``_only_shown``)."""
    name = _bound_name(zip(read.path, (read.node,) + tuple(read.path[:-1])), ctx, program=True, first=False)
    return name is not None and _only_shown(name, ctx, depth)


def names_a_type(node: ast.AST, ctx) -> bool:
    """``node`` is only named as a type: in an annotation or a ``Union[...]``/``Optional[...]`` (mmpose 1.3.2
    structures/multilevel_pixel_data.py:12, ``IndexType = Union[..., torch.cuda.BoolTensor, ...]``): nothing runs."""
    for parent, child in ctx.lineage(node):
        if isinstance(parent, (ast.arg, ast.AnnAssign)) and child is parent.annotation or (
                isinstance(parent, _FUNCTIONS) and child is parent.returns):
            return True
        if isinstance(parent, ast.Subscript) and child is parent.slice and (
                ctx.qualname(parent.value) in _TYPING_WRAPPERS):
            return True
        if isinstance(parent, (ast.stmt, ast.Call)):
            return False
    return False


# a function whose name says it only diagnoses: checks, logs, prints or reports (litgpt 0.5.13
# finetune/adapter.py:145, ``if torch.cuda.is_available() and devices > 1: check_nvlink_connectivity(fabric)``)
_DIAGNOSES = re.compile(r"_?(check|verify|log|print|report|warn|show|dump)(_|$)")
# what a torch.profiler.profile writes out: trace files for a person to read (torch 2.13 torch/profiler/profiler.py)
_PROFILER_EXPORTS = frozenset({"export_chrome_trace", "export_memory_timeline", "export_stacks"})
# a function whose name says it returns statistics (``get_memory_stats``)
_STATISTICS = re.compile(r"(^|_)stats$")
# additions to a collection, which ``_into_report`` follows to where the collection goes
_COLLECTS = frozenset({"update", "append", "extend", "setdefault"})


def _positive_cuda_test(test: ast.AST, ctx) -> bool:
    """``x.type == 'cuda'``, ``torch.cuda.is_available()``, ``x.is_cuda``, possibly ``and``-ed with more, never
    negated: False on an NPU."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_positive_cuda_test(v, ctx) for v in test.values)
    if isinstance(test, ast.Compare):
        if _count_on_npu(test, ctx) is False:
            return True
        return _equals_cuda(test)
    if isinstance(test, ast.Attribute):
        return test.attr == "is_cuda"
    if isinstance(test, ast.Name):  # a flag holding the answer: cuda_available = torch.cuda.is_available()
        return _cuda_question(test, ctx) is not None or _cuda_flag(test, ctx)
    return isinstance(test, ast.Call) and (ctx.qualname(test.func) in _CUDA_QUESTIONS or _prefix_test(test, _CUDA)
                                           or _cuda_probe(test))


def _cuda_probe(call: ast.Call) -> bool:
    """A library's CUDA availability question, named for it: ``is_torch_cuda_available()`` (transformers),
    ``is_cuda_available()`` (accelerate), as ``_npu_probe`` reads their NPU counterparts."""
    func = call.func
    name = (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")).lower()
    return name.startswith("is_") and "cuda" in name and "avail" in name


# questions whose answer is False (or 0) on a machine without CUDA
_CUDA_QUESTIONS = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})
# a comparison's operator, to evaluate it with the count 0 on its left
_OPERATORS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Gt: operator.gt, ast.GtE: operator.ge,
              ast.Lt: operator.lt, ast.LtE: operator.le}


def _cuda_question(name: ast.Name, ctx) -> Optional[ast.Call]:
    """The ``torch.cuda.is_available()`` / ``torch.cuda.device_count()`` call a name (``cuda_available``,
    ``num_gpus``) was bound to, or None."""
    binding = ctx.model.binding(name)
    value = binding.value if binding is not None else None
    return value if isinstance(value, ast.Call) and ctx.qualname(value.func) in _CUDA_QUESTIONS else None


def _cuda_flag(name: ast.Name, ctx) -> bool:
    """A name bound once in its function to a comparison with ``'cuda'``, possibly ``and``-ed with more
    (audiocraft 1.3.0 solvers/musicgen.py:354, ``check_synchronization_points = idx == 1 and self.device ==
    'cuda'``): False on an NPU."""
    home = ctx.model.scope(name).home(name.id)
    bindings = home.bindings.get(name.id, []) if home is not None else []
    if len(bindings) != 1:
        return False
    value = bindings[0].value
    parts = value.values if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And) else [value]
    return any(isinstance(part, ast.Compare) and _equals_cuda(part) for part in parts)


def _equals_cuda(test: ast.Compare) -> bool:
    """``x.type == 'cuda'``, ``device is 'cuda:0'``: one equality with a CUDA device string; or a device string
    that holds one (f5-tts 1.1.22 infer/utils_infer.py:194, ``"cuda" in device``, the same question of a string)."""
    if len(test.ops) != 1:
        return False
    if isinstance(test.ops[0], ast.In):
        return isinstance(test.left, ast.Constant) and isinstance(test.left.value, str) and bool(
            _CUDA.fullmatch(test.left.value))
    return isinstance(test.ops[0], (ast.Eq, ast.Is)) and _compares_with(test, _CUDA)


def _count_on_npu(test: ast.Compare, ctx) -> Optional[bool]:
    """The value on a machine without CUDA (no CUDA device: the count is 0) of a comparison of the CUDA device count
    with a number (``torch.cuda.device_count() > 1``, ``num_gpus == 0``, pyannote.audio 3.3.2
    pipelines/utils/getter.py:189-197), or None for any other test."""
    if len(test.ops) != 1 or type(test.ops[0]) not in _OPERATORS:
        return None
    count, number = test.left, test.comparators[0]
    if not (isinstance(number, ast.Constant) and type(number.value) is int):
        return None
    if isinstance(count, ast.Name):
        count = _cuda_question(count, ctx)
    if not (isinstance(count, ast.Call) and ctx.qualname(count.func) == "torch.cuda.device_count"):
        return None
    return _OPERATORS[type(test.ops[0])](0, number.value)


def tensor_dispatch(test: Optional[ast.AST]) -> bool:
    """``x.is_cuda`` (possibly ``and``-ed with more) on a tensor, not a ``self.is_cuda`` flag: the tensor's own
    device picks the CUDA kernel, and a tensor on the NPU takes the code's other path (whisper 20250625
    timing.py:142, diffusers 0.42.1 quantizers/bfl/utils.py:177)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(tensor_dispatch(value) for value in test.values)
    return isinstance(test, ast.Attribute) and test.attr == "is_cuda" and not (
        isinstance(test.value, ast.Name) and test.value.id == "self")


def tensor_dispatched_flag(node: ast.AST, ctx) -> bool:
    """``node`` runs in the body of ``if self.flag:`` where the class sets ``self.flag`` to a true constant only in
    the body of a test of a tensor's own ``.is_cuda``, and otherwise only to false constants (mmagic 1.2.0
    models/editors/basicvsr_plusplus_net/basicvsr_plusplus_net.py:299-302, ``self.cpu_cache = True`` only when
    ``lqs.is_cuda``; :277-279 and :316-321 free the CUDA cache under it): as under the tensor's own test, an input
    on the NPU takes the other path."""
    cls = ctx.enclosing(ast.ClassDef)
    for parent, child in ctx.lineage(node) if cls is not None else ():
        if isinstance(parent, _FUNCTIONS + (ast.ClassDef, ast.Lambda)):
            return False
        test = parent.test if isinstance(parent, ast.If) and any(s is child for s in parent.body) else None
        if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self":
            return ctx.memo(f"dispatched_flag.{id(cls)}.{test.attr}", lambda c: _set_for_cuda_tensors(cls, test.attr))
    return False


def _set_for_cuda_tensors(cls: ast.ClassDef, attr: str) -> bool:
    """Every ``self.<attr> = ...`` of ``cls`` assigns a constant, a true one only in the body of a tensor's own
    ``.is_cuda`` test, and at least one does."""
    dispatched = {id(s) for n in walk_tree(cls) if isinstance(n, ast.If) and tensor_dispatch(n.test) for s in n.body}
    sets = [n for n in walk_tree(cls) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) and t.value.id == "self"
        for t in n.targets)]
    return any(id(s) in dispatched for s in sets) and all(
        isinstance(s.value, ast.Constant) and (not s.value.value or id(s) in dispatched) for s in sets)


def moves_tested_object(call: ast.Call, test: Optional[ast.AST]) -> bool:
    """``call`` (``m.cuda()``) moves the object whose own device ``test`` asks about, or whose parameters it asks
    about (mmrazor 1.0.0 structures/subnet/fix_subnet.py:167-168, ``if next(copied_model.parameters()).is_cuda:
    copied_model.cuda()``): it only moves what already sits on CUDA, and on an NPU the object sits on the NPU and
    stays there. Moving another object under such a test (mmagic 1.2.0 inst_colorization/color_utils.py:48,
    s3prl 0.4.17 nn/speaker_loss.py:118, ``if x.is_cuda: y = y.cuda()``) leaves that one on the CPU when ``x`` is
    on the NPU, a device mismatch, and stays reported."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if test is None or not isinstance(receiver, (ast.Name, ast.Attribute)):
        return False
    spelled = ast.dump(receiver)
    return any(ast.dump(part) == spelled for subject in _device_subjects(test) for part in _bases(subject))


def _device_subjects(test: ast.AST) -> Iterator[ast.AST]:
    """The objects whose own device a positive CUDA test asks about: ``x`` in ``x.is_cuda`` (not a ``self.is_cuda``
    flag), ``x.device.type == 'cuda'``, ``'cuda' in str(x.device)``, possibly ``and``-ed with more."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            yield from _device_subjects(value)
    elif tensor_dispatch(test):
        yield test.value
    elif isinstance(test, ast.Compare) and _equals_cuda(test):
        yield from (n.value for n in walk_tree(test) if isinstance(n, ast.Attribute) and n.attr == "device")


def _bases(expr: ast.AST) -> Iterator[ast.AST]:
    """``expr`` and what it is read from: ``next(m.parameters())`` -> ``m.parameters()``, ``m.parameters``, ``m``."""
    while expr is not None:
        yield expr
        if isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func if isinstance(expr.func, ast.Attribute) else (
                expr.args[0] if len(expr.args) == 1 and isinstance(expr.func, ast.Name) and
                expr.func.id in _READ_THROUGH else None)
        else:
            expr = None


# calls that hand on an element of their argument: ``next(m.parameters())``, ``str(x.device)``
_READ_THROUGH = frozenset({"next", "iter", "str", "list"})


def _negative_cuda_test(test: ast.AST, ctx) -> bool:
    """``not torch.cuda.is_available()``, ``torch.cuda.device_count() == 0``, ``device.type != 'cuda'``, possibly
    ``or``-ed with more: True on an NPU."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(_negative_cuda_test(v, ctx) for v in test.values)
    if isinstance(test, ast.Compare):
        return _count_on_npu(test, ctx) is True or (len(test.ops) == 1 and isinstance(
            test.ops[0], (ast.NotEq, ast.IsNot)) and _compares_with(test, _CUDA))
    return _negated_cuda_test(test, ctx)


def _anchor(test: ast.AST, ctx) -> ast.AST:
    """Where the finding on a CUDA test sits: the test itself, or for a flag (``if not cuda_available:``) the
    ``torch.cuda.is_available()`` call the flag was bound to, which carries the ASC201 finding."""
    for node in walk_tree(test):
        question = _cuda_question(node, ctx) if isinstance(node, ast.Name) else None
        if question is not None:
            return question
    return test


def _after_cuda_exit(parent: ast.AST, statement: ast.stmt, ctx) -> Optional[ast.AST]:
    """The test of an earlier ``if not torch.cuda.is_available(): return`` in ``statement``'s block (mmdet 3.1.0
    utils/profiling.py:21-23; ``if device.type != "cuda": return False``, unsloth 2026.10.9 models/lora_init.py:163):
    what follows runs only with CUDA."""
    exit_if = _earlier_exit(parent, statement, lambda test: _negative_cuda_test(test, ctx))
    return _anchor(exit_if.test, ctx) if exit_if is not None else None


def in_tensor_dispatch_test(node: ast.AST, ctx) -> bool:
    """``node`` is part of an ``if`` test that asks a tensor's own ``.is_cuda`` (``torch.cuda.is_available() and
    pred.is_cuda``, mmseg 1.2.2 models/losses/focal_loss.py:272): the tensor's device picks the kernel."""
    holder = _test_holder(node, ctx)
    return holder is not None and tensor_dispatch(holder.test)


def cuda_branch_test(node: ast.AST, ctx) -> Optional[ast.AST]:
    """The CUDA test (False on an NPU) that ``node`` runs behind: the test of an ``if``/``x if ... else`` whose
    body holds ``node``, a test ``and``-ed before it, or an earlier ``if not torch.cuda.is_available(): return`` of
    its block. A finding on that test says the branch turns off on an NPU; findings inside it fold into that one
    (``engine.fold``)."""
    for parent, child in ctx.lineage(node):
        if isinstance(child, ast.stmt):
            test = _after_cuda_exit(parent, child, ctx)
            if test is not None:
                return test
        if isinstance(parent, _FUNCTIONS + (ast.ClassDef, ast.Lambda)):
            return None
        if (isinstance(parent, ast.If) and any(s is child for s in parent.body)) or (
                isinstance(parent, ast.IfExp) and child is parent.body):
            if _positive_cuda_test(parent.test, ctx):
                return _anchor(parent.test, ctx)
        elif isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And):
            before = parent.values[:next(i for i, v in enumerate(parent.values) if v is child)]
            test = next((v for v in before if _positive_cuda_test(v, ctx)), None)
            if test is not None:
                return test
    return None


def _nccl_comparison(test: ast.AST, equal: bool) -> Optional[ast.Compare]:
    """``test`` when it compares a value with NCCL (``backend == 'nccl'``, ``backend == dist.Backend.NCCL``; with
    ``!=`` / ``is not`` when not ``equal``), or for ``==`` such a comparison among the parts of an ``and``."""
    if equal and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return next(filter(None, (_nccl_comparison(value, True) for value in test.values)), None)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
            test.ops[0], (ast.Eq, ast.Is) if equal else (ast.NotEq, ast.IsNot)) and any(
            (isinstance(side, ast.Constant) and isinstance(side.value, str) and side.value.lower() == "nccl") or
            (isinstance(side, (ast.Name, ast.Attribute)) and last_name(side) == "NCCL")
            for side in (test.left, test.comparators[0])):
        return test
    return None


def nccl_branch_test(node: ast.AST, ctx) -> Optional[ast.Compare]:
    """The comparison with the NCCL backend that ``node`` runs behind: the test of an ``if``/``elif`` whose body
    holds it (the ``else`` of ``!=``), or one ``and``-ed before it (ignite 0.5.5 distributed/comp_models/native.py:117
    ``if backend == dist.Backend.NCCL and not torch.cuda.is_available():``, :146 the NCCL barrier's
    ``device_ids=[torch.cuda.current_device()]``). ASC204 reports the comparison and ``--fix`` turns 'nccl' into
    'hccl', after which an NPU run takes the branch: its CUDA calls fold into that finding (``engine.fold``), which
    names them, and are ported with it."""
    for parent, child in ctx.lineage(node):
        if isinstance(parent, _FUNCTIONS + (ast.ClassDef, ast.Lambda)):
            return None
        if isinstance(parent, ast.If):
            test = _nccl_comparison(parent.test, True) if any(s is child for s in parent.body) else \
                _nccl_comparison(parent.test, False) if any(s is child for s in parent.orelse) else None
            if test is not None:
                return test
        elif isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And):
            before = parent.values[:next(i for i, v in enumerate(parent.values) if v is child)]
            test = next(filter(None, (_nccl_comparison(value, True) for value in before)), None)
            if test is not None:
                return test
    return None


def redundant_reseed(node: ast.AST, qualname: str, ctx) -> bool:
    """``torch.cuda.manual_seed_all(seed)`` in a function (or module) that also calls ``torch.manual_seed``: that
    call seeds the NPU's generator too, and the CUDA one is a lazy no-op without CUDA."""
    if qualname not in _CUDA_RESEEDS:
        return False
    return _seeds_all_devices(ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef) or ctx.tree, ctx)


def _seeds_all_devices(scope: ast.AST, ctx) -> bool:
    """``scope`` calls ``torch.manual_seed`` (memoised per scope)."""
    return ctx.memo(f"manual_seed.{id(scope)}", lambda c: any(
        isinstance(n, ast.Call) and c.qualname(n.func) == "torch.manual_seed" for n in walk_tree(scope)))


def _unknown_before(name: str, branch: ast.If, scope: ast.AST) -> bool:
    """``name = None`` in ``scope`` before ``branch``: the branch only refines a result that is otherwise
    "unknown" (``fits_in_memory = None``), which the code already handles."""
    return any(isinstance(n, ast.Assign) and n.lineno < branch.lineno and isinstance(n.value, ast.Constant)
               and n.value.value is None and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
               for n in walk_tree(scope))


def _reports_only(branch: ast.If, scope: ast.AST, ctx) -> bool:
    """Both branches only do what an NPU run may skip: print, log, record a metric, call a function named for a
    check or a report (``check_nvlink_connectivity``), ask ``torch.cuda`` for statistics, mark a CUDA-graph step,
    reseed CUDA after ``torch.manual_seed``, set cuDNN / cuBLAS switches (``torch.backends.cudnn.benchmark``), and
    (the CUDA branch only) raise or assert.
    A name assigned there is read nowhere else in ``scope`` (``memory_used = torch.cuda.max_memory_allocated()``),
    gains or becomes a message (``output += f'| Memory Used: ...'``, ``cuda_max_mem = f"GPU Max Mem: ..."``), or was
    ``None`` before the ``if`` (an estimate that is
    otherwise unknown); a ``try`` there swallows its errors (``except Exception: pass``)."""
    inside = {id(n) for n in walk_tree(branch)}
    read_outside = {n.id for n in walk_tree(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                    and id(n) not in inside}
    cuda_body = branch.orelse if _negated_cuda_test(branch.test, ctx) else branch.body
    cuda_side = {id(n) for s in cuda_body for n in walk_tree(s)}
    # calls not asked about: what the CUDA branch raises or asserts, and what a shown call shows
    exempt = {id(n) for s in cuda_body for r in walk_tree(s) if isinstance(r, (ast.Raise, ast.Assert))
              for n in walk_tree(r)}
    # (``logger.info(f"cuDNN {format_cudnn_version(torch.backends.cudnn.version())}")``)
    exempt |= {id(n) for s in branch.body + branch.orelse for c in walk_tree(s) if isinstance(c, ast.Call)
               and _shows(c) for a in c.args + [k.value for k in c.keywords] for n in walk_tree(a)}
    for statement in (n for s in branch.body + branch.orelse for n in walk_tree(s) if isinstance(n, ast.stmt)):
        if isinstance(statement, ast.If) or (
                isinstance(statement, (ast.Raise, ast.Assert)) and id(statement) in cuda_side):
            continue
        if isinstance(statement, ast.Try):
            if statement.orelse or statement.finalbody or not all(
                    all(isinstance(h, (ast.Pass, ast.Continue)) or _shows_only(h) for h in handler.body)
                    for handler in statement.handlers):
                return False
            continue
        if not isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Pass)):
            return False
        if isinstance(statement, ast.Assign) and all(_cuda_library_setting(t, ctx) for t in statement.targets):
            continue
        if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = assign_targets(statement)
            text = (isinstance(statement, ast.AugAssign) and isinstance(statement.value, (ast.JoinedStr, ast.Constant))
                    ) or _message(statement.value)
            if not all(isinstance(t, ast.Name) and (text or t.id not in read_outside or _unknown_before(
                    t.id, branch, scope)) for t in targets):
                return False
        for node in walk_tree(statement):
            if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await, ast.Lambda)):
                return False
            if isinstance(node, ast.Call) and id(node) not in exempt:
                qualname = ctx.qualname(node.func) or ""
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if not (_DIAGNOSTIC_CUDA.fullmatch(qualname) or name in _REPORTING or _DIAGNOSES.match(name)
                        or name in _PROFILER_EXPORTS or name.endswith("Warning")  # the message of a warning
                        or _STATISTICS.search(name) or _into_report(node, ctx)
                        or _reporting_alias(node.func, ctx)
                        or qualname in _CUDAGRAPH_MARKERS
                        or (qualname == "torch.cuda.synchronize" and _times_a_report(branch, ctx))
                        or (qualname in _CUDA_RESEEDS and _seeds_all_devices(scope, ctx))):
                    return False
    return True


# clocks a wall time is read from
_CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.time_ns", "time.perf_counter_ns",
                     "time.monotonic_ns", "timeit.default_timer"})


def _times_a_report(branch: ast.If, ctx) -> bool:
    """The ``if`` (a CUDA synchronize) sits right before or after a clock read into a local name that is only shown
    (llm-foundry 0.22.0 command_utils/eval.py:167-178, ``a = time.time()`` around ``trainer.eval``, logged as
    ``f'Ran {model_name} eval in: {b-a} seconds'``): on an NPU only the logged wall time is less exact. A clock read
    that is returned or kept (yolov5 7.0.14 utils/torch_utils.py ``time_sync``, a profiler) is not."""
    around = ctx.model.ancestors(branch)  # none for the ``if`` that ``_rest_after`` builds
    block, index = block_of(around[-1], branch) if around else ([], -1)
    if index < 0:
        return False
    neighbours = block[index - 1:index] + block[index + 1:index + 2]
    return any(isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
               and isinstance(s.value, ast.Call) and ctx.qualname(s.value.func) in _CLOCKS
               and _only_shown(s.targets[0], ctx, _CARRIED_DEPTH) for s in neighbours)


# settings of CUDA's own libraries (cuBLAS TF32, cuDNN autotuning): they reach no NPU kernel, so an NPU run that
# skips them loses nothing; the TF32 switch has its own finding (ASC608) where the NPU has a counterpart
_CUDA_LIBRARY_SETTINGS = ("torch.backends.cuda.", "torch.backends.cudnn.")


def _cuda_library_setting(target: ast.AST, ctx) -> bool:
    """``torch.backends.cudnn.benchmark = True``, ``torch.backends.cuda.matmul.allow_tf32 = True``."""
    return isinstance(target, ast.Attribute) and (ctx.qualname(target) or "").startswith(_CUDA_LIBRARY_SETTINGS)


def _into_report(call: ast.Call, ctx) -> bool:
    """``log_dict.update(...)``: an addition to a local collection that only goes into a report, every other read of
    it showing it (``self._metric_logger.log_dict(log_dict, ...)``; torchtune 0.6.1
    recipes/dev/grpo_full_finetune_distributed.py:1040, peak-memory figures added on CUDA only)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _COLLECTS and isinstance(func.value, ast.Name)):
        return False
    function = ctx.model.function(call)
    reads = ctx.model.reads(function or ctx.tree, func.value.id)
    collected = [read for read in reads if len(read.path) > 1 and read.path[0].__class__ is ast.Attribute
                 and read.path[0].attr in _COLLECTS and read.path[1].__class__ is ast.Call
                 and read.path[1].func is read.path[0]]
    return len(collected) < len(reads) and all(_shown(read) for read in reads if read not in collected)


def _reporting_alias(func: ast.AST, ctx) -> bool:
    """``func`` is a local name every binding of which is a reporting function (litgpt 0.5.13 utils.py:725-728,
    ``custom_print = fabric.print`` or ``custom_print = print``)."""
    if not isinstance(func, ast.Name):
        return False
    home = ctx.model.scope(func).home(func.id)
    bindings = home.bindings.get(func.id, []) if home is not None else []
    return bool(bindings) and all(
        isinstance(b.value, (ast.Name, ast.Attribute)) and (
            b.value.attr if isinstance(b.value, ast.Attribute) else b.value.id) in SHOWN_BY for b in bindings)


def disables_a_report(node: ast.AST, ctx) -> bool:
    """``node`` is part of the test of an ``if`` that only warns and switches off a flag whose every other read
    guards a branch that only reports (torchtune 0.6.1 recipes/ppo_full_finetune_single_device.py:128, ``if
    self._log_peak_memory_stats and self._device.type != "cuda": log.info(...); self._log_peak_memory_stats =
    False``): on an NPU the run only loses the report. A flag that also decides anything else (``args.fp16 = False``
    read by the training code) is not."""
    holder = _test_holder(node, ctx)
    if not isinstance(holder, ast.If) or holder.orelse:
        return False
    flags = []
    for statement in holder.body:
        if _shows_only(statement):
            continue
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(
                statement.value, ast.Constant) and statement.value.value in (False, None):
            flags.append(statement.targets[0])
            continue
        return False
    owner = ctx.enclosing(ast.ClassDef) or ctx.tree
    return bool(flags) and all(_gates_reports_only(flag, holder, owner, ctx) for flag in flags)


def _shows_only(statement: ast.stmt) -> bool:
    """``log.warning(f'failed: {e}')``: a statement that only shows something (an ``except`` that reports and
    carries on swallows the error as ``pass`` does)."""
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and _shows(statement.value)


def _shows(call: ast.Call) -> bool:
    name = last_name(call.func)
    return name in SHOWN_BY or bool(_DIAGNOSES.match(name))


def _gates_reports_only(flag: ast.AST, holder: ast.If, owner: ast.AST, ctx) -> bool:
    """Every read of ``flag`` (``self.x`` or a name) in ``owner`` outside ``holder`` is in the test of an ``if``
    whose branches only report."""
    spelled, name = ast.dump(flag, annotate_fields=False).replace("Store()", "Load()"), last_name(flag)
    tests = [(n, {id(t) for t in walk_tree(n.test)}) for n in walk_tree(owner) if isinstance(n, ast.If) and n is not holder]
    inside = {id(n) for n in walk_tree(holder)}
    for read in walk_tree(owner):
        if read.__class__ is not flag.__class__ or last_name(read) != name or id(read) in inside or \
                not isinstance(read.ctx, ast.Load) or ast.dump(read, annotate_fields=False) != spelled:
            continue
        guard = next((n for n, ids in tests if id(read) in ids), None)
        if guard is None or not ctx.memo(f"reports_only.{id(guard)}", lambda c: _reports_only(
                guard, c.model.function(guard) or c.tree, c)):
            return False
    return True


def gates_reports_through_name(node: ast.AST, ctx) -> bool:
    """``node`` (a CUDA comparison) is bound to a local flag whose every read is the test, alone or ``and``-ed, of
    an ``if`` whose branches only report, or an argument of a function or method of the file whose parameter is
    read only so (audiocraft 1.3.0 solvers/musicgen.py:354, ``check_synchronization_points = idx == 1 and
    self.device == 'cuda'``, which only turns a debugging switch on and off, here and in
    ``_prepare_tokens_and_attributes``): on an NPU the run only loses the report."""
    name = _assigned_name(node, ctx)
    return name is not None and _gates_reports(ctx.model.function(name), name.id, ctx, 1)


def _gates_reports(function: ast.AST, name: str, ctx, depth: int) -> bool:
    reads = ctx.model.reads(function, name)
    for read in reads:
        holder = _test_holding(read, loose=False)[0]
        if holder is not None:
            if not ctx.memo(f"reports_only.{id(holder)}", lambda c: _reports_only(holder, function, c)):
                return False
            continue
        passed = _parameter_of(read, ctx) if depth else None
        if passed is None or not _gates_reports(*passed, ctx, depth - 1):
            return False
    return bool(reads)


def _parameter_of(read, ctx) -> Optional[Tuple[ast.AST, str]]:
    """(function, parameter name) that ``read`` is passed to as an argument of ``f(...)`` or ``self.f(...)``, a
    function of the module or a method of the enclosing class (``Summaries.callee``)."""
    call = read.path[0] if read.path else None
    return _callee_parameter(call, read.node, ctx) if isinstance(call, ast.Call) else None


def _callee_parameter(call: ast.Call, argument: ast.AST, ctx) -> Optional[Tuple[ast.AST, str]]:
    """(the ``def`` of the file that ``call`` runs, the parameter ``argument`` fills), by keyword or by position;
    None where the call runs no ``def`` of the file or passes ``*args``."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    callee = ctx.model.summaries.callee(call)
    if callee is None:
        return None
    positional = callee.args.posonlyargs + callee.args.args
    if ctx.model.receiver(callee) is not None:
        positional = positional[1:]  # ``self`` / ``cls``
    keyword = next((k.arg for k in call.keywords if k.value is argument), None)
    if keyword is not None:
        return callee, keyword
    index = next((i for i, a in enumerate(call.args) if a is argument), None)
    return (callee, positional[index].arg) if index is not None and index < len(positional) else None


def optional_cuda_branch(node: ast.AST, ctx) -> Optional[ast.If]:
    """The ``if`` whose CUDA test ``node`` is part of, or whose body ``node`` runs in, when both its branches only
    report (``_reports_only``): on an NPU the CUDA branch is skipped and nothing but a report is lost."""
    guards = []
    pairs = list(ctx.lineage(node))
    for at, (parent, child) in enumerate(pairs):
        if isinstance(child, ast.stmt):  # ``if not torch.cuda.is_available(): return`` and the rest of the function
            exit_guard = child if _exits(child) and _negated_cuda_test(child.test, ctx) else \
                _earlier_exit(parent, child, lambda test: _negated_cuda_test(test, ctx))
            rest = _rest_after(exit_guard, parent, pairs[at + 1:], ctx) if exit_guard is not None else None
            if rest is not None:
                guards.append(rest)
        if isinstance(parent, _FUNCTIONS + (ast.ClassDef,)):
            break
        if not isinstance(parent, ast.If):
            continue
        if (child is parent.test or any(s is child for s in parent.body)) and _positive_cuda_test(parent.test, ctx):
            guards.append(parent)
        elif (child is parent.test or any(s is child for s in parent.orelse)) and _negated_cuda_test(parent.test, ctx):
            guards.append(parent)  # ``if not torch.cuda.is_available(): logging.warning(...)``
    scope = ctx.enclosing(*_FUNCTIONS) or ctx.tree
    return next((g for g in guards if ctx.memo(f"reports_only.{id(g)}", lambda c: _reports_only(g, scope, c))), None)


def _rest_after(guard: ast.If, parent: ast.AST, outer, ctx) -> Optional[ast.If]:
    """``if not torch.cuda.is_available(): log(...); return`` and what runs after it up to the function's end (oumi
    0.9 utils/torch_utils.py:81-93, which only logs the CUDA and cuDNN versions) as one ``if`` whose ``else`` is that
    rest, the CUDA branch: made once per guard, where the return hands nothing on and the guard sits in the
    function's body or in ``with`` / ``try`` bodies of it (``outer``: the (parent, child) pairs above ``parent``);
    after a guard inside another ``if`` or a loop the rest also runs without the test."""
    leave = guard.body[-1]
    if not isinstance(leave, ast.Return) or not (leave.value is None or (
            isinstance(leave.value, ast.Constant) and leave.value.value is None)):
        return None

    def build(_ctx) -> Optional[ast.If]:
        block, index = block_of(parent, guard)
        rest = block[index + 1:]
        holder, held = parent, guard
        for above, _ in outer:
            if isinstance(holder, _FUNCTIONS):
                break
            if not (isinstance(holder, (ast.With, ast.AsyncWith)) or (
                    isinstance(holder, ast.Try) and any(s is held for s in holder.body))):
                return None
            block, index = block_of(above, holder)
            rest += block[index + 1:]
            holder, held = above, holder
        if not isinstance(holder, _FUNCTIONS) or not rest:
            return None
        return ast.copy_location(ast.If(test=guard.test, body=guard.body[:-1] or [ast.Pass()], orelse=rest), guard)
    return ctx.memo(f"rest_after.{id(guard)}", build)


def _negated_cuda_test(test: ast.AST, ctx) -> bool:
    """``not torch.cuda.is_available()``: True on an NPU, its ``else`` the CUDA branch."""
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _positive_cuda_test(test.operand, ctx)


def keeps_unsupported_out(node: ast.AST, ctx) -> bool:
    """``node`` is part of a CUDA test whose CUDA branch runs an API the selected torch_npu lists as unsupported
    (``elif torch.cuda.device_count() > 1: model = torch.nn.parallel.DataParallel(model)``, ignite 0.5.5
    distributed/auto.py:231-233): the test is right to keep an NPU run out of that branch. The API has its own
    finding (ASC101), which a run that takes the branch anyway (transfer_to_npu) meets."""
    branch = guarded_branch(node, ctx)
    if branch is None:
        return False
    return ctx.memo(f"keeps_unsupported_out.{id(branch)}", lambda c: any(
        isinstance(n, ast.Call) and _unsupported(c.qualname(n.func), c) for s in branch.body for n in walk_tree(s)))


def chooses_onnx_providers(node: ast.AST, ctx) -> bool:
    """``node`` is part of a CUDA test whose CUDA branch only chooses ONNX Runtime execution providers
    (``providers = [("CUDAExecutionProvider", {...})]``; flair 0.15.1 embeddings/transformer.py:876, pyannote.audio
    3.3.2 pipelines/speaker_verification.py:445): the model then runs in ONNX Runtime, not in torch, and any other
    device takes the CPU provider; nothing there is torch_npu's."""
    branch = guarded_branch(node, ctx)
    return branch is not None and all(
        isinstance(statement, ast.Assign) and any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith("ExecutionProvider")
            for n in walk_tree(statement.value)) for statement in branch.body)


# FLOP counters by the name a module imports: mmengine's and mmcv's get_model_complexity_info, fvcore's
# FlopCountAnalysis, torch.utils.flop_counter's FlopCounterMode (not thop's ``profile``, a name general profilers
# share: yolov5 7.0.14 utils/torch_utils.py ``profile`` also measures time and memory)
_FLOP_COUNTERS = frozenset(("get_model_complexity_info", "FlopCountAnalysis", "FlopCounterMode"))


def counts_flops(ctx) -> bool:
    """Does the module import a FLOP counter at its top level (also inside a top-level ``try``)? It is a
    model-complexity tool (the OpenMMLab toolboxes' tools/analysis_tools/get_flops.py, open_clip 3.2.0
    open_clip_train/profiler.py): a count is the same wherever the model sits, so where it puts the model
    (``if torch.cuda.is_available(): model.cuda()``) is no port."""
    def imports_counter(c) -> bool:
        statements = [s for top in c.tree.body for s in (top.body if isinstance(top, ast.Try) else [top])]
        return any(isinstance(s, ast.ImportFrom) and any(a.name in _FLOP_COUNTERS for a in s.names)
                   for s in statements)
    return ctx.memo("counts_flops", imports_counter)


def only_makes_contiguous(node: ast.AST, ctx) -> bool:
    """``node`` is part of a CUDA test whose CUDA branch only makes tensors contiguous (``q = q.contiguous()``):
    the HF-style modeling files' detour around a bug of torch's memory-efficient SDPA on CUDA with non-contiguous
    inputs and a custom mask (transformers 4.57.6; llamafactory 0.9.5 longlora.py:320, xtuner 0.2.0
    modeling_internlm2.py:658). An NPU run that skips it computes the same attention."""
    branch = guarded_branch(node, ctx)
    return branch is not None and not branch.orelse and all(
        isinstance(statement, ast.Assign) and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Call)
        and not statement.value.args and isinstance(statement.value.func, ast.Attribute)
        and statement.value.func.attr == "contiguous" and isinstance(statement.value.func.value, ast.Name)
        and statement.value.func.value.id == statement.targets[0].id for statement in branch.body)


def _unsupported(qualname: Optional[str], ctx) -> bool:
    status = ctx.data.api_status(qualname) if qualname else None
    return status is not None and status[0] == "unsupported"


def guarded_branch(node: ast.AST, ctx) -> Optional[ast.If]:
    """The ``if`` whose test is (or ``and``-s) the CUDA test ``node``: the branch an NPU run does not take."""
    holder = _test_holder(node, ctx)
    return holder if isinstance(holder, ast.If) and _positive_cuda_test(holder.test, ctx) else None


def skipping_exit(node: ast.AST, ctx) -> str:
    """For a CUDA string in ``if device.type != 'cuda': return`` (a test True on an NPU whose body leaves the block):
    the message tail that says which of the block's later lines an NPU run skips, or ""."""
    holder = _test_holder(node, ctx)
    if not (_exits(holder) and _negative_cuda_test(holder.test, ctx)):
        return ""
    parent = next(parent for parent, child in zip(ctx.stack, ctx.stack[1:]) if child is holder)
    block, index = block_of(parent, holder)
    later = block[index + 1:]
    return f"True on an NPU: the CUDA path after it ({_lines(later)}) is skipped there" if later else ""


def turns_off(branch: ast.If) -> str:
    """The message tail for a CUDA test that decides a branch."""
    return f"False on an NPU: the CUDA branch ({_lines(branch.body)}) turns off there"


def _lines(statements: Sequence[ast.stmt]) -> str:
    """``line 7`` or ``lines 7-12``: where ``statements`` lie."""
    first, end = statements[0].lineno, max(getattr(s, "end_lineno", s.lineno) for s in statements)
    return f"lines {first}-{end}" if end > first else f"line {first}"


# a file that merges adapter or sharded weights into a model checkpoint (axolotl 0.19.0 cli/merge_lora.py,
# merge_sharded_fsdp_weights.py; litgpt scripts/merge_lora.py): not mmdet's merge_augs.py or mmcv's merge_cells.py,
# model code that merges predictions or feature maps on the device
_MERGE_TOOL = re.compile(r"(^|_)merge_(lora|peft|adapters?|weights?|checkpoints?|sharded)|(lora|adapter|peft)_merge")


def _offline_converter(path: str) -> bool:
    """A data or checkpoint converter: a one-off script run before or after training (``tools/dataset_converters/``,
    ``convert_hf_checkpoint.py``, ``merge_lora.py``), not the training path."""
    parts = re.split(r"[\\/]", path)
    return any("convert" in part.lower() for part in parts[-3:]) or bool(_MERGE_TOOL.search(parts[-1].lower()))


def offline_cpu_fallback(node: ast.AST, ctx) -> bool:
    """In an offline converter, ``node`` is (or runs under) a ``torch.cuda.is_available()`` choice whose other side is
    the CPU (``if torch.cuda.is_available(): model = model.to('cuda:0')``, ``torch.device('cuda:0') if
    torch.cuda.is_available() else torch.device('cpu')``): on an NPU machine the conversion runs on the CPU, which
    is right for a one-off data tool (mmpose 1.3.2 .mim/tools/dataset_converters/ubody_smplx_to_coco.py:40, 301)."""
    if not ctx.memo("offline_converter", lambda c: _offline_converter(c.path)):
        return False
    for parent, child in ctx.lineage(node):
        if isinstance(parent, _FUNCTIONS + (ast.ClassDef,)):
            return False
        if isinstance(parent, (ast.If, ast.IfExp)) and (child is parent.test or child is parent.body or (
                isinstance(parent, ast.If) and any(s is child for s in parent.body))):
            test = parent.test
            if isinstance(test, ast.Call) and ctx.qualname(test.func) == "torch.cuda.is_available":
                return True
    return False


def _npu_test(test: ast.AST) -> bool:
    """``x.type == 'npu'``, ``x.type in {'mps', 'npu'}``, ``is_torch_npu_available()``, possibly ``or``-ed with
    more or ``and``-ed with another NPU question: True on an NPU."""
    if isinstance(test, ast.BoolOp):
        return (any if isinstance(test.op, ast.Or) else all)(_npu_test(v) for v in test.values)
    if _npu_probe(test) or (isinstance(test, ast.Call) and _prefix_test(test, _NPU)):
        return True
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if isinstance(test.ops[0], (ast.Eq, ast.Is)):
        return _compares_with(test, _NPU)
    if isinstance(test.ops[0], ast.In) and isinstance(test.comparators[0], (ast.Set, ast.Tuple, ast.List)):
        return any(isinstance(e, ast.Constant) and isinstance(e.value, str) and _NPU.fullmatch(e.value)
                   for e in test.comparators[0].elts)
    return False


def npu_skips(node: ast.AST, ctx) -> bool:
    """``node`` is in the ``else`` of a test that is True on an NPU (diffusers adaptive_projected_guidance.py:240:
    ``if diff.device.type in {"mps", "npu"}: ... .cpu().double() else: diff.double()``; training_utils.py:75:
    ``if is_torch_npu_available(): torch.npu.manual_seed_all(seed) else: torch.cuda.manual_seed_all(seed)``): an
    NPU run never gets there, the NPU has its own branch. So is code after ``if is_torch_npu_available(): return
    ...`` in the same block (the early return is the ``else``)."""
    for parent, child in ctx.lineage(node):
        if isinstance(child, ast.stmt) and _earlier_exit(parent, child, _npu_test) is not None:
            return True
        if isinstance(parent, _FUNCTIONS + (ast.ClassDef,)):
            return False
        if isinstance(parent, ast.If) and any(s is child for s in parent.orelse) or (
                isinstance(parent, ast.IfExp) and child is parent.orelse):
            if _npu_test(parent.test):
                return True
    return False


_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _exits(statement: ast.stmt) -> bool:
    """``if <test>: ... return`` (or raise, continue, break) with no ``else``: after it, the test was False."""
    return isinstance(statement, ast.If) and not statement.orelse and bool(statement.body) and isinstance(
        statement.body[-1], _EXITS)


def _earlier_exit(parent: ast.AST, statement: ast.stmt, leaves_when) -> Optional[ast.If]:
    """An earlier statement of ``statement``'s block (a body of ``parent``) that is ``if <test>:`` with
    ``leaves_when(test)`` and a body that always leaves the block: ``statement`` runs only when the test is False."""
    block, index = block_of(parent, statement)
    return next((earlier for earlier in block[:max(index, 0)] if _exits(earlier) and leaves_when(earlier.test)), None)


# a parameter that switches a library's own CUDA path on or off: ``use_cuda`` (pytorch-grad-cam), ``using_cuda``
# (stable-baselines3's set_random_seed), ``use_gpu``, ``cuda``
_CUDA_SWITCH = re.compile(r"((use|using|on|with)_?)?(cuda|gpu)s?", re.IGNORECASE)


def _switch_parameter(call: ast.Call, argument: ast.AST, ctx) -> bool:
    """``argument`` of ``call`` fills a CUDA switch: by keyword, or positionally a parameter of a ``def`` of the file
    that the call runs."""
    for keyword in call.keywords:  # a library's own parameter (``GradCAM(..., use_cuda=...)``)
        if keyword.value is argument:
            return bool(keyword.arg) and bool(_CUDA_SWITCH.fullmatch(keyword.arg))
    filled = _callee_parameter(call, argument, ctx)
    return filled is not None and bool(_CUDA_SWITCH.fullmatch(filled[1]))


def _bool_choice(parent: ast.AST, test: ast.AST) -> bool:
    """``parent`` is ``True if test else False`` (or the other way round)."""
    return isinstance(parent, ast.IfExp) and parent.test is test and all(
        isinstance(branch, ast.Constant) and isinstance(branch.value, bool) for branch in (parent.body, parent.orelse))


def _into_switch(value: ast.AST, path: Sequence[ast.AST], ctx) -> bool:
    """``value``, whose ancestors are ``path`` (innermost first), becomes a CUDA switch argument: directly, or as
    the test of ``True if ... else False``."""
    for parent in path:
        if _bool_choice(parent, value):
            value = parent
            continue
        if isinstance(parent, ast.keyword):
            continue
        return isinstance(parent, ast.Call) and _switch_parameter(parent, value, ctx)
    return False


def sets_cuda_switch(node: ast.AST, ctx) -> bool:
    """``node`` (a CUDA device string) is compared with a configured device (``'cuda' in args.device``,
    ``device.type == torch.device('cuda').type``) only to tell a library whether to take its own CUDA path: the
    comparison becomes a ``use_cuda=`` / ``using_cuda=`` / ``use_gpu=`` argument, directly, as ``True if ... else
    False`` or through a local name read only so (mmpretrain 1.2.0 .mim/tools/visualization/vis_cam.py:247,
    pytorch-grad-cam's ``use_cuda``; stable-baselines3 2.9.2 common/base_class.py:568, ``set_random_seed(seed,
    using_cuda=self.device.type == th.device("cuda").type)``). The device itself comes from configuration; on an
    NPU the switch is off and the library takes its other path, which is what a port wants. A flag that asks
    ``torch.cuda.is_available()`` is a question, not such a comparison, and keeps its ASC201."""
    path = list(reversed(ctx.stack))  # the string's ancestors, innermost first
    if len(path) > 2 and isinstance(path[0], ast.Call) and ctx.qualname(path[0].func) == "torch.device" and \
            isinstance(path[1], ast.Attribute) and path[1].attr == "type":
        path = path[2:]  # ``torch.device('cuda').type``
    if not path or not isinstance(path[0], ast.Compare):
        return False
    value, above = path[0], path[1:]
    while above and _bool_choice(above[0], value):
        value, above = above[0], above[1:]
    if _into_switch(value, above, ctx):
        return True
    # ``flag = 'cuda' in device`` (or ``True if ... else False``), read only as a switch
    parent = above[0] if above else None
    targets = assign_targets(parent) if isinstance(parent, (ast.Assign, ast.AnnAssign)) else []
    if len(targets) != 1 or parent.value is not value or not isinstance(targets[0], ast.Name):
        return False
    function = ctx.model.function(targets[0])
    if function is None or targets[0].id in ctx.model.scopes[id(function)].shared:
        return False
    reads = ctx.model.reads(function, targets[0].id)
    return bool(reads) and all(_into_switch(read.node, read.path, ctx) for read in reads)
