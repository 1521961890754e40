"""ASC607-ASC609: mixed precision on NPU (loss scaling, TF32 vs HF32, the NPU autocast fp32 policy)."""
from __future__ import annotations

import ast

from ..detect.autocast import autocast_dtype, region_dtype
from ..calls import last_names
from ..registry import Rule
from ..detect.training import source_text, training

_AUTOCAST_SOURCE = ("torch_npu torch_npu/csrc/aten/AutoCastOps.cpp (Ascend/pytorch master, KERNEL_PRIVATEUSEONE "
                    "entries) via rules_data/sources/advice/npu_autocast_op_lists.json")
_HF32_DOCS = ("hiascend.com torch_npu API reference (torch_npu.npu.matmul.allow_hf32: default False; "
              "torch_npu.npu.conv.allow_hf32: default True) and Ascend/op-plugin docs torch_npu-npu-conv-allow_hf32.md")

# ATen ops of the NPU autocast "fp32" policy -> the Python spellings that dispatch to them first.
# Checked with torch 2.13.0 (tools/verify_autocast_spellings.py); tests keep the op names in step
# with npu_autocast_op_lists.json.  In-place variants (``exp_``) are not in the policy.
_TORCH_AND_METHOD = ("acos asin cosh erfinv exp expm1 log log10 log1p log2 logsumexp reciprocal rsqrt sinh tan "
                     "renorm").split()
_TORCH_ONLY = "cdist pdist cosine_similarity nuclear_norm layer_norm group_norm kl_div".split()
_FUNCTIONAL = ("binary_cross_entropy_with_logits cosine_embedding_loss cosine_similarity pdist hinge_embedding_loss "
               "huber_loss kl_div l1_loss layer_norm group_norm margin_ranking_loss mse_loss multi_margin_loss "
               "multilabel_margin_loss nll_loss poisson_nll_loss smooth_l1_loss soft_margin_loss softplus "
               "triplet_margin_loss").split()
FP32_POLICY_APIS = {
    **{f"torch.{op}": op for op in _TORCH_AND_METHOD + _TORCH_ONLY + ["dist"]},
    **{f"torch.nn.functional.{op}": op for op in _FUNCTIONAL},
    "torch.arccos": "acos", "torch.arcsin": "asin",
    "torch.special.expm1": "expm1", "torch.special.log1p": "log1p", "torch.special.erfinv": "erfinv",
    "torch.special.logsumexp": "logsumexp",
}
FP32_POLICY_METHODS = {**{op: op for op in _TORCH_AND_METHOD + ["dist"]}, "arccos": "acos", "arcsin": "asin"}
_FP32_LASTS = last_names(*FP32_POLICY_APIS) | frozenset(FP32_POLICY_METHODS)


