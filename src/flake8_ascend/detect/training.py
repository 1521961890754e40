"""Where a file trains: training loops, per-step code and entry scripts.

The one loop finder: every advice rule (ASC5xx/ASC6xx) that asks "does this run
on every training step?" and the runtime injector that asks "which loop records
an iteration?" use it, so they agree.  The definitions, also in docs/advice.md:

- A *training step call* is ``<expr>.backward(...)``, ``torch.autograd.backward(...)``
  or an optimizer step: ``<opt>.step(...)`` whose receiver's last name contains
  ``optim`` or is ``opt`` / ends in ``_opt``, or ``<scaler>.step(<optimizer>)``.
  ``scheduler.step()`` is not one.
- A *training loop* is a ``for``/``while`` loop holding a training step call
  whose innermost enclosing loop is that loop, or holding a call ``f(...)`` /
  ``self.f(...)`` of a *step function*: a function of the same file with a
  training step call outside its own loops.  An epoch loop that only contains
  a training loop is not one itself.  A method a framework calls on every step
  of a subclass (``data/frameworks.json``, from the frameworks' sources: the HF
  ``Trainer``'s ``training_step`` and ``compute_loss``, ``LightningModule.training_step``)
  is a step function too, in a class whose bases name that framework class or
  such a class of the same file or of another module of its package (read, never
  imported: ``semantic/project.py``); so is the ``step`` of a ``torch.optim.Optimizer``
  subclass, which is the optimizer step itself (a LARS or Muon ``step``).
- A *whole-step loop* (where the injector records iterations) is a loop whose own
  body, outside nested loops and definitions, holds both a backward call and an
  optimizer step.
- Code *runs every step* when it is in the body of a training loop (loops
  nested in it included) or in a step function called from a loop, without
  crossing a def/lambda/class boundary, and not in the body of an ``if``
  whose test uses ``%`` (``if step % 10 == 0:``, periodic logging) unless
  that body runs the optimizer step (``if (i + 1) % accumulation == 0:``:
  with gradient accumulation, it runs on every optimizer step), nor after
  such an ``if`` that leaves its block (``if step % N != 0: return``), nor in
  the body of an ``if`` that ends in ``raise`` (it runs once, on the way out)
  or that switches off its own test (``if self.log_images: self.log_images = False``).
- An *entry script* has a module-level ``if __name__ == "__main__":`` and a
  training loop.
"""
from __future__ import annotations

import ast
import re
from bisect import bisect_left
from functools import lru_cache
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from ..data import load_frameworks
from ..semantic.values import framework_backward
from ..walk import walk_tree

_STEP_WORDS = ("backward", ".step(")  # a training step call spells one of these
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BOUNDARIES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOSS_SCALING = frozenset({"GradScaler", "ShardedGradScaler", "scale_loss"})


def last_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _optimizer_like(node: ast.AST) -> bool:
    name = last_name(node).lower()
    return "optim" in name or name == "opt" or name.endswith("_opt") or name.startswith("opt_")


def step_kind(call: ast.Call) -> Optional[str]:
    """``"backward"`` or ``"step"`` for a training step call, else None."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "backward":
        return "backward"
    if func.attr == "step" and (_optimizer_like(func.value) or (call.args and _optimizer_like(call.args[0]))):
        return "step"
    return None


def _periodic(test: ast.AST, flags: Set[str] = frozenset()) -> bool:
    """``step % N == 0``, or a call that asks whether a given step logs (torchtitan 0.3.0 trainer.py and
    experiments/forge/example_train.py:348, ``if not self.metrics_processor.should_log(self.step): return``; nemo
    2.5.0 progress_printer.py:139, ``if self.should_log(n):``), or one of ``flags``, names bound to such a call.
    Not HF's ``args.should_log``, a property that says whether this process logs at all."""
    return any((isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)) or _asks_should_log(n) or (
        isinstance(n, ast.Name) and n.id in flags) for n in walk_tree(test))


