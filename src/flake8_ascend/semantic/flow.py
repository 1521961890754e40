"""Local data flow inside one function (or module) body, for the ASC304 pattern rules.

``Flow(owner)`` records, in one walk of the body (nested defs, classes and lambdas left out), every
assignment to a plain name: the assigned expression, the position in a tuple unpack, and where the
binding statement ends.  ``Flow.binding(name)`` is the binding in force at a use: the last one whose
statement ends before the use starts, so in ``x = x * 2`` the right-hand ``x`` sees the previous
binding.  Branches and loops are not modelled: the textually last earlier binding wins.  That is
enough to follow a value through the local names of one ``forward``.  Only statements are walked
(walrus targets are not bindings here), which keeps a flow much cheaper than a full tree walk.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set, Tuple

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)
MAX_DEPTH = 8  # how many name-to-value steps a resolution follows
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # statement lists of compound statements


class Binding:
    """One assignment of a name: ``value`` is None when unknown (loop target, ``with ... as``)."""

    __slots__ = ("end", "value", "index", "each")

    def __init__(self, end: Tuple[int, int], value: Optional[ast.AST], index: Optional[int],
                 each: Optional[ast.AST] = None) -> None:
        self.end = end
        self.value = value
        self.index = index  # position in a tuple unpack (``a, b = ...``), else None
        self.each = each  # a plain ``for`` target: the iterable it takes its elements from


class Flow:
    """The name bindings of one body, in source order."""

    def __init__(self, owner: ast.AST) -> None:
        self.owner = owner
        self.bindings: Dict[str, List[Binding]] = {}
        self.shared: Set[str] = set()  # names declared global / nonlocal
        self.assignments: List[ast.AST] = []  # every Assign / AnnAssign statement, whatever its targets
        self._products: Optional[List[ast.BinOp]] = None
        stack = list(reversed(owner.body))
        while stack:  # statements only: expressions bind nothing but walrus targets, which are ignored
            node = stack.pop()
            self._record(node)
            for name in _BLOCKS:
                block = getattr(node, name, None)
                if isinstance(block, list):
                    stack.extend(reversed([c for c in block if not isinstance(c, _SCOPES)]))
        for bindings in self.bindings.values():
            bindings.sort(key=lambda b: b.end)

    def _record(self, node: ast.AST) -> None:
        end = (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            self.assignments.append(node)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._bind(target, node.value, end)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._bind(node.target, node.value, end)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            left = ast.copy_location(ast.Name(id=node.target.id, ctx=ast.Load()), node.target)
            value = ast.copy_location(ast.BinOp(left=left, op=node.op, right=node.value), node)
            self._bind(node.target, value, end)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            where = (node.target.end_lineno, node.target.end_col_offset)
            for target, iterable in _loop_targets(node.target, node.iter):
                if isinstance(target, ast.Name) and iterable is not None:
                    self.bindings.setdefault(target.id, []).append(Binding(where, None, None, iterable))
                else:
                    self._bind(target, None, where)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    var = item.optional_vars
                    self._bind(var, None, (var.end_lineno, var.end_col_offset))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self.bindings.setdefault(node.name, []).append(Binding((node.lineno, node.col_offset), None, None))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            self.shared.update(node.names)

    @property
    def products(self) -> List[ast.BinOp]:
        """Every ``a * b`` and ``a / b`` of the body (found on first use)."""
        if self._products is None:
            self._products = []
            stack = list(self.owner.body)
            while stack:
                node = stack.pop()
                if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
                    self._products.append(node)
                stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _SCOPES))
        return self._products

    def _bind(self, target: ast.AST, value: Optional[ast.AST], end: Tuple[int, int], index=None) -> None:
        if isinstance(target, ast.Name):
            self.bindings.setdefault(target.id, []).append(Binding(end, value, index))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for position, element in enumerate(target.elts):
                if isinstance(element, ast.Name) and value is not None and index is None:
                    self._bind(element, value, end, position)
                else:
                    self._bind(element.value if isinstance(element, ast.Starred) else element, None, end)

    def binding(self, name: ast.Name) -> Optional[Binding]:
        """The binding in force where ``name`` is read, or None (a parameter, global or builtin)."""
        found = None
        here = (name.lineno, name.col_offset)
        for binding in self.bindings.get(name.id, ()):
            if binding.end > here:
                break
            found = binding
        return found

    def resolve(self, expr: ast.AST) -> ast.AST:
        """Follow plain names to the expression last assigned to them (unpacks and unknowns stop)."""
        for _ in range(MAX_DEPTH):
            if not isinstance(expr, ast.Name):
                return expr
            binding = self.binding(expr)
            if binding is None or binding.value is None or binding.index is not None:
                return expr
            expr = binding.value
        return expr

    def same(self, a: ast.AST, b: ast.AST) -> bool:
        """Do two expressions denote the same value (same binding, or the same text)?"""
        if isinstance(a, ast.Name) and isinstance(b, ast.Name):
            if a.id != b.id:
                return self.resolve(a) is self.resolve(b) and not isinstance(self.resolve(a), ast.Name)
            return self.binding(a) is self.binding(b)
        return ast.dump(self.resolve(a)) == ast.dump(self.resolve(b))


def _loop_targets(target: ast.AST, iterable: ast.AST):
    """(target, the iterable it takes elements of): ``for a, b in zip(xs, ys)``, ``for i, x in enumerate(xs)``."""
    if isinstance(target, ast.Tuple) and isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
            and not iterable.keywords and not any(isinstance(a, ast.Starred) for a in iterable.args):
        if iterable.func.id == "zip" and len(iterable.args) == len(target.elts):
            return list(zip(target.elts, iterable.args))
        if iterable.func.id == "enumerate" and len(target.elts) == 2 and len(iterable.args) == 1:
            return [(target.elts[0], None), (target.elts[1], iterable.args[0])]
    return [(target, iterable if isinstance(target, ast.Name) else None)]
