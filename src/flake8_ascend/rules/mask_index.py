"""ASC402: reading a tensor through a boolean mask (``x[x > 0]``, ``boxes[keep]``)."""
from __future__ import annotations

import ast

from ..registry import Rule
from ._shape_facts import facts_of, same_expression
from .value_dependent_ops import DYNAMIC_SOURCE, HINTS_CSV

_MASK_METHOD_NAMES = frozenset("isnan isinf isfinite bool logical_not eq ne gt ge lt le".split())


class BooleanMaskRead(Rule):
    code = "ASC402"
    summary = "boolean-mask indexing read (x[x > 0], boxes[keep] with a mask)"
    node_types = (ast.Subscript, ast.Assign, ast.AnnAssign, ast.For)
    csv = HINTS_CSV
    why = (
        "Indexing with a boolean mask returns as many rows as the mask holds True values, so the result's shape "
        "changes from batch to batch and the NPU recompiles the ops that consume it."
    )
    example = "positives = scores[scores > 0.5]"
    fix = (
        "Keep the full shape and neutralise the unwanted elements: `torch.where(mask, x, 0)`, "
        "`x.masked_fill(~mask, 0)`, or weight a loss by `mask.float()`; select on the CPU if you must."
    )
    source = DYNAMIC_SOURCE
    fires = [
        ("import torch\ny = x[x > 0]\n", 2),
        ("import torch\nscores = torch.rand(10)\nkeep = scores > 0.5\nboxes = b[keep]\n", 4),
        ("import torch\ndef f(x: torch.Tensor):\n    return x[~torch.isnan(x)]\n", 3),
        ("import torch\nx = torch.randn(4, 4)\ny = x[:, x[0] > 0]\n", 3),
        ("import torch\ny = loss[loss.isfinite()]\n", 2),
    ]
    passes = [
        "import numpy as np\na = np.arange(5)\nb = a[a > 2]\n",
        "import torch\ny = state_dict[key]\n",
        "import torch\nx = torch.randn(4)\nx[x > 0] = 0\n",
        "import torch\nflag = options[n > 0]\n",
        "import torch\nx = torch.randn(4)\ny = x[:2]\n",
        "import torch\nkeep = torch.rand(3) > 0.5\nkeep = [1, 2]\ny = b[keep]\n",
    ]

    def check(self, node, ctx) -> None:
        if not isinstance(node, ast.Subscript):
            facts_of(ctx).learn(node, ctx)
            return
        if not isinstance(node.ctx, ast.Load):  # x[mask] = v is an index put (ASC304), not a read
            return
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        facts = facts_of(ctx)
        for part in parts:
            if facts.is_mask(part, ctx) or self._masks_itself(node.value, part, ctx):
                ctx.report(node, self.code, f"boolean-mask read {ast.unparse(node)[:60]} has a data-dependent "
                           "length (each new length compiles new NPU kernels)",
                           api="tensor[bool mask]", tips="torch.where(mask, x, 0) / masked_fill keep the shape")
                return

    def _masks_itself(self, value: ast.AST, index: ast.AST, ctx) -> bool:
        """``x[x > 0]`` / ``x[x.isnan()]``: a mask built from the indexed value itself, not numpy's."""
        if facts_of(ctx).is_numpy(value, ctx):
            return False
        if isinstance(index, ast.Compare):
            return (len(index.ops) == 1 and not isinstance(index.ops[0], (ast.In, ast.NotIn, ast.Is, ast.IsNot))
                    and (same_expression(index.left, value) or same_expression(index.comparators[0], value)))
        if isinstance(index, ast.Call) and isinstance(index.func, ast.Attribute):
            return index.func.attr in _MASK_METHOD_NAMES and same_expression(index.func.value, value)
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.Invert):
            return self._masks_itself(value, index.operand, ctx)
        return False
