"""The rule engine shared by the flake8 plugin and ``ascend-analyse``.

``lint(tree, lines, path, config)`` builds the file's semantic model once
(``semantic.model.SemanticModel``), then walks the tree once, handing each
node to the rules registered for its type.  A
rule reports through ``Context.report``; the result is a sorted list of
``Finding``, one per (line, column, code), and one per (function, code, API): the same advice repeated down one
function is one problem to a reader. A finding inside a branch that only CUDA takes folds into the finding on the
branch's test, which says that the branch turns off on an NPU; one inside the branch of a backend's comparison with
NCCL folds into that comparison's finding, whose rewrite to 'hccl' lets the NPU in. Folded findings travel with the
one they fold into (``Finding.folded``), so ``--fix`` still rewrites every site.
"""
from __future__ import annotations

import ast
from ast import AST
import gc
import os
import re
import tokenize
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Type, TypeVar

from flake8.defaults import NOQA_FILE, NOQA_INLINE_REGEXP
from flake8.utils import parse_comma_separated_list

from .codes import CODES, Report
from .config import Config
from .detect.cuda_packages import for_nvidia_runtime
from .detect.export_path import on_export_path
from .detect.loader_names import data_pipeline_module, datasets_module, in_data_pipeline, only_the_pipeline_calls
from .detect.old_torch import in_old_torch_branch
from .detect.training import is_main_guard, source_text
from .detect.unused import in_unused_function, in_untaken_branch
from .registry import Rule, all_rules
from .rewrite import Rewrite
from .semantic import project
from .semantic.model import SemanticModel
from .walk import child_fields, fields_table, lineage

T = TypeVar("T")
_UNSET = object()  # a memo's "not asked yet" (None is an answer)


@dataclass(frozen=True, order=True)
class Finding:
    """One lint finding; ``col`` is 0-based like flake8 expects from plugins."""

    line: int
    col: int
    code: str
    message: str  # the text after the code
    end_line: int = 0
    api: str = ""  # the qualified API or pattern the finding is about (CSV "OP" column)
    tips: str = ""  # restriction, advice or replacement (CSV "Tips" column)
    path: str = ""
    # The safe rewrite ``fix.py`` may apply (None: report only); not part of what the finding is.
    rewrite: Optional[Rewrite] = field(default=None, compare=False)
    # findings folded into this one (repeats in its function, or the calls of the CUDA branch its test guards)
    folded: Tuple["Finding", ...] = field(default=(), compare=False)
    # what makes two findings of a code in one function the same problem, where ``api`` names the site itself
    # (an index put's API is its line of code): '' means ``api``
    family: str = field(default="", compare=False)

    @property
    def problem(self) -> str:
        """The (code's) problem this finding is an instance of: repeats of it in one function fold (``fold``)."""
        return self.family or self.api

    def with_folded(self) -> Iterator["Finding"]:
        """This finding and those folded into it (which fold nothing themselves): every site ``--fix`` may rewrite."""
        yield self
        yield from self.folded

    @property
    def text(self) -> str:
        return f"{self.code} {self.message}"


# codes whose findings advise on running on the NPU (affinity, dynamic shapes, performance, precision), as opposed to
# what stops the code there: none of them is reported in code that only exports the model (detect/export_path.py)
# or in a module of a datasets package's transforms, which prepares samples on the host (detect/loader_names.py)
_NPU_ADVICE = frozenset(code for code, row in CODES.items() if row.report in (
    Report.AFFINITY_API_CALL, Report.DYNAMIC_SHAPE_HINTS, Report.PERFORMANCE_ADVICE, Report.PRECISION_ADVICE))
# findings on tensor operations themselves (``Code.tensor_op``): also moot in the methods of a dataset or a collator,
# the modules of a datasets folder and the functions only they call (detect/loader_names.py)
_OP_ADVICE = frozenset(code for code, row in CODES.items() if row.tensor_op)


