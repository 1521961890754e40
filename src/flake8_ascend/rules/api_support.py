"""ASC101-103: torch APIs the selected torch_npu version does not support, does not list, or restricts."""
from __future__ import annotations

import ast
import re
from typing import Optional, Tuple

from ..detect.api_domain import CUDA_DOMAIN as _CUDA_DOMAIN
from ..registry import Rule

_SOURCE = (
    "torch_npu support lists: the official PyTorch Analyse tool's per-version lists (1.11.0-2.8.0), "
    "Ascend/pytorch API docs tables (2.7.1, 2.9.0-2.13.0), and the ATen ops of the torch_npu wheels "
    "(rules_data/sources/PROVENANCE.md)"
)


# CJK ideographs and punctuation, kana, hangul, fullwidth forms: the official lists' notes are mostly Chinese
_NOT_ENGLISH = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def in_english(note: str) -> str:
    """``note`` for a flake8 message, which is English: a note in another language stays in the CSV Tips."""
    if not _NOT_ENGLISH.search(note):
        return note
    return "the official list's note, not in English, is in the Tips of ascend-analyse's report"


def api_of(node: ast.AST, ctx) -> Optional[str]:
    """The torch API a name/attribute chain names: an import path, or ``torch.Tensor.m`` for a method
    (whether its receiver is a tensor is for the caller to ask, and only when the data knows the method)."""
    qualname = ctx.chain(node)
    if qualname is not None:
        return qualname if qualname.startswith("torch.") and not qualname.startswith(_CUDA_DOMAIN) else None
    if isinstance(node, ast.Attribute) and not _inside_chain(node, ctx):
        return f"torch.Tensor.{node.attr}"
    return None


def _inside_chain(node: ast.AST, ctx) -> bool:
    parent = ctx.parent
    return isinstance(parent, ast.Attribute) and parent.value is node


_GENERICS = frozenset({"list", "dict", "tuple", "set", "frozenset", "type"})  # builtins subscripted in type hints
_PASS_THROUGH = (ast.Tuple, ast.List, ast.Starred, ast.BinOp)  # (A, B) and A | B in isinstance/except/hints


def is_use(node: ast.AST, ctx) -> bool:
    """Whether the API at ``node`` runs here: False for type hints, isinstance/issubclass arguments,
    except clauses, base classes and the binding of an alias (``pool = nn.MaxPool2d``: its call reports)."""
    child = node
    for parent in reversed(ctx.stack):
        if isinstance(parent, _PASS_THROUGH):
            child = parent
            continue
        if isinstance(parent, ast.Call):
            func = parent.func
            return not (child is not func and isinstance(func, ast.Name) and func.id in ("isinstance", "issubclass")
                        and len(parent.args) > 1 and child is parent.args[1] and ctx.qualname(func) is None)
        if isinstance(parent, ast.Subscript):
            if child is not parent.slice:
                return True
            generic = ctx.qualname(parent.value)
            if generic is None and isinstance(parent.value, ast.Name):
                return parent.value.id not in _GENERICS
            return not (generic or "").startswith(("typing.", "typing_extensions.", "collections.abc."))
        if isinstance(parent, ast.arg):
            return child is not parent.annotation
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return child is not parent.returns
        if isinstance(parent, ast.AnnAssign):
            return child is not parent.annotation
        if isinstance(parent, ast.ClassDef):
            return child not in parent.bases
        if isinstance(parent, ast.ExceptHandler):
            return child is not parent.type
        if isinstance(parent, ast.Assign):  # an alias the resolver follows to its call site
            return not (child is node and parent.value is node and ctx.chain(node) is not None
                        and all(isinstance(t, ast.Name) for t in parent.targets))
        return True
    return True


def is_called(node: ast.AST, ctx) -> bool:
    """``node(...)`` or ``functools.partial(node, ...)``: where an API's argument restrictions apply."""
    parent = ctx.parent
    if not isinstance(parent, ast.Call):
        return False
    return parent.func is node or (
        bool(parent.args) and parent.args[0] is node and ctx.qualname(parent.func) == "functools.partial")


