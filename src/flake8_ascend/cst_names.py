"""Name chains on the libcst tree, for the two rewriters (``fix.py``, ``runtime/inject.py``).

Kept apart from ``calls.py`` (the same question on the stdlib tree) so that linting never imports libcst.
"""
from __future__ import annotations

from typing import Optional

import libcst as cst


def dotted(node: cst.CSTNode) -> Optional[str]:
    """``self.train_loader`` for a pure Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr.value}" if inner else None
    return None