class HalfAutocastWithoutScaler(Rule):
    code = "ASC607"
    summary = "float16 autocast in a training loop without loss scaling"
    node_types = (ast.With, ast.AsyncWith)
    trigger_words = ("autocast",)
    why = (
        "In float16, small gradients underflow to zero and large ones overflow; a loss scaler multiplies the "
        "loss before backward and unscales the gradients before the step. float16 autocast without one "
        "trains worse or diverges, on NPU as on GPU. Fires on an autocast region that is float16 (the "
        "default for CUDA/NPU autocast) inside a training loop when the file has no GradScaler, "
        "`scaler.scale(...)`, `amp.scale_loss` or framework `X.backward(loss)` (accelerate, DeepSpeed). "
        "bfloat16 autocast does not need a scaler and does not fire."
    )
    example = ("for x, y in loader:\n    with torch.autocast('npu'):\n        loss = crit(model(x), y)\n"
               "    loss.backward()")
    use_instead = ("`scaler = torch.amp.GradScaler('npu')`, then `scaler.scale(loss).backward()`, `scaler.step(opt)`, "
                   "`scaler.update()`; or autocast with `dtype=torch.bfloat16`.")
    source = ("PyTorch docs, Automatic Mixed Precision > Gradient Scaling; Ascend/pytorch docs torch_npu.npu.amp "
              "(GradScaler for NPU AMP)")
    fires = [
        ("import torch\nfor x in data:\n    with torch.autocast('npu'):\n        loss = f(x)\n"
         "    loss.backward()\n    optimizer.step()\n", 3),
        ("import torch\nfor x in data:\n    with torch.cuda.amp.autocast():\n        loss = f(x)\n"
         "    loss.backward()\n", 3),
    ]
    passes = [
        "import torch\nscaler = torch.amp.GradScaler('npu')\nfor x in data:\n    with torch.autocast('npu'):\n"
        "        loss = f(x)\n    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n",
        "import torch\nfor x in data:\n    with torch.autocast('npu', dtype=torch.bfloat16):\n        loss = f(x)\n"
        "    loss.backward()\n",
        "import torch\nfor x in data:\n    with torch.autocast('npu'):\n        y = model(x)\n",
        "import torch\nfor x in data:\n    with torch.autocast('cpu'):\n        loss = f(x)\n    loss.backward()\n",
        "import torch\nfor x in data:\n    with torch.autocast('npu', enabled=False):\n        loss = f(x)\n"
        "    loss.backward()\n",
        "import torch\nfor x in data:\n    with torch.autocast('npu'):\n        loss = f(x)\n"
        "    accelerator.backward(loss)\n",
    ]

    def check(self, node, ctx) -> None:
        for item in node.items:
            if autocast_dtype(item.context_expr, ctx) == "float16":
                info = training(ctx)
                if info.scales_loss or not info.runs_every_step(ctx.stack, node):
                    return
                ctx.report(item.context_expr, self.code, "float16 autocast in the training loop without a loss "
                           "scaler: small gradients underflow (use torch.amp.GradScaler('npu') or bfloat16) "
                           "[fp16 AMP without loss scaling]", api=ctx.qualname(item.context_expr.func) or "autocast",
                           tips="scale the loss with torch.amp.GradScaler('npu'), or autocast to bfloat16")
                return


# switch -> (NPU counterpart, NPU default of the counterpart)
_TF32_SWITCHES = {
    "torch.backends.cuda.matmul.allow_tf32": ("torch.npu.matmul.allow_hf32", False),
    "torch.backends.cudnn.allow_tf32": ("torch.npu.conv.allow_hf32", True),
}


class Tf32WithoutHf32(Rule):
    code = "ASC608"
    summary = "TF32 switch whose NPU counterpart (HF32) is not set to match"
    node_types = (ast.Assign,)
    trigger_words = ("allow_tf32",)
    why = (
        "TF32 switches only configure NVIDIA GPUs. NPUs have HF32 instead, with their own switches and "
        "defaults: `torch.npu.matmul.allow_hf32` is False and `torch.npu.conv.allow_hf32` is True. A script "
        "that enables TF32 matmuls gets full-float32 matmuls on NPU (not the faster reduced format), and one that "
        "disables TF32 convolutions for accuracy still gets HF32 convolutions on NPU. Fires when the value "
        "set differs from the NPU default (or is not a literal) and the file does not set the counterpart."
    )
    example = "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = False"
    use_instead = ("Set the counterpart to the same value: `torch.npu.matmul.allow_hf32 = True`, "
                   "`torch.npu.conv.allow_hf32 = False`.")
    source = f"{_HF32_DOCS}; rules_data/sources/advice/hf32_switches.tsv"
    fires = [
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", 2),
        ("import torch\ntorch.backends.cudnn.allow_tf32 = False\n", 2),
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = args.tf32\n", 2),
    ]
    passes = [
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\ntorch.npu.matmul.allow_hf32 = True\n",
        "import torch\ntorch.backends.cudnn.allow_tf32 = True\n",
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = False\n",
        "cfg.matmul.allow_tf32 = True\n",
    ]

    def check(self, node, ctx) -> None:
        for target in node.targets:
            switch = ctx.qualname(target) if isinstance(target, ast.Attribute) and target.attr == "allow_tf32" else None
            if switch not in _TF32_SWITCHES:
                continue
            counterpart, npu_default = _TF32_SWITCHES[switch]
            value = node.value
            literal = isinstance(value, ast.Constant) and isinstance(value.value, bool)
            if (literal and value.value == npu_default) or counterpart.split("npu.", 1)[1] in source_text(ctx):
                continue
            wanted = repr(value.value) if literal else ast.unparse(value)
            ctx.report(node, self.code, f"{switch} does not reach the NPU, where {counterpart} defaults to "
                       f"{npu_default} (set {counterpart} = {wanted}) [TF32 vs HF32]", api=switch,
                       tips=f"set {counterpart} = {wanted}")


