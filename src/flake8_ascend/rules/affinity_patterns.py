"""ASC304: code patterns an NPU affinity or fused API replaces (boolean-mask index put, fused blocks)."""
from __future__ import annotations

import ast
import re
from types import SimpleNamespace
from typing import List

from ..detect import affinity
from ..semantic.flow import Flow
from ..detect.fused import STARTS, attention_fallback, function_patterns, other_branch_calls, untaken_branch
from ..detect.once_per_call import runs_once
from ..detect.training import last_name
from ..semantic.aliasing import aliased, fresh_tensor, source_line
from ..semantic.values import ARRAY, BUILT_ON_HOST, COMPARE, HOST, MASK, NUMBER, TENSOR, UNKNOWN
from ..registry import Rule
from ..rewrite import Kind, Rewrite
from .affinity_calls import _CAIT_ATTENTION, _TIMM_SDPA_OR_MANUAL
from ..walk import assign_targets

_LABELS = {
    "rms_norm": "RMSNorm (pow-mean-add-rsqrt-mul)",
    "rotate_half": "rotate_half RoPE (chunk/slice-neg-cat)",
    "swiglu": "SwiGLU (silu(a) * b of one tensor's halves)",
    "geglu": "GeGLU (gelu(a) * b of one tensor's halves)",
    "swiglu_proj": "SwiGLU (silu(W1 x) * W2 x; merge W1 and W2 into one Linear and pass its output)",
    "geglu_proj": "GeGLU (gelu(W1 x) * W2 x; merge W1 and W2 into one Linear and pass its output)",
    "attention": "attention (matmul-softmax-matmul)",
    "add_layer_norm": "add + layer_norm",
}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_AUGMENTED = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.FloorDiv: "//"}


_LLAMA_MLP = (
    "import torch.nn as nn\nimport torch.nn.functional as F\n\nclass LLaMAMLP(nn.Module):\n    def __init__(self, d, h):\n"
    "        self.fc_1 = nn.Linear(d, h, bias=False)\n        self.fc_2 = nn.Linear(d, h, bias=False)\n"
    "        self.proj = nn.Linear(h, d, bias=False)\n\n    def forward(self, x):\n        x_fc_1 = self.fc_1(x)\n"
    "        x_fc_2 = self.fc_2(x)\n        x = F.silu(x_fc_1) * x_fc_2\n        return self.proj(x)\n"
)


_PIPELINE_EMBEDS = (
    "import torch\nclass Pipeline:\n    def process_embeds(self, embeds, mask):\n        keep = mask == 0\n"
    "        embeds[keep] = torch.zeros_like(embeds[keep])\n        return embeds, mask\n\n"
    "    @torch.no_grad()\n    def __call__(self, embeds, mask, latents):\n"
    "        embeds, mask = self.process_embeds(embeds, mask)\n"
    "        for t in self.timesteps:\n            latents = self.unet(latents, t, embeds)\n        return latents\n"
)


_RMS_NORM_BRANCHES = (
    "import torch\nfrom diffusers.utils import is_torch_npu_available\n\ndef rms_norm(x, w, eps):\n"
    "    if is_torch_npu_available() and w is not None:\n        import torch_npu\n        return {npu}\n"
    "    else:\n        return x * torch.rsqrt(x.to(torch.float32).pow(2).mean(-1, keepdim=True) + eps)\n")


# the index puts of one function are one problem (mmdet atss_assigner.py:187 and :244): the first names the rest
_INDEX_PUT = "boolean-mask index put"


_PREDICATES = frozenset(("isnan", "isinf", "isfinite", "isneginf", "isposinf", "signbit", "eq", "ne", "gt", "ge", "lt",
                         "le", "isclose"))
_LOGICAL = frozenset(("logical_and", "logical_or", "logical_xor"))
_KEEPS_SHAPE = frozenset(("clone", "detach", "float", "double", "half", "bfloat16", "contiguous", "to"))
_FACTORIES = frozenset(("zeros", "ones", "empty", "full", "rand", "randn"))


def _shaped_like(x: ast.Name, flow: Flow) -> List[ast.Name]:
    """``x`` and the local names whose shape the binding of ``x`` copies: ``b = torch.zeros(y.shape)``,
    ``torch.zeros_like(y)`` (divided by a number or not), ``y.clone()``, ``y.float()``."""
    names = [x]
    value = flow.resolve(x)
    while isinstance(value, ast.BinOp) and isinstance(value.right, ast.Constant):  # ones_like(a) / 2.4
        value = value.left
    if not isinstance(value, ast.Call):
        return names
    func, args = value.func, value.args
    name = last_name(func)
    source = None
    if name.endswith("_like") and args:
        source = args[0]
    elif name in _FACTORIES and args:
        first = args[0]
        if isinstance(first, ast.Attribute) and first.attr == "shape":
            source = first.value
        elif isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) and first.func.attr == "size" \
                and not first.args:
            source = first.func.value
    elif name in _KEEPS_SHAPE and isinstance(func, ast.Attribute):
        source = func.value
    if isinstance(source, ast.Name):
        names.append(source)
    return names


