"""Local data flow inside one function (or module) body.

``Flow(scope)`` orders the scope's bindings (``names.Binding``) that statements make: assignments,
augmented assignments, loop and ``with`` targets, ``except ... as``; walrus and comprehension targets,
imports, defs and parameters are not followed.  ``Flow.binding(name)`` is the binding in force at a use:
the last one whose statement ends before the use starts, so in ``x = x * 2`` the right-hand ``x`` sees
the previous binding.  Branches and loops are not modelled: the textually last earlier binding wins.
That is enough to follow a value through the local names of one ``forward``.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional

from .names import AUGMENTED, FLOW_KINDS, Binding, Scope

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)
MAX_DEPTH = 8  # how many name-to-value steps a resolution follows


class Flow:
    """The name bindings of one body, in source order."""

    def __init__(self, scope: Scope) -> None:
        self.owner = scope.node
        self.shared = scope.shared  # names declared global / nonlocal
        self.assignments = scope.assignments  # every Assign / AnnAssign statement, whatever its targets
        self.bindings: Dict[str, List[Binding]] = {}
        for name, bindings in scope.bindings.items():
            flowing = [b for b in bindings if b.kind in FLOW_KINDS]
            if flowing:
                flowing.sort(key=lambda b: b.end)
                self.bindings[name] = flowing
        self._products: Optional[List[ast.BinOp]] = None

    @property
    def products(self) -> List[ast.BinOp]:
        """Every ``a * b`` and ``a / b`` of the body (found on first use)."""
        if self._products is None:
            self._products = []
            stack = [stmt for stmt in self.owner.body if not isinstance(stmt, _SCOPES)]  # not nested defs
            while stack:
                node = stack.pop()
                if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
                    self._products.append(node)
                stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _SCOPES))
        return self._products

    def binding(self, name: ast.Name, in_place: bool = True) -> Optional[Binding]:
        """The binding in force where ``name`` is read, or None (a parameter, global or builtin). ``in_place=False``
        passes over augmented assignments: ``p *= w`` updates a tensor in place, where it is."""
        found = None
        here = (name.lineno, name.col_offset)
        for binding in self.bindings.get(name.id, ()):
            if binding.end > here:
                break
            if in_place or binding.kind != AUGMENTED:
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