def _asks_should_log(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and bool(node.args) and last_name(node.func) == "should_log"


def is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    sides = [stmt.test.left, *stmt.test.comparators]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def _lines_with(lines: Sequence[str], words: Sequence[str]) -> List[int]:
    """1-based numbers of the lines holding any of ``words``, ascending (one regex search per line: a generator
    over the words for every line of every file was most of the ``Training`` build)."""
    if not words:
        return []
    search = re.compile("|".join(map(re.escape, words))).search
    return [number for number, line in enumerate(lines, 1) if search(line)]


class Training:
    """The training structure of one module.

    Built by two walks that skip every statement whose lines hold none of the
    words they look for: the first finds training step calls and loss scaling,
    the second (only when the file has step functions) the loops calling them.
    """

    def __init__(self, tree: ast.AST, lines: Sequence[str], framework_steps: Set[int] = frozenset()) -> None:
        self.loops: Set[int] = set()  # ids of training loops
        self._kinds: Dict[ast.AST, Set[str]] = {}  # loop -> kinds of the step calls in its own body
        # ids of step functions called from a loop, and of the methods a framework calls every step
        self.step_functions: Set[int] = set(framework_steps)
        self.scales_loss = False  # GradScaler, scaler.scale(...), amp.scale_loss or X.backward(loss)
        self.accumulates = False  # an optimizer step under a periodic ``if`` inside a training loop
        # ids of those periodic ``if``s (``if (i + 1) % accumulation == 0: optimizer.step()``): their body runs on
        # every optimizer step, unlike a logging branch ``if step % 100 == 0:``
        self.accumulation_steps: Set[int] = set()
        self._candidates: Dict[str, List[ast.AST]] = {}  # def name -> defs with a step outside their loops
        self._hits: List[int] = _lines_with(lines, _STEP_WORDS + ("scale", "Scaler"))
        self._on_call = self._step_call
        self._walk(tree, tree, None, None)
        if self._candidates:
            self._hits = _lines_with(lines, tuple(self._candidates))
            self._on_call = self._loop_call
            self._walk(tree, tree, None, None)
        self.is_entry = bool(self.loops) and any(is_main_guard(s) for s in getattr(tree, "body", ()))

    # -- building ------------------------------------------------------------
    # ``periodic``: the innermost periodic ``if`` (``% N``) whose body holds the node inside its loop, or None
    def _walk(self, node: ast.AST, scope: ast.AST, loop: Optional[ast.AST], periodic: Optional[ast.If]) -> None:
        for child in ast.iter_child_nodes(node):
            self._visit(child, scope, loop, periodic)

    def _visit(self, node: ast.AST, scope: ast.AST, loop: Optional[ast.AST], periodic: Optional[ast.If]) -> None:
        if isinstance(node, ast.stmt):
            at = bisect_left(self._hits, node.lineno)
            if at == len(self._hits) or self._hits[at] > node.end_lineno:
                return  # none of the words is on its lines: nothing to find inside
        if isinstance(node, _BOUNDARIES):
            self._walk(node, node, None, None)
            return
        if isinstance(node, ast.Call):
            self._on_call(node, scope, loop, periodic)
        if isinstance(node, _LOOPS):
            self._walk(node, scope, node, None)
        elif isinstance(node, ast.If) and _periodic(node.test):
            self._visit(node.test, scope, loop, periodic)
            for stmt in node.body:
                self._visit(stmt, scope, loop, node)
            for stmt in node.orelse:
                self._visit(stmt, scope, loop, periodic)
        else:
            self._walk(node, scope, loop, periodic)

    def _step_call(self, call: ast.Call, scope: ast.AST, loop: Optional[ast.AST], periodic: Optional[ast.If]) -> None:
        func = call.func
        name = last_name(func)
        if name in _LOSS_SCALING or (name == "scale" and len(call.args) == 1):
            self.scales_loss = True
        kind = step_kind(call)
        if kind == "backward" and framework_backward(call):
            self.scales_loss = True  # accelerator.backward(loss): the framework scales the loss
        if kind and loop is not None:
            self.loops.add(id(loop))
            self._kinds.setdefault(loop, set()).add(kind)
            if kind == "step" and periodic is not None:
                self.accumulates = True
                self.accumulation_steps.add(id(periodic))
        elif kind and isinstance(scope, _FUNCTIONS):
            self._candidates.setdefault(scope.name, []).append(scope)

    def _loop_call(self, call: ast.Call, scope: ast.AST, loop: Optional[ast.AST], periodic: Optional[ast.If]) -> None:
        """A loop calling ``f(...)`` / ``self.f(...)`` of a step function ``f`` is a training loop."""
        func = call.func
        if loop is None or not (isinstance(func, ast.Name) or (
                isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self")):
            return
        for function in self._candidates.get(last_name(func), ()):
            self.loops.add(id(loop))
            self.step_functions.add(id(function))

    # -- questions -----------------------------------------------------------
    def whole_step_loops(self) -> List[ast.AST]:
        """The loops whose own body runs a backward call and an optimizer step, in file order."""
        return sorted((loop for loop, kinds in self._kinds.items() if kinds == {"backward", "step"}),
                      key=lambda loop: (loop.lineno, loop.col_offset))

    def runs_every_step(self, stack: Sequence[ast.AST], node: ast.AST) -> bool:
        """Does ``node`` (whose ancestors are ``stack``) run on every training step?"""
        child = node
        for parent in reversed(stack):
            if isinstance(parent, ast.If) and _in(child, parent.body) and (
                    (_periodic(parent.test) and id(parent) not in self.accumulation_steps)
                    or isinstance(parent.body[-1], ast.Raise) or _one_shot(parent)):  # periodic, or rare
                return False
            if isinstance(parent, ast.ExceptHandler) or self._after_periodic_exit(parent, child):
                return False  # a handler runs after a failure (an out-of-memory retry), not on every step
            finite = _finite(parent.test) if isinstance(parent, ast.If) else None
            if finite is not None and _in(child, parent.orelse if finite else parent.body):
                return False  # the branch of a non-finite value: a step skipped, not every step
            if isinstance(parent, _LOOPS) and id(parent) in self.loops and (
                    _in(child, parent.body) or (isinstance(parent, ast.While) and child is parent.test)):
                return True
            if isinstance(parent, _BOUNDARIES):
                return id(parent) in self.step_functions
            child = parent
        return False

    def _after_periodic_exit(self, parent: ast.AST, child: ast.AST) -> bool:
        """Is ``child`` a statement after a periodic guard that leaves its block (``if step % N != 0: return``,
        ``if i % log_every: continue``, ``if not should_log: return`` after ``should_log =
        self.metrics_processor.should_log(self.step)`` in the same block: torchtitan 0.3.0 trainer.py:877-959,
        experiments/torchft/trainer.py:392-494)? What follows runs every N steps, like the body of ``if step % N ==
        0:``."""
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list) or not _in(child, block):
                continue
            flags: Set[str] = set()
            for stmt in block:
                if stmt is child:
                    return False
                if isinstance(stmt, ast.Assign):  # a name bound to the question, and not bound again since
                    names = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
                    flags = flags | names if _asks_should_log(stmt.value) else flags - names
                if isinstance(stmt, ast.If) and not stmt.orelse and _periodic(stmt.test, flags) and isinstance(
                        stmt.body[-1], (ast.Return, ast.Continue)) and id(stmt) not in self.accumulation_steps:
                    return True
        return False

    def called_every_step(self, stack: Sequence[ast.AST], node: ast.AST, model, depth: int = 0) -> bool:
        """Does ``node`` run on every call of its function, a function that per-step code of this file calls?

        ``empty_cache()`` in a loss helper that each step calls: the function's call sites (``f(...)`` of a
        module-level function, ``self.f(...)`` of a method) are checked with ``runs_every_step``, then, two
        calls deep, with this test.  Under any ``if`` or ``except`` inside the function it is not every call, nor
        in a conditional expression unless its test is itself a tensor's truth value (``p.mean().item() if
        mask.any() else 0.0``: the line waits for the device on every call, whichever side it takes).
        """
        function, child = None, node
        for parent in reversed(stack):
            if isinstance(parent, (ast.If, ast.excepthandler)) or self._after_periodic_exit(parent, child) or (
                    isinstance(parent, ast.IfExp) and not model.values.of(parent.test).tensor):
                return False
            if isinstance(parent, _BOUNDARIES):
                function = parent
                break
            child = parent
        if not isinstance(function, _FUNCTIONS) or not (self.loops or self.step_functions):
            return False
        for call in model.summaries.call_sites(function):
            where = model.ancestors(call)
            if self.runs_every_step(where, call) or (
                    depth < 2 and self.called_every_step(where, call, model, depth + 1)):
                return True
        return False


def _one_shot(branch: ast.If) -> bool:
    """Does the branch switch off its own test (``if self.log_images: self.log_images = False``,
    ``if not logged: ...; logged = True``)? It runs once, not on every step."""
    tested = {ast.unparse(n) for n in walk_tree(branch.test) if isinstance(n, (ast.Name, ast.Attribute))}
    return any(isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and any(
        ast.unparse(target) in tested for target in stmt.targets) for stmt in branch.body)


_FINITE = frozenset(("isfinite",))
_NOT_FINITE = frozenset(("isnan", "isinf"))


def _finite(test: ast.AST) -> Optional[bool]:
    """True for a test that holds when values are finite (``grad_norm is None or torch.isfinite(grad_norm)``), False
    for one that holds when they are not (``torch.isnan(loss)``, ``not math.isfinite(x)``), None for any other test.
    The branch taken on a NaN or an infinity (a skipped step: espnet 202511 espnet2/train/gan_trainer.py:281,
    funasr 1.4.16 train_utils/trainer.py:486) is no per-step path."""
    negated = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, not negated
    if isinstance(test, ast.BoolOp):
        answers = [_finite(v) for v in test.values]
        # the rare side must need a non-finite value: the else of ``x is None or isfinite(x)`` (an ``or`` with a
        # finite test and no non-finite one), the body of ``isnan(a) and ...``; ``isfinite(a) and step > 10``
        # fails on small steps too, ``isnan(a) or verbose`` holds whenever verbose
        if isinstance(test.op, ast.Or):
            found = True if True in answers and False not in answers else (
                False if all(a is False for a in answers) else None)
        else:
            found = False if False in answers and True not in answers else (
                True if all(a is True for a in answers) else None)
        return None if found is None else found != negated
    while isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr in ("all", "any",
                                                                                                       "item"):
        test = test.func.value  # ``torch.isnan(loss).any()``
    if not isinstance(test, ast.Call):
        return None
    func = test.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _FINITE:
        return not negated
    if name in _NOT_FINITE:
        return negated
    return None


def _in(node: ast.AST, statements: List[ast.stmt]) -> bool:
    return any(node is stmt for stmt in statements)


_NO_TRAINING = Training(ast.Module(body=[], type_ignores=[]), [])


def training(ctx) -> Training:
    """The ``Training`` of the file being checked, built on first use and shared by the rules.

    A file that never spells ``backward`` or ``.step(`` cannot hold a training step call: no walk.
    """
    def build(c) -> Training:
        text = source_text(c)  # (a framework's step methods first: a HF ``compute_loss`` spells no step call)
        hooks = framework_steps(c, text)
        return Training(c.tree, c.lines, hooks) if hooks or any(w in text for w in _STEP_WORDS) else _NO_TRAINING

    return ctx.memo("training", build)


# an optimizer's own ``step`` is the optimizer step a training loop calls (by the definition above), not a
# framework's choice: no data file says it
_OPTIMIZER_STEP = {base: {"step": "the optimizer step itself"}
                   for base in ("torch.optim.Optimizer", "torch.optim.optimizer.Optimizer")}


@lru_cache(maxsize=None)
def _step_tables() -> Dict[str, Dict[str, str]]:
    """Base class -> the methods run on every training step of a subclass: the frameworks' (data/frameworks.json)
    and an optimizer's ``step``."""
    return {**load_frameworks()["step_methods"], **_OPTIMIZER_STEP}


@lru_cache(maxsize=None)
def _step_method_defs() -> Tuple[str, ...]:
    """``def compute_loss``, ``def training_step``: how a file spells a framework's step method (once per process)."""
    methods = {name for table in _step_tables().values() for name in table}
    return tuple(sorted(f"def {name}" for name in methods))


def step_words() -> Tuple[str, ...]:
    """What a file with per-step code spells: a training step call, or the def of a framework's step method."""
    return _STEP_WORDS + _step_method_defs()


def framework_steps(ctx, text: str) -> Set[int]:
    """Ids of the methods a framework calls on every training step: ``compute_loss`` of a ``Trainer``
    subclass, ``training_step`` of a ``LightningModule`` (directly or through a class of the same file)."""
    if not any(word in text for word in _step_method_defs()):
        return set()
    table = _step_tables()
    classes = [scope.node for scope in ctx.model.scopes.values() if scope.is_class]  # the model knows them
    methods_of: Dict[str, Set[str]] = {}  # class name of this file -> the methods its framework calls per step
    grew = True
    while grew:
        grew = False
        for cls in classes:
            if cls.name in methods_of:
                continue
            for base in cls.bases:
                qualname = ctx.qualname(base)
                methods = _framework_methods(ctx, qualname, table) if qualname else methods_of.get(
                    last_name(base), ())
                if methods:
                    methods_of[cls.name], grew = set(methods), True
                    break
    shared = _shared_step_methods()
    return {id(node) for cls in classes for node in cls.body if isinstance(node, _FUNCTIONS) and (
        node.name in methods_of.get(cls.name, ()) or (node.name in shared and _subclass(cls)))}


def _framework_methods(ctx, qualname: str, table: Dict[str, Dict[str, str]], depth: int = 0) -> Dict[str, str]:
    """The per-step methods of a framework class ``qualname`` is or derives from: itself, or through the package's
    modules, a re-export or the bases of a class another module defines (axolotl 0.19.0
    ``DiffusionTrainer(AxolotlTrainer)``, whose base in core/trainers/base.py derives from ``transformers.Trainer``;
    transformers 4.57.6 ``Seq2SeqTrainer(Trainer)`` with ``from .trainer import Trainer``)."""
    methods = table.get(qualname)
    if methods or depth >= 3:
        return methods or {}
    name, bases = ctx.resolve_class(qualname)
    if name in table:
        return table[name]
    for base in bases:
        found = _framework_methods(ctx, base, table, depth + 1)
        if found:
            return found
    return {}


@lru_cache(maxsize=None)
def _shared_step_methods() -> FrozenSet[str]:
    """Step-method names that more than one framework calls on every step (``training_step``: Lightning and the HF
    Trainer): the name is the contract, so a subclass whose base lives in another file (``class TFT(BaseModel)``,
    a project's own LightningModule) has one too."""
    owners: Dict[str, Set[str]] = {}
    for framework, methods in load_frameworks()["step_methods"].items():
        for name in methods:
            owners.setdefault(name, set()).add(framework.split(".")[0].replace("pytorch_lightning", "lightning"))
    return frozenset(name for name, frameworks in owners.items() if len(frameworks) > 1)


def _subclass(cls: ast.ClassDef) -> bool:
    return any(not (isinstance(base, ast.Name) and base.id == "object") for base in cls.bases)


def source_text(ctx) -> str:
    """The whole source of the file being checked, joined once."""
    return ctx.memo("source", lambda c: "".join(c.lines))
