"""ASC101-103: torch APIs the selected torch_npu version does not support, does not list, or restricts."""
from __future__ import annotations

import ast
from typing import Optional, Tuple

from ..registry import Rule

_CUDA_DOMAIN = ("torch.cuda.", "torch.backends.cuda", "torch.backends.cudnn")  # the ASC2xx codes own these
_SOURCE = (
    "torch_npu support lists: the official PyTorch Analyse tool's per-version lists (1.11.0-2.8.0), "
    "Ascend/pytorch API docs tables (2.7.1, 2.9.0-2.13.0), and the ATen ops of the torch_npu wheels "
    "(rules_data/sources/PROVENANCE.md)"
)


def api_of(node: ast.AST, ctx) -> Optional[str]:
    """The torch API a name/attribute chain uses: an import path, or ``torch.Tensor.m`` on a tensor."""
    qualname = ctx.chain(node)
    if qualname is not None:
        return qualname if qualname.startswith("torch.") and not qualname.startswith(_CUDA_DOMAIN) else None
    if isinstance(node, ast.Attribute) and not _inside_chain(node, ctx) and ctx.is_tensor(node.value):
        return f"torch.Tensor.{node.attr}"
    return None


def _inside_chain(node: ast.AST, ctx) -> bool:
    parent = ctx.parent
    return isinstance(parent, ast.Attribute) and parent.value is node


def status_of(node: ast.AST, ctx) -> Optional[Tuple[str, str, str, str]]:
    """(api, status, note, how decided) when the data knows the API used at ``node``.

    Memoised per node: ASC101, ASC102 and ASC103 all ask about every name.
    """
    cache = ctx.memo("api_status", lambda _: {})
    key = id(node)
    if key not in cache:
        api = api_of(node, ctx)
        row = ctx.data.api_status(api) if api else None
        cache[key] = (api, *row) if row else None
    return cache[key]


class _ApiStatusRule(Rule):
    node_types = (ast.Name, ast.Attribute)
    csv = "unsupported_api.csv"
    source = _SOURCE
    wanted = ""

    def check(self, node, ctx) -> None:
        if isinstance(node.ctx, ast.Store) or isinstance(node.ctx, ast.Del):
            return
        found = status_of(node, ctx)
        if found and found[1] == self.wanted:
            api, _, note, how = found
            self.emit(node, ctx, api, note, how)


class UnsupportedApi(_ApiStatusRule):
    code = "ASC101"
    summary = "torch API not supported on NPU for the selected torch_npu version"
    wanted = "unsupported"
    why = (
        "The operator has no NPU implementation in that release: the call fails at run time or falls back "
        "to the CPU, which makes training slow or breaks it."
    )
    example = "eigenvalues = torch.linalg.eig(a)"
    fix = "Use a supported equivalent, move that computation to the CPU explicitly, or pick a newer torch_npu."

    fires = [
        ("import torch\nx = torch.randn(4, 4)\nm = x.mode()\n", 3),
        ("import torch\ny = torch.unique(x)\nz = y.unique_consecutive()\n", 3),
        ("import torch\ndef f(t: torch.Tensor):\n    return t.mode()\n", 3),
    ]
    passes = [
        "import pandas as pd\nm = pd.DataFrame({'a': [1]}).mode()\n",
        "import statistics\nm = statistics.mode([1, 2, 2])\n",
        "import numpy as np\na = np.zeros(3)\nm = a.mode()\n",
        "import numpy as torch\nv = torch.linalg.eig(a)\n",
        "import torch\ndef f(t):\n    return t.mode()\n",
        "import torch\ndef eig(a):\n    return a\nv = eig(1)\n",
    ]

    def emit(self, node, ctx, api, note, how) -> None:
        ctx.report(node, self.code, f"{api} is not supported on NPU (torch_npu {ctx.data.version})",
                   api=api, tips=note or "unsupported")


class UnknownApi(_ApiStatusRule):
    code = "ASC102"
    summary = "torch API whose NPU support is unknown for the selected version"
    wanted = "unknown"
    csv = "unknown_api.csv"
    why = (
        "The version's support list does not name the API, and the ATen ops it dispatches to do not all have "
        "an NPU kernel in that torch_npu wheel (or no wheel data exists), so it may fail or fall back to the CPU."
    )
    example = "y = torch.nn.functional.huber_loss(a, b)"
    fix = "Check the API on an NPU or with `ascend-analyse -m runtime_ops`; prefer an API the list supports."

    fires = [
        ("import torch.nn.functional as F\nloss = F.huber_loss(a, b)\n", 2),
        ("from torch import linalg\nv = linalg.eig(a)\n", 2),
    ]
    passes = ["import torch.nn.functional as F\ny = F.relu(x)\n", "import torch\nw = torch.nn.Parameter(x)\n"]

    def emit(self, node, ctx, api, note, how) -> None:
        reason = note or "absent from the support data"
        ctx.report(node, self.code, f"NPU support of {api} is unknown for torch_npu {ctx.data.version} ({reason})",
                   api=api, tips=reason)


class RestrictedApi(_ApiStatusRule):
    code = "ASC103"
    summary = "torch API supported on NPU only with restrictions (dtypes, arguments)"
    wanted = "partial"
    default_off = True
    why = "The API runs on NPU but only for some dtypes or argument values; other inputs fail or lose precision."
    example = "d = torch.cdist(a, b)"
    fix = "Check the restriction in the message against your dtypes and arguments. Off by default: enable with `--extend-select ASC103`."

    fires = [("import torch\nd = torch.cdist(a, b)\n", 2)]
    passes = ["import torch\nx = torch.zeros(3)\n"]

    def emit(self, node, ctx, api, note, how) -> None:
        ctx.report(node, self.code, f"{api} is supported on NPU with restrictions (torch_npu {ctx.data.version}: {note})",
                   api=api, tips=f"supported with restrictions: {note}")
