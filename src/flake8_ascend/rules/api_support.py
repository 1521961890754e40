"""ASC101-103: torch APIs the selected torch_npu version does not support, does not list, or restricts."""
from __future__ import annotations

import ast
from typing import Optional, Tuple

from ..calls import MISSING, argument
from ..detect.api_domain import CUDA_DOMAIN as _CUDA_DOMAIN
from ..detect.left_default import constant, left_at_default
from ..registry import Rule
from .cuda_extension import CPP_EXTENSION

_SOURCE = (
    "torch_npu support lists: the official PyTorch Analyse tool's per-version lists (1.11.0-2.8.0), "
    "Ascend/pytorch API docs tables (2.7.1, 2.9.0-2.13.0), and the ATen ops of the torch_npu wheels "
    "(rules_data/sources/PROVENANCE.md)"
)


# CJK ideographs and punctuation, kana, hangul, fullwidth forms: the official lists' notes are mostly Chinese.
# Code point ranges, not a regular expression: compiling that character class took 15 ms of every start.
_NOT_ENGLISH = ((0x3000, 0x30FF), (0x3400, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0xFF00, 0xFFEF))


def in_english(note: str) -> str:
    """``note`` for a flake8 message, which is English: a note in another language stays in the CSV Tips."""
    if note.isascii() or not any(low <= ord(c) <= high for c in note for low, high in _NOT_ENGLISH):
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
    """Whether the API at ``node`` runs here: False for type hints, isinstance/issubclass arguments and the other
    side of ``type(x) in (...)`` (yolov5 7.0.14 utils/torch_utils.py:204), except clauses, base classes and the
    binding of an alias (``pool = nn.MaxPool2d``: its call reports)."""
    child = node
    for parent in reversed(ctx.stack):
        if isinstance(parent, _PASS_THROUGH):
            child = parent
            continue
        if isinstance(parent, ast.Call):
            func = parent.func
            return not (child is not func and isinstance(func, ast.Name) and func.id in ("isinstance", "issubclass")
                        and len(parent.args) > 1 and child is parent.args[1] and ctx.qualname(func) is None)
        if isinstance(parent, ast.Compare):  # ``type(model) in (nn.DataParallel, ...)``: a type test
            return not (child is not parent.left and _type_of(parent.left, ctx) and len(parent.ops) == 1
                        and isinstance(parent.ops[0], (ast.In, ast.NotIn, ast.Is, ast.IsNot, ast.Eq, ast.NotEq)))
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


def _type_of(node: ast.AST, ctx) -> bool:
    """``type(x)``, the builtin."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type" and len(
        node.args) == 1 and ctx.qualname(node.func) is None


def is_called(node: ast.AST, ctx) -> bool:
    """``node(...)`` or ``functools.partial(node, ...)``: where an API's argument restrictions apply."""
    parent = ctx.parent
    if not isinstance(parent, ast.Call):
        return False
    return parent.func is node or (
        bool(parent.args) and parent.args[0] is node and ctx.qualname(parent.func) == "functools.partial")


_UNSET = object()


def _new_cache(_ctx) -> dict:
    return {}


def _may_name(node: ast.AST, ctx, status: str) -> bool:
    """The cheap test before ``status_of``: an attribute's API ends in its own name, and is a tensor method
    (``x.mode`` -> ``torch.Tensor.mode``) or a chain whose root the file imports (``torch.linalg.eig``); a bare
    name names an API only when some binding of the file imports it."""
    if node.__class__ is ast.Attribute:
        data = ctx.data
        return node.attr in data.method_tails.get(status, ()) or (
            node.attr in data.tails.get(status, ()) and ctx.model.may_resolve(node))
    return node.id in ctx.model.imported


def status_of(node: ast.AST, ctx, wanted: str) -> Optional[Tuple[str, str, str, str]]:
    """(api, status, note, how decided) when the data gives the API *used* at ``node`` (see ``is_use``) the
    status ``wanted``.

    With ``--official-lists`` the version's official table row wins, stale or not.  The row is memoised per
    node (ASC101, ASC102 and ASC103 all ask about every name); whether a method's receiver is a tensor, the
    costly question, is asked only for the status a running rule wants (``x.to(...)`` is ``partial``: only
    ASC103, off by default, asks about it).
    """
    cache = ctx.memo("api_status", _new_cache)
    key = id(node)
    found = cache.get(key, _UNSET)
    if found is _UNSET:
        api = api_of(node, ctx)
        row = ctx.data.api_status(api, ctx.config.official_lists) if api else None
        if row and (row[0] == "supported" or not is_use(node, ctx)):
            row = None
        found = cache[key] = (api, *row) if row else None
    if found is None or found[1] != wanted:
        return None
    if found[0].startswith("torch.Tensor.") and ctx.chain(node) is None and not ctx.is_tensor(node.value):
        return None  # a method of something that is not known to be a tensor
    return found


class _ApiStatusRule(Rule):
    node_types = (ast.Name, ast.Attribute)
    names = "outermost"  # a tensor method (``x.mode``) has no import chain: every outermost attribute
    source = _SOURCE
    wanted = ""

    def check(self, node, ctx) -> None:
        if not isinstance(node.ctx, ast.Load) or not _may_name(node, ctx, self.wanted):
            return
        found = status_of(node, ctx, self.wanted)
        if found:
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


_IDEOGRAM = (
    "import torch\n\ndef _logit_normal_sigmas(num_inference_steps, mu, std, device=None):\n"
    "    intervals = torch.linspace(0.0, 1.0, num_inference_steps + 1, dtype=torch.float64{device})\n"
    "    z = torch.special.ndtri(intervals)\n    sigmas = (1.0 - torch.special.expit(mu + std * z)).flip(0)\n"
    "    return sigmas[:-1].to(dtype=torch.float32, device=device)\n"
)


