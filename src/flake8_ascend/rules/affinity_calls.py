"""ASC303: torch API calls that an NPU affinity or fused API replaces."""
from __future__ import annotations

import ast
from typing import Optional, Tuple

from ..calls import integer, passed
from ..detect import affinity
from ..detect.fused import attention_fallback, attention_scores, untaken_branch
from ..registry import Rule
from ..rewrite import Kind, Rewrite

_TRANSPOSE_LAST_TWO = ({-2, -1},)


def transposed_last_two(expr: ast.AST, ctx) -> bool:
    """``k.transpose(-2, -1)``, ``k.transpose(-1, -2)``, ``torch.transpose(k, -2, -1)`` or ``k.mT``, of a ``k`` that
    is not conjugated first: ``x.conj().transpose(-1, -2)`` is a Hermitian transpose of complex data, which
    ``matmul_transpose`` neither conjugates nor takes (asteroid 0.7.0 dsp/beamforming.py:472)."""
    if isinstance(expr, ast.Attribute):
        return expr.attr == "mT" and not _conjugated(expr.value, ctx)
    if not isinstance(expr, ast.Call) or expr.keywords:
        return False
    qualname = ctx.qualname(expr.func)
    if qualname == "torch.transpose" and expr.args:
        dims, operand = expr.args[1:], expr.args[0]
    elif qualname is None and isinstance(expr.func, ast.Attribute) and expr.func.attr == "transpose":
        dims, operand = expr.args, expr.func.value
    else:
        return False
    return len(dims) == 2 and {integer(d) for d in dims} in _TRANSPOSE_LAST_TWO and not _conjugated(operand, ctx)


_CONJUGATES = frozenset(("conj", "conj_physical", "resolve_conj"))


def _conjugated(expr: ast.AST, ctx) -> bool:
    """``x.conj()``, ``torch.conj(x)``, ``x.conj_physical()``: a complex tensor's conjugate."""
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    qualname = ctx.qualname(func)
    if qualname is not None:
        return qualname.rpartition(".")[2] in _CONJUGATES and qualname.startswith("torch.")
    return isinstance(func, ast.Attribute) and func.attr in _CONJUGATES


def _pair(node: Optional[ast.AST]) -> bool:
    return isinstance(node, ast.Tuple) and len(node.elts) == 2


def roll_over_h_w(call: ast.Call) -> Tuple[bool, str]:
    """(fires, why it is not rewritten) for ``torch.roll``: the affinity roll shifts dims (1, 2) of NHWC."""
    shifts, dims = passed(call, "shifts", 1), passed(call, "dims", 2)
    if not isinstance(dims, (ast.Tuple, ast.List)) or [integer(d) for d in dims.elts] != [1, 2]:
        return False, ""
    if shifts is None or integer(shifts) is not None:
        return False, ""
    if isinstance(shifts, (ast.Tuple, ast.List)) and len(shifts.elts) != 2:
        return False, ""
    if not (_pair(shifts) and isinstance(dims, ast.Tuple)):
        return True, "shifts and dims must be tuple literals (the affinity roll caches by them)"
    return True, ""


def _unfit(call: ast.Call, entry: dict) -> str:
    """Why a call cannot be rewritten one-to-one ('' when it can)."""
    accepted = entry.get("fix")
    if not accepted:
        return "the replacement takes other arguments"
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return "*args/**kwargs are passed"
    if len(call.args) > len(accepted):
        return "more positional arguments than the replacement takes"
    extra = [k.arg for k in call.keywords if k.arg not in accepted]
    if extra:
        return f"{', '.join(extra)}= has no counterpart"
    for name in entry.get("needs", ()):
        if passed(call, name, accepted.index(name)) is None:
            return f"{name}= must be given (the replacement has no default)"
    return ""


_CAIT_ATTENTION = (  # timm 1.0.31 models/cait.py:63-73 (ClassAttn.forward, the non-fused branch)
    "import torch\nfrom torch import nn\n\nclass ClassAttn(nn.Module):\n    def __init__(self, dim):\n"
    "        super().__init__()\n        self.attn_drop = nn.Dropout(0.0)\n\n    def forward(self, q, k, v):\n"
    "        q = q * self.scale\n        attn = q @ k.transpose(-2, -1)\n        attn = attn.softmax(dim=-1)\n"
    "        attn = self.attn_drop(attn)\n        x_cls = attn @ v\n        return x_cls\n"
)
# timm 1.0.31 layers/attention.py:123-135: SDPA by default, the hand-written attention only as a fallback
_TIMM_SDPA_OR_MANUAL = (
    "import torch.nn.functional as F\nfrom torch import nn\n\nclass Attention(nn.Module):\n"
    "    def forward(self, q, k, v, attn_mask=None):\n        if self.fused_attn:\n"
    "            x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)\n        else:\n"
    "            q = q * self.scale\n            attn = q @ k.transpose(-2, -1)\n"
    "            attn = attn.softmax(dim=-1)\n            attn = self.attn_drop(attn)\n            x = attn @ v\n"
    "        return x\n"
)


