"""Code that only a torch older than the selected torch_npu's runs.

torch_npu X.Y runs on torch X.Y (torch_npu 2.13.0 on torch 2.13), so on an NPU machine the body of
``if Version(torch.__version__) < Version("2.4.0"):`` and the ``else`` of ``if V(torch.__version__) >= V("1.6.0"):``
never run when the selected version is 2.4 or later. What they hold (``torch.cuda.amp.custom_fwd`` for torch<2.4:
unsloth 2026.10.9 kernels/utils.py:49, axolotl 0.19.0 kernels/utils.py:7; espnet 202511 train/reporter.py:357) is
no migration work. Only a comparison of ``torch.__version__`` (bare or wrapped in a parser call; mmengine's
``TORCH_VERSION`` is the same string) with a literal
version is read; a helper such as ``check_version(torch.__version__, "1.12.0")`` says no direction and is left alone.
The engine drops every finding there. The ``except`` of a ``try`` that first uses the device-generic ``torch.amp``
API is such code too (``old_torch_fallback``, which ASC207 asks).
"""
from __future__ import annotations

import ast
import re
from typing import Optional, Tuple

from ..walk import walk_tree
from .training import source_text

_VERSION = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_MIRROR = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}


def version_tuple(text: str) -> Optional[Tuple[int, int, int]]:
    """``"2.4.0"`` -> (2, 4, 0), ``"1.8"`` -> (1, 8, 0), ``"2.1.0.post17"`` -> (2, 1, 0); None for no version."""
    found = _VERSION.match(text)
    return None if found is None else tuple(int(part or 0) for part in found.groups())  # type: ignore[return-value]


# names for ``torch.__version__``: mmengine 0.10.7 utils/dl_utils/parrots_wrapper.py:7, ``TORCH_VERSION =
# torch.__version__``, re-exported by utils/dl_utils/__init__.py:6 (mmagic 1.2.0 eg3d/renderer.py:436 compares
# ``digit_version(TORCH_VERSION) < digit_version('1.8.0')``)
_TORCH_VERSIONS = frozenset(("torch.__version__", "mmengine.utils.dl_utils.TORCH_VERSION",
                             "mmengine.utils.dl_utils.parrots_wrapper.TORCH_VERSION"))
_SPELLINGS = ("__version__", "TORCH_VERSION")


def _mentions_torch_version(expr: ast.AST, ctx) -> bool:
    return any((isinstance(node, ast.Attribute) and node.attr == "__version__" or isinstance(node, ast.Name) and
                node.id == "TORCH_VERSION") and ctx.qualname(node) in _TORCH_VERSIONS for node in walk_tree(expr))


def _literal_version(expr: ast.AST) -> Optional[Tuple[int, int, int]]:
    """The one version literal of a side: ``"2.4.0"``, ``Version("2.4.0")``, ``parse("2.4")``."""
    while isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords:
        expr = expr.args[0]
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return version_tuple(expr.value)
    return None


def _old_side(test: ast.AST, ctx, running: Tuple[int, int, int]) -> Optional[str]:
    """``"body"`` or ``"orelse"``: the side of ``if test:`` that only a torch older than ``running`` takes."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _MIRROR):
        return None
    left, right, op = test.left, test.comparators[0], type(test.ops[0])
    if _mentions_torch_version(right, ctx) and not _mentions_torch_version(left, ctx):
        left, right, op = right, left, _MIRROR[op]
    elif not _mentions_torch_version(left, ctx):
        return None
    bound = _literal_version(right)
    if bound is None:
        return None
    # torch < bound (or <=) holds only on old torch; torch >= bound (or >) fails only there
    if op is ast.Lt and running >= bound or op is ast.LtE and running > bound:
        return "body"
    if op is ast.GtE and running >= bound or op is ast.Gt and running > bound:
        return "orelse"
    return None


def in_old_torch_branch(ctx, node: ast.AST) -> bool:
    """Is ``node`` (a descendant of the node being checked, or that node) on a side of an ``if`` that only a torch
    older than the selected one takes?"""
    text = source_text(ctx)
    if not any(spelling in text for spelling in _SPELLINGS):
        return False
    running = ctx.memo("running_torch", lambda c: version_tuple(c.config.version) or (0, 0, 0))
    path = [*ctx.stack, node]
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, ast.If) and child is not parent.test:
            side = _old_side(parent.test, ctx, running)
            if side is not None and any(statement is child for statement in getattr(parent, side)):
                return True
    return False


def old_torch_fallback(node: ast.AST, qualname: str, ctx) -> bool:
    """``node`` (``torch.cuda.amp.GradScaler``) is in the ``except`` of a ``try`` whose body uses the device-generic
    ``torch.amp`` API of the same name (timm 1.0.31 utils/cuda.py:50-53): a fallback for a torch older than any
    torch_npu supports, which an NPU install never reaches."""
    name = qualname.rsplit(".", 1)[-1]
    for parent, child in ctx.lineage(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False
        if isinstance(parent, ast.Try) and any(h is child for h in parent.handlers):
            return any(isinstance(n, ast.Attribute) and n.attr == name and (ctx.qualname(n) or "").startswith(
                "torch.amp.") for s in parent.body for n in walk_tree(s))
    return False
