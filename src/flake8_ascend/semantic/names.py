"""Qualified-name resolution on the stdlib ``ast`` tree.

One pass over a module records, per scope, every name binding: imports bind a
qualified name (``import torch.nn.functional as F`` binds ``F`` to
``torch.nn.functional``), and defs, assignments, parameters and loop targets
bind "something else" (``None``), which shadows an import.  ``Resolver``
then answers "what does this expression refer to?" for ``Name`` and
attribute chains, using the binding in force at the line of use.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..walk import iter_children

# Modules whose public names are re-exported under a shorter, documented path.
_CANONICAL_PREFIXES = (
    ("torch.nn.modules.", "torch.nn.", 1),  # torch.nn.modules.conv.Conv2d -> torch.nn.Conv2d
    ("torch.functional.", "torch.", 0),
    ("torch._tensor.Tensor.", "torch.Tensor.", 0),
    ("torch.nn.parallel.distributed.", "torch.nn.parallel.", 0),
    ("torch.optim.adamw.", "torch.optim.", 0),
    ("torch.optim.adam.", "torch.optim.", 0),
    ("torch.optim.sgd.", "torch.optim.", 0),
    ("torch.utils.data.dataloader.", "torch.utils.data.", 0),
    ("torch.cuda.amp.autocast_mode.", "torch.cuda.amp.", 0),
    ("torch.cuda.amp.grad_scaler.", "torch.cuda.amp.", 0),
)


def canonical(qualname: str) -> str:
    """Map a re-exported spelling to the public path the data tables use."""
    for prefix, replacement, skip in _CANONICAL_PREFIXES:
        if qualname.startswith(prefix):
            rest = qualname[len(prefix):].split(".")
            return replacement + ".".join(rest[skip:])
    return qualname


@dataclass
class Binding:
    line: int
    qualname: Optional[str]  # None: bound to something that is not an import


@dataclass
class Scope:
    node: ast.AST
    parent: Optional["Scope"]
    is_class: bool = False
    bindings: Dict[str, List[Binding]] = field(default_factory=dict)

    def bind(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)

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


class ScopeBuilder(ast.NodeVisitor):
    """Collects the bindings of every scope of a module in source order."""

    def __init__(self) -> None:
        self.scopes: Dict[int, Scope] = {}
        self.node_scopes: Dict[int, Scope] = {}  # id(node) -> the scope its names are looked up in
        self.current: Optional[Scope] = None
        self._dispatch: Dict[type, object] = {}

    # NodeVisitor looks its method up by name for every node; a per-class table is much faster.
    def visit(self, node: ast.AST) -> None:
        self.node_scopes[id(node)] = self.current
        cls = node.__class__
        method = self._dispatch.get(cls)
        if method is None:
            method = self._dispatch[cls] = getattr(self, "visit_" + cls.__name__, self.generic_visit)
        method(node)

    def generic_visit(self, node: ast.AST) -> None:
        for child in iter_children(node):
            self.visit(child)

    # -- scopes ---------------------------------------------------------
    def build(self, tree: ast.AST) -> Dict[int, Scope]:
        self._enter(tree, is_class=False)
        self.generic_visit(tree)
        return self.scopes

    def _enter(self, node: ast.AST, is_class: bool) -> Scope:
        scope = Scope(node, self.current, is_class)
        self.scopes[id(node)] = scope
        self.current = scope
        return scope

    def _resolver(self) -> "Resolver":
        return Resolver(self.scopes, self.current)

    def _visit_function(self, node) -> None:
        self.current.bind(node.name, Binding(node.lineno, None))
        for expr in node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(expr)
        self._annotations(node.args, node.returns)
        outer = self.current
        self._enter(node, is_class=False)
        args = node.args
        for arg in args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]:
            self.current.bind(arg.arg, Binding(node.lineno, None))
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
            self.current.bind(arg.arg, Binding(node.lineno, None))
        self.visit(node.body)
        self.current = outer

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.current.bind(node.name, Binding(node.lineno, None))
        for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(expr)
        outer = self.current
        self._enter(node, is_class=True)
        for stmt in node.body:
            self.visit(stmt)
        self.current = outer

    # -- bindings -------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.current.bind(alias.asname, Binding(node.lineno, alias.name))
            else:
                top = alias.name.split(".")[0]
                self.current.bind(top, Binding(node.lineno, top))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * (node.level or 0) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                continue
            qual = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
            self.current.bind(alias.asname or alias.name, Binding(node.lineno, canonical(qual)))

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        if isinstance(node.value, ast.Constant) and node.value.value is None:
            return  # ``apex = None`` after a failed import keeps the import's meaning
        resolver = self._resolver()
        alias = resolver.qualname(node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
        for target in node.targets:
            self._bind_target(target, node.lineno, alias)
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._bind_target(node.target, node.lineno, None)
        self.visit(node.target)
        self.visit(node.annotation)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)

    def visit_NamedExpr(self, node) -> None:
        self.visit(node.value)
        self._bind_target(node.target, node.lineno, None)
        self.visit(node.target)

    def visit_For(self, node) -> None:
        self.visit(node.iter)
        self._bind_target(node.target, node.lineno, None)
        self.visit(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.visit(node.iter)
        self._bind_target(node.target, node.target.lineno, None)
        self.visit(node.target)
        for cond in node.ifs:
            self.visit(cond)

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self._bind_target(node.optional_vars, node.context_expr.lineno, None)
            self.visit(node.optional_vars)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.current.bind(node.name, Binding(node.lineno, None))
        self.generic_visit(node)

    def visit_Global(self, node) -> None:  # global/nonlocal names live elsewhere: nothing to bind here
        return

    visit_Nonlocal = visit_Global

    def _bind_target(self, target: ast.AST, line: int, alias: Optional[str]) -> None:
        if isinstance(target, ast.Name):
            self.current.bind(target.id, Binding(line, alias))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind_target(element, line, None)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, line, None)


class Resolver:
    """Resolves names and attribute chains in one scope of a module."""

    __slots__ = ("scopes", "scope")

    def __init__(self, scopes: Dict[int, Scope], scope: Scope) -> None:
        self.scopes = scopes
        self.scope = scope

    def binding(self, name: str, line: int) -> Optional[Binding]:
        """The binding of ``name`` in force at ``line``, or None if unbound (builtin)."""
        scope = self.scope
        first = True
        while scope is not None:
            if first or not scope.is_class:
                bindings = scope.bindings.get(name)
                if bindings:
                    if first:
                        before = [b for b in bindings if b.line <= line]
                        return before[-1] if before else bindings[-1]
                    return bindings[-1]
            first = False
            scope = scope.parent
        return None

    def qualname(self, node: ast.AST) -> Optional[str]:
        """``F.relu`` -> ``torch.nn.functional.relu``; None when not an import chain."""
        parts: List[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        binding = self.binding(node.id, node.lineno)
        if binding is None or binding.qualname is None:
            return None
        parts.append(binding.qualname)
        return canonical(".".join(reversed(parts)))