def _mask_of(mask: ast.AST, shaped: List[ast.Name], flow: Flow, depth: int = 0) -> bool:
    """``mask`` is computed elementwise from a tensor of the target's own shape (``shaped``): ``x > 0``,
    ``~torch.isnan(x)``, ``(x > a) & (x < b)``, or a local name bound to one. That is the whole-tensor mask
    ``npu_fast_condition_index_put`` needs; a mask over fewer dimensions (diffusers 0.42.1
    value_guided_sampling.py:107, ``grad[timesteps < 2] = 0`` on a 3-D ``grad``) would broadcast along the wrong
    ones there."""
    if depth > 8:
        return False

    def own(expr: ast.AST) -> bool:
        return isinstance(expr, ast.Name) and any(flow.same(expr, name) for name in shaped)

    if isinstance(mask, ast.Compare):
        return any(own(side) for side in (mask.left, *mask.comparators))
    if isinstance(mask, ast.UnaryOp) and isinstance(mask.op, (ast.Invert, ast.Not)):
        return _mask_of(mask.operand, shaped, flow, depth + 1)
    if isinstance(mask, ast.BinOp) and isinstance(mask.op, (ast.BitAnd, ast.BitOr, ast.BitXor, ast.Mult)):
        return _mask_of(mask.left, shaped, flow, depth + 1) and _mask_of(mask.right, shaped, flow, depth + 1)
    if isinstance(mask, ast.Call):
        func = mask.func
        name = last_name(func)
        if name in _LOGICAL:
            return len(mask.args) == 2 and all(_mask_of(a, shaped, flow, depth + 1) for a in mask.args)
        if name == "logical_not":
            operand = mask.args[0] if mask.args else getattr(func, "value", None)
            return operand is not None and _mask_of(operand, shaped, flow, depth + 1)
        if name in _PREDICATES:
            return (bool(mask.args) and own(mask.args[0])) or (isinstance(func, ast.Attribute) and own(func.value))
        return False
    if isinstance(mask, ast.Name):
        value = flow.resolve(mask)
        return value is not mask and _mask_of(value, shaped, flow, depth + 1)
    return False


# the name of a boolean mask: ``mask``, ``masks``, ``padding_mask``, ``mask_out``; not one whose last word names
# positions or a key (``mask_idx`` from ``torch.nonzero``, espnet 202511 asr/maskctc_model.py:309-337; a dict's
# ``mask_key``, unsloth studio inference/diffusion_cfg_batch.py:996)
_MASK_NAME = re.compile(r"(^|_)masks?($|_(?!(idx|idxs|id|ids|key|keys)$))")


def _owner(ctx) -> ast.AST:
    """The function (or module) whose flow holds the checked node's names."""
    return ctx.enclosing(*_FUNCTIONS) or ctx.tree


def _built_on_host(x: ast.AST, ctx) -> bool:
    """``x`` was made by a factory given no device, in a function that places nothing on a device (peft 0.17.1
    tuners/randlora/model.py:169, ``torch.zeros(shape)`` filled at init), or by ``torch.from_numpy`` there
    (torchgeo 0.8.1 datasets/bigearthnet.py:839-842, a label map read from a file): the index put runs on the CPU.
    A tensor moved with ``.cpu()`` is ``values.host_here``'s question: the flow does not model branches (``if
    assign_on_cpu: x = x.cpu()``)."""
    values = ctx.values
    device = values.of(x).device
    if device == HOST and isinstance(x, ast.Name):  # made there, not moved there
        binding = ctx.model.flow(_owner(ctx)).binding(x)
        return binding is not None and isinstance(binding.value, ast.Call) and values.host_only(binding.value)
    return device == BUILT_ON_HOST and values.host_side(x)


_CALIBRATED = ("import torch\ndef fit(uncs: torch.Tensor, targets: torch.Tensor, mask, neg: torch.Tensor):\n"
               "    targets = targets.float()\n    targets[targets == 0] = neg[targets == 0]\n"
               "    return [targets[:, j][mask[:, j]]{numpy} for j in range(uncs.shape[1])]\n")
_FROM_NUMPY = ("import torch\ndef load_map(array, codes, weights, device):\n    tensor = torch.from_numpy(array)\n{moved}"
               "    for code, ordinal in codes.items():\n        tensor[tensor == code] = ordinal\n    return tensor\n")

# ms_swift template/base.py:270 and :2214-2228: token types built from a list, in a file whose only default device
# is ``meta``
_TOKEN_TYPES = ("import torch\nfrom typing import List\nclass Template:\n    def skeleton(self, build):\n"
                "        with torch.device({device}):\n            return build()\n"
                "    def create_mm_token_type_ids(self, input_ids: List[int], media_token_id):\n"
                "        input_ids = torch.tensor(input_ids)\n        mm_token_type_ids = torch.zeros_like(input_ids)\n"
                "        mm_token_type_ids[input_ids == media_token_id] = 1\n        return mm_token_type_ids\n")