_RNN_DROPOUT = ("import torch.nn as nn\nclass Encoder(nn.Module):\n    def __init__(self, n, dropout_prob: float = 0.0):\n"
                "        self.rnn = nn.LSTM(n, n, 2, batch_first=True, dropout=dropout_prob)\n")

_CSR_FALLBACK = ("import torch\ndef rows(e: torch.Tensor):\n    try:\n        {body}\n    except {error}:\n"
                 "        {handler}\n    return x\n")

_HOST_RESIZE = ("import torch\nimport torch.nn.functional as F\ndef load(img, device):\n"
                "    t = torch.from_numpy(img){moved}\n    return F.interpolate(t, scale_factor=2, mode='bilinear')\n")

_SPARSE_BRANCHES = ("import torch\nfrom torch import Tensor\ndef pairwise_sim(a: Tensor, b: Tensor) -> Tensor:\n"
                    "    if a.is_sparse or b.is_sparse:\n        return {sparse}\n    else:\n        return {dense}\n")


class UnsupportedApi(_ApiStatusRule):
    code = "ASC101"
    summary = "torch API not supported on NPU for the selected torch_npu version"
    wanted = "unsupported"
    why = (
        "The operator has no NPU implementation in that release: the call fails at run time or falls back "
        "to the CPU, which makes training slow or breaks it.  Decided from the ATen ops the API dispatches "
        "(traced with torch) and the NPU kernels of that version's wheel; an official \"unsupported\" entry "
        "is not reported where that wheel has an NPU kernel for every ATen op the API dispatches (or for the op "
        "it is named after): the kernels win over a stale list (`--official-lists` reports the entry). "
        "`torch.utils.cpp_extension` builds host code and is ASC205's, which reads the sources it builds: "
        "`load` of C++ sources runs on an NPU machine, of `.cu` sources it is a CUDA extension. "
        "`x.to_dense()` returns a strided `x` itself, dispatching nothing: not reported on a tensor made by "
        "`torch.from_numpy` or in the branch an `is_sparse` test leaves dense. The styles of one tensor-parallel "
        "plan (`RowwiseParallel`, `PrepareModuleInput`, ...) are one finding per function or statement; "
        "`parallelize_module` is its own. Not reported: an op in the body of a `try` whose handler catches "
        "`NotImplementedError`, what torch raises for an op with no kernel on the device: the code has its own "
        "fallback. Nor is an op on the samples the loader's workers build on the host: in a "
        "dataset's or collator's methods, a datasets folder, or a function only they call."
    )
    example = "eigenvalues = torch.linalg.eig(a)"
    use_instead = "Use a supported equivalent, move that computation to the CPU explicitly, or pick a newer torch_npu."

    def check(self, node, ctx) -> None:
        if not isinstance(node.ctx, ast.Load) or not _may_name(node, ctx, self.wanted):
            return
        found = status_of(node, ctx, self.wanted)
        if found and not found[0].startswith(CPP_EXTENSION) and not _operand_on_host(node, ctx) and not (
                found[0] == _TO_DENSE and _strided_receiver(node, ctx)) \
                and not _missing_kernel_handled(node, ctx):
            # not when the op runs on the CPU already (diffusers pipeline_ideogram4.py:90: ndtri of a CPU linspace)
            api, _, note, how = found
            self.emit(where(node), ctx, api, note, how)

    fires = [
        ("import torch\nx = torch.randn(4, 4)\nm = x.mode()\n", 3),
        ("import torch\ny = torch.randn(3, 3)\nz = torch.linalg.inv(y)\n", 3),
        ("import torch\ndef f(t: torch.Tensor):\n    return t.mode()\n", 3),
        # near miss of the metric's option below: the instance of a tensor subclass is a tensor
        ("import torch\nclass Labels(torch.Tensor):\n    def top(self):\n        return self.mode()\n", 4),
        ("import torch\ntorch._assert_async(flag)\n", 2),
        ("import functools\nimport torch.nn as nn\nm = functools.partial(nn.MultiLabelMarginLoss, reduction='sum')\n",
         3),
        ("import torch.nn as nn\nLoss = nn.MultiLabelMarginLoss\nloss = Loss()\n", 3),
        # near misses of a type test: the class built (through the re-export), and compared with something else
        ("from torch import nn\ndef wrap(model):\n    return nn.parallel.DataParallel(model)\n", 3),
        ("from torch import nn\ndef pick(kind):\n    return kind in (nn.parallel.DataParallel, None)\n", 3),
        # near miss of the torch.fft.fftshift / std_mean passes below: aten::_linalg_solve_ex has no NPU kernel
        ("import torch\nrhos_p = torch.linalg.solve(R[:-1, :-1], b[:-1]).to(device).to(x.dtype)\n", 2),
        # near miss of a histogram of host data: the input stays on the device
        ("import torch\ndef hist(theta):\n    return torch.histogram(input=theta, bins=8)\n", 3),
        # near miss of diffusers pipeline_ideogram4.py:90 below: the schedule is built on the device
        (_IDEOGRAM.format(device=", device=device"), 5),
        (_IDEOGRAM.format(device=").to(device"), 5),
        # near misses of a strided receiver: the branch the sparse test takes; a sparse tensor made from numpy
        (_SPARSE_BRANCHES.format(sparse="(a * b).sum(dim=-1).to_dense()", dense="(a * b).sum(dim=-1)"), 5),
        ("import torch\ndef f(a, device):\n    return torch.from_numpy(a).to(device).to_sparse().float().to_dense()\n", 3),
        # near misses of a handled missing kernel: the op in the handler, a handler for another error
        (_CSR_FALLBACK.format(body="x = e.float()", error="NotImplementedError", handler="x = e.to_sparse_csr()"), 6),
        (_CSR_FALLBACK.format(body="x = e.to_sparse_csr()", error="ValueError", handler="x = e"), 4),
    ]
    passes = [
        "import pandas as pd\nm = pd.DataFrame({'a': [1]}).mode()\n",
        "import statistics\nm = statistics.mode([1, 2, 2])\n",
        "import numpy as np\na = np.zeros(3)\nm = a.mode()\n",
        "import numpy as torch\nv = torch.linalg.eig(a)\n",
        "import torch\ndef f(t):\n    return t.mode()\n",
        # the input passed by keyword, moved to the host (anomalib 2.7.0 models/video/ai_vad/features.py:284)
        "import torch\ndef hist(theta):\n    return torch.histogram(input=theta.cpu(), bins=8)\n",
        # mmpretrain 1.2.0 evaluation/metrics/retrieval.py:290: a metric's option, read off the instance
        ("import torch\nclass RetrievalAveragePrecision:\n    def __init__(self, mode='IR'):\n        self.mode = mode\n"
         "    def process(self, pred_score):\n        return calculate(pred_score.unsqueeze(0), mode=self.mode)\n"),
        "import torch\ndef eig(a):\n    return a\nv = eig(1)\n",
        "import torch.nn as nn\nok = isinstance(m, (nn.MultiLabelMarginLoss, nn.L1Loss))\n",
        # a type test (yolov5 7.0.14 utils/torch_utils.py:204, with the re-exported DataParallel)
        "from torch import nn\ndef is_parallel(model):\n"
        "    return type(model) in (nn.parallel.DataParallel, nn.parallel.DistributedDataParallel)\n",
        "import torch.nn as nn\nclass Loss(nn.MultiLabelMarginLoss):\n    pass\n",
        "import torch.nn as nn\ndef f(loss: nn.MultiLabelMarginLoss) -> nn.MultiLabelMarginLoss:\n    return loss\n",
        "import torch.nn as nn\nLoss = nn.MultiLabelMarginLoss\n",
        # a build utility, not an op: ASC205 decides from its sources (peft 0.17.1 tuners/boft/layer.py:87)
        "from torch.utils.cpp_extension import load\nfbd_cuda = load(name='fbd_cuda', sources=['fbd_cuda.cpp'])\n",
        # listed unsupported, but a decorator that only keeps torch.compile out (kernel-free; diffusers hooks/)
        "import torch\n@torch.compiler.disable\ndef step(x):\n    return x\n",
        # listed unsupported, but every ATen op they dispatch has an NPU kernel (index, lt, arange, unbind;
        # fft_fftfreq is composite over arange): diffusers transformer_cogview4.py, hooks/sea_cache.py
        "import torch\nhidden_states_unpad = torch.nn.utils.rnn.unpad_sequence(hidden_states, lengths=lengths)\n",
        "import torch\nfrequencies = torch.fft.fftfreq(hidden_states.shape[axis], device=hidden_states.device)\n",
        # the CPU trace shows _weight_norm_interface (no NPU kernel), but only inside torch._weight_norm, a
        # composite op torch_npu has its own kernel for (diffusers autoencoder_kl_kvae_audio.py)
        "import torch.nn as nn\nfrom torch.nn.utils.parametrizations import weight_norm\n"
        "conv1 = weight_norm(nn.Conv1d(num_channels, encoder_dim, kernel_size=7, padding=3))\n",
        # diffusers pipeline_ideogram4.py:90: ndtri of a linspace built without a device runs on the CPU
        _IDEOGRAM.format(device=""),
        # to_dense of a strided tensor returns it, dispatching nothing: the branch an is_sparse test leaves dense,
        # a tensor from numpy (sentence-transformers 5.x util/similarity.py:98, :157)
        _SPARSE_BRANCHES.format(sparse="(a * b).sum(dim=-1)", dense="(a * b).sum(dim=-1).to_dense()"),
        "import torch\ndef f(dist, a):\n    return torch.from_numpy(-dist).float().to(a.device).to_dense()\n",
        "import torch\ndef f(x: torch.Tensor):\n    if not x.is_sparse:\n        return x.to_dense()\n",
        # a try whose handler catches what a missing kernel raises and redoes the op on the CPU (sentence-transformers
        # 5.x sparse_encoder/model.py:1203)
        _CSR_FALLBACK.format(body="x = e.to_sparse_csr()", error="NotImplementedError",
                             handler="x = e.cpu().to_sparse_csr()"),
    ]

    def emit(self, node, ctx, api, note, how) -> None:
        reason = note or f"listed unsupported by the torch_npu {ctx.data.version} support table"
        ctx.report(node, self.code, f"{api} is not supported on NPU (torch_npu {ctx.data.version}: "
                   f"{in_english(reason)})",
                   api=api, tips=reason, family=_TP_PLAN if _parallel_style(api) else "")


