"""Fast child iteration over the stdlib ast, shared by the scope builder and the engine's walk.

``ast.iter_child_nodes`` goes through a generator per node and yields the
context and operator singletons (``Load``, ``Add``...), which no rule looks
at and which double the number of nodes visited.  ``child_fields`` lists, per
node class, only the fields that can hold nodes worth visiting.
"""
from __future__ import annotations

import ast
from collections import deque
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

# Fields that never hold a node worth visiting: names, flags, contexts and operator singletons.
_SKIPPED_FIELDS = frozenset(
    "ctx op ops id attr arg name asname module level kind type_comment is_async conversion simple".split()
)
_FIELDS: Dict[type, Tuple[str, ...]] = {}


def child_fields(cls: type) -> Tuple[str, ...]:
    """The fields of ``cls`` that may contain child nodes (memoised per class)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple(f for f in cls._fields if f not in _SKIPPED_FIELDS)
    return fields


def fields_table() -> Dict[type, Tuple[str, ...]]:
    """``child_fields``' own memo, for a hot loop that looks a class up inline (``None``: ask ``child_fields``)."""
    return _FIELDS


def iter_children(node: ast.AST) -> Iterator[ast.AST]:
    """Child nodes of ``node`` in source order, without contexts and operators."""
    for name in child_fields(node.__class__):
        value = getattr(node, name, None)
        if value.__class__ is list:
            for item in value:
                if isinstance(item, ast.AST):
                    yield item
        elif isinstance(value, ast.AST):
            yield value


def lineage(ancestors: Sequence[ast.AST], node: ast.AST) -> Iterator[Tuple[ast.AST, ast.AST]]:
    """(parent, child) pairs from ``node`` outwards, given its ``ancestors`` outermost first: its parent with it, then
    upwards."""
    path = [*ancestors, node]
    return zip(reversed(path[:-1]), reversed(path[1:]))


def block_of(parent: ast.AST, statement: ast.stmt) -> Tuple[List[ast.stmt], int]:
    """The block of ``parent`` (its body, else or finally) that holds ``statement``, and its place there; ([], -1)
    when none does."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list):
            index = next((i for i, s in enumerate(block) if s is statement), -1)
            if index >= 0:
                return block, index
    return [], -1


def walk_tree(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` without contexts and operators: the other nodes in the same (breadth-first) order, at about
    half the cost (those singletons have no children, so leaving them out moves no other node)."""
    todo = deque((node,))
    pop, extend = todo.popleft, todo.extend
    while todo:
        node = pop()
        extend(iter_children(node))
        yield node


def assign_targets(statement: ast.AST) -> List[ast.expr]:
    """The targets of an ``Assign`` (``a = b = v``), or the one target of an ``AnnAssign`` / ``AugAssign``."""
    return statement.targets if isinstance(statement, ast.Assign) else [statement.target]


def defaulted_parameters(args: ast.arguments) -> List[Tuple[ast.arg, Optional[ast.expr]]]:
    """(parameter, its default) for the positional parameters that have one and every keyword-only one (None: a
    keyword-only parameter without)."""
    positional = args.posonlyargs + args.args
    return list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) + list(
        zip(args.kwonlyargs, args.kw_defaults))


def parameter_defaults(args: ast.arguments) -> Dict[str, ast.expr]:
    """Parameter name -> its default, for the parameters of a ``def`` that have one (positional and keyword-only)."""
    return {a.arg: d for a, d in defaulted_parameters(args) if d is not None}