# pyannote 3.3.2 pipelines/speaker_verification.py:176-197: lengths of a batch the pipeline built on the host
_WAV_LENS = ("import torch\nclass Embedding:\n    def __call__(self, waveforms, masks):\n"
             "        wav_lens = masks.sum(dim=1)\n        too_short = wav_lens < self.min_num_samples\n"
             "        wav_lens[too_short] = wav_lens.max()\n{move}")

# kraken 7.1.1 blla.py:106-121: the tensor of an image's transforms, masked before the forward pass moves it
_SEGMENT = ("import torch\ndef segment(im, mask, model, transforms, device):\n    tensor_im = transforms(im)\n"
            "    if mask:\n        tensor_im[~transforms(mask).bool()] = 0\n{move}")

# scvi-tools 1.4.2 model/_multivi.py:565-574: a host copy of a model output, updated in place under branches
_HOST_COPY = ("import torch\nclass Model:\n    def impute(self, post, normalize_cells, threshold):\n"
              "        for tensors in post:\n            outputs = self.module(tensors)\n{copy}"
              "            if normalize_cells:\n                p *= outputs['libsize_acc'].cpu()\n"
              "            if threshold:\n                p[p < threshold] = 0\n")

# timm 1.0.31 models/davit.py:204-211 and edgenext.py:165-173: the tokens of a (B, N, C) input put last, so
# ``q @ k`` sums over them (channel attention)
_QKV_HEADS = ("import torch\nimport torch.nn.functional as F\nclass Attention:\n    def forward(self, x):\n"
              "        B, N, C = x.shape\n        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, -1).permute({order})\n"
              "        q, k, v = qkv.unbind(0)\n        attn = ({scores}) * self.scale\n        attn = attn.softmax(dim=-1)\n"
              "        return (attn @ v).transpose(1, 2).reshape(B, N, C)\n")

_WEIGHTS_OUT = ("import torch\ndef attend(q, k, v):\n    attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n"
                "    return {out}\n")

_MASKED_LABELS = ("import torch\nfrom torch import Tensor\nclass {cls}:\n    def process_labels(self, input_ids: Tensor) -> Tensor:\n"
           "        keep = input_ids != self.pad_id\n        labels = input_ids.clone()\n        labels[~keep] = -100\n"
           "        return labels\n")