class Context:
    """What a rule sees while the engine walks one file."""

    def __init__(self, tree: ast.AST, lines: Sequence[str], path: str, config: Config) -> None:
        self.tree = tree
        self.lines = lines
        self.path = path
        self.config = config
        self.data = config.data
        self.stack: List[ast.AST] = []  # ancestors of the node being checked, outermost first
        self.findings: List[Finding] = []
        self._chains: Dict[int, Optional[str]] = {}
        self._memo: Dict[str, object] = {}
        # finding -> (id, kind) of its function, or of its top-level statement (``fold``)
        self.owners: Dict[Finding, Tuple[int, str]] = {}
        self.guards: Dict[Finding, Tuple[int, int]] = {}  # finding -> lines of the CUDA test guarding its branch
        self.model = SemanticModel(tree, lines)  # scopes, bindings, values: independent of the walk
        self.values = self.model.values  # the value model: what an expression is, where it lives

    # -- questions rules ask ---------------------------------------------
    def qualname(self, node: ast.AST) -> Optional[str]:
        """Fully qualified import path of a name or attribute chain, if it is one."""
        return self.model.qualname(node)

    def is_tensor(self, node: ast.AST) -> bool:
        """Is ``node`` known to be a torch tensor (``self.values`` has the finer questions)?"""
        return self.values.is_tensor(node)

    def chain(self, node: ast.AST) -> Optional[str]:
        """Qualified name of a whole ``Name``/``Attribute`` chain, or None.

        Only the outermost node of a chain answers (``torch.nn.functional.relu``
        once, not again for ``torch.nn``); results are memoised per node so the
        rules sharing this question resolve each chain once.  A name being
        bound (``x = torch.cuda.amp.GradScaler``) names nothing: only its value does.
        """
        key = id(node)
        chains = self._chains
        result = chains.get(key, _UNSET)
        if result is not _UNSET:
            return result
        parent = self.stack[-1] if self.stack else None
        if (isinstance(parent, ast.Attribute) and parent.value is node) or (
            isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)
        ):
            result = None
        else:
            result = self.model.qualname(node)
        chains[key] = result
        return result

    def calls_elsewhere(self, name: str, method: bool = False) -> List[ast.Call]:
        """The calls of the module-level function or class ``name`` (``method``: of any method so named) in the
        other modules of the file's package (``semantic/project.py``); none for stdin."""
        path = self.module_path()
        if path is None:
            return []
        return project.method_calls_elsewhere(path, name) if method else project.calls_elsewhere(path, name)

    def hidden_callers(self, name: str) -> bool:
        """May the file's package call the module-level function or class ``name`` where ``calls_elsewhere`` does
        not show it (``semantic/project.py``)? True for stdin."""
        path = self.module_path()
        return path is None or project.hidden_callers(path, name)

    def resolve_class(self, qualname: str) -> Tuple[str, Tuple[str, ...]]:
        """Where the class ``qualname`` (as this file spells it) is defined when the file's package holds or
        re-exports it, and its bases there (``semantic/project.py``); ("", ()) for stdin."""
        path = self.module_path()
        return ("", ()) if path is None else project.resolve_class(path, qualname)

    def public(self, name: str) -> bool:
        """Is the module-level function or class ``name`` part of the package's public interface
        (``semantic/project.py``)? False for stdin."""
        path = self.module_path()
        return path is not None and project.public(path, name)

    def package_inits(self, spelled: Optional[Callable[[str], bool]] = None) -> List[ast.Module]:
        """The parsed ``__init__.py`` of every package above the file, outermost first: what Python runs before it
        (``semantic/project.py``; ``spelled``: only those whose text passes it); none for stdin."""
        path = self.module_path()
        return [] if path is None else project.package_inits(path, spelled)

    def program(self) -> bool:
        """Is the file a program: no other module of its package imports it (``semantic/project.py``)? True for
        stdin and a module in no package (a script)."""
        path = self.module_path()
        return path is None or not project.imported_elsewhere(path)

    def module_path(self) -> Optional[str]:
        """The file's path for ``semantic/project.py``; None for stdin."""
        return module_path(self.path, self.config)

    def project_root(self) -> Optional[str]:
        """Where the file's project begins (``semantic/project.py``); None for stdin, a file that is not on disk
        (no part of the project read) or a project no folder marks."""
        path = self.module_path()
        if path is None or not os.path.isfile(path):
            return None
        return project.project_root(os.path.dirname(os.path.abspath(path)))

    def memo(self, key: str, build: Callable[["Context"], T]) -> T:
        """A per-file result several rules share (e.g. the training-loop analysis), built on first use."""
        found = self._memo.get(key, _UNSET)
        if found is _UNSET:
            found = self._memo[key] = build(self)
        return found  # type: ignore[return-value]

    @property
    def parent(self) -> Optional[ast.AST]:
        return self.stack[-1] if self.stack else None

    def enclosing(self, *types: type) -> Optional[ast.AST]:
        """The innermost ancestor of one of ``types``."""
        for node in reversed(self.stack):
            if isinstance(node, types):
                return node
        return None

    def lineage(self, node: ast.AST) -> Iterator[Tuple[ast.AST, ast.AST]]:
        """(parent, child) pairs from ``node`` (the checked node) outwards: its parent with it, then upwards."""
        return lineage(self.stack, node)

    # -- reporting ---------------------------------------------------------
    def report(self, node: ast.AST, code: str, message: str, api: str = "", tips: str = "",
               rewrite: Optional[Rewrite] = None, guard: Optional[ast.AST] = None, family: str = "") -> None:
        """``guard``: the test of a branch only CUDA takes, around ``node``; a finding on that test stands for this
        one (``fold``).  ``family``: see ``Finding.family``."""
        if code in _NPU_ADVICE and (on_export_path(self) or data_pipeline_module(self.path)):
            return  # advice for running on the NPU, in code that only exports the model or prepares samples on the host
        if code in _OP_ADVICE and (in_data_pipeline(self.stack) or datasets_module(self.path)
                                   or only_the_pipeline_calls(self)):
            return  # an operation on samples that the loader's workers build on the host
        if not self.config.lint_tests and in_test_code(self):
            return
        if in_old_torch_branch(self, node):
            return  # only a torch older than the selected torch_npu's takes this branch
        if in_unused_function(self, node):
            return  # in a top-level function that nothing in the project names: it never runs
        if in_untaken_branch(self, node):
            return  # in a branch that no value the project can give takes: it never runs
        if rewrite is not None and "--fix" not in message:  # a finding with a safe rewrite names its command
            message += f"; ascend-analyse --fix --select {code} rewrites it"
        finding = Finding(
            line=node.lineno,
            col=node.col_offset,
            code=code,
            message=message,
            end_line=getattr(node, "end_lineno", None) or node.lineno,
            api=api,
            tips=tips,
            path=self.path,
            rewrite=rewrite,
            family=family,
        )
        self.findings.append(finding)
        # the innermost function, or at module level the top-level statement (one dict literal is one change)
        function = self.enclosing(ast.FunctionDef, ast.AsyncFunctionDef)
        if function is not None:
            self.owners[finding] = (id(function), "function")
        elif len(self.stack) > 1:
            self.owners[finding] = (id(self.stack[1]), "statement")
        if guard is not None:
            self.guards[finding] = (guard.lineno, getattr(guard, "end_lineno", None) or guard.lineno)


