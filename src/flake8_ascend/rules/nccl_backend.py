"""ASC204: the NCCL collective backend.

Where a framework picks the backend itself on an NPU (mmengine's pytorch launcher initialises 'hccl' whatever
``dist_cfg`` says, mmcv 1.x's whatever an mmdet-2.x config's ``dist_params`` says), a 'nccl' given to it is no
finding; the backend keywords and those frameworks come from their sources (``data/frameworks.json``, built by
tools/build_frameworks.py). A hybrid backend string (``'cpu:gloo,cuda:nccl'``) is reported like 'nccl'.
"""
from __future__ import annotations

import ast
import re
from typing import Optional

from ..data import load_frameworks, load_transfer_to_npu
from ..registry import Rule
from ..detect.cuda_fixes import string_fix
from ..detect.device_dispatch import has_npu_branch, in_cuda_test, npu_skips
from ..detect.device_defaults import defaulted
from ..detect.transfer_to_npu import migrated, quiet
from ..walk import assign_targets, walk_tree

_GROUP_FUNCTIONS = ("init_process_group", "new_group", "init_device_mesh")
# a per-device backend string of torch.distributed ('cpu:gloo,cuda:nccl'): device:backend pairs, one of them NCCL
_HYBRID = re.compile(r"(\w+:\w+,)*\w+:nccl(,\w+:\w+)*", re.IGNORECASE)


def _hybrid_for_npu(value: str) -> str:
    """'cpu:gloo,cuda:nccl' -> 'cpu:gloo,npu:hccl'."""
    pairs = [pair.split(":") for pair in value.split(",")]
    return ",".join("npu:hccl" if backend.lower() == "nccl" else f"{device}:{backend}" for device, backend in pairs)


def _holder(stack) -> int:
    """The index in ``stack`` of what holds the string, seen through ``a if c else b`` and ``a or b``."""
    i = len(stack) - 1
    while i > 0 and isinstance(stack[i], (ast.IfExp, ast.BoolOp)):
        i -= 1
    return i


def _call_name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _key(container: ast.AST, child: ast.AST) -> Optional[str]:
    """The keyword or dict key under which ``child`` sits in ``container`` (``backend=`` / ``{'backend': ...}``)."""
    if isinstance(container, ast.keyword):
        return container.arg
    if isinstance(container, ast.Dict):
        for key, value in zip(container.keys, container.values):
            if value is child and isinstance(key, ast.Constant) and isinstance(key.value, str):
                return key.value
    return None


_LOOKUPS = ("get", "setdefault", "pop")  # mapping lookups with a default: cfg.get('backend', 'nccl')