class AffinityPattern(Rule):
    """A statement or expression pattern with an NPU affinity or fused replacement.

    *Index put*: ``x[mask] = value`` where ``mask`` (in any index position) is a boolean mask by the value
    model (docs/value_model.md) or an unplaced value named for a mask (``masks``, ``batch.padding_mask``; not
    ``mask_idx``, ``mask_key``, which name positions or a key), ``value`` a Python number or a tensor (or any
    value when ``x`` is a known tensor or the mask a known one), and ``x`` a tensor: known, or unknown inside a
    function that never uses numpy/pandas/cupy. Lists, dicts, numpy arrays, pandas ``.loc`` and
    ``state_dict[k] = v`` never fire. ``x[mask] = number`` gets the affinity API; the rewrite
    ``x = npu_fast_condition_index_put(x, mask, value)`` rebinds ``x``, so it is offered only when ``x`` is a
    local name bound in the same body to a newly allocated tensor and not stored anywhere else afterwards, and
    only when the mask is computed elementwise from a tensor of ``x``'s own shape (``x > 0``, ``~torch.isnan(x)``,
    a comparison of ``y`` when ``x = torch.zeros_like(y)``): the fused API takes a whole-tensor mask, and a mask
    over fewer dimensions would broadcast along the wrong ones.
    ``x[mask] = tensor`` and masks beside other indices (``x[:, mask] = 0``) name ``torch.where`` /
    ``masked_scatter_`` / ``masked_fill_`` instead, never rewritten.  ``x[mask] *= value`` reads and
    writes back through the mask (an index and an IndexPut): ``torch.where(mask, x * value, x)``.
    *Fused blocks* (detected through the local names of one function, see ``detect/fused.py``): hand-written
    RMSNorm, rotate_half RoPE, SwiGLU/GeGLU, attention matmul-softmax-matmul and add + layer_norm; these
    are reported, never rewritten. Neither is reported where the code runs once per object, per call of an
    inference entry point or per evaluation of a metric (``detect/once_per_call.py``): a faster kernel there saves
    nothing worth a change, nor in a branch the values its parameters keep never take (``untaken_branch``).
    """

    code = "ASC304"
    summary = "code pattern replaceable by an NPU affinity or fused API (Api Type special)"
    node_types = (ast.Assign, ast.AugAssign, ast.Call, ast.BinOp)
    trigger_words = ("torch",)
    api_type = "special"
    why = (
        "A boolean-mask assignment becomes an IndexPut that runs on the AI CPU (an index the code does not show "
        "to be a mask counts when its name says so: `masks`, `padding_mask`, not `mask_idx` or `mask_key`, which "
        "name positions or a key); hand-written RMSNorm, RoPE, "
        "SwiGLU, attention and add+LayerNorm run as chains of small kernels that torch_npu has single fused "
        "kernels for. An attention's two products each sum over one head dimension, as the fused kernel does (an "
        "`einsum` that contracts several indices at once, channels attended across time and frequency, is no "
        "match), nor one whose first product sums over the tokens (channel attention, XCA and DaViT: `permute(2, 0, 3, 4, 1)` or `k.transpose(-1, -2) @ v` on a `(B, N, C)` input), whose head size would be the token count, past the kernel's 512. Nor is an add+LayerNorm whose norm the constructor binds in several branches, when its literal "
        "defaults pick one that is no LayerNorm (`norm=\"batch\"` choosing a BatchNorm): the LayerNorm needs an "
        "option. "
        "Not reported where the code runs once per object, per call of an inference entry point (a "
        "no_grad pipeline `__call__` or `infer`/`inference` method, outside the loops that carry a state from step to "
        "step; a loop that only prepares each input and appends it to a list counts as once) or per evaluation (a "
        "metric's `compute`/`compute_metrics` and the helpers only it reaches; `update`/`process` run per batch). "
        "Nor in code that only exports the model (a function named for `onnx`, `export` or `deploy`, or one only "
        "they reach): the exported graph must keep standard operators, as for every advice code. Nor on the "
        "samples a DataLoader's workers build on the host: in a dataset's, collator's or energon task encoder's "
        "method, a collate function, a datasets folder, or a top-level function or a method only these call in "
        "the project (a sequence-packing helper, a boxes class's geometric transform); nor on a tensor a function builds with no device in a file whose default "
        "device is only ever `cpu` or `meta`, nor on one that is on the host where the put writes it: a `.cpu()` "
        "copy made before the put on every path (not in a branch of its own), or moved to a device after the put on "
        "every path (`x.to(device)`, or a view of it: `x.unsqueeze(0).to(device)`; `with` bodies run whole; not "
        "just beside another tensor: `labels.to(logits.device)`, nor in a loop that may write into it once moved). "
        "Nor in a branch that the values its parameters keep never take: an `if binary:` (or the `else` of `if "
        "not self.flag:`) where every call in the package leaves the "
        "parameter at a default that skips it."
    )
    example = "boxes[boxes < 0] = 0\nx = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)"
    use_instead = (
        "`x = torch_npu.contrib.function.npu_fast_condition_index_put(x, mask, value)` (rewritten by "
        "`ascend-analyse -m affinity_apis --fix` when safe); call the fused API the message names "
        "(`torch_npu.npu_rms_norm`, `npu_rotary_mul`, `npu_swiglu`, `npu_fusion_attention`, `npu_add_layer_norm`)."
    )
    source = (
        "official affinity special list (affinity_api_visitor visit_Assign); op-plugin torch_npu-contrib list; "
        "Ascend-mstt profiler advisor timeline_fusion_ops.yaml; targets checked against the torch_npu wheels"
    )
    fires = [
        # near miss of the host tensor below: the function moves data to a device too
        (_FROM_NUMPY.format(moved="    weights = weights.to(device)\n"), 6),
        # near miss of the calibration below: .numpy() of a .cpu() copy says nothing of the tensor before it
        (_CALIBRATED.format(numpy=".cpu().numpy()"), 4),
        # near miss of the meta skeleton below: a default device that may be the NPU
        (_TOKEN_TYPES.format(device="self.device"), 10),
        (_CAIT_ATTENTION, 11),  # the matmul-softmax-matmul, reported alone (ASC303 keeps quiet about q @ k.T)
        # near miss of channel attention: the usual layout keeps each head's features last
        (_QKV_HEADS.format(order="2, 0, 3, 1, 4", scores="q @ k.transpose(-2, -1)"), 8),
        ("import torch\ndef f(boxes):\n    boxes[boxes < 0] = 0\n    return boxes\n", 3),
        # near miss of labels masked in a processor: the model's own head does it on the device
        (_MASKED_LABELS.format(cls="LMHead"), 7),
        (_MASKED_LABELS.format(cls="CogView4AttnProcessor"), 7),  # diffusers' attention processors run on the device
        # near miss of attention weights returned: only the output leaves
        (_WEIGHTS_OUT.format(out="attn @ v"), 3),
        # near miss of an export entry: a name that only contains the word (not ``export`` between underscores)
        ("import torch\nclass Checker:\n    def exported_scores(self, images, scores):\n"
         "        flagged = torch.any(scores > 0, dim=1)\n        images[flagged] = 0.0\n        return images\n", 5),
        # near misses of a tensor built on the host: built on the input's device; moved to a device afterwards
        ("import torch\ndef f(x, sparsity):\n    b = torch.zeros(x.shape, device=x.device)\n    b[x < sparsity] = -1\n"
         "    return b\n", 4),
        ("import torch\ndef f(x, y, device):\n    m = torch.zeros(4)\n    m[x > 0] = 1\n    return m, y.to(device)\n",
         4),
        # near misses of a put moved to a device afterwards: a move beside another tensor (which may already be on a
        # device), a move in a branch of its own
        (_WAV_LENS.format(move="        return self.model_(waveforms, wav_lens.to(waveforms.device))\n"), 6),
        (_WAV_LENS.format(move="        if self.on_device:\n            wav_lens = wav_lens.to(self.device)\n"
                               "        return self.model_(waveforms, wav_lens)\n"), 6),
        # ... a loop that moves the tensor in one iteration and writes into it in the next
        ("import torch\ndef refine(model, x, device):\n    for _ in range(3):\n        x[x < 0] = 0\n"
         "        x = model(x.to(device))\n    return x\n", 4),
        # near miss of a host copy: made in a branch of its own (mmdet 3.1.0 models/task_modules/assigners/
        # approx_max_iou_assigner.py:130-154, ``if assign_on_cpu: approxs = approxs.cpu()``)
        (_HOST_COPY.format(copy="            p = outputs['p']\n            if self.assign_on_cpu:\n"
                                "                p = p.cpu()\n"), 12),
        ("import torch\ndef norm(x, eps):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n", 3),
        # near miss of diffusers' RMSNorm below: the other branch is not the advised NPU API
        (_RMS_NORM_BRANCHES.format(npu="torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)"), 9),
        ("import torch\ndef rotate_half(x):\n    x1, x2 = x.chunk(2, dim=-1)\n"
         "    return torch.cat((-x2, x1), dim=-1)\n", 4),
        ("import torch.nn.functional as F\ndef ffn(x):\n    a, b = x.chunk(2, dim=-1)\n    return F.silu(a) * b\n", 4),
        # litgpt 0.5 model.py:830 (LLaMAMLP) and diffusers auraflow_transformer_2d.py:127
        (_LLAMA_MLP, 13),
        # litgpt 0.5 model.py:838: GemmaMLP(LLaMAMLP) inherits the two projections
        (_LLAMA_MLP.split("    def forward")[0] + "\nclass GemmaMLP(LLaMAMLP):\n    def forward(self, x):\n"
         "        x = F.gelu(self.fc_1(x), approximate='tanh') * self.fc_2(x)\n        return self.proj(x)\n", 13),
        ("import torch.nn as nn\nimport torch.nn.functional as F\nclass FF(nn.Module):\n    def __init__(self, d, h):\n"
         "        self.linear_1 = nn.Linear(d, h, bias=False)\n        self.linear_2 = nn.Linear(d, h, bias=False)\n"
         "    def forward(self, x):\n        x = F.silu(self.linear_1(x)) * self.linear_2(x)\n        return x\n", 8),
        # the official docs' example, in a file that imports numpy: the function decides, not the file
        ("import numpy as np\nimport torch\ncondition = input1 < 0.5\nvalue = 0.\ninput1[condition] = value\n", 5),
        ("import torch\ndef f(x, m):\n    keep = x.new_zeros(3) > 0\n    x[:, keep] = 0\n", 4),
        ("import torch\ndef f(bboxes, scores):\n    keep = scores > 0.5\n    bboxes[keep] = bboxes.new_zeros(4)\n", 4),
        # augmented assignment through a mask: an index read and an IndexPut
        ("import torch\ndef f(x: torch.Tensor, mask: torch.Tensor):\n    m = mask > 0\n    x[:, m] *= 0\n", 4),
        ("import torch\ndef f(scores, labels):\n    ignore = labels == -1\n    scores[ignore] -= scores.new_tensor(1.0)\n"
         "    return scores.softmax(-1)\n", 4),
        # a mask that arrives as a parameter or a batch attribute, named so (torchtune 0.6.1 rlhf/rewards.py:218,
        # recipes/dev/grpo_full_finetune_distributed.py:894)
        ("import torch\nfrom typing import Optional\ndef estimate_advantages(values, rewards, "
         "masks: Optional[torch.Tensor] = None):\n    advantages = whiten(rewards - values, mask=masks)\n"
         "    if masks is not None:\n        advantages[~masks] = 0.0\n    return advantages\n", 6),
        ("import torch\ndef grpo_step(self, trajectory, context_length):\n    pi_logits = self._model(trajectory.query)\n"
         "    pi_logprobs = rlhf.logits_to_logprobs(pi_logits, context_length)\n"
         "    pi_logprobs[trajectory.response_padding_masks] = 1.0\n    return pi_logprobs\n", 5),
        # a mask named for the positions it picks (espnet 202511 ssl/utils/mask.py:97, wav2vec's boolean mask)
        ("import torch\ndef apply(self, x: torch.Tensor, mask_indices):\n"
         "    x[mask_indices] = self.mask_embedding.to(x.dtype)\n    return x\n", 3),
        # a setting put through a mask into a known tensor (torchtune 0.6.1 recipes/ppo_full_finetune_single_device.py:849)
        ("import torch\ndef generate_trajectory(self, scores, seq_lens):\n    scores = scores.gather(1, seq_lens[:, None])\n"
         "    reward_penalty_mask = rlhf.get_reward_penalty_mask(seq_lens)\n"
         "    scores[reward_penalty_mask] = self._reward_penalty\n    return scores\n", 5),
        # near miss of a one-off: the same put inside the pipeline's denoising loop runs every step
        (_PIPELINE_EMBEDS.replace("        for t in self.timesteps:\n            latents = self.unet(latents, t, embeds)\n",
                                  "        for t in self.timesteps:\n            embeds, mask = self.process_embeds(embeds, mask)\n"
                                  "            latents = self.unet(latents, t, embeds)\n"), 5),
    ]
    passes = [
        # labels masked where the loader's workers prepare the batch, on the host (axolotl 0.19.0
        # processing_strategies.py:389)
        _MASKED_LABELS.format(cls="ProcessingStrategy"),
        # once per call of an inference pipeline, before its denoising loop (diffusers 0.42.1
        # pipelines/kandinsky3/pipeline_kandinsky3.py:83-85, process_embeds called from __call__)
        _PIPELINE_EMBEDS,
        # the hand-written fallback of a module whose default path is scaled_dot_product_attention (NPU-fused)
        _TIMM_SDPA_OR_MANUAL,
        # diffusers 0.37 models/normalization.py:555: the fallback of code that calls npu_rms_norm where it can
        _RMS_NORM_BRANCHES.format(npu="torch_npu.npu_rms_norm(x, w, epsilon=eps)[0]"),
        "import numpy as np\nimport torch\na = np.zeros(3)\na[a > 0] = 0\n",
        # diffusers 0.37 image_processor.py:536: an image the signature says is a PIL image
        "import PIL.Image\nimport torch\ndef binarize(image: PIL.Image.Image):\n    image[image < 0.5] = 0\n",
        "import torch\nstate_dict = {}\nfor k, v in model.state_dict().items():\n    state_dict[k] = v\n",
        "import torch\nx = torch.randn(4)\nx[idx] = 0\n",
        "import torch\ndef f(df):\n    df.loc[df.a > 0] = 0\n",
        "import torch\ndef norm(x, eps):\n    xc = x - x.mean(-1, keepdim=True)\n"
        "    return xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps)\n",
        "import torch\ndef f(x, y):\n    return torch.cat((-y, x), dim=-1)\n",
        # one projection gated by another input's (cross gating), and one module applied twice: no SwiGLU
        _LLAMA_MLP.replace("x_fc_2 = self.fc_2(x)", "x_fc_2 = self.fc_2(y)").replace("forward(self, x)", "forward(self, x, y)"),
        _LLAMA_MLP.replace("x_fc_2 = self.fc_2(x)", "x_fc_2 = self.fc_1(x)"),
        # augmented assignment through numpy masks, list indices, or of strings: no IndexPut on the NPU
        "import numpy as np\nimport torch\ndef f(a):\n    a = np.asarray(a)\n    a[a > 0] *= 2\n",
        "import torch\ndef f(x: torch.Tensor, idx):\n    x[idx] += 1\n",
        "import torch\ndef f(x: torch.Tensor, names):\n    x[names == 'a'] += 1\n",
        "import torch\ncounts = {}\ncounts[key > 0] += 1\n",
        "import numpy as np\nimport torch\ndef f(img):\n    img = np.asarray(img)\n    img[img > 255] = 255\n",
        "import torch\ndef f(d):\n    d = {}\n    d[d > 0] = 1\n",
        "import torch\ndef f(x):\n    x[x.shape[0] > 2] = 0\n",
        "import torch\ndef f(x, names):\n    x[names == 'a'] = 0\n",
        # near misses of a name that says mask: a numpy function, a list of positions, a mask's element, a name
        # that only contains the word
        "import numpy as np\nimport torch\ndef f(scores, mask):\n    scores = np.asarray(scores)\n    scores[mask] = 0\n",
        "import torch\ndef f(x):\n    mask = [0, 2]\n    x[mask] = 0\n",
        "import torch\ndef f(x, masks, i):\n    x[masks[i]] = 0\n",
        "import torch\ndef f(x, masking_ratio):\n    x[masking_ratio] = 0\n",
        "import torch\ndef f(y_in, pred, mask_idx):\n    y_in[0][mask_idx] = pred[0][mask_idx].argmax(dim=-1)\n",
        "import torch\ndef pad(kw, mask_key, mask):\n    kw[mask_key] = mask\n",
        # a value of unknown kind put into an unknown through a comparison of unknowns: a data transform's keypoint
        # array (mmaction2 1.2.0 datasets/transforms/processing.py:841)
        "import torch\ndef _flip_kps(kps, img_width):\n    kp_x = kps[..., 0]\n"
        "    kp_x[kp_x != 0] = img_width - kp_x[kp_x != 0]\n    return kps\n",
        # a module's own setting named mask (mmpose 1.3.2 losses/classification_loss.py:211, keypoint indices)
        "import torch\nclass KLDiscretLoss:\n    def __init__(self, mask=None):\n        self.mask = mask\n"
        "    def forward(self, t_loss):\n        t_loss[:, self.mask] = t_loss[:, self.mask] * 2.0\n        return t_loss\n",
        # attention whose weights the function returns (neuralforecast 3.0.2 tft.py:253-269, kept for
        # interpretability): the fused kernel does not give them
        _WEIGHTS_OUT.format(out="attn @ v, attn"),
        # channel attention (XCA; DaViT's k^T @ v): q @ k sums over the tokens, the fused kernel's head size
        _QKV_HEADS.format(order="2, 0, 3, 4, 1", scores="F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)"),
        _QKV_HEADS.format(order="2, 0, 3, 1, 4", scores="k.transpose(-1, -2) @ v"),
        # an ONNX export entry (diffusers 0.42.1 safety_checker.py:106-127): the graph must keep standard operators
        "import torch\nclass Checker:\n    def forward_onnx(self, images, scores):\n        flagged = torch.any(scores > 0, dim=1)\n"
        "        images[flagged] = 0.0\n        return images\n",
        # a tensor built on the host at init (peft 0.17.1 tuners/randlora/model.py:166-169)
        "import torch\ndef init(shape, sparsity):\n    b = torch.rand(shape)\n    b_sparse = torch.zeros(b.shape)\n"
        "    b_sparse[b < 1 / (2 * sparsity)] = -1\n    return b_sparse\n",
        # a label map read from a file into a host tensor (torchgeo 0.8.1 datasets/bigearthnet.py:839-842)
        _FROM_NUMPY.format(moved=""),
        # a put into targets that the same function converts with .numpy(), which only a CPU tensor allows
        # (chemprop 2.2.1 uncertainty/calibrator.py:380-389, Platt scaling's targets)
        _CALIBRATED.format(numpy=".numpy()"),
        _TOKEN_TYPES.format(device="'meta'"),
        # a put into a tensor the function then moves to a device: it ran on the host (pyannote 3.3.2
        # pipelines/speaker_verification.py:192-197)
        _WAV_LENS.format(move="        return self.model_(waveforms.to(self.device), wav_lens.to(self.device))\n"),
        "import torch\ndef f(x, device):\n    m = torch.zeros(4)\n    m[x > 0] = 1\n    return m.to(device)\n",
        # ... moved through a view, inside ``with`` blocks (kraken 7.1.1 blla.py:106-121)
        _SEGMENT.format(move="    with torch.no_grad():\n        return model(tensor_im.unsqueeze(0).to(device))\n"),
        # a put into a host copy made before it on every path (scvi-tools 1.4.2 model/_multivi.py:565-574)
        _HOST_COPY.format(copy="            p = outputs['p'].cpu()\n"),
    ]

    def check(self, node, ctx) -> None:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            self._index_put(node, ctx)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in STARTS or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                  and func.value.id == "self" and name in getattr(function_patterns(ctx), "attrs", ())):
                self._fused(node, ctx)
        elif isinstance(node.op, ast.MatMult) or (isinstance(node.op, ast.Mult) and any(
                isinstance(side, (ast.Call, ast.BinOp)) for side in (node.left, node.right))):
            self._fused(node, ctx)

    # -- x[mask] = value -----------------------------------------------------------------------
    def _index_put(self, node, ctx) -> None:
        targets = assign_targets(node)
        if len(targets) != 1 or not isinstance(targets[0], ast.Subscript):
            return
        target = targets[0]
        x, index = target.value, target.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        masks = [p for p in parts if isinstance(p, (ast.Compare, ast.UnaryOp, ast.BinOp, ast.Name, ast.Call,
                                                    ast.Subscript, ast.Attribute)) and self._mask(p, ctx)]
        if len(masks) != 1 or not self._tensor(x, masks[0], ctx) or runs_once(node, ctx) or _built_on_host(x, ctx) \
                or ctx.values.host_here(x) or untaken_branch(node, ctx):
            return  # a put the NPU never runs: once per call, on a host tensor (the loader's workers: Context.report)
        value = ctx.values.of(node.value)
        if isinstance(node, ast.AugAssign):
            if value.kind == NUMBER or value.tensor:
                self._augmented_put(node, ctx)
        elif value.kind == NUMBER and len(parts) == 1:
            self._scalar_put(node, x, ctx)
        elif value.kind == NUMBER or value.tensor or (value.kind == UNKNOWN and (  # a setting: ``self._penalty``
                ctx.values.is_tensor(x) or ctx.values.of(masks[0]).kind == MASK)):
            what = "a Python number" if value.kind == NUMBER else "a tensor" if value.tensor else "a value"
            replacement = ("torch.where(mask, value, x) when value broadcasts to x, else x.masked_scatter_(mask, "
                           "value)") if value.kind != NUMBER else "x.masked_fill_(mask broadcast to x's shape, value)"
            if value.kind == UNKNOWN:
                replacement += " (x.masked_fill_ for a number)"
            ctx.report(node, self.code, f"boolean-mask index put of {what} runs IndexPut on the AI CPU: use "
                       f"{replacement} (not rewritten: npu_fast_condition_index_put takes a whole-tensor mask "
                       "and a number)", api=source_line(node, ctx.lines) or "x[mask] = value", family=_INDEX_PUT,
                       tips="torch.where / masked_scatter_ / masked_fill_")

    def _augmented_put(self, node: ast.AugAssign, ctx) -> None:
        op = _AUGMENTED.get(type(node.op))
        if op is None:
            return
        ctx.report(node, self.code, f"boolean-mask augmented assignment x[mask] {op}= value reads and writes back "
                   "through the mask (an index of data-dependent length, then IndexPut on the AI CPU): use "
                   f"x = torch.where(mask, x {op} value, x) with mask broadcast to x's shape (not rewritten)",
                   api=source_line(node, ctx.lines) or f"x[mask] {op}= value", tips="torch.where", family=_INDEX_PUT)

    def _scalar_put(self, node: ast.Assign, x: ast.AST, ctx) -> None:
        entry = affinity.entries("special")["index_put"]
        if not affinity.available(entry, ctx.data.version):
            return
        flow = ctx.model.flow(_owner(ctx))
        why_not = self._unsafe(x, flow, ctx) or ("" if _mask_of(node.targets[0].slice, _shaped_like(x, flow), flow)
                                                  else "the mask may not have the target's shape")
        note = f"not rewritten: {why_not}" if why_not else "ascend-analyse --fix rewrites it"
        ctx.report(node, self.code, f"replace the boolean-mask index put by x = {entry['target']}(x, mask, value) "
                   f"(NPU affinity API, {affinity.since(entry)}; {note})",
                   api=source_line(node, ctx.lines) or "x[mask] = value", tips=entry["target"], family=_INDEX_PUT,
                   rewrite=None if why_not else Rewrite(Kind.INDEX_PUT, entry["target"]))

    @staticmethod
    def _mask(part: ast.AST, ctx) -> bool:
        """A boolean mask, or a comparison of values the model cannot place (``x[x > 0]`` on an unknown x), or a
        value the model cannot place whose name says it is a mask: a parameter, an attribute of a batch, or its
        negation (torchtune 0.6.1 rlhf/rewards.py:218 ``advantages[~masks] = 0.0``, recipes/dev/
        grpo_full_finetune_distributed.py:894 ``pi_logprobs[trajectory.response_padding_masks] = 1.0``)."""
        value = ctx.values.of(part)
        if value.kind in (MASK, COMPARE):
            return True
        named = part.operand if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Invert) else part
        if isinstance(named, ast.Attribute) and isinstance(named.value, ast.Name) and named.value.id == "self":
            return False  # a module's setting: mmpose 1.3.2 classification_loss.py:171, ``mask`` is list[int]
        return value.kind in (UNKNOWN, TENSOR) and ctx.values.of(named).kind in (UNKNOWN, TENSOR) and bool(
            _MASK_NAME.search(last_name(named).lower()))

    @staticmethod
    def _tensor(x: ast.AST, mask: ast.AST, ctx) -> bool:
        """``x`` is a tensor, or may be one: unknown, in a function that uses no numpy, and not masked by an
        array (``values.maybe_tensor``)."""
        values = ctx.values
        operands = [mask.left, *mask.comparators] if isinstance(mask, ast.Compare) else []
        if values.of(mask).kind == ARRAY or any(values.of(e).kind == ARRAY for e in operands):
            return False
        if values.is_tensor(x) or values.is_mask(mask):
            return not values.not_tensor(x)
        return values.maybe_tensor(x) and all(values.maybe_tensor(e) or values.of(e).kind == NUMBER
                                              for e in operands)

    @staticmethod
    def _unsafe(x: ast.AST, flow: Flow, ctx) -> str:
        if not isinstance(x, ast.Name):
            return "the target is not a local variable"
        binding = flow.binding(x)
        if binding is None or binding.value is None or binding.index is not None or x.id in flow.shared:
            return f"{x.id} is not a local variable bound in this function (the caller may see the in-place change)"
        if not fresh_tensor(binding.value, ctx):
            return f"{x.id} may share memory with another tensor"
        if aliased(x.id, flow, binding.end):
            return f"{x.id} is stored elsewhere too"
        return ""

    # -- fused blocks --------------------------------------------------------------------------
    def _fused(self, node, ctx) -> None:
        patterns = function_patterns(ctx)
        if patterns is None:
            return
        if isinstance(node, ast.Call):
            found = [("rms_norm", patterns.rms_norm(node)), ("rotate_half", patterns.rotate_half(node)),
                     ("add_layer_norm", patterns.add_layer_norm(node)), ("attention", patterns.attention(node))]
        elif isinstance(node.op, ast.MatMult):
            found = [("attention", patterns.attention(node))]
        else:
            gated = patterns.gated(node)
            found = [gated] if gated else []
        for pattern, span in found:
            if span is None:
                continue
            entry = affinity.entries("special")[pattern.replace("_proj", "")]  # the same fused kernel
            if not affinity.available(entry, ctx.data.version) or runs_once(node, ctx) or (
                    pattern == "attention" and attention_fallback(node, ctx)) or other_branch_calls(
                    node, ctx, entry["target"].rsplit(".", 1)[-1]) or untaken_branch(node, ctx):
                continue
            self._report_fused(entry, pattern, span, ctx)

    def _report_fused(self, entry: dict, pattern: str, span, ctx) -> None:
        first, last = span
        where = SimpleNamespace(lineno=min(first.lineno, last.lineno), col_offset=first.col_offset
                                if first.lineno <= last.lineno else last.col_offset,
                                end_lineno=max(first.end_lineno, last.end_lineno))
        ctx.report(where, self.code, f"use the fused {entry['target']} instead of this hand-written {_LABELS[pattern]} "
                   f"(NPU fused API, {affinity.since(entry)})", api=_LABELS[pattern], tips=entry["target"])
