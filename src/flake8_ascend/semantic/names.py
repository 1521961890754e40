"""Scopes, bindings and qualified-name resolution on the stdlib ``ast`` tree.

One pass over a module records, per scope, every name binding with its kind (import, definition,
parameter, assignment, loop target...), its position and, for assignments, the assigned value: imports
bind a qualified name (``import torch.nn.functional as F`` binds ``F`` to ``torch.nn.functional``),
everything else binds "something else" (``qualname`` None), which shadows an import.  ``Resolver``
answers "what does this expression refer to?" for ``Name`` and attribute chains, using the binding in
force at the line of use; ``flow.Flow`` reads the same bindings in statement order for local data flow.
The same pass maps every node to the scope its names are read in.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from ..walk import child_fields, fields_table

# Modules whose public names are re-exported under a shorter, documented path.
_CANONICAL_PREFIXES = (
    ("torch.nn.modules.", "torch.nn.", 1),  # torch.nn.modules.conv.Conv2d -> torch.nn.Conv2d
    ("torch.functional.", "torch.", 0),
    ("torch._tensor.Tensor.", "torch.Tensor.", 0),
    ("torch.nn.parallel.distributed.", "torch.nn.parallel.", 0),
    # torch/nn/__init__.py re-exports DataParallel from torch/nn/parallel/data_parallel.py (torch 2.13.0)
    ("torch.nn.parallel.data_parallel.DataParallel", "torch.nn.DataParallel", 0),
    ("torch.nn.parallel.DataParallel", "torch.nn.DataParallel", 0),
    ("torch.optim.adamw.", "torch.optim.", 0),
    ("torch.optim.adam.", "torch.optim.", 0),
    ("torch.optim.sgd.", "torch.optim.", 0),
    ("torch.utils.data.dataloader.", "torch.utils.data.", 0),
    ("torch.cuda.amp.autocast_mode.", "torch.cuda.amp.", 0),
    ("torch.cuda.amp.grad_scaler.", "torch.cuda.amp.", 0),
)


def canonical(qualname: str) -> str:
    """Map a re-exported spelling to the public path the data tables use."""
    if not qualname.startswith("torch."):  # every prefix below starts so: most names are not torch's
        return qualname
    for prefix, replacement, skip in _CANONICAL_PREFIXES:
        if qualname.startswith(prefix):
            rest = qualname[len(prefix):].split(".")
            return replacement + ".".join(rest[skip:])
    return qualname


# Binding kinds.  PLACEHOLDER is ``x = None``: a local value for the data flow, but for name resolution
# ``apex = None`` after a failed import keeps the import's meaning.
IMPORT, DEFINITION, PARAMETER, ASSIGNMENT, PLACEHOLDER, AUGMENTED, ANNOTATION, LOOP, WITH, EXCEPT, COMPREHENSION, \
    WALRUS = ("import", "definition", "parameter", "assignment", "placeholder", "augmented", "annotation", "loop",
              "with", "except", "comprehension", "walrus")
FLOW_KINDS = frozenset((ASSIGNMENT, PLACEHOLDER, AUGMENTED, LOOP, WITH, EXCEPT))  # the statements a Flow follows


class Binding:
    """One binding of a name.

    ``line`` is where name resolution sees it (the statement's first line); ``end`` is where the binding
    statement ends (the data flow sees it only after, so in ``x = x * 2`` the right-hand ``x`` is the
    previous binding).  ``value`` is the assigned expression (None when unknown), ``index`` the position
    in a tuple unpack, ``each`` the iterable a plain ``for`` target takes its elements from.  ``fallback``: made
    in the body of ``if <name> is None:``, where that body ends: after it, the name holds this value or what it
    held before.  An import binding also says, as written, the module a ``from`` import takes it from
    (``module``, with a relative import's dots; None for ``import x``) and whether an ``as`` clause binds it
    (``aliased``: ``import numpy as np``, ``import torch_npu as torch_npu``, not ``from m import x as x``):
    what --fix asks before it adds an import of its own.
    """

    __slots__ = ("kind", "line", "end", "qualname", "value", "index", "each", "fallback", "module", "aliased")

    def __init__(self, kind: str, line: int, end: Tuple[int, int], qualname: Optional[str] = None,
                 value: Optional[ast.AST] = None, index: Optional[int] = None,
                 each: Optional[ast.AST] = None, module: Optional[str] = None, aliased: bool = False) -> None:
        self.kind = kind
        self.line = line
        self.end = end
        self.qualname = qualname  # None: bound to something that is not an import
        self.value = value
        self.index = index
        self.each = each
        self.fallback: Optional[Tuple[int, int]] = None
        self.module = module
        self.aliased = aliased


@dataclass
class Scope:
    node: ast.AST
    parent: Optional["Scope"]
    is_class: bool = False
    bindings: Dict[str, List[Binding]] = field(default_factory=dict)  # per name, in source order
    assignments: List[ast.AST] = field(default_factory=list)  # every Assign / AnnAssign statement of the body
    shared: Set[str] = field(default_factory=set)  # names declared global / nonlocal here
    resolver: Optional["Resolver"] = None  # resolves names read in this scope (set by the builder)

    def bind(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)
        if binding.qualname is not None and self.resolver is not None:
            self.resolver.imported.add(name)

    def home(self, name: str) -> Optional["Scope"]:
        """The scope that binds ``name`` as seen from here (a class scope only when it is this one)."""
        scope: Optional[Scope] = self
        first = True
        while scope is not None:
            if (first or not scope.is_class) and name in scope.bindings:
                return scope
            first = False
            scope = scope.parent
        return None


# Nodes without child nodes that the builder has no ``visit_`` method for: visiting one only records its scope,
# which the generic visits do in place (names and constants are about half of all nodes).
_LEAVES = frozenset((ast.Name, ast.Constant))
_FIELDS = fields_table()


class ScopeBuilder(ast.NodeVisitor):
    """Collects the bindings of every scope of a module in source order."""

    def __init__(self) -> None:
        self.scopes: Dict[int, Scope] = {}
        self.node_scopes: Dict[int, Scope] = {}  # id(node) -> the scope its names are looked up in
        self.calls: Dict[str, List[ast.Call]] = {}  # ``f(...)`` and ``x.f(...)`` by the called name
        self.imported: Set[str] = set()  # names that some binding of the file gives a qualified name
        self.current: Optional[Scope] = None
        self._dispatch: Dict[type, object] = {}
        self._generic = self.generic_visit
        self._fallbacks: List[Tuple[str, Tuple[int, int]]] = []  # enclosing ``if <name> is None:``: name, end

    # NodeVisitor looks its method up by name for every node; a per-class table is much faster.
    def visit(self, node: ast.AST) -> None:
        self.node_scopes[id(node)] = self.current
        cls = node.__class__
        method = self._dispatch.get(cls)
        if method is None:
            method = getattr(self, "visit_" + cls.__name__, self._generic)
            if getattr(method, "__func__", None) is ast.NodeVisitor.visit_Constant:
                method = self._generic  # NodeVisitor's looks for the pre-3.8 visit_Num & co. on every constant
            self._dispatch[cls] = method
        method(node)

    def generic_visit(self, node: ast.AST) -> None:  # ``iter_children`` inlined: every node of the file passes here
        visit, scopes, current = self.visit, self.node_scopes, self.current  # a child's visit restores ``current``
        cls = node.__class__
        for name in _FIELDS.get(cls) or child_fields(cls):
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if item.__class__ in _LEAVES:
                        scopes[id(item)] = current
                    elif isinstance(item, ast.AST):
                        visit(item)
            elif value.__class__ in _LEAVES:
                scopes[id(value)] = current
            elif isinstance(value, ast.AST):
                visit(value)

    # -- scopes ---------------------------------------------------------
    def build(self, tree: ast.AST) -> Dict[int, Scope]:
        self._enter(tree, is_class=False)
        self.generic_visit(tree)
        return self.scopes

    def _enter(self, node: ast.AST, is_class: bool) -> Scope:
        scope = Scope(node, self.current, is_class)
        scope.resolver = Resolver(self.scopes, scope, self.imported)
        self.scopes[id(node)] = scope
        self.current = scope
        return scope

    def _visit_function(self, node) -> None:
        self.current.bind(node.name, Binding(DEFINITION, node.lineno, _start(node)))
        for expr in node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(expr)
        self._annotations(node.args, node.returns)
        outer = self.current
        self._enter(node, is_class=False)
        args = node.args
        for arg in args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]:
            self.current.bind(arg.arg, Binding(PARAMETER, node.lineno, _start(node)))
        for stmt in node.body:
            self.visit(stmt)
        self.current = outer

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

    def _annotations(self, args: ast.arguments, returns: Optional[ast.AST]) -> None:
        """Annotations are evaluated where the function is defined: they belong to the outer scope."""
        for arg in args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]:
            self.node_scopes[id(arg)] = self.current
            if arg.annotation is not None:
                self.visit(arg.annotation)
        if returns is not None:
            self.visit(returns)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expr in node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(expr)
        outer = self.current
        self._enter(node, is_class=False)
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            self.current.bind(arg.arg, Binding(PARAMETER, node.lineno, _start(node)))
        self.visit(node.body)
        self.current = outer

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.current.bind(node.name, Binding(DEFINITION, node.lineno, _start(node)))
        for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(expr)
        outer = self.current
        self._enter(node, is_class=True)
        for stmt in node.body:
            self.visit(stmt)
        self.current = outer

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if called is not None:
            self.calls.setdefault(called, []).append(node)
        self.generic_visit(node)

    # -- bindings -------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.current.bind(alias.asname, Binding(IMPORT, node.lineno, _end(node), alias.name, aliased=True))
            else:
                top = alias.name.split(".")[0]
                self.current.bind(top, Binding(IMPORT, node.lineno, _end(node), top))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * (node.level or 0) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                continue
            qual = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
            self.current.bind(alias.asname or alias.name, Binding(
                IMPORT, node.lineno, _end(node), canonical(qual), module=module,
                aliased=alias.asname not in (None, alias.name)))

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        self.current.assignments.append(node)
        value, end = node.value, _end(node)
        if isinstance(value, ast.Constant) and value.value is None:
            kind, alias = PLACEHOLDER, None
        else:
            kind = ASSIGNMENT
            alias = self.current.resolver.qualname(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
        for target in node.targets:
            self._bind_target(target, kind, node.lineno, end, value, alias)
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.current.assignments.append(node)
        self._bind_target(node.target, ANNOTATION if node.value is None else ASSIGNMENT, node.lineno, _end(node),
                          node.value)
        self.visit(node.target)
        self.visit(node.annotation)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        target = node.target
        if isinstance(target, ast.Name):  # ``x += y`` binds x to ``x + y``
            left = ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target)
            value = ast.copy_location(ast.BinOp(left=left, op=node.op, right=node.value), node)
            self.node_scopes[id(left)] = self.node_scopes[id(value)] = self.current
            self.current.bind(target.id, Binding(AUGMENTED, node.lineno, _end(node), None, value))

    def visit_NamedExpr(self, node) -> None:
        self.visit(node.value)
        self._bind_target(node.target, WALRUS, node.lineno, _end(node))
        self.visit(node.target)

    def visit_For(self, node) -> None:
        self.visit(node.iter)
        end = _end(node.target)
        for target, iterable in _loop_targets(node.target, node.iter):
            if isinstance(target, ast.Name) and iterable is not None:
                self.current.bind(target.id, Binding(LOOP, node.lineno, end, each=iterable))
            else:
                self._bind_target(target, LOOP, node.lineno, end)
        self.visit(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.visit(node.iter)
        self._bind_target(node.target, COMPREHENSION, node.target.lineno, _end(node.target))
        self.visit(node.target)
        for cond in node.ifs:
            self.visit(cond)

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self._bind_target(node.optional_vars, WITH, node.context_expr.lineno, _end(node.optional_vars))
            self.visit(node.optional_vars)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.current.bind(node.name, Binding(EXCEPT, node.lineno, _start(node)))
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.left.id if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) \
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None else None
        self.visit(test)
        if name is not None:
            self._fallbacks.append((name, _end(node.body[-1])))
        for stmt in node.body:
            self.visit(stmt)
        if name is not None:
            self._fallbacks.pop()
        for stmt in node.orelse:
            self.visit(stmt)
        self._import_wins(node.body, node.orelse)

    def visit_Try(self, node: ast.Try) -> None:
        self.generic_visit(node)
        self._import_wins(node.body, [s for h in node.handlers for s in h.body])

    visit_TryStar = visit_Try

    def _import_wins(self, body: List[ast.stmt], fallback: List[ast.stmt]) -> None:
        """A name that ``body`` imports and ``fallback`` (the ``else`` of a version test, an ``except ImportError``)
        defines otherwise resolves to the import: the fallback serves old installs (espnet 202511
        espnet2/train/trainer.py:44-55, ``from torch.cuda.amp import autocast`` or a no-op ``def autocast``)."""
        imported = {alias.asname or alias.name.split(".")[0] for s in body if isinstance(s, (ast.Import, ast.ImportFrom))
                    for alias in s.names}
        if not imported or not fallback:
            return
        redefined = {n.name for n in fallback if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        redefined |= {t.id for n in fallback if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        bindings = self.current.bindings
        for name in imported & redefined:
            found = bindings.get(name, [])
            last_import = next((b for b in reversed(found) if b.kind is IMPORT), None)
            if last_import is not None and found[-1] is not last_import:
                found.remove(last_import)
                found.append(last_import)

    def visit_Global(self, node) -> None:  # the names live in another scope: nothing is bound here
        self.current.shared.update(node.names)

    visit_Nonlocal = visit_Global

    def _bind_target(self, target: ast.AST, kind: str, line: int, end: Tuple[int, int],
                     value: Optional[ast.AST] = None, alias: Optional[str] = None, index: Optional[int] = None) -> None:
        """Bind the names of an assignment target; ``a, b = v`` binds a and b to items 0 and 1 of ``v``."""
        if isinstance(target, ast.Name):
            binding = Binding(kind, line, end, alias, value, index)
            binding.fallback = next((end for tested, end in reversed(self._fallbacks) if tested == target.id), None)
            self.current.bind(target.id, binding)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for position, element in enumerate(target.elts):
                if isinstance(element, ast.Name) and value is not None and index is None:
                    self._bind_target(element, kind, line, end, value, None, position)
                else:
                    self._bind_target(element.value if isinstance(element, ast.Starred) else element, kind, line,
                                      end)


def _start(node: ast.AST) -> Tuple[int, int]:
    return node.lineno, node.col_offset


def _end(node: ast.AST) -> Tuple[int, int]:
    return getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0


def _loop_targets(target: ast.AST, iterable: ast.AST):
    """(target, the iterable it takes elements of): ``for a, b in zip(xs, ys)``, ``for i, x in enumerate(xs)``."""
    if isinstance(target, ast.Tuple) and isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
            and not iterable.keywords and not any(isinstance(a, ast.Starred) for a in iterable.args):
        if iterable.func.id == "zip" and len(iterable.args) == len(target.elts):
            return list(zip(target.elts, iterable.args))
        if iterable.func.id == "enumerate" and len(target.elts) == 2 and len(iterable.args) == 1:
            return [(target.elts[0], None), (target.elts[1], iterable.args[0])]
    return [(target, iterable if isinstance(target, ast.Name) else None)]


class Resolver:
    """Resolves names and attribute chains in one scope of a module."""

    __slots__ = ("scopes", "scope", "imported")

    def __init__(self, scopes: Dict[int, Scope], scope: Scope, imported: Optional[Set[str]] = None) -> None:
        self.scopes = scopes
        self.scope = scope
        # names bound with a qualified name anywhere in the file so far (an import or an alias of one): any other
        # name resolves to no qualified name whatever its binding, so ``qualname`` need not look it up
        self.imported: Set[str] = set() if imported is None else imported

    def binding(self, name: str, line: int) -> Optional[Binding]:
        """The binding of ``name`` in force at ``line``, or None if unbound (builtin)."""
        scope = self.scope
        first = True
        while scope is not None:
            if first or not scope.is_class:
                bindings = scope.bindings.get(name)
                if bindings:  # the last binding that qualifies, found from the end without building lists
                    if first:
                        for b in reversed(bindings):
                            if b.line <= line and b.kind is not PLACEHOLDER:
                                return b
                    for b in reversed(bindings):
                        if b.kind is not PLACEHOLDER:
                            return b
            first = False
            scope = scope.parent
        return None

    def qualname(self, node: ast.AST) -> Optional[str]:
        """``F.relu`` -> ``torch.nn.functional.relu``; None when not an import chain."""
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in self.imported:
            return None
        binding = self.binding(root.id, root.lineno)
        if binding is None or binding.qualname is None:
            return None
        parts: List[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        parts.append(binding.qualname)
        return canonical(".".join(reversed(parts)))