def module_path(path: str, config: Config) -> Optional[str]:
    """The linted file's path for ``semantic/project.py`` (below ``Config.root``); None for stdin."""
    return None if path in ("-", "stdin") else os.path.join(config.root or os.getcwd(), path)


# test code: a tests/, test/ or testing/ folder, test_*.py, *_test.py, conftest.py (pytest's and unittest's
# conventions) and testing_utils.py (a package's helpers for its tests: diffusers, transformers)
_TEST_PATH = re.compile(r"(^|[\\/])(tests?[\\/]|testing[\\/]|test_[^\\/]*\.py$|[^\\/]*_test\.py$|conftest\.py$|"
                        r"testing_utils\.py$)")


def is_test_path(path: str) -> bool:
    """Is ``path`` test code by the usual conventions (``tests/``, ``test/``, ``testing/``, ``test_*.py``,
    ``*_test.py``, ``conftest.py``, ``testing_utils.py``)? Its CUDA cases are skipped or faked where CUDA is
    missing (``skipif(not torch.cuda.is_available())``), it picks data and sizes for its own case, and a test that
    breaks on the NPU shows itself when the suite runs there: no rule reports in it unless ``Config.lint_tests``
    (docs/accuracy.md)."""
    return bool(_TEST_PATH.search(path))


_TEST_FOLDER = re.compile(r"(^|[\\/])(tests?|testing)[\\/]")


def is_test_code(path: str, tree: ast.AST) -> bool:
    """``is_test_path``, less a program that only its file name makes look like a test: a ``test_*.py`` outside
    a tests folder with a ``__main__`` block, no pytest or unittest import and no test of its own is a tool a user
    runs (mmselfsup 1.0.0 ``.mim/tools/benchmarks/classification/knn_imagenet/test_knn.py``, a kNN benchmark)."""
    if not is_test_path(path):
        return False
    if _TEST_FOLDER.search(path) or not isinstance(tree, ast.Module):
        return True
    main = False
    for node in tree.body:
        if is_main_guard(node):
            main = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                name.split(".")[0] in ("pytest", "unittest") for name in _imported(node)):
            return True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test") or \
                isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            return True
    return not main


