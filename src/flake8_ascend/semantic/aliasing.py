"""Can ``x[mask] = v`` be rewritten as ``x = f(x, mask, v)``?  Fresh tensors and aliases (ASC304's --fix).

Rebinding ``x`` is only safe when no other name sees the tensor: ``x`` must be a local bound to a newly
allocated tensor (``fresh_tensor``) and not stored anywhere else afterwards (``aliased``).  Both look at
the expression and, through ``flow.Flow``, at the local names of the same function; what a value *is*
comes from the value model (``ctx.values``).
"""
from __future__ import annotations

import ast
from typing import Optional

from .flow import Flow
from .values import COMPARE
from ..walk import assign_targets

# torch functions whose result may share memory with an argument: not a fresh tensor
_VIEW_FUNCTIONS = frozenset(
    """as_strided narrow select squeeze unsqueeze transpose permute t reshape view_as_real view_as_complex
    flatten unflatten movedim moveaxis swapaxes swapdims diagonal expand_copy chunk split unbind tensor_split
    from_numpy as_tensor asarray detach""".split()
)
_FRESH_METHODS = frozenset(("clone", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"))
_VIEW_METHODS = frozenset(
    """view view_as reshape reshape_as transpose permute squeeze unsqueeze expand expand_as narrow select t
    flatten unflatten detach as_strided split chunk unbind diagonal movedim swapaxes swapdims unfold real
    imag T mT H mH data float half double bfloat16 int long bool to type type_as contiguous""".split()
)


def fresh_tensor(value: ast.AST, ctx) -> bool:
    """Does ``value`` allocate a new tensor (no other name can alias it)?"""
    if isinstance(value, (ast.BinOp, ast.Compare)):
        return True
    if isinstance(value, ast.UnaryOp):
        return not isinstance(value.op, ast.Not)
    if isinstance(value, ast.Subscript):  # advanced (mask / index tensor) indexing copies, slicing does not
        index = value.slice
        return not isinstance(index, (ast.Slice, ast.Tuple, ast.Constant)) and (
            ctx.values.is_tensor(index) or ctx.values.of(index).kind == COMPARE)
    if isinstance(value, ast.Call):
        qualname = ctx.qualname(value.func)
        if qualname is not None:
            name = qualname[len("torch."):]
            return qualname.startswith("torch.") and "." not in name and name not in _VIEW_FUNCTIONS
        return isinstance(value.func, ast.Attribute) and value.func.attr in _FRESH_METHODS
    return False


def aliased(name: str, flow: Flow, after) -> bool:
    """Is local ``name`` stored anywhere else after position ``after`` (``y = x``, ``self.t = x.view(...)``)?"""
    for node in flow.assignments:
        targets = assign_targets(node)
        if (node.end_lineno, node.end_col_offset) <= after or node.value is None:
            continue
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == name:
            continue  # ``x = f(x)`` rebinds x itself
        if _refers_to(node.value, name):
            return True
    return False


def _refers_to(expr: ast.AST, name: str) -> bool:
    while True:
        if isinstance(expr, ast.Name):
            return expr.id == name
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Attribute) and expr.attr in _VIEW_METHODS:
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _VIEW_METHODS:
            expr = expr.func.value
        elif isinstance(expr, (ast.Tuple, ast.List)):
            return any(_refers_to(e, name) for e in expr.elts)
        else:
            return False


def source_line(node: ast.AST, lines) -> Optional[str]:
    """The first source line of a statement, stripped (the CSV's Api Call Name for a pattern)."""
    if 0 < node.lineno <= len(lines):
        return lines[node.lineno - 1].strip()
    return None