def status_of(node: ast.AST, ctx) -> Optional[Tuple[str, str, str, str]]:
    """(api, status, note, how decided) when the data knows the API *used* at ``node`` (see ``is_use``).

    With ``--official-lists`` the version's official table row wins, stale or not.  Memoised per
    node: ASC101, ASC102 and ASC103 all ask about every name.
    """
    cache = ctx.memo("api_status", lambda _: {})
    key = id(node)
    if key not in cache:
        api = api_of(node, ctx)
        row = ctx.data.api_status(api, ctx.config.official_lists) if api else None
        if row and (row[0] == "supported" or not is_use(node, ctx)):
            row = None
        if row and api.startswith("torch.Tensor.") and ctx.chain(node) is None:
            row = row if ctx.is_tensor(node.value) else None  # the costly question, asked last
        cache[key] = (api, *row) if row else None
    return cache[key]


class _ApiStatusRule(Rule):
    node_types = (ast.Name, ast.Attribute)
    source = _SOURCE
    wanted = ""

    def check(self, node, ctx) -> None:
        if isinstance(node.ctx, ast.Store) or isinstance(node.ctx, ast.Del):
            return
        found = status_of(node, ctx)
        if found and found[1] == self.wanted:
            api, _, note, how = found
            self.emit(where(node), ctx, api, note, how)


class _Span:
    """A report position that is not a node's start."""

    def __init__(self, line: int, col: int) -> None:
        self.lineno = self.end_lineno = line
        self.col_offset = col


def where(node: ast.AST):
    """Where to report: a method named on a later line than its receiver starts
    (``torch.sparse_coo_tensor(\n...\n).to_dense()``) is reported on the method's own line."""
    if isinstance(node, ast.Attribute) and node.end_lineno and node.end_lineno != node.lineno:
        return _Span(node.end_lineno, max(node.end_col_offset - len(node.attr), 0))
    return node


class UnsupportedApi(_ApiStatusRule):
    code = "ASC101"
    summary = "torch API not supported on NPU for the selected torch_npu version"
    wanted = "unsupported"
    why = (
        "The operator has no NPU implementation in that release: the call fails at run time or falls back "
        "to the CPU, which makes training slow or breaks it.  Decided from the ATen ops the API dispatches "
        "(traced with torch) and the NPU kernels of that version's wheel; an official \"unsupported\" entry "
        "those kernels and a later list contradict is stale and not reported (`--official-lists` reports it)."
    )
    example = "eigenvalues = torch.linalg.eig(a)"
    use_instead = "Use a supported equivalent, move that computation to the CPU explicitly, or pick a newer torch_npu."

    fires = [
        ("import torch\nx = torch.randn(4, 4)\nm = x.mode()\n", 3),
        ("import torch\ny = torch.randn(3, 3)\nz = torch.linalg.inv(y)\n", 3),
        ("import torch\ndef f(t: torch.Tensor):\n    return t.mode()\n", 3),
        ("import torch\ntorch._assert_async(flag)\n", 2),
        ("import functools\nimport torch.nn as nn\nm = functools.partial(nn.MultiLabelMarginLoss, reduction='sum')\n",
         3),
        ("import torch.nn as nn\nLoss = nn.MultiLabelMarginLoss\nloss = Loss()\n", 3),
    ]
    passes = [
        "import pandas as pd\nm = pd.DataFrame({'a': [1]}).mode()\n",
        "import statistics\nm = statistics.mode([1, 2, 2])\n",
        "import numpy as np\na = np.zeros(3)\nm = a.mode()\n",
        "import numpy as torch\nv = torch.linalg.eig(a)\n",
        "import torch\ndef f(t):\n    return t.mode()\n",
        "import torch\ndef eig(a):\n    return a\nv = eig(1)\n",
        "import torch.nn as nn\nok = isinstance(m, (nn.MultiLabelMarginLoss, nn.L1Loss))\n",
        "import torch.nn as nn\nclass Loss(nn.MultiLabelMarginLoss):\n    pass\n",
        "import torch.nn as nn\ndef f(loss: nn.MultiLabelMarginLoss) -> nn.MultiLabelMarginLoss:\n    return loss\n",
        "import torch.nn as nn\nLoss = nn.MultiLabelMarginLoss\n",
    ]

    def emit(self, node, ctx, api, note, how) -> None:
        reason = note or f"listed unsupported by the torch_npu {ctx.data.version} support table"
        ctx.report(node, self.code, f"{api} is not supported on NPU (torch_npu {ctx.data.version}: "
                   f"{in_english(reason)})",
                   api=api, tips=reason)


