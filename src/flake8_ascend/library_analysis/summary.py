"""One library file reduced to what the call graph needs (run in worker processes).

The file is parsed once and walked once by the rule engine: the ASC rules that
decide root causes (ASC101, ASC102, ASC201, ASC205, ASC206) run beside a
collector that sees the same nodes through the same ``Context``, so names are
resolved by the engine's scope table (imports, shadowing) and never twice.
The result is a small picklable ``FileSummary``: definitions, call references,
root causes and module-level imports -- no AST leaves the worker.

Graph nodes are the module itself (code run at import time), classes (their
header and body outside methods), module-level functions and methods
(``Outer.Inner.method``); functions and classes nested in a function belong
to it.  A call reference is one of:

- ``("q", dotted)``: an absolute dotted name (import, relative import, global),
- ``("star", name)``: an unbound name that a ``from x import *`` may provide,
- ``("self", class, attr)`` / ``("super", class, attr)``: ``self.attr(...)``,
  ``super().attr(...)`` in a method of ``class`` (module-relative path),
- ``("selfattr", class, attr, method)``: ``self.attr.method(...)``,
- ``("inst", ref, method)``: a method of an object built by calling ``ref``
  (``m = Net(); m.run()``; ``method`` is ``__call__`` for ``m(x)``).

An import of a CUDA-only package (ASC206) under an ``if`` or ``try`` of its
function or module is an optional dependency, the way libraries import
``flash_attn`` only when it is installed and asked for: it is listed, but
does not make its callers unsupported.
"""
from __future__ import annotations

import ast
import bisect
import builtins
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ..config import Config
from ..detect.api_domain import inherited_status
from ..engine import Finding, lint, unsuppressed
from ..registry import rule_for
from .extensions import CUDA_OP, LOADER_NAMES, ExtensionCalls
from .layout import absolute

__all__ = ["CUDA_OP", "MIGRATION", "UNKNOWN", "UNSUPPORTED", "Collector", "FileSummary", "OpTable", "summarise"]

CAUSE_CODES = ("ASC101", "ASC102", "ASC201", "ASC205", "ASC206")
UNSUPPORTED, UNKNOWN, MIGRATION = "unsupported", "unknown", "migration"
_CATEGORY = {"ASC101": UNSUPPORTED, "ASC102": UNKNOWN, "ASC205": MIGRATION, "ASC206": MIGRATION}
_CODE = {UNSUPPORTED: "ASC101", UNKNOWN: "ASC102"}  # API status -> the code whose category it is
_BUILTINS = frozenset(dir(builtins))

_TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()
Ref = tuple
EXTERNAL: Ref = ()  # resolved, to something outside the library


@dataclass
class OpTable:
    """What workers need to know of the library's C++ operators and module layout."""

    pybind: frozenset = frozenset()  # pybind operator names
    library: frozenset = frozenset()  # TORCH_LIBRARY operators, "ns::name"
    ext_modules: frozenset = frozenset()  # literal PYBIND11_MODULE names
    extension_name: bool = False  # some module is named by TORCH_EXTENSION_NAME
    modules: frozenset = frozenset()  # dotted names of the library's Python modules
    tops: frozenset = frozenset()  # their first components


@dataclass
class FileSummary:
    """What the parent needs of one file; keys are paths inside the module ("" = the module)."""

    rel: str
    module: str
    is_package: bool
    error: str = ""  # why the file could not be analysed
    defs: Dict[str, Tuple[int, str]] = field(default_factory=dict)  # function key -> (def line, class path or "")
    classes: Dict[str, Tuple[int, List[str]]] = field(default_factory=dict)  # path -> (line, base names)
    spans: List[Tuple[int, int, str]] = field(default_factory=list)  # (first line, last line, key) of defs
    class_attrs: Dict[str, Dict[str, List[Ref]]] = field(default_factory=dict)  # path -> self.attr -> refs
    calls: List[Tuple[str, Ref, int, int]] = field(default_factory=list)  # (node key, ref, line, column)
    sites: List[Tuple[str, str, int, int]] = field(default_factory=list)  # unresolved attr calls: key, attr, line, col
    # (key, category, api, line, tips, optional): optional = a guarded import of a CUDA-only package
    causes: List[Tuple[str, str, str, int, str, bool]] = field(default_factory=list)
    imports: Dict[str, str] = field(default_factory=dict)  # module-level name -> absolute dotted target
    aliases: Dict[str, Ref] = field(default_factory=dict)  # module-level ``name = other.name``
    stars: List[str] = field(default_factory=list)  # modules of ``from x import *``
    all_names: Optional[List[str]] = None  # a literal ``__all__``
    names: Set[str] = field(default_factory=set)  # every module-level name it binds