def _says_backend(node: ast.AST) -> bool:
    """A string naming a backend option or key: ``'--dist-backend'``, ``'backend'``, ``'ddp_backend'``."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and "backend" in node.value.lower()


def _lists_hccl(strings: ast.AST) -> bool:
    return any(isinstance(e, ast.Constant) and e.value == "hccl" for e in strings.elts)


def _option_of_backend(stack, i: int) -> bool:
    """``stack[i]`` (a call) declares a backend option: ``parser.add_argument('--dist-backend', ...)`` (an option
    string names it), or ``field(...)`` as the value of a dataclass field named after it (``ddp_backend: str =
    field(default='nccl')``)."""
    call = stack[i]
    if not isinstance(call, ast.Call):
        return False
    if any(_says_backend(a) for a in call.args):
        return True
    owner = stack[i - 1] if i else None
    return isinstance(owner, (ast.Assign, ast.AnnAssign)) and owner.value is call and _binds_backend(owner)


def _binds_backend(statement: "ast.Assign | ast.AnnAssign") -> bool:
    """``backend = ...``, ``self.dist_backend = ...``, ``ddp_backend: str = ...``: a target named for a backend."""
    targets = assign_targets(statement)
    return any("backend" in _call_name(t).lower() for t in targets)


def _mentions_backend(node: ast.AST) -> bool:
    """``backend``, ``args.dist_backend``, ``get_backend()``: a name or call that says it is a backend."""
    return "backend" in _call_name(node.func if isinstance(node, ast.Call) else node).lower()


def _tested_against_another(stack, i: int) -> bool:
    """Is the lookup ``stack[i]`` only compared with another backend's name (nemo 2.5.0 megatron_base_model.py:213,
    ``cfg.get('ub_tp_comm_bootstrap_backend', 'nccl') == 'mpi'``)? The 'nccl' fallback then just makes the test
    false: no process group ever gets it."""
    compare = stack[i - 1] if i else None
    if not (isinstance(compare, ast.Compare) and all(isinstance(op, (ast.Eq, ast.NotEq)) for op in compare.ops)):
        return False
    others = [side for side in (compare.left, *compare.comparators) if side is not stack[i]]
    return all(isinstance(side, ast.Constant) and isinstance(side.value, str) and "nccl" not in side.value.lower()
               for side in others)


def _asks_the_registry(ctx) -> bool:
    """The function looks the backend up in ``torch.distributed.Backend.default_device_backend_map`` (torchtune
    0.6.1 training/_distributed.py:117-120: ``backend = 'nccl'`` then the map's entry for the device type): torch_npu
    registers 'hccl' for 'npu' there (torch 2.13 distributed_c10d.py ``Backend.register_backend`` fills the map from
    its ``devices``), so the 'nccl' is only the fallback for a device the map does not know."""
    function = ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef)
    return function is not None and ctx.memo(f"backend_map.{id(function)}", lambda c: any(
        isinstance(n, ast.Attribute) and n.attr == "default_device_backend_map" for n in walk_tree(function)))


class NcclBackend(Rule):
    code = "ASC204"
    summary = "NCCL collective backend ('nccl', Backend.NCCL, is_nccl_available)"
    node_types = (ast.Constant, ast.Name, ast.Attribute)
    names = "imported"
    trigger_words = ("nccl", "NCCL")
    why = ("NCCL is NVIDIA's collective library; on Ascend the backend is HCCL (`'hccl'`). Not reported where the "
           "framework picks HCCL itself on an NPU (mmengine's `dist_cfg`, an mmdet-2.x config's `dist_params` that "
           "mmcv 1.x's launcher reads); reported for deepspeed's `dist_backend` (used as given) and the HF Trainer's "
           "`ddp_backend` (accelerate rejects anything but 'hccl' on an NPU). Nor is the fallback of a lookup in "
           "`dist.Backend.default_device_backend_map`, which torch_npu fills with 'npu' -> 'hccl', or an NCCL question "
           "kept in a CUDA flag beside the function's own NPU case, nor the 'nccl' fallback of a lookup only compared "
           "with another backend (`cfg.get('bootstrap_backend', 'nccl') == 'mpi'`). A hybrid backend "
           "(`'cpu:gloo,cuda:nccl'`) needs `'cpu:gloo,npu:hccl'`. The CUDA calls and devices of the branch a "
           "reported comparison guards (`if backend == 'nccl': torch.cuda.synchronize()`) fold into its finding: "
           "once it says 'hccl' the NPU run takes that branch, and `--fix` ports them with it.")
    example = "dist.init_process_group('nccl')"
    use_instead = ("Use `backend='hccl'`, or let transfer_to_npu rewrite it; comparisons with 'nccl' must be edited by hand "
                   "after it. `ascend-analyse --fix --select ASC2` rewrites the backend strings, comparisons included; "
                   "`Backend.NCCL` and `is_nccl_available` stay manual.")
    source = "torch_npu transfer_to_npu.py (nccl -> hccl); rules_data/sources/cuda/cuda_api_catalog.tsv"
    fires = [
        ("import torch.distributed as dist\ndist.init_process_group('nccl')\n", 2),
        ("init_process_group(backend='nccl', rank=0)\n", 1),
        ("if args.backend == 'nccl':\n    pass\n", 1),
        ("import torch.distributed as dist\nok = dist.is_nccl_available()\n", 2),
        # yolov5 7.0.14 train.py:611
        ("dist.init_process_group(backend='nccl' if dist.is_nccl_available() else 'gloo')\n", 1),
        # backends outside a call: a parameter default, a membership check that rejects 'hccl', the backend
        # keywords of deepspeed and the HF Trainer (accelerate raises on an NPU for a backend other than 'hccl')
        ("def init_dist(launcher, backend='nccl', **kwargs):\n    pass\n", 1),
        ("assert backend in ['gloo', 'nccl']\n", 1),
        ("if args.dist_backend not in ('nccl', 'gloo'):\n    raise ValueError(args.dist_backend)\n", 1),
        ("import deepspeed\ndeepspeed.init_distributed(dist_backend='nccl')\n", 2),
        ("from transformers import TrainingArguments\nargs = TrainingArguments('out', ddp_backend='nccl')\n", 2),
        ("cfg = {'backend': 'nccl', 'port': 29500}\n", 1),
        # near misses of a lookup compared with another backend: compared with a name, or with 'nccl' itself
        ("if cfg.get('backend', 'nccl') == other:\n    pass\n", 1),
        ("if os.environ.get('DIST_BACKEND', 'nccl') != 'nccl':\n    pass\n", 1),
        # near misses of a registry lookup and of an NPU flag: no lookup in the function, no NPU case beside
        ("import torch.distributed as dist\ndef get_distributed_backend(device_type):\n    backend = 'nccl'\n"
         "    if device_type == 'cpu':\n        backend = 'gloo'\n    return backend\n", 3),
        ("import torch\ndef verify():\n    return torch.cuda.is_available() and torch.distributed.is_nccl_available()\n", 3),
        # near miss of an NPU case: the question is about another accelerator
        ("backend = 'xccl' if is_torch_xpu_available() else 'nccl'\n", 1),
        # transfer_to_npu rewrites no comparison: the backend is then 'hccl'
        ("import torch.distributed as dist\nimport torch_npu.contrib.transfer_to_npu\n"
         "if dist.get_backend() == 'nccl':\n    pass\n", 3),
        # a hybrid per-device backend (diffusers 0.42.1 commands/run.py:438): 'cpu:gloo,npu:hccl' on an NPU
        ("import torch\ntorch.distributed.init_process_group(backend='cpu:gloo,cuda:nccl')\n", 2),
        # a dist_params that no mmcv launcher reads: the backend of a call of one's own
        ("dist_params = dict(backend='nccl')\ndist.init_process_group(**dist_params)\n", 1),
        # backends declared as options and configuration: a command-line default, the choices it accepts, a
        # dataclass field, a default looked up in a mapping
        ("parser.add_argument('--dist-backend', default='nccl', type=str)\n", 1),
        ("parser.add_argument('--backend', type=str, choices=['nccl', 'gloo'])\n", 1),
        ("from dataclasses import dataclass\n@dataclass\nclass Args:\n    ddp_backend: str = 'nccl'\n", 4),
        ("from dataclasses import dataclass, field\n@dataclass\nclass Args:\n"
         "    dist_backend: str = field(default='nccl', metadata={'help': 'backend'})\n", 4),
        ("backend = cfg.get('backend', 'nccl')\n", 1),
    ]
    passes = ["print('nccl')\n", "name = 'nccl_tests.log'\n", "dist.init_process_group('gloo')\n",
              # mmengine's pytorch launcher initialises 'hccl' on an NPU whatever dist_cfg says
              # (mmpose 1.3.2 configs/_base_/default_runtime.py:29)
              "env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='nccl'))\n",
              "env_cfg = {'dist_cfg': {'backend': 'nccl', 'timeout': 1800}}\n",
              "from mmengine.dist import init_dist\ninit_dist('pytorch', backend='nccl')\n",
              # mmcv 1.x's pytorch launcher too (mmdet 2.x configs, mmpose 1.3.2
              # .mim/demo/mmdetection_cfg/faster_rcnn_r50_fpn_1class.py:10; mmcv 1.7.2 runner/dist_utils.py:66)
              "dist_params = dict(backend='nccl')\n", "dist_params = {'backend': 'nccl'}\n",
              "from mmcv.runner import init_dist\ninit_dist(args.launcher, backend='nccl')\n",
              # hybrid strings outside a backend place, and one that is already NPU
              "name = 'cpu:gloo,cuda:nccl'\n", "dist.init_process_group(backend='cpu:gloo,npu:hccl')\n",
              # a check that accepts both, and strings that are not a backend
              "assert backend in ('nccl', 'hccl', 'gloo')\n", "if name in ['nccl', 'gloo']:\n    pass\n",
              "def f(kind='nccl'):\n    pass\n",
              # the code's own NPU case comes first (accelerate-style backend choice)
              "backend = 'hccl' if is_torch_npu_available() else 'nccl'\n",
              # near misses of options: another option's default, choices that take 'hccl', another key's default
              "parser.add_argument('--log-name', default='nccl')\n",
              "parser.add_argument('--backend', choices=['nccl', 'hccl', 'gloo'])\n",
              "from dataclasses import dataclass\n@dataclass\nclass Args:\n    log_prefix: str = 'nccl'\n",
              "name = cfg.get('name', 'nccl')\n",
              # a lookup's fallback only compared with another backend (nemo 2.5.0 megatron_base_model.py:213)
              "init_mpi = cfg.get('ub', False) and cfg.get('ub_tp_comm_bootstrap_backend', 'nccl') == 'mpi'\n",
              # the fallback of a lookup in torch's device -> backend map, which torch_npu fills with npu -> hccl
              # (torchtune 0.6.1 training/_distributed.py:117-120)
              "import torch.distributed as dist\ndef get_distributed_backend(device_type):\n"
              "    default_device_backend_map = dist.Backend.default_device_backend_map\n    backend = 'nccl'\n"
              "    if device_type in default_device_backend_map:\n        backend = default_device_backend_map[device_type]\n"
              "    return backend\n",
              # a CUDA flag beside an NPU one (torchtune 0.6.1 training/precision.py:63-71)
              "import torch\ndef verify_bf16_support():\n    cuda_support = torch.cuda.is_available() and "
              "torch.distributed.is_nccl_available()\n    npu_support = is_npu_available and torch.npu.is_bf16_supported()\n"
              "    return cuda_support or npu_support\n",
              # transfer_to_npu rewrites init_process_group's backend and maps is_nccl_available
              "import torch.distributed as dist\nfrom torch_npu.contrib import transfer_to_npu\n"
              "dist.init_process_group(backend='nccl')\nok = dist.is_nccl_available()\n",
              "import torch.distributed as dist\nfrom torch_npu.contrib import transfer_to_npu\n"
              "dist.init_process_group(backend='nccl' if ok else 'gloo')\n"]

    def check(self, node, ctx) -> None:
        if isinstance(node, ast.Constant):
            if (isinstance(node.value, str) and node.value.lower() == "nccl" and self._backend_context(ctx, node)
                    and not (migrated(ctx) and self._rewritten(ctx)) and not npu_skips(node, ctx)
                    and not _asks_the_registry(ctx)):
                ctx.report(node, self.code, "NCCL backend 'nccl' does not exist on NPU (use 'hccl')",
                           api="nccl", tips="nccl -> hccl", rewrite=string_fix(node.value, ctx))
            elif isinstance(node.value, str) and _HYBRID.fullmatch(node.value) and self._backend_context(ctx, node):
                # transfer_to_npu swaps only the exact 'nccl', so a hybrid string is reported in a migrated file too
                instead = _hybrid_for_npu(node.value)
                ctx.report(node, self.code, f"NCCL backend in {node.value!r} does not exist on NPU (use {instead!r})",
                           api=node.value, tips=f"{node.value} -> {instead}")
            return
        qualname = ctx.chain(node)
        if qualname and quiet(ctx, qualname):
            return
        if qualname in ("torch.distributed.Backend.NCCL", "torch.distributed.is_nccl_available",
                        "torch.distributed.ProcessGroupNCCL") and not (in_cuda_test(node, ctx) and has_npu_branch(ctx)):
            ctx.report(node, self.code, f"{qualname} is NCCL-specific (the NPU backend is HCCL)",
                       api=qualname, tips="NCCL -> HCCL")

    @staticmethod
    def _rewritten(ctx) -> bool:
        """The string is an argument of a call whose backend transfer_to_npu rewrites (init_process_group)."""
        i = _holder(ctx.stack)
        call = ctx.stack[i - 1] if isinstance(ctx.stack[i], ast.keyword) and i > 0 else ctx.stack[i]
        return isinstance(call, ast.Call) and ctx.qualname(call.func) in load_transfer_to_npu()["backend_functions"]

    @staticmethod
    def _backend_context(ctx, node: ast.Constant) -> bool:
        """Is the string where a backend goes, and not one a framework replaces on an NPU?"""
        stack = ctx.stack
        i = _holder(stack)
        holder = stack[i] if stack else None
        frameworks = load_frameworks()
        if isinstance(holder, (ast.List, ast.Tuple, ast.Set)) and i and isinstance(stack[i - 1], ast.Compare):
            return NcclBackend._rejects_hccl(stack[i - 1], holder)
        if isinstance(holder, (ast.List, ast.Tuple, ast.Set)) and i >= 2 and isinstance(stack[i - 1], ast.keyword) \
                and stack[i - 1].arg == "choices":  # add_argument('--backend', choices=['nccl', 'gloo'])
            return _option_of_backend(stack, i - 2) and not _lists_hccl(holder)
        key = _key(holder, stack[i + 1] if i + 1 < len(stack) else node)
        if key == "default" and i >= 1:  # add_argument('--dist-backend', default='nccl'), field(default='nccl')
            return _option_of_backend(stack, i - 1)
        if isinstance(holder, ast.Call) and _call_name(holder.func) in _LOOKUPS and len(holder.args) == 2 \
                and holder.args[1] is (stack[i + 1] if i + 1 < len(stack) else node):  # cfg.get('backend', 'nccl')
            return _says_backend(holder.args[0]) and not _tested_against_another(stack, i)
        if key is not None:
            if key not in frameworks["backend_keywords"]:
                return False
            call = stack[i - 1] if isinstance(holder, ast.keyword) and i else None
            chosen = frameworks["backend_chosen_on_npu"].get(ctx.qualname(call.func) if isinstance(call, ast.Call)
                                                            else None)
            if chosen and chosen["keyword"] == key:
                return False
            j = i - 1 if isinstance(holder, ast.keyword) else i  # the dict(...) / {...} that holds the backend
            config_keys = frameworks["backend_config_keys"]
            if j >= 1 and isinstance(stack[j - 1], ast.Assign) and stack[j - 1].value is stack[j]:
                # dist_params = dict(backend='nccl'): an mmdet-2.x config that mmcv's launcher overrides, unless the
                # file spreads it into a process group of its own (init_process_group(**dist_params))
                names = {t.id for t in stack[j - 1].targets if isinstance(t, ast.Name) and t.id in config_keys}
                return not names or any(isinstance(k.value, ast.Name) and k.value.id in names for f in _GROUP_FUNCTIONS
                                        for call in ctx.model.calls(f) for k in call.keywords if k.arg is None)
            return not (j >= 1 and _key(stack[j - 1], stack[j]) in config_keys)
        if isinstance(holder, ast.Call):
            return _call_name(holder.func) in _GROUP_FUNCTIONS
        if isinstance(holder, ast.Compare):
            return any(_mentions_backend(side) for side in [holder.left, *holder.comparators])
        if isinstance(holder, (ast.Assign, ast.AnnAssign)):  # also a dataclass field: ddp_backend: str = 'nccl'
            return _binds_backend(holder)
        if isinstance(holder, ast.arguments):  # a parameter default: def init_dist(backend='nccl')
            default = stack[i + 1] if i + 1 < len(stack) else node
            return any("backend" in a.arg.lower() for a in defaulted(holder, default))
        return False

    @staticmethod
    def _rejects_hccl(compare: ast.Compare, strings: ast.AST) -> bool:
        """``backend in ['gloo', 'nccl']``: a membership test of a backend that lists 'nccl' but not 'hccl'."""
        return (all(isinstance(op, (ast.In, ast.NotIn)) for op in compare.ops) and _mentions_backend(compare.left)
                and not _lists_hccl(strings))