def _one_tensor(call: ast.Call) -> bool:
    """An optimizer over one tensor, spelled as a one-element list or tuple (``torch.optim.SGD([x_in], lr=...)``,
    diffusers 0.42.1 pipeline_stable_diffusion_pix2pix_zero.py:1050, which optimises a latent): a fused optimizer
    gains by updating many parameter tensors in one kernel, and there is only one (a parameter group, a dict,
    may hold many)."""
    params = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "params"), None)
    return isinstance(params, (ast.List, ast.Tuple)) and len(params.elts) == 1 and not isinstance(
        params.elts[0], (ast.Starred, ast.Dict, ast.ListComp, ast.GeneratorExp, ast.Call))


# the ATen op each torch optimizer runs with ``fused=True`` (torch 2.13 optim/adam.py:877, AdamW being Adam with
# decoupled_weight_decay=True, adamw.py:48; optim/sgd.py:529); torch lets the privateuse1 backend, the NPU, take it
# (utils/_foreach_utils.py:13-23, _get_fused_kernels_supported_devices)
_FUSED_OPS = {"torch.optim.Adam": "_fused_adam_", "torch.optim.AdamW": "_fused_adamw_",
              "torch.optim.SGD": "_fused_sgd_"}


def _fused_on_npu(call: ast.Call, qualname: str, ctx) -> bool:
    """An optimizer built with a literal ``fused=True`` whose fused kernel the torch_npu version's wheel registers
    (``aten_npu_ops``: AdamW's from 2.1.0, Adam's and SGD's in 2.7.1 and from 2.9.0; unknown without a wheel): the
    update is already one fused kernel on the NPU (f5_tts 1.1.22
    model/trainer.py:143, ``AdamW(model.parameters(), lr=learning_rate, fused=True)``). ``fused=`` computed from
    ``torch.cuda.is_available()`` is False on the NPU (oumi builders/optimizers.py:45) and is not this."""
    fused = next((k.value for k in call.keywords if k.arg == "fused"), None)
    return isinstance(fused, ast.Constant) and fused.value is True and _FUSED_OPS.get(qualname) in ctx.data.aten_npu_ops


_DEPLOYED = (
    "import torch\nclass Head:\n    def switch_to_deploy(self):\n        self.{helper}()\n\n"
    "    def {helper}(self):\n        def _forward(x):\n            return torch.matmul(x, self.w.transpose(-1, -2))\n"
    "        self.forward = _forward\n"
)