def _first_line(node) -> int:
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


class Collector(ExtensionCalls):
    """Gathers a ``FileSummary`` while the engine walks the file (a ``lint`` visitor beside the rules)."""

    node_types = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Call, ast.Assign,
                  ast.Import, ast.ImportFrom, ast.Attribute)
    trigger_words = ()

    def __init__(self, summary: FileSummary, ops: OpTable) -> None:
        self.s = summary
        self.ops = ops
        self.keys: Dict[int, str] = {}  # id(def or class node) -> graph node key
        self.methods: Dict[str, Tuple[str, str]] = {}  # function key -> (class path, name of self)
        self.class_paths: Dict[int, str] = {}  # id(ClassDef) -> dotted path in the module
        self.instances: Dict[int, Ref] = {}  # id(binding of a variable) -> ref of what built it
        self.init_extensions()
        self.mentions: List[Tuple[int, int, int, int]] = []  # spans that name an API without running it
        self.inherited: List[Finding] = []  # unsupported/unknown torch base classes (not findings of the rules)
        self.guarded: Set[int] = set()  # lines of imports under an ``if`` or ``try`` of their function or module
        self.module_scope = None

    # -- where are we ----------------------------------------------------------------------
    def _owner(self, ctx) -> Tuple[str, Optional[ast.AST]]:
        """(node key, innermost enclosing def or class) of the node being checked."""
        for node in reversed(ctx.stack):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return self.keys.get(id(node), ""), node
        return "", None

    def _absolute(self, name: str) -> str:
        return absolute(name, self.s.module, self.s.is_package)

    def _in_library(self, dotted: str) -> bool:
        return dotted.split(".", 1)[0] in self.ops.tops

    # -- definitions ----------------------------------------------------------------------
    def _define(self, node, ctx) -> None:
        if not isinstance(node, ast.ClassDef):  # annotations name types, they run nothing
            arguments = node.args
            for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg,
                        arguments.kwarg]:
                self._mention(arg.annotation if arg is not None else None)
            self._mention(node.returns)
        owner, enclosing = self._owner(ctx)
        if enclosing is not None and id(enclosing) not in self.class_paths:
            self.keys[id(node)] = owner  # inside a function (or a class inside one): part of it
            return
        prefix = self.class_paths[id(enclosing)] + "." if enclosing is not None else ""
        path = prefix + node.name
        if enclosing is None:
            self.s.names.add(node.name)
        self.keys[id(node)] = path
        self.s.spans.append((_first_line(node), node.end_lineno or node.lineno, path))
        if isinstance(node, ast.ClassDef):
            self.class_paths[id(node)] = path
            bases = [self._absolute(q) for q in (ctx.qualname(b) for b in node.bases) if q]
            bases += [f"{self.s.module}.{b.id}" for b in node.bases
                      if isinstance(b, ast.Name) and ctx.qualname(b) is None]
            self.s.classes[path] = (node.lineno, bases)
            for base in node.bases:
                found = inherited_status(base, ctx)
                if found and found[1] in _CODE:
                    api, status, note = found
                    self.inherited.append(Finding(base.lineno, base.col_offset, _CODE[status], "", api=api,
                                                  tips=f"a subclass of {api}: {note}"))
            return
        cls = prefix[:-1]
        self.s.defs[path] = (node.lineno, cls)
        args = node.args.posonlyargs + node.args.args
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        if cls and args and not static:
            self.methods[path] = (cls, args[0].arg)

    # -- references -----------------------------------------------------------------------
    def _binding(self, node: ast.Name, ctx):
        return ctx.model.binding(node)

    def _is_global(self, binding, name: str) -> bool:
        scope = self.module_scope
        return any(b is binding for b in scope.bindings.get(name, ()))

    def ref(self, expr: ast.AST, ctx, key: str, qualname: Optional[str] = None) -> Optional[Ref]:
        """What a called (or aliased) expression refers to: a reference, ``EXTERNAL`` (an import
        from outside the library), or None when plain resolution cannot tell.  ``qualname``:
        ``ctx.qualname(expr)`` when the caller has it already."""
        if qualname is None:
            qualname = ctx.qualname(expr)
        if qualname is not None:
            dotted = self._absolute(qualname)
            return ("q", dotted) if dotted and self._in_library(dotted) else EXTERNAL
        attrs: List[str] = []
        base = expr
        while isinstance(base, ast.Attribute):
            attrs.append(base.attr)
            base = base.value
        attrs.reverse()
        if isinstance(base, ast.Name):
            return self._name_ref(base, attrs, ctx, key)
        if isinstance(base, ast.Call) and len(attrs) == 1:
            func = base.func
            if isinstance(func, ast.Name) and func.id == "super" and key in self.methods:
                return ("super", self.methods[key][0], attrs[0])
            built = self.ref(func, ctx, key)
            if built:
                return ("inst", built, attrs[0])
        return None

    def _name_ref(self, base: ast.Name, attrs: List[str], ctx, key: str) -> Optional[Ref]:
        binding = self._binding(base, ctx)
        if binding is None:
            if base.id in _BUILTINS or base.id == "__class__":
                return None
            return ("star", ".".join([base.id, *attrs]))
        if id(binding) in self.instances:
            built = self.instances[id(binding)]
            if len(attrs) <= 1:
                return ("inst", built, attrs[0] if attrs else "__call__")
            return None
        if self._is_global(binding, base.id):
            return ("q", ".".join([self.s.module, base.id, *attrs]))
        method = self.methods.get(key)
        if method is not None and base.id == method[1] and attrs:
            if len(attrs) == 1:
                return ("self", method[0], attrs[0])
            if len(attrs) == 2:
                return ("selfattr", method[0], attrs[0], attrs[1])
        return None

    # -- the handlers ---------------------------------------------------------------------
    def check(self, node, ctx) -> None:
        if self.module_scope is None:
            self.module_scope = ctx.model.module
        if type(node) is ast.Attribute:  # the most frequent node: reject it fast
            if self.may_be_operator(node) and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load):
                self.handle_use(node, ctx)
        elif isinstance(node, ast.Call):
            self._call(node, ctx)
        elif isinstance(node, ast.Assign):
            self._assign(node, ctx)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, ctx)
        else:
            self._define(node, ctx)

    def _mention(self, node: Optional[ast.AST]) -> None:
        if node is not None:
            self.mentions.append((node.lineno, node.col_offset, node.end_lineno or node.lineno,
                                  node.end_col_offset or 0))

    def _call(self, node: ast.Call, ctx) -> None:
        key, _ = self._owner(ctx)
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("isinstance", "issubclass") and len(node.args) == 2:
            self._mention(node.args[1])  # a type check does not use the class
        if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in LOADER_NAMES:
            self.extension_handle(node, ctx)  # remembers the extension's name
        qualname = ctx.qualname(func)
        if qualname is not None and self.custom_op(node, qualname, key):
            return
        ref = self.ref(func, ctx, key, qualname)
        if isinstance(func, ast.Attribute):  # where jedi would look: the called name
            line, col = func.end_lineno or node.lineno, max(0, (func.end_col_offset or 0) - len(func.attr))
        else:
            line, col = node.lineno, node.col_offset
        if ref:
            self.s.calls.append((key, ref, line, col))
        elif ref is None and isinstance(func, ast.Attribute) and not ctx.is_tensor(func.value):
            self.s.sites.append((key, func.attr, line, col))

    def _assign(self, node: ast.Assign, ctx) -> None:
        key, enclosing = self._owner(ctx)
        value = node.value
        targets = node.targets
        module_level = enclosing is None
        if module_level:
            for target in targets:
                if isinstance(target, ast.Name):
                    self.s.names.add(target.id)
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                name = targets[0].id
                if name == "__all__" and isinstance(value, (ast.List, ast.Tuple)):
                    self.s.all_names = [e.value for e in value.elts
                                        if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                elif isinstance(value, (ast.Name, ast.Attribute)):
                    ref = self.ref(value, ctx, key)
                    if ref:
                        self.s.aliases[name] = ref
        if not isinstance(value, ast.Call):
            return
        loaded = self.extension_handle(value, ctx)
        built = None if loaded is not False else self.ref(value.func, ctx, key)
        for target in targets:
            if isinstance(target, ast.Name) and loaded is not False:
                self.bind_handle(target, loaded, module_level, enclosing, ctx)
            elif isinstance(target, ast.Name) and built:
                binding = ctx.model.binding(target)
                if binding is not None:
                    self.instances[id(binding)] = built
            elif built and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                method = self.methods.get(key)
                if method is not None and target.value.id == method[1]:
                    attrs = self.s.class_attrs.setdefault(method[0], {})
                    attrs.setdefault(target.attr, []).append(built)

    def _import(self, node, ctx) -> None:
        for ancestor in reversed(ctx.stack):
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
            if isinstance(ancestor, (ast.If, ast.Try, *_TRY_STAR)):
                self.guarded.add(node.lineno)
                break
        enclosing = self._owner(ctx)[1]
        if enclosing is not None:
            if isinstance(node, ast.Import):
                self.global_import(node, enclosing)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                self.s.names.add(local)
                if alias.asname:
                    self.s.imports[alias.asname] = alias.name
            return
        base = "." * (node.level or 0) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                module = self._absolute(base)
                if module:
                    self.s.stars.append(module)
                continue
            target = f"{base}.{alias.name}" if node.module else base + alias.name
            target = self._absolute(target)
            if target:
                local = alias.asname or alias.name
                self.s.imports[local] = target
                self.s.names.add(local)


def _category(finding, data, tops: frozenset) -> Optional[str]:
    if finding.code == "ASC201":
        name = finding.api.split(".")[2] if finding.api.count(".") >= 2 else ""
        return MIGRATION if not data.npu_all or name not in data.npu_all else None
    if finding.code == "ASC206" and finding.api.split(".")[0] in tops:
        return None  # the library importing its own ops: those are analysed from its C++ sources
    return _CATEGORY.get(finding.code)


def _owner_by_line(spans: List[Tuple[int, int, str]]):
    """line -> key of the innermost def or class spanning it ("" = the module)."""
    spans = sorted(spans, key=lambda span: (span[0], -span[1]))
    starts = [span[0] for span in spans]
    parents: List[int] = []
    open_spans: List[int] = []
    for index, (first, last, _) in enumerate(spans):
        while open_spans and spans[open_spans[-1]][1] < first:
            open_spans.pop()
        parents.append(open_spans[-1] if open_spans else -1)
        open_spans.append(index)

    def owner(line: int) -> str:
        index = bisect.bisect_right(starts, line) - 1
        while index >= 0 and spans[index][1] < line:
            index = parents[index]
        return spans[index][2] if index >= 0 else ""

    return owner


def summarise(tree: ast.AST, lines: List[str], summary: FileSummary, config: Config, ops: OpTable) -> FileSummary:
    """Fill ``summary`` from one parsed file."""
    collector = Collector(summary, ops)
    rules = [rule_for(code) for code in CAUSE_CODES]
    findings = lint(tree, lines, summary.rel, config, rules, visitors=[collector])
    collector.finish()
    owner = _owner_by_line(summary.spans)
    data = config.data
    mentions = collector.mentions
    for finding in unsuppressed(findings, lines):
        if any(
                (first, start) <= (finding.line, finding.col) < (last, end) for first, start, last, end in mentions):
            continue
        category = _category(finding, data, ops.tops)
        if category is None:
            continue
        tips, optional = finding.tips, finding.code == "ASC206" and finding.line in collector.guarded
        if optional:
            tips = f"imported only under an if or try (an optional dependency), so not counted as unsupported; {tips}"
        summary.causes.append((owner(finding.line), category, finding.api, finding.line, tips, optional))
    for finding in unsuppressed(collector.inherited, lines):
        summary.causes.append((owner(finding.line), _CATEGORY[finding.code], finding.api, finding.line,
                               finding.tips, False))
    return summary