# The styles of a tensor-parallel plan (``{"wq": ColwiseParallel(), "wo": RowwiseParallel(), "attn":
# PrepareModuleInput(...)}``) are one problem, the plan: a function's or a statement's first style names the rest.
# ``parallelize_module``, which applies the plan, stays a problem of its own.
_TP_PLAN = "tensor-parallel plan"


def _parallel_style(api: str) -> bool:
    """A ``ParallelStyle`` class of ``torch.distributed.tensor.parallel`` (its name is capitalised)."""
    return api.startswith("torch.distributed.tensor.parallel.") and api.rsplit(".", 1)[-1][:1].isupper()


def _missing_kernel_handled(node: ast.AST, ctx) -> bool:
    """In the body of a ``try`` whose handler catches ``NotImplementedError``, what torch raises for an op with no
    kernel on the device: the code has its own fallback (sentence-transformers 5.x sparse_encoder/model.py:1203,
    ``except NotImplementedError: embeddings.cpu().to_sparse_csr()``)."""
    for parent, child in ctx.lineage(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(parent, ast.Try) and any(child is s for s in parent.body) and any(
                _catches(handler.type, "NotImplementedError") for handler in parent.handlers):
            return True
    return False


def _catches(kind: Optional[ast.AST], name: str) -> bool:
    """``except name`` or ``except (..., name, ...)``."""
    kinds = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return any(isinstance(k, ast.Name) and k.id == name for k in kinds)


# torch 2.13 ``Tensor.to_dense`` returns ``self`` for a strided tensor (traced on CPU: no ATen op); only a sparse
# receiver dispatches ``aten::_to_dense``, the op with no NPU kernel
_TO_DENSE = "torch.Tensor.to_dense"
_KEEPS_LAYOUT = frozenset(("float", "double", "half", "bfloat16", "to", "cpu", "contiguous", "clone", "detach"))


def _strided_receiver(node: ast.AST, ctx) -> bool:
    """``x.to_dense()`` on a tensor known to be strided: one ``torch.from_numpy`` made (through casts and moves;
    sentence-transformers 5.x util/similarity.py:157), or in the branch an ``is_sparse`` test leaves dense
    (``if a.is_sparse or b.is_sparse: ... else: <here>``, ``if not x.is_sparse: <here>``; similarity.py:98), where
    the call only keeps the layouts of both branches alike."""
    receiver = node.value
    while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) \
            and receiver.func.attr in _KEEPS_LAYOUT:
        receiver = receiver.func.value
    if isinstance(receiver, ast.Call) and ctx.qualname(receiver.func) == "torch.from_numpy":
        return True
    for parent, child in ctx.lineage(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(parent, ast.If) and (
                (any(child is s for s in parent.orelse) and _tests_sparse(parent.test, ast.Or, False))
                or (any(child is s for s in parent.body) and _tests_sparse(parent.test, ast.And, True))):
            return True
    return False


def _tests_sparse(test: ast.AST, joined: type, negated: bool) -> bool:
    """``x.is_sparse`` (``not x.is_sparse`` when ``negated``), alone or every part of an ``or`` (``and``)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, joined) else [test]
    for part in parts:
        if negated:
            if not (isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not)):
                return False
            part = part.operand
        if not (isinstance(part, ast.Attribute) and part.attr == "is_sparse"):
            return False
    return True


class UnknownApi(_ApiStatusRule):
    code = "ASC102"
    summary = "torch API whose NPU support is unknown for the selected version"
    wanted = "unknown"
    why = (
        "The evidence leaves NPU support open: the version's support list does not name the API and it "
        "could not be traced (or its name's ATen op has no NPU kernel in that wheel, or no wheel data "
        "exists; or every list says unsupported and only a generic probe of the API, one call without "
        "arguments, ran on that wheel's kernels, for an API that makes a new kind of tensor: `x.to_sparse()`, "
        "whose sparse result later ops meet). It may fail or fall back to the CPU: check it "
        "on an NPU.  APIs that dispatch no ATen op at "
        "all (context managers, jit helpers, exception and type objects) are never reported, nor are those "
        "whose every ATen op has an NPU kernel in that wheel, whatever the lists say (`torch.std_mean`, "
        "`F.adaptive_max_pool2d`: listed unsupported, kernels in every wheel)."
    )
    example = "torch.hspmm(a, b)"
    use_instead = "Check the API on an NPU or with `ascend-analyse -m runtime_ops`; prefer an API the list supports."

    fires = [
        # not listed, not traced, and aten::hspmm has no NPU kernel (the near miss of the passes below)
        ("import torch\nv = torch.hspmm(a, b)\n", 2),
        # listed unsupported; _to_sparse has a kernel, but only the generic probe traced it (whisper model.py)
        ("import torch\nall_heads = torch.zeros(n_layer, n_head, dtype=torch.bool)\n"
         "self.register_buffer(\"alignment_heads\", all_heads.to_sparse(), persistent=False)\n", 3),
    ]
    passes = [
        "import torch.nn.functional as F\ny = F.relu(x)\n",
        "import torch\nw = torch.nn.Parameter(x)\n",
        "import torch\n@torch.jit.ignore\ndef f(x):\n    return x\n",
        "import torch\nif not torch.jit.is_scripting():\n    pass\n",
        "import torch\nwith torch.inference_mode():\n    pass\n",
        "import torch\nwith torch.set_grad_enabled(False):\n    pass\n",
        # dispatch no ATen op of their own (traced): tensorboard's writer, the jit tracer
        "from torch.utils.tensorboard import SummaryWriter\nwriter = SummaryWriter(log_dir)\n",
        "import torch\ntraced = torch.jit.trace_module(model, {'forward': (x,)})\n",
        # a dynamo helper: its traced sample dispatches nothing (unsloth 2026.10.9 utils/attention_dispatch.py:655)
        "import torch\nsizes = torch.compiler.assume_constant_result(_sizes)\n",
        # listed unsupported, but the wheel has NPU kernels for every ATen op they dispatch (std_mean.correction;
        # fft_fftshift, over roll): whisper timing.py, diffusers utils/torch_utils.py, mmdet necks/bfp.py
        "import torch\nstd, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)\n",
        "from torch.fft import fftshift\nx_freq = fftshift(x_freq, dim=(-2, -1))\n",
        "import torch.nn.functional as F\ngathered = F.adaptive_max_pool2d(inputs[i], output_size=gather_size)\n",
        # only the generic probe traced it, but its ops all return dense tensors with NPU kernels (s3prl 0.4.17
        # nn/vq_apc.py:78, pytorch-tabular heads/blocks.py:128)
        "import torch.nn.functional as F\nx = F.gumbel_softmax(logits, tau=self.tau, hard=True)\n",
    ]

    def emit(self, node, ctx, api, note, how) -> None:
        reason = note or "absent from the support data"
        ctx.report(node, self.code, f"NPU support of {api} is unknown for torch_npu {ctx.data.version} "
                   f"({in_english(reason)})",
                   api=api, tips=reason)


class RestrictedApi(_ApiStatusRule):
    code = "ASC103"
    summary = "torch API call that breaks an NPU restriction of its dtypes or arguments"
    wanted = "partial"
    why = (
        "The API runs on NPU but only for some dtypes or argument values; other inputs fail or lose precision. "
        "The restriction notes of the support tables are parsed into facts when the data is built (dtype "
        "lists per parameter, arguments not supported or only with some values, rank limits; "
        "rules_data/README.md) and a call is reported only where it plausibly breaks one: a dtype known at "
        "the call (its `dtype=` argument, an explicit cast of its tensor such as `x.double()`) outside the "
        "list, or a restricted argument in use (`F.interpolate(x, scale_factor=2)`, `topk(..., sorted=False)`, "
        "`x.to(memory_format=torch.channels_last)`); an argument left at its off value (`dropout=0.0`) or that "
        "torch does not hand to the kernel (`scale_factor` with `recompute_scale_factor=True` or `mode='area'`: torch "
        "computes the output size and the kernel gets no scale; the `dropout` of a "
        "one-layer LSTM/GRU/RNN, which acts only between stacked layers) is not in use. So is a value that "
        "crosses a function boundary: a parameter (or the `self.x` stored from one) that defaults to off, or a "
        "`num_layers` that defaults to 1, where no call in the package passes another value (a class the package "
        "only hands on keeps its default); a public, registered or subclassed class, a caller that spreads "
        "`**kwargs` and a `None` default (a placeholder the configuration fills) keep the finding. The LSTM, GRU "
        "and RNN of one function that break one restriction (alternatives of a configured cell type) are one "
        "finding. Nor is a call whose tensor lives on the host (`x.cpu()`, `torch.from_numpy(a)`: no NPU kernel "
        "runs it), an argument passed at torch's own default (`nn.GELU(approximate='none')` is `nn.GELU()`) or a "
        "`dtype=` that is the operand's own (`torch.sum(q, dtype=q.dtype)` casts nothing), or a call on the samples "
        "the loader's workers build (a dataset's or collator's methods, a datasets folder, a function only they call). "
        "bf16 counts as listed where torch_npu's autocast runs "
        "the op's kernel in bf16. Notes about hardware models or compatibility switches concern no call. "
        "The message states the fact in English; the CSV Tips keep the original note."
    )
    example = "y = F.interpolate(x, scale_factor=2, mode=\"nearest\")"
    use_instead = ("Pass a supported dtype or argument value (here `size=` instead of `scale_factor=`). Off by default: "
                   "enable with `--extend-select ASC103`.")

    fires = [
        ("import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2, mode='nearest')\n", 2),
        # near misses of a parameter left at its off default: outside a package its callers are not known; a
        # caller that turns it on, one that spreads ``**kwargs`` (doctr 0.12.0 sar/pytorch.py ``SAR(feat_extractor,
        # cfg=_cfg, **kwargs)``), a registered or subclassed class; the scale handed on; a None default that the
        # configuration must set (mmseg 1.2.2 multimodal_encoder_decoder.py:82-132 asserts it is given)
        (_RNN_DROPOUT, 4),
        (_RNN_DROPOUT + "enc = Encoder(8, dropout_prob=0.1)\n", 4),
        (_RNN_DROPOUT + "def build(n, **kwargs):\n    return Encoder(n, **kwargs)\n", 4),
        (_RNN_DROPOUT.replace("class Encoder", "@MODELS.register_module()\nclass Encoder"), 5),
        (_RNN_DROPOUT + "class BiEncoder(Encoder):\n    pass\n", 4),
        ("from functools import partial\n" + _RNN_DROPOUT + "make = partial(Encoder, dropout_prob=0.1)\n", 5),
        ("import torch.nn as nn\nclass Enc(nn.Module):\n    def __init__(self, n, p=0.0):\n        self.p = p\n"
         "        self.rnn = nn.GRU(n, n, 2, dropout=self.p)\n\n    def train(self):\n        self.p = 0.2\n", 5),
        # stacked layers whose number the file does not show: the dropout may act (espnet 202511
        # nets/pytorch_backend/rnn/encoders.py:112, ``elayers`` from the configuration)
        ("import torch\ndef rnn(idim, cdim, elayers, dropout):\n"
         "    return torch.nn.LSTM(idim, cdim, elayers, batch_first=True, dropout=dropout)\n", 3),
        ("import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2, recompute_scale_factor=False)\n", 2),
        # near miss of area mode: bicubic hands the scale to its upsample kernel (mmagic 1.2.0
        # basicvsr_plusplus_net.py:307)
        ("import torch.nn.functional as F\nlqs_downsample = F.interpolate(\n    lqs.view(-1, c, h, w), scale_factor=0.25,"
         " mode='bicubic').view(n, t, c, h // 4, w // 4)\n", 2),
        ("import torch.nn.functional as F\nclass Seg:\n    def __init__(self, encoder_resolution: float = None):\n"
         "        self.encoder_resolution = encoder_resolution\n\n    def encode(self, inputs):\n"
         "        return F.interpolate(inputs, scale_factor=self.encoder_resolution, mode='bilinear')\n", 7),
        ("import torch\nv, i = torch.topk(x, 5, sorted=False)\n", 2),
        ("import torch\nx = torch.randn(2, 3)\ny = x.to(memory_format=torch.channels_last)\n", 3),
        ("import torch\nv = torch.sum(x, dtype=torch.float32)\n", 2),
        # a low-precision dtype known at the call, outside a list that names another one
        ("import torch\nx = torch.randn(4)\nr = x.bfloat16().repeat_interleave(2)\n", 3),
        ("import torch.nn.functional as F\ny = F.pad(x.bfloat16(), (1, 1), mode='reflect')\n", 2),
        # near misses of the passes below: a comparison summed as another tensor's dtype (espnet 202511
        # nets/pytorch_backend/lm/default.py:132), a host tensor moved to the device
        ("import torch\ndef count(x, loss_batch):\n    return torch.sum(x[:, 0] != 0, dtype=loss_batch.dtype)\n", 3),
        (_HOST_RESIZE.format(moved=".to(device)"), 5),
    ]
    passes = [
        "import torch\nx = torch.zeros(3)\n",
        "import torch\nf = torch.cdist\n",
        "import torch\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return x\n",
        "import torch.nn as nn\nclass Net(nn.Module):\n    pass\n",
        # notes read literally: "self: fp32 only" on a view and on item(), a dtype list of the input
        "import torch\nx = torch.randn(4)\ny = x.detach()\nz = x.new_zeros(3)\nv = x.sum().item()\n",
        "import torch.nn as nn\nfc = nn.Linear(4, 4)\nconv = nn.Conv2d(3, 8, 3)\n",
        "import torch.nn.functional as F\ny = F.interpolate(x, size=(8, 8), mode='bilinear')\n",
        # a restricted argument left at its off value, or not handed to the kernel (doctr 0.12.0
        # vision_transformer/pytorch.py:53: torch computes the size, the kernel gets no scale)
        "import torch.nn as nn\nrnn = nn.LSTM(8, 16, 2, dropout=0.0)\n",
        # one layer: torch applies an RNN's dropout only between stacked layers (funasr 1.4.16
        # contextual_paraformer/model.py:77, eend/encoder_decoder_attractor.py:19)
        "import torch\ndef build(inner_dim, **kwargs):\n    rate = kwargs.get('bias_encoder_dropout_rate', 0.0)\n"
        "    return torch.nn.LSTM(inner_dim, inner_dim, 1, batch_first=True, dropout=rate)\n",
        "import torch.nn as nn\nclass Attractor(nn.Module):\n    def __init__(self, n_units, encoder_dropout=0.1):\n"
        "        super().__init__()\n        self.encoder = nn.GRU(n_units, n_units, batch_first=True, dropout=encoder_dropout)\n",
        "import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2, recompute_scale_factor=True)\n",
        # area mode pools to the size torch computes, even with recompute_scale_factor=False (mmagic 1.2.0
        # real_basicvsr.py:106)
        "import torch.nn.functional as F\ngt_clean = F.interpolate(\n    gt_clean,\n    scale_factor=0.25,\n"
        "    mode='area',\n    recompute_scale_factor=False)\n",
        "import torch\nv, i = torch.topk(x, 5)\nw = x.to(memory_format=torch.contiguous_format)\n",
        # yolov5 7.0 utils/dataloaders.py:925: a collate_fn runs in the DataLoader workers, on the host
        "import torch.nn.functional as F\nclass LoadImages:\n    @staticmethod\n    def collate_fn4(batch):\n"
        "        im, label = zip(*batch)\n        return F.interpolate(im[0].float(), scale_factor=2.0, mode='bilinear')\n",
        # a hardware note (Atlas inference cards) and a compatibility switch concern no argument
        "import torch\nx = torch.randn(2)\ny = x.to('npu:1')\n",
        "import torch.nn as nn\nnorm = nn.LayerNorm(8)\n",
        # bf16: the note lists fp16 and fp32 only, but torch_npu's autocast runs addmm in bf16
        "import torch\nimport torch.nn as nn\nfc = nn.Linear(4, 4, dtype=torch.bfloat16)\n",
        # fp64 is ASC508's; "fp32 only" lists and integer dtypes (diffusers marigold_image_processing.py:524,
        # pipeline_rfd4_proteina.py:231)
        "import torch\nimport torch.nn as nn\nfc = nn.Linear(4, 4, dtype=torch.float64)\n",
        "import torch\nx = torch.randn(4)\nv = x.half().item()\n",
        "import torch\nimg = torch.rand(4)\nimg = (img * 255).to(dtype=torch.uint8, device='cpu').numpy()\n",
        "import torch\n_, ids = torch.unique(c['molecule_iid'].long(), return_inverse=True)\n",
        # the operand's own dtype casts nothing (mmpretrain 1.2.0 models/losses/swav_loss.py:49); torch's default
        # passed by name (transformers 4.57.6 models/mpt/modeling_mpt.py:148); an image resized on the host
        "import torch\ndef norm(Q):\n    return torch.sum(Q, dim=1, keepdim=True, dtype=Q.dtype)\n",
        "import torch.nn as nn\nact = nn.GELU(approximate=\"none\")\n",
        _HOST_RESIZE.format(moved=""),
        "import torch.nn.functional as F\ndef shrink(x):\n    return F.interpolate(x.cpu(), scale_factor=0.5)\n",
        # F.pad's constant mode lists bf16 (its reflect list does not)
        "import torch.nn.functional as F\ny = F.pad(x.bfloat16(), (1, 1), mode='constant')\n",
    ]

    def check(self, node, ctx) -> None:
        if is_called(node, ctx):
            super().check(node, ctx)

    def emit(self, node, ctx, api, note, how) -> None:
        facts = ctx.data.restrictions.get(api)
        broken = restriction_broken(ctx.parent, node, api, facts, ctx) if facts and not _operand_on_host(
            node, ctx) else None
        if broken or ctx.config.official_lists:  # the official lists' audit reports every restricted call
            ctx.report(node, self.code, f"{api} is supported on NPU with restrictions (torch_npu {ctx.data.version}: "
                       f"{broken or in_english(note)})", api=api, tips=f"supported with restrictions: {note}",
                       family=f"{_RECURRENT}: {broken}" if broken and api in _BETWEEN_LAYERS else "")


def _operand_on_host(node: ast.AST, ctx) -> bool:
    """The API is called on a tensor that lives on the host: the receiver of a method, or the first argument of
    a function (``torch.special.ndtri(torch.linspace(0, 1, n))`` in a function: nothing NPU runs it)."""
    call = ctx.parent
    if not (isinstance(call, ast.Call) and call.func is node):
        return False
    operand = _operand(call, node, ctx)
    if operand is None:
        return False
    moved = isinstance(operand, ast.Call) and isinstance(operand.func, ast.Attribute) and operand.func.attr == "cpu"
    return moved or ctx.values.on_host(operand)  # ``x.cpu()`` handed to a torch function is a host tensor


def _operand(call: ast.Call, node: ast.AST, ctx) -> Optional[ast.AST]:
    """The tensor an API is called on: a method's receiver, else a function's first argument or its ``input=``
    (``torch.histogram(input=theta.cpu(), ...)``, anomalib 2.7.0 models/video/ai_vad/features.py:284)."""
    if isinstance(node, ast.Attribute) and ctx.chain(node) is None:
        return node.value
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "input"), None)


_DTYPES = {  # torch dtype attribute -> the tables' spelling
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "double": "fp64", "int8": "int8", "uint8": "uint8", "int16": "int16", "short": "int16", "int32": "int32",
    "int": "int32", "int64": "int64", "long": "int64", "bool": "bool", "complex64": "complex64",
    "cfloat": "complex64", "complex128": "complex128", "cdouble": "complex128",
}
# The dtypes a dtype fact is checked for: fp16/bf16 support differs op by op on NPU, and a list that names one
# of them shows the op was checked in low precision.  A list naming only fp32 ("self仅支持fp32" on detach,
# item, numpy) records the dtype tested, not an exclusion; integer and bool dtypes outside a list were found
# to work on the tuning corpora (uint8 images to numpy, int64 ids to unique); fp64/complex are ASC508's.
_LOW_PRECISION = frozenset({"fp16", "bf16"})
_CASTS = {"half": "fp16", "float": "fp32", "double": "fp64", "bfloat16": "bf16", "long": "int64", "int": "int32",
          "short": "int16", "bool": "bool", "byte": "uint8", "char": "int8"}  # x.half() ...


def _dtype_constant(node, ctx) -> Optional[str]:
    """``torch.float64`` -> ``fp64``."""
    name = ctx.chain(node) if isinstance(node, ast.Attribute) else None
    return _DTYPES.get(name[6:]) if name and name.startswith("torch.") else None


def _cast_dtype(expr, ctx) -> Optional[str]:
    """The dtype an expression is explicitly cast to or built with: ``x.double()``, ``x.to(torch.int8)``,
    ``x.type(torch.half)``, ``torch.zeros(3, dtype=torch.int64)``."""
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    dtype = next((k.value for k in expr.keywords if k.arg == "dtype"), None)
    if isinstance(func, ast.Attribute) and ctx.chain(func) is None:
        if func.attr in _CASTS and not expr.args and not expr.keywords:
            return _CASTS[func.attr]
        if func.attr in ("to", "type") and dtype is None and expr.args:
            dtype = expr.args[0]
    return _dtype_constant(dtype, ctx) if dtype is not None else None


def _literal(node, ctx):
    """(True, value) for a literal argument (``False``, ``'reflect'``, ``-1``, ``torch.channels_last``)."""
    found = constant(node)
    if found[0]:
        return found
    chain = ctx.chain(node) if isinstance(node, ast.Attribute) else None
    return (True, chain) if chain else (False, None)


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b  # True is not 1


# An argument torch does not hand to the kernel when another one is set (torch 2.13.0 torch/nn/functional.py,
# interpolate: with recompute_scale_factor=True the output size is computed from scale_factor, which is then passed on
# as None; mode="area" takes that path whatever recompute_scale_factor says and runs adaptive_avg_pool, no upsample).
_NOT_PASSED_ON = {("torch.nn.functional.interpolate", "scale_factor"): (("recompute_scale_factor", True),
                                                                       ("mode", "area"))}

# torch's own default of a restricted argument (torch 2.13.0 signatures): passing it is the call without it, which the
# restriction does not concern (``nn.GELU(approximate="none")`` is ``nn.GELU()``, the erf form every model uses).
_TORCH_DEFAULTS = {("torch.nn.GELU", "approximate"): "none", ("torch.nn.functional.gelu", "approximate"): "none"}


# Recurrent layers apply ``dropout`` only between stacked layers (torch 2.13.0 torch/nn/modules/rnn.py, RNNBase: a
# dropout layer "on the outputs of each RNN layer except the last layer"; with one layer torch warns and drops it):
# with ``num_layers`` (the third positional argument) left out or 1, a dropout value reaches no kernel.
_BETWEEN_LAYERS = frozenset(("torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN"))
# They share one base class (RNNBase) and its arguments: an LSTM and a GRU that one function builds as alternatives
# of a configured cell type, with the same ``dropout``, are one problem, fixed in the one value (espnet 202511
# nets/pytorch_backend/rnn/encoders.py:112 and :121, nemo collections/audio/modules/masking.py:93 and :102).
_RECURRENT = "recurrent layer"


def _one_layer(call: ast.Call, ctx) -> bool:
    """``nn.LSTM(n, n, 1, dropout=p)`` or ``nn.GRU(n, n, dropout=p)``: one layer, whatever ``p`` is; also
    ``num_layers=num_layers`` where that parameter is left at a default of 1 (``left_at_default``).
    ``**kwargs`` may pass more layers."""
    layers = argument(call, "num_layers", 2)
    if layers is MISSING:
        return True
    return layers is not None and (_literal(layers, ctx) == (True, 1) or left_at_default(ctx, layers) == (True, 1))


def _off(value) -> bool:
    """A literal an "argument not supported" restriction is not exercised by: the feature's off value
    (``dropout=0.0``, ``scale_factor=None``)."""
    return value is None or (type(value) in (int, float, bool) and value == 0)


def _off_by_default(node: ast.AST, ctx) -> bool:
    """A parameter (or the ``self.x`` stored from one) that defaults to the off value, where the package shows no
    call that passes another (``left_at_default``: neuralforecast 3.0.2 models/gru.py ``encoder_dropout=0.0``,
    a model class the package only hands on). A user's configuration may still turn it on, but where the project
    never does, the restricted argument is not in use as shipped. A public interface (``project.public``), a
    registered or subclassed class, a caller that spreads ``**kwargs`` or passes a value the file does not show
    keep the finding, and so does a ``None`` default: a placeholder that the caller or the configuration must fill
    (``F.interpolate`` with neither ``size`` nor ``scale_factor`` fails)."""
    known, value = left_at_default(ctx, node)
    return known and value is not None and _off(value)


def _argument_broken(fact: dict, keywords: dict, ctx) -> Optional[str]:
    arg = fact["arg"]
    node = keywords.get(arg)
    if node is None:
        return f"{arg} must be set to {fact['value']!r}" if fact["rule"] == "set_to" and None not in keywords else None
    known, value = _literal(node, ctx)
    rule = fact["rule"]
    if rule == "absent" and not (known and _off(value)) and not _off_by_default(node, ctx):
        return f"the {arg} argument is not supported"
    if not known:
        return None
    if rule == "not" and _same(value, fact["value"]):
        return f"{arg}={value!r} is not supported"
    if rule == "in" and value not in fact["values"]:
        return f"{arg} is supported only as {' or '.join(map(str, fact['values']))}, here {value}"
    if rule == "none_if" and value is not None:
        cond = keywords.get(fact["if"])
        if cond is not None and _literal(cond, ctx) == (True, True):
            return f"{arg} must be None when {fact['if']}=True"
    if rule == "gt" and isinstance(value, (int, float)) and not isinstance(value, bool) and value <= fact["value"]:
        return f"{arg} must be greater than {fact['value']}, here {value}"
    if rule == "set_to" and value != fact["value"]:
        return f"{arg} must be set to {fact['value']!r}, here {value!r}"
    if rule == "ge0" and isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return f"{arg} must not be negative, here {value}"
    return None


def _operands(call: ast.Call, node, api: str, params, ctx) -> list:
    """The expressions a dtype fact's parameters name at this call: the receiver of a method (``self``), the
    first argument of a function, named keywords, the call's own ``dtype=`` (also a module's data dtype)."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    method = api.startswith("torch.Tensor.") and isinstance(node, ast.Attribute) and ctx.chain(node) is None
    module = api.startswith("torch.nn.") and api.rsplit(".", 1)[-1][:1].isupper()
    found = []
    for index, param in enumerate(params):
        if param == "dtype" or module:
            found.append(("dtype", keywords.get("dtype")))
        elif param in keywords:
            found.append((param, keywords[param]))
        elif method and param in ("self", "input") and index == 0:
            found.append((param, node.value))
        elif not method and len(call.args) > index:
            found.append((param, call.args[index]))
    return found


