"""Where a function's local names are read: the reads index of one scope.

``reads_of(scope, node_scopes)`` walks one function (or module) body once and answers, per name the scope
binds, every place that reads it, in source order: a ``Name`` in load context whose name resolves to this
scope (reads from nested functions, lambdas and comprehensions included, since they see the same variable),
and the target of ``x += ...`` (which reads ``x`` too). Each read comes with its ancestors inside the scope,
innermost first (``Read.path``), so a question about what a read feeds (a call's argument, an ``if`` test) needs
no second walk. The index is flow-insensitive on purpose: it lists the reads of the name, whichever of its
bindings they see, which is the safe side for "every read of this name does X".

``SemanticModel.reads(owner)`` builds it on first use per scope and keeps it for the file.
"""
from __future__ import annotations

import ast
from typing import Dict, List, NamedTuple, Optional, Tuple

from .names import Scope
from ..walk import child_fields


class Read(NamedTuple):
    """One read of a local name: the node and its ancestors up to the scope's body, innermost first."""
    node: ast.AST
    path: Tuple[ast.AST, ...]


def reads_of(scope: Scope, node_scopes: Dict[int, Scope]) -> Dict[str, List[Read]]:
    """Every read of each name ``scope`` binds (see the module docstring)."""
    found: Dict[str, List[Read]] = {}
    bound = scope.bindings
    if not bound:
        return found
    owner = scope.node
    body = owner.body if isinstance(getattr(owner, "body", None), list) else [owner.body]
    # depth-first; each node comes with a link to its parent's (parent, link), unrolled only for a read
    todo: List[Tuple[ast.AST, Optional[tuple]]] = [(stmt, None) for stmt in reversed(body)]
    while todo:
        node, link = todo.pop()
        cls = node.__class__
        if cls is ast.Name:
            if node.id in bound and (isinstance(node.ctx, ast.Load) or (
                    link is not None and isinstance(link[0], ast.AugAssign) and link[0].target is node)):
                home = (node_scopes.get(id(node)) or scope).home(node.id)
                if home is scope:
                    path = []
                    while link is not None:
                        path.append(link[0])
                        link = link[1]
                    found.setdefault(node.id, []).append(Read(node, tuple(path)))
            continue
        inner = (node, link)
        children = []
        for field in child_fields(cls):
            value = getattr(node, field, None)
            if value.__class__ is list:
                children.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                children.append(value)
        todo.extend((child, inner) for child in reversed(children))
    return found
