"""Small inferences for ``x[mask] = value`` (ASC304): boolean masks, scalars, non-tensors, fresh tensors.

All of them look only at the expression and, through ``flow.Flow``, at what local names were bound to
in the same function; anything they cannot settle counts as "no".
"""
from __future__ import annotations

import ast
from typing import Optional

from .flow import MAX_DEPTH, Flow

_COMPARISONS = (ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.Eq, ast.NotEq)
# torch functions and tensor methods that return a bool tensor
_MASK_OPS = frozenset(
    """isnan isinf isfinite isneginf isposinf isreal isclose isin logical_and logical_or logical_not
    logical_xor gt lt ge le eq ne greater less greater_equal less_equal not_equal bool any all""".split()
)
_FACTORIES = frozenset("zeros ones empty full zeros_like ones_like empty_like full_like tensor as_tensor".split())
_CONSTANTS = frozenset(f"{m}.{c}" for m in ("math", "numpy", "torch") for c in ("inf", "nan", "pi", "e"))
_PANDAS_ACCESSORS = frozenset(("loc", "iloc", "at", "iat"))
_CONTAINERS = (ast.List, ast.Dict, ast.Set, ast.Tuple, ast.ListComp, ast.DictComp, ast.SetComp, ast.JoinedStr)
_CONTAINER_CALLS = frozenset(("list", "dict", "set", "tuple", "defaultdict", "OrderedDict", "Counter", "str"))
_FOREIGN = ("numpy.", "pandas.", "collections.", "cupy.")
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


def _is_bool_dtype(node: ast.AST, ctx) -> bool:
    return ctx.qualname(node) == "torch.bool"


def is_mask(expr: ast.AST, ctx, flow: Flow, depth: int = 0) -> bool:
    """Is ``expr`` a boolean tensor: a comparison, a logical op on masks, ``~mask``, a bool dtype tensor?"""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, ast.Compare):
        return len(expr.ops) == 1 and isinstance(expr.ops[0], _COMPARISONS)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
        return is_mask(expr.operand, ctx, flow, depth + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return is_mask(expr.left, ctx, flow, depth + 1) or is_mask(expr.right, ctx, flow, depth + 1)
    if isinstance(expr, ast.Subscript):
        return is_mask(expr.value, ctx, flow, depth + 1)
    if isinstance(expr, ast.Name):
        value = flow.resolve(expr)
        return value is not expr and is_mask(value, ctx, flow, depth + 1)
    if isinstance(expr, ast.Call):
        return _mask_call(expr, ctx)
    return False


def _mask_call(call: ast.Call, ctx) -> bool:
    qualname = ctx.qualname(call.func)
    if qualname is not None:
        name = qualname[len("torch."):] if qualname.startswith("torch.") else ""
        if name in _MASK_OPS:
            return True
        return name in _FACTORIES and any(k.arg == "dtype" and _is_bool_dtype(k.value, ctx) for k in call.keywords)
    if not isinstance(call.func, ast.Attribute):
        return False
    attr = call.func.attr
    if attr in _MASK_OPS:
        return True
    if attr in ("to", "type"):
        dtypes = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "dtype"]
        return any(_is_bool_dtype(d, ctx) for d in dtypes)
    return False


def is_scalar(expr: ast.AST, ctx, flow: Flow, depth: int = 0) -> bool:
    """A Python number: a literal, ``-1``, ``float('inf')``, ``math.inf``, ``torch.finfo(t).min``..."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, complex)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return is_scalar(expr.operand, ctx, flow, depth + 1)
    if isinstance(expr, ast.BinOp):
        return is_scalar(expr.left, ctx, flow, depth + 1) and is_scalar(expr.right, ctx, flow, depth + 1)
    if isinstance(expr, ast.Call):
        return isinstance(expr.func, ast.Name) and expr.func.id in ("float", "int") and ctx.qualname(expr.func) is None
    if isinstance(expr, (ast.Attribute, ast.Name)) and ctx.qualname(expr) in _CONSTANTS:
        return True
    if isinstance(expr, ast.Attribute):
        value = expr.value
        return (expr.attr in ("min", "max", "eps", "tiny") and isinstance(value, ast.Call)
                and ctx.qualname(value.func) in ("torch.finfo", "torch.iinfo"))
    if isinstance(expr, ast.Name):
        value = flow.resolve(expr)
        return value is not expr and is_scalar(value, ctx, flow, depth + 1)
    return False


def known_non_tensor(expr: ast.AST, ctx, flow: Flow, depth: int = 0) -> bool:
    """Known to be something else: a list/dict/str, a numpy or pandas object, a pandas ``.loc``."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, _CONTAINERS):
        return True
    if isinstance(expr, ast.Attribute):
        return expr.attr in _PANDAS_ACCESSORS or (ctx.qualname(expr) or "").startswith(_FOREIGN)
    if isinstance(expr, ast.Call):
        qualname = ctx.qualname(expr.func)
        if qualname is not None:
            return qualname.startswith(_FOREIGN) or qualname in _CONTAINER_CALLS
        if isinstance(expr.func, ast.Name):
            return expr.func.id in _CONTAINER_CALLS
        return isinstance(expr.func, ast.Attribute) and known_non_tensor(expr.func.value, ctx, flow, depth + 1)
    if isinstance(expr, ast.BinOp):
        return known_non_tensor(expr.left, ctx, flow, depth + 1) or known_non_tensor(expr.right, ctx, flow, depth + 1)
    if isinstance(expr, ast.Subscript):
        return known_non_tensor(expr.value, ctx, flow, depth + 1)
    if isinstance(expr, ast.Name):
        value = flow.resolve(expr)
        return value is not expr and known_non_tensor(value, ctx, flow, depth + 1)
    return False


def known_tensor(expr: ast.AST, ctx, flow: Flow) -> bool:
    """``ctx.is_tensor`` on the expression or on what its local name was bound to."""
    return ctx.is_tensor(expr) or ctx.is_tensor(flow.resolve(expr))


def fresh_tensor(value: ast.AST, ctx, flow: Flow) -> bool:
    """Does ``value`` allocate a new tensor (no other name can alias it)?"""
    if isinstance(value, (ast.BinOp, ast.Compare)):
        return True
    if isinstance(value, ast.UnaryOp):
        return not isinstance(value.op, ast.Not)
    if isinstance(value, ast.Subscript):  # advanced (mask / index tensor) indexing copies, slicing does not
        index = value.slice
        return is_mask(index, ctx, flow) or (not isinstance(index, (ast.Slice, ast.Tuple, ast.Constant))
                                             and known_tensor(index, ctx, flow))
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
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
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


def foreign_arrays(lines) -> bool:
    """Does the file mention numpy, pandas or cupy?  Then an unknown ``x`` may be one of their arrays."""
    return any(word in line for line in lines for word in ("numpy", "pandas", "cupy"))


def source_line(node: ast.AST, lines) -> Optional[str]:
    """The first source line of a statement, stripped (the CSV's Api Call Name for a pattern)."""
    if 0 < node.lineno <= len(lines):
        return lines[node.lineno - 1].strip()
    return None
