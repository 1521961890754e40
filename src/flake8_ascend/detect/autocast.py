"""Autocast regions: which ``with`` blocks run under automatic mixed precision, and in what dtype.

An autocast region is the body of a ``with`` statement (same function) one of
whose items calls an autocast context manager that is not disabled with a
literal ``enabled=False``.  Its dtype is the ``dtype`` argument when that is a
literal torch dtype, else the device default: bfloat16 on ``"cpu"``,
float16 for CUDA/NPU, ``"unknown"`` when the device is not a literal.
"""
from __future__ import annotations

import ast
from typing import Optional

from ..calls import MISSING, argument, is_constant

# context manager -> (device it is bound to or None for a device argument, index of positional ``enabled``,
# index of positional ``dtype``)
_AUTOCASTS = {
    "torch.autocast": (None, 2, 1),
    "torch.amp.autocast": (None, 2, 1),
    "torch.amp.autocast_mode.autocast": (None, 2, 1),
    "torch.cuda.amp.autocast": ("cuda", 0, 1),
    "torch.npu.amp.autocast": ("npu", 0, 1),
    "torch_npu.npu.amp.autocast": ("npu", 0, 1),
    "torch.cpu.amp.autocast": ("cpu", 0, 1),
}
_DTYPES = {"torch.float16": "float16", "torch.half": "float16", "torch.bfloat16": "bfloat16"}


def autocast_dtype(call: ast.AST, ctx) -> Optional[str]:
    """``"float16"``, ``"bfloat16"`` or ``"unknown"`` for an enabled autocast call; None otherwise."""
    if not isinstance(call, ast.Call):
        return None
    spec = _AUTOCASTS.get(ctx.qualname(call.func) or "")
    if spec is None:
        return None
    device, enabled_at, dtype_at = spec
    enabled = argument(call, "enabled", enabled_at)
    if is_constant(enabled, False):
        return None
    dtype = argument(call, "dtype", dtype_at)
    if dtype is None:
        return "unknown"
    if dtype is not MISSING:
        return _DTYPES.get(ctx.qualname(dtype) or "", "unknown")
    if device is None:
        given = argument(call, "device_type", 0)
        if not (isinstance(given, ast.Constant) and isinstance(given.value, str)):
            return "unknown"
        device = given.value
    return "bfloat16" if device == "cpu" else "float16"


def is_autocast(call: ast.AST, ctx) -> bool:
    """Is ``call`` any autocast context manager call, enabled or not?"""
    return isinstance(call, ast.Call) and (ctx.qualname(call.func) or "") in _AUTOCASTS


def region_dtype(ctx, node: ast.AST) -> Optional[str]:
    """The dtype of the innermost autocast region holding ``node`` in its function, or None."""
    child = node
    for parent in reversed(ctx.stack):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return None
        if isinstance(parent, (ast.With, ast.AsyncWith)) and any(child is stmt for stmt in parent.body):
            for item in parent.items:
                if is_autocast(item.context_expr, ctx):
                    return autocast_dtype(item.context_expr, ctx)
        child = parent
    return None