class UnknownApi(_ApiStatusRule):
    code = "ASC102"
    summary = "torch API whose NPU support is unknown for the selected version"
    wanted = "unknown"
    why = (
        "The evidence leaves NPU support open: the version's support list does not name the API and it "
        "could not be traced (or its name's ATen op has no NPU kernel in that wheel, or no wheel data "
        "exists); or every list says unsupported while the wheel has NPU kernels for every op it dispatches "
        "(`F.adaptive_max_pool2d`). It may fail or fall back to the CPU: check it on an NPU.  APIs that "
        "dispatch no ATen op at all (context managers, jit helpers, exception and type objects) are never "
        "reported."
    )
    example = "torch.hspmm(a, b)"
    use_instead = "Check the API on an NPU or with `ascend-analyse -m runtime_ops`; prefer an API the list supports."

    fires = [
        ("import torch\nv = torch.hspmm(a, b)\n", 2),
    ]
    passes = [
        "import torch.nn.functional as F\ny = F.relu(x)\n",
        "import torch\nw = torch.nn.Parameter(x)\n",
        "import torch\n@torch.jit.ignore\ndef f(x):\n    return x\n",
        "import torch\nif not torch.jit.is_scripting():\n    pass\n",
        "import torch\nwith torch.inference_mode():\n    pass\n",
        "import torch\nwith torch.set_grad_enabled(False):\n    pass\n",
    ]

    def emit(self, node, ctx, api, note, how) -> None:
        reason = note or "absent from the support data"
        ctx.report(node, self.code, f"NPU support of {api} is unknown for torch_npu {ctx.data.version} "
                   f"({in_english(reason)})",
                   api=api, tips=reason)


class RestrictedApi(_ApiStatusRule):
    code = "ASC103"
    summary = "torch API supported on NPU only with restrictions (dtypes, arguments)"
    wanted = "partial"
    why = (
        "The API runs on NPU but only for some dtypes or argument values; other inputs fail or lose precision. "
        "Reported on calls only (and `functools.partial(api, ...)`), never on type hints, isinstance or base "
        "classes, nor on APIs that dispatch no ATen op."
    )
    example = "d = torch.cdist(a, b)"
    use_instead = "Check the restriction in the message against your dtypes and arguments. Off by default: enable with `--extend-select ASC103`."

    fires = [("import torch\nd = torch.cdist(a, b)\n", 2)]
    passes = [
        "import torch\nx = torch.zeros(3)\n",
        "import torch\nf = torch.cdist\n",
        "import torch\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return x\n",
        "import torch.nn as nn\nclass Net(nn.Module):\n    pass\n",
    ]

    def check(self, node, ctx) -> None:
        if is_called(node, ctx):
            super().check(node, ctx)

    def emit(self, node, ctx, api, note, how) -> None:
        ctx.report(node, self.code, f"{api} is supported on NPU with restrictions (torch_npu {ctx.data.version}: "
                   f"{in_english(note)})",
                   api=api, tips=f"supported with restrictions: {note}")