class Fp32PolicyOpInAutocast(Rule):
    code = "ASC609"
    summary = "op that the NPU autocast policy runs in float32, used inside an autocast region"
    node_types = (ast.Call,)
    trigger_words = ("autocast",)
    why = (
        "torch_npu registers an autocast policy per op. Ops in its fp32 list (exp, log, rsqrt, softplus, "
        "layer_norm, group_norm, the losses...) are run in float32 even inside an autocast region: half inputs "
        "are cast up and the result is a float32 tensor. Code that expects half outputs there (buffers, "
        "comparisons with GPU dtypes) or casts the result back to half loses what the policy protects. Fires "
        "only on direct calls (`torch.exp(x)`, `x.exp()` on a known tensor, `F.mse_loss(...)`) lexically inside "
        "an enabled autocast `with` block of the same function; module instances (`nn.LayerNorm`) are not tracked."
    )
    example = "with torch.autocast('npu'):\n    probs = torch.exp(logits)"
    use_instead = ("Nothing to change if float32 is what you want there; do not cast the result back to half by hand, "
                   "and expect a float32 tensor when comparing dtypes with the GPU run.")
    source = _AUTOCAST_SOURCE
    fires = [
        ("import torch\nwith torch.autocast('npu'):\n    y = torch.exp(x)\n", 3),
        ("import torch.nn.functional as F\nimport torch\nwith torch.autocast('npu', dtype=torch.bfloat16):\n"
         "    loss = F.mse_loss(a, b)\n", 4),
        ("import torch\nx = torch.randn(3)\nwith torch.npu.amp.autocast():\n    y = x.rsqrt()\n", 4),
    ]
    passes = [
        "import torch\nwith torch.autocast('npu'):\n    y = model(x)\nz = torch.exp(y)\n",
        "import torch\nwith torch.autocast('npu', enabled=False):\n    y = torch.exp(x)\n",
        "import torch\nwith torch.autocast('npu'):\n    y = torch.matmul(a, b)\n",
        "import torch\nwith torch.autocast('npu'):\n    def f(x):\n        return torch.exp(x)\n",
        "import torch, math\nwith torch.autocast('npu'):\n    y = math.exp(x)\n",
        "import torch\nwith torch.autocast('npu'):\n    y = x.exp_()\n",
    ]

    def check(self, node, ctx) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr not in _FP32_LASTS:
            return
        api = ctx.chain(func)
        op = FP32_POLICY_APIS.get(api or "")
        if op is None and api is None and isinstance(func, ast.Attribute) and func.attr in FP32_POLICY_METHODS \
                and ctx.is_tensor(func.value):
            api, op = f"torch.Tensor.{func.attr}", FP32_POLICY_METHODS[func.attr]
        if op is None or region_dtype(ctx, node) is None:
            return
        ctx.report(node, self.code, f"NPU autocast runs {api} in float32: half inputs are cast up and the result "
                   f"is float32 [torch_npu autocast policy fp32: aten::{op}]", api=api,
                   tips="runs in float32 under NPU autocast; do not cast its result back to half")
