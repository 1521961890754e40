"""Code that already dispatches per device type and has an NPU branch.

timm's loaders and distributed helpers test ``device.type == 'cuda'`` next to
``device.type == 'npu'``: the CUDA branch is one case of several, not a
hard-coded device, so the CUDA rules stay quiet about the test and about the
``torch.cuda`` calls it guards.
"""
from __future__ import annotations

import ast
import re

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NPU = re.compile(r"npu(:\d+)?")
_CUDA = re.compile(r"cuda(:\d+)?")


def _compares_with(test: ast.AST, pattern: re.Pattern) -> bool:
    """``test`` holds a comparison with a string constant ``pattern`` matches (``x.type == 'npu'``)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and isinstance(side.value, str) and pattern.fullmatch(side.value):
                    return True
    return False


def has_npu_branch(ctx) -> bool:
    """The function around the checked node also tests for ``'npu'`` (memoised per function)."""
    function = ctx.enclosing(*_FUNCTIONS)
    if function is None:
        return False
    return ctx.memo(f"npu_branch.{id(function)}", lambda _: _compares_with(function, _NPU))


def cuda_guarded(node: ast.AST, ctx) -> bool:
    """``node`` runs only after a ``== 'cuda'`` test: in the body of ``if``/``x if ... else``, or after it
    in an ``and`` (``device.type == 'cuda' and torch.cuda.is_available()``)."""
    for parent, child in ctx.lineage(node):
        if isinstance(parent, _FUNCTIONS):
            return False
        if isinstance(parent, ast.If) and any(s is child for s in parent.body) or (
                isinstance(parent, ast.IfExp) and child is parent.body):
            if _compares_with(parent.test, _CUDA):
                return True
        elif isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And):
            before = parent.values[:next(i for i, v in enumerate(parent.values) if v is child)]
            if any(_compares_with(v, _CUDA) for v in before):
                return True
    return False