class AffinityTorchCall(Rule):
    """A call of a torch API the affinity table maps to an NPU affinity or fused API.

    ``torch.optim.SGD/Adam/AdamW/Adadelta/RMSprop`` -> ``torch_npu.optim.NpuFused*``;
    ``torch.roll(x, shifts, dims=(1, 2))`` (the NHWC roll of Swin) -> ``torch_npu.contrib.function.roll``;
    ``torch.matmul(q, k.transpose(-2, -1))`` and ``q @ k.transpose(-2, -1)`` ->
    ``torch_npu.contrib.function.matmul_transpose(q, k)``. A call is marked fixable when the replacement
    accepts every argument it passes, by position or by the same keyword, with the same defaults.
    """

    code = "ASC303"
    summary = "torch API call replaceable by an NPU affinity or fused API (Api Type torch)"
    node_types = (ast.Call, ast.BinOp)
    trigger_words = ("torch",)
    api_type = "torch"
    why = (
        "torch_npu's fused optimizers update all parameters in a few large kernels instead of one small kernel "
        "per tensor, and its affinity roll and matmul_transpose avoid slow generic kernels on NPU. An optimizer "
        "over a single tensor (`SGD([latent], lr=...)`) has nothing to fuse and is not reported, nor one built with "
        "`fused=True` where the torch_npu version has that fused kernel (torch runs it on the NPU). "
        "Nor in code that only exports the model (a function named for `onnx`, `export` or `deploy`, or one only "
        "they reach): the exported graph must keep standard operators, as for every advice code."
    )
    example = "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)"
    use_instead = (
        "Use the API named in the message (`torch_npu.optim.NpuFusedAdamW`...). `ascend-analyse -m affinity_apis "
        "--fix` rewrites the calls the message marks as rewritable (fused optimizers need float32/float16 params)."
    )
    source = (
        "rules_data/sources/affinity/affinity_rules.tsv (official affinity_list_1_11_0.json, op-plugin "
        "torch_npu-optim list); signatures from torch 2.13 and the torch_npu wheels"
    )
    fires = [
        ("import torch\nopt = torch.optim.AdamW(model.parameters(), lr=1e-3)\n", 2),
        ("from torch.optim import SGD\nopt = SGD(params, 0.1, momentum=0.9)\n", 2),
        ("import torch\ny = torch.roll(x, shifts=(-3, -3), dims=(1, 2))\n", 2),
        ("import torch\ns = torch.matmul(q, k.transpose(-1, -2))\n", 2),
        ("import torch\ns = torch.zeros(2, 3, 4) @ k.transpose(-2, -1)\n", 2),
        ("import torch\ndef scores(q, k):\n    return q @ k.transpose(-2, -1)\n", 3),
        # near miss of a conjugate transpose: the conjugate is of the other operand
        ("import torch\ndef scores(q, k):\n    return q.conj() @ k.transpose(-2, -1)\n", 3),
        # near misses of an optimizer over one tensor: two tensors, a parameter group
        ("import torch\nopt = torch.optim.SGD([x_in, y_in], lr=0.1)\n", 2),
        # near miss of a deploy conversion: the helper also runs in the forward
        (_DEPLOYED.format(helper="_convert") + "    def forward(self, x):\n        self._convert()\n", 8),
        ("import torch\nopt = torch.optim.AdamW([{'params': model.parameters()}], lr=1e-3)\n", 2),
        # near miss of an optimizer already fused: fused only where CUDA is, off on the NPU (oumi 0.9
        # builders/optimizers.py:43-50, ``fused=fused_available``, set from ``torch.cuda.is_available()``)
        ("import torch\nopt = torch.optim.Adam(params, lr=lr, fused=torch.cuda.is_available())\n", 2),
    ]
    passes = [
        "import torch\ny = torch.roll(x, 1, 0)\n",
        "import torch\ny = torch.roll(x, shifts=(1, 1), dims=(2, 3))\n",
        "import torch\ns = torch.matmul(q, k)\n",
        # deprecated target: torch_npu.contrib.module.SiLU warns to use torch.nn.SiLU
        "import torch.nn as nn\nact = nn.SiLU()\n",
        "import numpy as np\nimport torch\ndef scores(q, k):\n    q = np.asarray(q)\n    return q @ k.transpose(-2, -1)\n",
        "import keras\nopt = keras.optimizers.AdamW(1e-3)\n",
        # a Hermitian product of complex data (asteroid 0.7.0 dsp/beamforming.py:472)
        "import torch\ndef gev(a, b):\n    inv = torch.inverse(b)\n    return inv @ a @ inv.conj().transpose(-1, -2)\n",
        # already fused: torch_npu has _fused_adamw_ (f5_tts 1.1.22 model/trainer.py:143)
        "from torch.optim import AdamW\nopt = AdamW(model.parameters(), lr=learning_rate, fused=True)\n",
        # an optimizer over one tensor: nothing to fuse (diffusers 0.42.1 pipeline_stable_diffusion_pix2pix_zero.py:1050)
        "import torch\ndef step(latent_model_input, amount):\n    x_in = latent_model_input.detach().clone()\n"
        "    x_in.requires_grad = True\n    opt = torch.optim.SGD([x_in], lr=amount)\n    return opt\n",
        # built only for a deploy conversion (an export: no torch_npu API may enter the graph; mmpose 1.3.2
        # rtmo_head.py:550-590, switch_to_deploy -> _convert_gau -> a nested forward; detect/export_path.py)
        _DEPLOYED.format(helper="_convert_gau"),
        # the first product of a hand-written attention: ASC304 reports the whole fused pattern instead
        _CAIT_ATTENTION,
        _CAIT_ATTENTION.replace("q @ k.transpose(-2, -1)", "torch.matmul(q, k.transpose(-2, -1))"),
        # the fallback branch of a module that calls scaled_dot_product_attention (NPU-fused) by default
        _TIMM_SDPA_OR_MANUAL.replace("attn = attn.softmax(dim=-1)", "attn = attn * 2"),
    ]

    def check(self, node, ctx) -> None:
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult) and transposed_last_two(node.right, ctx) and (
                    ctx.values.maybe_tensor(node.left) and ctx.values.maybe_tensor(node.right)) and (
                    id(node) not in attention_scores(ctx)) and not attention_fallback(node, ctx):
                self._emit(node, ctx, "torch.matmul", "the operands must be rewritten (q, k)")
            return
        qualname = ctx.qualname(node.func)
        entry = affinity.entries("torch").get(qualname) if qualname else None
        if entry is None:
            return
        why_not = _unfit(node, entry)
        when = entry.get("when")
        if when == "transposed_rhs":
            if (len(node.args) < 2 or not transposed_last_two(node.args[1], ctx) or id(node) in attention_scores(ctx)
                    or attention_fallback(node, ctx)):
                return
            why_not = "the operands must be rewritten (q, k) and it does not broadcast in dynamic shapes"
        elif when == "hw_roll":
            fires, reason = roll_over_h_w(node)
            if not fires:
                return
            why_not = why_not or reason
        elif qualname.startswith("torch.optim.") and (_one_tensor(node) or _fused_on_npu(node, qualname, ctx)):
            return
        self._emit(node, ctx, qualname, why_not)

    def _emit(self, node, ctx, api: str, why_not: str) -> None:
        entry = affinity.entries("torch")[api]
        if not affinity.available(entry, ctx.data.version) or untaken_branch(node, ctx):
            return  # a branch the package's values never take: nothing runs there (``untaken_branch``)
        target = entry["target"]
        note = f"not rewritten: {why_not}" if why_not else "ascend-analyse --fix rewrites it"
        ctx.report(node, self.code, f"use {target} instead of {api} (NPU affinity API, {affinity.since(entry)}; "
                   f"{note})", api=api, tips=target, rewrite=None if why_not else Rewrite(Kind.CALL, target))
