"""The safe rewrites the CUDA rules attach to their findings (``Finding.rewrite``, applied by ``fix.py``).

A rewrite comes from ``data/cuda_fixes.json`` (the GPU2Ascend rule tables, where transfer_to_npu agrees) and
is attached only where the finding is certain and the version has the target: ``torch.cuda.X`` only when
that version's ``torch_npu.npu`` has ``X``, nothing for a version without ``torch_npu.npu`` data.  A file that
already names the NPU as data (``'npu'``, ``'npu:0'``, ``'hccl'``: timm's ``utils/distributed.py``, ultralytics'
trainer, deepspeed's ``comm/constants.py``) dispatches per device, so its CUDA code is the CUDA case and gets
no rewrite.  What has no rewrite stays a plain finding: the manual work of a migration.
"""
from __future__ import annotations

import ast
import re
from typing import Optional

from ..data import load_cuda_fixes
from ..rewrite import Kind, Rewrite
from ..walk import iter_children

_DEVICE_INDEX = re.compile(r"\d+")
_NPU_DATA = re.compile(r"npu(:\d+)?|hccl|HCCL")
# what such a string literal's text must hold: ``npu`` before its closing quote or a device index ("input" and
# "torch_npu" hold neither), or ``hccl``
_NPU_TEXT = re.compile(r"npu['\":]|hccl", re.IGNORECASE)


def names_npu(tree: ast.AST, lines) -> bool:
    """The module holds an NPU device or backend string: it has NPU cases of its own."""
    if not any(_NPU_TEXT.search(line) for line in lines if "npu" in line or "hccl" in line.lower()):
        return False
    stack = [tree]  # every node, as ``ast.walk`` gives them (order does not matter), less contexts and operators
    while stack:
        node = stack.pop()
        if node.__class__ is ast.Constant:
            if isinstance(node.value, str) and _NPU_DATA.fullmatch(node.value):
                return True
            continue
        stack.extend(iter_children(node))
    return False


def handles_npu(ctx) -> bool:
    """``names_npu`` for the file the rules are walking (memoised per file)."""
    return ctx.memo("handles_npu", lambda c: names_npu(c.tree, c.lines))


def name_fix(qualname: str, ctx) -> Optional[Rewrite]:
    """``name torch_npu.npu.synchronize`` for ``torch.cuda.synchronize`` (longest mapped module first)."""
    data = ctx.data
    if not data.npu_all or handles_npu(ctx):
        return None
    for old, new in sorted(load_cuda_fixes()["modules"].items(), key=lambda item: -len(item[0])):
        if qualname.startswith(old + "."):
            rest = qualname[len(old) + 1:]
            if old == "torch.cuda" and rest.split(".")[0] not in data.npu_all:
                return None
            return Rewrite(Kind.NAME, f"{new}.{rest}")
    return None


def method_fix(name: str, ctx) -> Optional[Rewrite]:
    """``method npu`` for ``.cuda()``."""
    new = load_cuda_fixes()["methods"].get(name)
    return Rewrite(Kind.METHOD, new) if new and not handles_npu(ctx) else None


def string_fix(value: str, ctx) -> Optional[Rewrite]:
    """``string npu:1`` for ``'cuda:1'``, ``string hccl`` for ``'nccl'``: exact strings and device prefixes."""
    strings = load_cuda_fixes()["strings"]
    if handles_npu(ctx):
        return None
    if value in strings:
        return Rewrite(Kind.STRING, strings[value])
    for old, new in strings.items():
        if old.endswith(":") and value.startswith(old) and _DEVICE_INDEX.fullmatch(value[len(old):]):
            return Rewrite(Kind.STRING, f"{new}{value[len(old):]}")
    return None
