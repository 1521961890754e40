"""The safe rewrites the CUDA rules attach to their findings (``Finding.fix``, applied by ``fix.py``).

A rewrite comes from ``data/cuda_fixes.json`` (the GPU2Ascend rule tables, where transfer_to_npu agrees) and
is attached only where the finding is certain and the version has the target: ``torch.cuda.X`` only when
that version's ``torch_npu.npu`` has ``X``, nothing for a version without ``torch_npu.npu`` data.  What has
no rewrite stays a plain finding: the manual work of a migration.
"""
from __future__ import annotations

import re

from ..data import load_cuda_fixes

_DEVICE_INDEX = re.compile(r"\d+")


def name_fix(qualname: str, data) -> str:
    """``name torch_npu.npu.synchronize`` for ``torch.cuda.synchronize`` (longest mapped module first)."""
    if not data.npu_all:
        return ""
    for old, new in sorted(load_cuda_fixes()["modules"].items(), key=lambda item: -len(item[0])):
        if qualname.startswith(old + "."):
            rest = qualname[len(old) + 1:]
            if old == "torch.cuda" and rest.split(".")[0] not in data.npu_all:
                return ""
            return f"name {new}.{rest}"
    return ""


def method_fix(name: str) -> str:
    """``method npu`` for ``.cuda()``."""
    new = load_cuda_fixes()["methods"].get(name)
    return f"method {new}" if new else ""


def string_fix(value: str) -> str:
    """``string npu:1`` for ``'cuda:1'``, ``string hccl`` for ``'nccl'``: exact strings and device prefixes."""
    strings = load_cuda_fixes()["strings"]
    if value in strings:
        return f"string {strings[value]}"
    for old, new in strings.items():
        if old.endswith(":") and value.startswith(old) and _DEVICE_INDEX.fullmatch(value[len(old):]):
            return f"string {new}{value[len(old):]}"
    return ""