def _own_dtype(call: ast.Call, node, value: ast.AST, ctx) -> bool:
    """``torch.sum(q, dtype=q.dtype)``: the dtype of the operand itself, no cast (mmpretrain 1.2.0
    models/losses/swav_loss.py:49), which a restriction of the ``dtype`` argument does not concern."""
    if not (isinstance(value, ast.Attribute) and value.attr == "dtype"):
        return False
    operand = _operand(call, node, ctx)
    return operand is not None and ast.dump(operand) == ast.dump(value.value)


def restriction_broken(call: ast.Call, node, api: str, facts: dict, ctx) -> Optional[str]:
    """The restriction fact this call plausibly breaks, in English, or None (see ASC103's docs)."""
    keywords = {k.arg: k.value for k in call.keywords}  # key None: ``**kwargs`` may pass anything
    for fact in facts.get("args", ()):
        if any(arg in keywords and _literal(keywords[arg], ctx) == (True, value)
               for arg, value in _NOT_PASSED_ON.get((api, fact["arg"]), ())):
            continue
        if fact["arg"] == "dropout" and api in _BETWEEN_LAYERS and _one_layer(call, ctx):
            continue
        passed = keywords.get(fact["arg"])
        if passed is not None and (_literal(passed, ctx) == (True, _TORCH_DEFAULTS.get((api, fact["arg"]), _UNSET))
                                   or fact["arg"] == "dtype" and _own_dtype(call, node, passed, ctx)):
            continue
        broken = _argument_broken(fact, keywords, ctx)
        if broken:
            return broken
    for fact in facts.get("dtypes", ()):
        when = fact.get("when")
        if when:
            known, value = _literal(keywords[when[0]], ctx) if when[0] in keywords else (False, None)
            if not known or _same(value, when[1]) != (when[2] == "eq"):
                continue
        for param, expr in _operands(call, node, api, fact["params"], ctx):
            dtype = expr is not None and (_dtype_constant(expr, ctx) if param == "dtype" else None) or \
                (_cast_dtype(expr, ctx) if expr is not None else None)
            if dtype in _LOW_PRECISION and dtype not in fact["dtypes"] and _LOW_PRECISION & set(fact["dtypes"]):
                condition = f" when {when[0]} is {'' if when[2] == 'eq' else 'not '}{when[1]!r}" if when else ""
                return f"{param} is listed only for {', '.join(fact['dtypes'])}{condition}, here {dtype}"
    return None