def _imported(node) -> List[str]:
    return [node.module or ""] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]


_TEST_CASES = frozenset(("unittest.TestCase", "unittest.case.TestCase"))


def in_test_code(ctx: Context) -> bool:
    """Is the node being checked in test code inside a module that is not a test file: a module-level
    ``def test_*`` that nothing else in the file names (a kernel file's pytest-style self-check, unsloth
    2026.10.9 kernels/rms_layernorm.py ``test_rms_layernorm``), or a ``unittest.TestCase`` class? Such code is
    skipped as in a test file; so is the ``if __name__ == "__main__":`` block of a library module
    (``_self_check_block``). A ``test_net`` that the file calls (easyocr 1.7.2 detection.py, CRAFT's
    inference) or a Lightning ``test_dataloader`` method is no test."""
    top = ctx.stack[1] if len(ctx.stack) > 1 else None
    if is_main_guard(top):
        return ctx.memo(f"self_check_block.{id(top)}", lambda c: _self_check_block(c, top))
    if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) and top.name.startswith("test_"):
        named = ctx.memo("names_in_source", lambda c: {})
        found = named.get(top.name)
        if found is None:
            found = named[top.name] = len(re.findall(rf"\b{top.name}\b", source_text(ctx))) > 1
        return not found
    return isinstance(top, ast.ClassDef) and any(ctx.qualname(base) in _TEST_CASES for base in top.bases)


# what a block that takes its input from the command line calls or reads: a program its user starts
_COMMAND_LINE = frozenset(("argv", "parse_args", "parse_known_args", "parse_args_into_dataclasses", "ArgumentParser",
                           "Fire"))


def _self_check_block(ctx: Context, block: ast.If) -> bool:
    """Is the module's ``if __name__ == "__main__":`` block a self-check of a library module: another module of its
    package imports the module (``project.imported_elsewhere``), and the block reads no command line? It runs the
    module's code on data of its own (coqui-tts 0.27.2 tts/layers/xtts/stream_generator.py:466 generates with
    bloom-560m on cuda:0, espnet 202511 espnet2/tts/feats_extract/yin.py:149 on random audio, deepspeed 0.19.8
    compile/profilers/comm_profile.py:156); a run of the package never takes it. A module nothing imports is a
    program, and its block is how its user starts it."""
    if any((node.attr if isinstance(node, ast.Attribute) else node.id) in _COMMAND_LINE
           for node in ast.walk(block) if isinstance(node, (ast.Attribute, ast.Name))):
        return False
    return not ctx.program()


# deep-learning frameworks other than torch: a module written for one of them runs no torch code
_OTHER_FRAMEWORKS = frozenset(("chainer", "tensorflow", "jax", "flax", "paddle", "mxnet", "mindspore"))


