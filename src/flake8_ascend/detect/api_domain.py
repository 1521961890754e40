"""Which torch names the API-support codes (ASC1xx) speak for, shared by their rules and the library analysis."""
from __future__ import annotations

import ast
from typing import Optional, Tuple

CUDA_DOMAIN = ("torch.cuda.", "torch.backends.cuda", "torch.backends.cudnn")  # the ASC2xx codes own these


def inherited_status(base: ast.AST, ctx) -> Optional[Tuple[str, str, str]]:
    """(api, status, note) of a torch class a class derives from: not a use where it is named (no
    finding there), but the library analysis counts the subclass as using it."""
    api = ctx.qualname(base)
    if api is None or not api.startswith("torch.") or api.startswith(CUDA_DOMAIN):
        return None
    row = ctx.data.api_status(api, ctx.config.official_lists)
    return (api, row[0], row[1]) if row else None