def for_another_framework(tree: ast.AST) -> bool:
    """Does the module import another deep-learning framework (Chainer, TensorFlow, JAX, Paddle, MXNet, MindSpore)
    at its top level and nothing of torch? Its code never reaches torch_npu (espnet 202511 keeps a Chainer backend
    beside its PyTorch one): no rule reports in it."""
    roots = set()
    for statement in getattr(tree, "body", ()):
        if isinstance(statement, ast.Import):
            roots.update(alias.name.partition(".")[0] for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            roots.add(statement.module.partition(".")[0])
    return bool(roots & _OTHER_FRAMEWORKS) and not any(root.startswith("torch") for root in roots)


def _left_out_of_project(located: Optional[str], tree: ast.AST) -> bool:
    """Does the module at ``located`` (None: no file on disk) run nothing worth reporting, by what its project shows?
    The CUDA one of a pair the project picks from by device (``project.npu_counterpart``: on an NPU the project runs
    the other), a script whose import of its own project's package fails (``project.stale_script``: none of its
    lines runs), or a module of an NVIDIA-only runtime (``for_nvidia_runtime``: replaced, not ported)."""
    return (located is not None and (project.npu_counterpart(located) is not None
                                     or project.stale_script(located, tree))) or for_nvidia_runtime(located, tree)


def _active_rules(source: str, rules: Iterable[Type[Rule]], config: Config, left_out: bool = False) -> List[Rule]:
    """Rules whose trigger words occur in the file (the cheap pre-filter), less those with nothing to report under
    ``config`` (ASC104 without a third_party list); none in a file ``left_out`` (test code, another framework's,
    the CUDA twin of an NPU module, a script whose imports fail, a module of an NVIDIA-only runtime)."""
    if left_out:
        return []
    rules = list(rules)
    spelled = {word for word in {w for rule in rules for w in rule.trigger_words} if word in source}  # each once
    return [rule() for rule in rules if (not rule.trigger_words or not spelled.isdisjoint(rule.trigger_words))
            and rule.runs_with(config)]


_CHAIN_TYPES = (ast.Name, ast.Attribute)


def _handlers(rules: Sequence[Rule]) -> Tuple[Dict[type, List[Rule]], Dict[type, List[Rule]], Dict[type, List[Rule]]]:
    """Per node class, the rules to call: on every node, and (``Rule.names``) on the outermost node of a chain and
    on one whose root name the file imports."""
    every: Dict[type, List[Rule]] = {}
    outermost: Dict[type, List[Rule]] = {}
    imported: Dict[type, List[Rule]] = {}
    tables = {"every": every, "outermost": outermost, "imported": imported}
    for rule in rules:
        gate = getattr(rule, "names", "every")
        for node_type in rule.node_types:
            table = tables[gate] if node_type in _CHAIN_TYPES else every
            table.setdefault(node_type, []).append(rule)
    return every, outermost, imported


def lint(
    tree: ast.AST,
    lines: Sequence[str],
    path: str,
    config: Config,
    rules: Optional[Iterable[Type[Rule]]] = None,
    visitors: Sequence[object] = (),
    shown: Optional[Callable[[str], bool]] = None,
) -> List[Finding]:
    """Run the rules on one parsed module and return its findings, sorted.

    ``shown(code)``: whether the front end reports ``code`` in this file (flake8's selection; default: every code
    the rules report). A finding folds into one of another code only where that one is shown.

    ``visitors`` are objects shaped like rule instances (``node_types``, ``check(node, ctx)``) that gather facts
    during the same walk instead of reporting; they run whatever the file's words.
    ``lines`` are split as ``sources.split_lines`` splits them (flake8 hands the plugin such lines); callers
    run it through ``sources.deep`` so that a tree deeper than the recursion limit allows is still walked.
    """
    source = "".join(lines)
    left_out = (not config.lint_tests and is_test_code(path, tree)) or for_another_framework(tree) or \
        _left_out_of_project(module_path(path, config), tree)
    active = [*_active_rules(source, all_rules() if rules is None else rules, config, left_out), *visitors]
    if not active:
        return []
    # The cyclic garbage collector pauses during the walk: what the walk allocates (the model, the memos) lives
    # until it ends, so collections during it would only traverse the same objects again and promote them to
    # the older generations; the first collection after it frees the file's model while it is still young.
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        return _walk(tree, lines, path, config, active, shown)
    finally:
        if collecting:
            gc.enable()


_LEAVES = frozenset((ast.Name, ast.Constant))  # no child worth visiting: the walk only runs their rules


def _walk(tree: ast.AST, lines: Sequence[str], path: str, config: Config, active: List,
          shown: Optional[Callable[[str], bool]]) -> List[Finding]:
    """``lint`` once the active rules (and visitors) are known: the model, the walk, the findings."""
    handlers, outermost, imported_rules = _handlers(active)
    ctx = Context(tree, lines, path, config)
    stack = ctx.stack
    may_resolve = ctx.model.may_resolve
    chained = bool(outermost or imported_rules)

    push, pop, rules_of, fields_of = stack.append, stack.pop, handlers.get, fields_table().get
    outermost_of, imported_of = outermost.get, imported_rules.get
    Attribute, Name = ast.Attribute, ast.Name

    def chain_rules(node: ast.AST, cls: type) -> None:
        """The gated rules of the outermost node of a chain (``Rule.names``)."""
        for rule in outermost_of(cls, ()):
            rule.check(node, ctx)
        rules = imported_of(cls)
        if rules and may_resolve(node):
            for rule in rules:
                rule.check(node, ctx)

    def visit(node: ast.AST) -> None:
        cls = node.__class__
        rules = rules_of(cls)
        if rules is not None:
            for rule in rules:
                rule.check(node, ctx)
        if cls is Attribute and chained and stack[-1].__class__ is not Attribute:  # not a link inside a chain
            chain_rules(node, cls)
        fields = fields_of(cls)
        if fields is None:
            fields = child_fields(cls)
        if not fields:  # a leaf (a name, a constant): no child to see it on the stack
            return
        push(node)
        outer = chained and cls is not Attribute  # a name here is a whole chain, not the root of one
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if item.__class__ in _LEAVES:  # ``visit`` inlined for names and constants: only their rules
                        for rule in rules_of(item.__class__, ()):
                            rule.check(item, ctx)
                        if outer and item.__class__ is Name:
                            chain_rules(item, Name)
                    elif isinstance(item, AST):
                        visit(item)
            elif value.__class__ in _LEAVES:
                for rule in rules_of(value.__class__, ()):
                    rule.check(value, ctx)
                if outer and value.__class__ is Name:
                    chain_rules(value, Name)
            elif isinstance(value, AST):
                visit(value)
        pop()

    visit(tree)
    return fold(one_per_site(ctx.findings), ctx.owners, ctx.guards, lines, shown)


def one_per_site(findings: Iterable[Finding]) -> List[Finding]:
    """The findings sorted, one per (line, column, code): the first in sort order stands for the rest.

    Several nodes can start at the same place (a fused pattern found from each of the statements that close it,
    a chain seen from each of its links); a user reads one finding there, not three that differ only in the
    end line or the API column.
    """
    kept: Dict[Tuple[int, int, str], Finding] = {}
    for finding in sorted(set(findings)):
        kept.setdefault((finding.line, finding.col, finding.code), finding)
    return list(kept.values())


# the NCCL backend's code: a branch whose test it reports is the NCCL backend's (``nccl_branch_test``)
_NCCL_CODE = "ASC204"


def _before(test: Finding, inner: Finding) -> bool:
    """Does the finding on a branch's test come before ``inner``? An NCCL comparison also where ``inner`` is
    ``and``-ed after it on its line (``if backend == 'nccl' and not torch.cuda.is_available():``); a CUDA test only
    on an earlier line: a device on the test's own line keeps its finding (``'cuda' if torch.cuda.is_available()
    else 'cpu'``, both judged right, litgpt 0.5.13 eval/evaluate.py:83)."""
    if test.code == _NCCL_CODE:
        return (test.line, test.col) < (inner.line, inner.col)
    return test.line < inner.line


def _lines(numbers: Iterable[int]) -> str:
    numbers = sorted(set(numbers))
    return f"line{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}"


def fold(findings: List[Finding], owners: Dict[Finding, Tuple[int, str]], guards: Dict[Finding, Tuple[int, int]],
         lines: Sequence[str], shown: Optional[Callable[[str], bool]] = None) -> List[Finding]:
    """The sorted findings with two kinds folded into another one (its message names them, ``folded`` keeps them):

    - a finding in a branch only CUDA takes (or the NCCL backend's), into an ASC2 finding on the branch's test
      that comes before it: on an NPU the test turns the branch off, which that finding says; the calls inside
      matter once the test lets the NPU in;
    - a later repeat of a (function, code, problem) into the first (module-level script lines are separate
      statements to change, so there only repeats inside one top-level statement fold, such as the entries of one
      dict literal; the problem is the API, or the rule's ``family``: every boolean-mask index put of a function
      is one problem).

    A finding whose ``# noqa`` hides it, or whose code the front end does not show (``shown``), neither folds
    nor takes others in, so a suppressed site never hides the rest in either front end.
    """
    keys = [(owners[f], f.code, f.problem) for f in findings if f in owners]
    if not guards and len(set(keys)) == len(keys):
        return findings  # nothing to fold: no need to read the file's noqa comments
    hidden = set(findings) - set(unsuppressed(findings, lines))
    into: Dict[Finding, Finding] = {}  # folded finding -> the one it folds into
    if guards:
        on_tests = [f for f in findings
                    if f.code.startswith("ASC2") and f not in hidden and (shown is None or shown(f.code))]
        for finding in findings:
            span = guards.get(finding)
            if span is not None and finding not in hidden:
                lead = next((t for t in on_tests if span[0] <= t.line <= span[1] and _before(t, finding)), None)
                if lead is not None:
                    into[finding] = lead
    first: Dict[Tuple[Tuple[int, str], str, str], Finding] = {}
    # a test that turns a branch off says so in its own finding, a repeat only of the same API (an NCCL comparison
    # names only the backend: of any), its branch's calls going with it to the first: the same question asked
    # again (a second torch.cuda.is_available(), yolov5 7.0.14 utils/torch_utils.py:118 and :121; the device test
    # against 'cuda' of a device built from 'cuda', oumi 0.9 utils/verl_utils/fsdp1_rank_buffer_sync.py:39 and :43),
    # not another of its problem's sites (a .cuda() call before a test of the device a model sits on, funasr 1.4.16
    # bin/train.py:131 and :249, judged apart)
    branch_leads = {lead for lead in into.values() if lead.code != _NCCL_CODE}
    for finding in findings:
        owner = owners.get(finding)
        if finding not in into and owner is not None and finding not in hidden:
            lead = first.setdefault((owner, finding.code, finding.problem), finding)
            if lead is not finding and (finding not in branch_leads or lead.api == finding.api):
                into[finding] = lead

    def root(finding: Finding) -> Finding:
        while finding in into:
            finding = into[finding]
        return finding

    repeats: Dict[Finding, List[Finding]] = {}
    branch: Dict[Finding, List[Finding]] = {}
    for finding in findings:
        if finding in into:
            lead = root(finding)
            same = (finding.code, finding.problem) == (lead.code, lead.problem) and owners.get(finding) == owners.get(lead)
            (repeats if same else branch).setdefault(lead, []).append(finding)
    kept = []
    for finding in findings:
        if finding in into:
            continue
        message = finding.message
        if finding in repeats:
            message += f" (again in this {owners[finding][1]} on {_lines(f.line for f in repeats[finding])})"
        if finding in branch:
            groups: Dict[Tuple[str, str], List[int]] = {}
            for inner in branch[finding]:
                groups.setdefault((inner.code, inner.api), []).append(inner.line)
            message += f" (the {'NCCL' if finding.code == _NCCL_CODE else 'CUDA'} branch also has: " + "; ".join(
                " ".join(filter(None, (code, api, "on", _lines(numbers))))
                for (code, api), numbers in groups.items()) + ")"
        folded = tuple(repeats.get(finding, ())) + tuple(branch.get(finding, ()))
        kept.append(replace(finding, message=message, folded=folded) if folded else finding)
    return kept


def _statement_lines(lines: Sequence[str]) -> Dict[int, str]:
    """Line number -> the text flake8 searches for ``# noqa`` (the whole multi-line statement or string).

    Mirrors flake8's ``FileProcessor._noqa_line_mapping``: a comment after the
    closing bracket of a call spread over several lines covers every line of it.
    """
    mapping: Dict[int, str] = {}
    first, last = len(lines) + 2, -1
    try:
        for token in tokenize.generate_tokens(iter(lines).__next__):
            if token.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            first, last = min(first, token.start[0]), max(last, token.end[0])
            if token.type in (tokenize.NL, tokenize.NEWLINE):
                text = "".join(lines[first - 1:last])
                mapping.update(dict.fromkeys(range(first, last + 1), text))
                first, last = len(lines) + 2, -1
    except (tokenize.TokenError, SyntaxError):
        return {}
    return mapping


def unsuppressed(findings: Iterable[Finding], lines: Sequence[str], disable_noqa: bool = False) -> List[Finding]:
    """The findings flake8 would still report after ``# noqa`` comments (flake8's own pattern and matching).

    A bare ``# noqa`` silences its statement, ``# noqa: ASC2,ASC301`` the codes
    starting with one of the listed prefixes, and ``# flake8: noqa`` on a line
    of its own the whole file.
    """
    findings = list(findings)
    if disable_noqa or not findings or not any("noqa" in line.lower() for line in lines):
        return findings
    if any(NOQA_FILE.match(line) for line in lines):
        return []
    statements = _statement_lines(lines)
    kept = []
    for finding in findings:
        text = statements.get(finding.line) or (lines[finding.line - 1] if 0 < finding.line <= len(lines) else "")
        match = NOQA_INLINE_REGEXP.search(text)
        if match is not None:
            codes = match.group("codes")
            if codes is None or finding.code.startswith(tuple(parse_comma_separated_list(codes))):
                continue
        kept.append(finding)
    return kept
