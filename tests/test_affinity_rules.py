"""ASC301-ASC304: what fires (with the target and version in the message) and the near misses that must not."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_rules
from flake8_ascend.rewrite import Kind, Rewrite

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "yolo_mini"


def only(source, code, **kwargs):
    """The findings of one code on a snippet."""
    return run_rules(source, codes=[code], **kwargs)


def single(source, code, **kwargs):
    found = only(source, code, **kwargs)
    assert len(found) == 1, found
    return found[0]


# -- ASC301: classes ---------------------------------------------------------------------------
YOLOV5_FOCUS = """
import torch
import torch.nn as nn

class Focus(nn.Module):
    # Focus wh information into c-space
    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):  # ch_in, ch_out, kernel, stride, padding, groups
        super().__init__()
        self.conv = Conv(c1 * 4, c2, k, s, p, g, act)

    def forward(self, x):  # x(b,c,w,h) -> y(b,4c,w/2,h/2)
        return self.conv(torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1))
"""


def test_yolov5_focus_fires_on_the_class_line_with_target_and_version():
    finding = single(YOLOV5_FOCUS, "ASC301")
    assert (finding.line, finding.col, finding.end_line) == (5, 0, 12)
    assert "torch_npu.contrib.module.Focus" in finding.message and "torch_npu 2.1.0 and later" in finding.message
    assert (finding.api, finding.tips) == ("Focus", "torch_npu.contrib.module.Focus")


def test_focus_with_long_parameter_names_and_annotations_still_matches():
    source = """
    from torch import nn
    class Focus(nn.Module):
        def __init__(self, in_channels: int, out_channels: int, kernel_size=1, stride=1, padding=None,
                     groups=1, activation=True):
            super().__init__()
        def forward(self, input):
            return input
    """
    assert [f.line for f in only(source, "ASC301")] == [3]


@pytest.mark.parametrize("variant", [
    "class Focus(nn.Module):\n    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True, e=0.5): ...\n"
    "    def forward(self, x): ...\n",                                  # one more __init__ parameter
    "class Focus(nn.Module):\n    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True): ...\n"
    "    def forward(self, x, y): ...\n",                               # forward takes two inputs
    "class Focus(nn.Module):\n    def __init__(self, c1, c2, s=1, k=1, p=None, g=1, act=True): ...\n"
    "    def forward(self, x): ...\n",                                  # k and s swapped
    "class Focus(Base):\n    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True): ...\n"
    "    def forward(self, x): ...\n",                                  # base class not torch.nn.Module
])
def test_focus_near_misses(variant):
    assert only("import torch.nn as nn\n" + variant, "ASC301") == []


def test_a_module_named_nn_that_is_not_torch_does_not_count():
    source = "import mylib as nn\nclass DropPath(nn.Module):\n    def __init__(self, drop_prob): ...\n" \
             "    def forward(self, x): ...\n"
    assert only(source, "ASC301") == []


def test_autograd_function_with_static_forward_and_no_init():
    source = """
    import torch
    from torch.autograd import Function
    class ModulatedDeformConv2dFunction(Function):
        @staticmethod
        def forward(ctx, input, offset, mask, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
                    deform_groups=1):
            return input
    """
    assert single(source, "ASC301").tips == "torch_npu.contrib.module.ModulatedDeformConv"


def test_optimizer_class_by_name_and_base():
    fires = "import torch\nclass Lamb(torch.optim.Optimizer):\n    pass\n"
    assert single(fires, "ASC301").tips == "torch_npu.optim.NpuFusedLamb"
    assert only("import torch\nclass Lamb(torch.nn.Module):\n    pass\n", "ASC301") == []


def test_deprecated_target_is_not_suggested():
    mish = "import torch.nn as nn\nclass Mish(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
           "    def forward(self, input):\n        return input\n"
    assert only(mish, "ASC301") == []


def test_no_suggestion_for_a_version_older_than_every_wheel():
    assert only(YOLOV5_FOCUS, "ASC301", version="1.11.0") == []
    assert [f.line for f in only(YOLOV5_FOCUS, "ASC301", version="2.2.0")] == [5]


# -- ASC302: functions -------------------------------------------------------------------------
def test_channel_shuffle_function_fires_on_def_line():
    source = """
    import torch

    @torch.no_grad()
    def channel_shuffle(x: torch.Tensor, groups: int = 2) -> torch.Tensor:
        batchsize, num_channels, height, width = x.size()
        x = x.view(batchsize, groups, num_channels // groups, height, width)
        return torch.transpose(x, 1, 2).contiguous().view(batchsize, -1, height, width)
    """
    finding = single(source, "ASC302")
    assert finding.line == 5 and finding.tips == "torch_npu.contrib.module.ChannelShuffle"
    assert "channel_shuffle" in finding.message and "2.1.0" in finding.message


def test_channel_shuffle_as_a_method():
    source = "class Block:\n    def channel_shuffle(self, inputs, num_groups):\n        return inputs\n"
    assert single(source, "ASC302").api == "Block.channel_shuffle"


@pytest.mark.parametrize("signature", ["(x)", "(x, groups, dim)", "(x, num_channels)", "(groups, x)"])
def test_channel_shuffle_near_misses(signature):
    assert only(f"def channel_shuffle{signature}:\n    return x\n", "ASC302") == []


def test_mmdet_bbox_coders_pick_the_target_by_signature():
    source = """
    class YOLOBBoxCoder:
        def encode(self, bboxes, gt_bboxes, stride):
            return bboxes
        def decode(self, bboxes, pred_bboxes, stride):
            return bboxes

    class DeltaXYWHBBoxCoder:
        def encode(self, bboxes, gt_bboxes):
            return bboxes
        def decode(self, bboxes, pred_bboxes, max_shape=None, wh_ratio_clip=16 / 1000):
            return bboxes

    class TBLRBBoxCoder:
        def encode(self, bboxes, gt_bboxes):
            return bboxes

    class BaseBBoxCoder(metaclass=ABCMeta):
        @abstractmethod
        def encode(self, bboxes, gt_bboxes, stride):
            return bboxes
    """
    found = {(f.line, f.tips) for f in only(source, "ASC302")}
    assert found == {
        (3, "torch_npu.contrib.function.npu_bbox_coder_encode_yolo"),
        (9, "torch_npu.contrib.function.npu_bbox_coder_encode_xyxy2xywh"),
        (11, "torch_npu.contrib.function.npu_bbox_coder_decode_xywh2xyxy"),
    }


# -- ASC303: torch calls -----------------------------------------------------------------------
@pytest.mark.parametrize("call,target,fixable", [
    ("torch.optim.AdamW(model.parameters(), lr=1e-3)", "torch_npu.optim.NpuFusedAdamW", True),
    ("torch.optim.Adam(params, 1e-3, (0.9, 0.99), 1e-8, 0, False)", "torch_npu.optim.NpuFusedAdam", True),
    ("torch.optim.Adam(params, lr=1e-3, fused=torch.cuda.is_available())", "torch_npu.optim.NpuFusedAdam", False),
    ("torch.optim.SGD(params, 0.1, momentum=0.9)", "torch_npu.optim.NpuFusedSGD", True),
    ("torch.optim.SGD(params, momentum=0.9)", "torch_npu.optim.NpuFusedSGD", False),
    ("torch.optim.Adadelta(params, **cfg)", "torch_npu.optim.NpuFusedAdadelta", False),
    ("torch.optim.RMSprop(params, lr=0.01, centered=True)", "torch_npu.optim.NpuFusedRMSprop", True),
    ("torch.roll(x, shifts=(-3, -3), dims=(1, 2))", "torch_npu.contrib.function.roll", True),
    ("torch.roll(x, shifts=[-3, -3], dims=(1, 2))", "torch_npu.contrib.function.roll", False),
    ("torch.roll(input=x, shifts=(1, 1), dims=(1, 2))", "torch_npu.contrib.function.roll", False),
    ("torch.matmul(q, k.transpose(-2, -1))", "torch_npu.contrib.function.matmul_transpose", False),
    ("torch.matmul(q, torch.transpose(k, -1, -2))", "torch_npu.contrib.function.matmul_transpose", False),
    ("torch.matmul(q, k.mT)", "torch_npu.contrib.function.matmul_transpose", False),
])
def test_torch_calls(call, target, fixable):
    finding = single(f"import torch\ny = {call}\n", "ASC303")
    assert finding.tips == target and finding.line == 2
    assert (finding.rewrite == Rewrite(Kind.CALL, target)) is fixable
    assert ("ascend-analyse --fix rewrites it" in finding.message) is fixable


@pytest.mark.parametrize("call", [
    "torch.roll(x, 1)",
    "torch.roll(x, shifts=(1, 1), dims=(0, 1))",
    "torch.roll(x, shifts=(1, 1, 1), dims=(1, 2))",
    "torch.matmul(q, k)",
    "torch.matmul(q, k.transpose(0, 1))",
    "torch.nn.SiLU()",                       # deprecated contrib.module.SiLU
    "torchvision.transforms.ColorJitter(0.4)",  # deprecated FusedColorJitter
    "np.roll(a, 1)",
    "optax.adamw(1e-3)",
])
def test_torch_call_near_misses(call):
    assert only(f"import torch\nimport torchvision\nimport numpy as np\ny = {call}\n", "ASC303") == []


# f5_tts 1.1.22 model/trainer.py:143: torch runs ``fused=True`` on the NPU with torch_npu's own kernel
# (``_fused_adamw_`` in the wheel from 2.1.0; ``_fused_adam_`` and ``_fused_sgd_`` in 2.7.1 and from 2.9.0)
FUSED_ADAMW = "from torch.optim import AdamW\nopt = AdamW(model.parameters(), lr=learning_rate, fused=True)\n"


def test_an_optimizer_already_fused_on_the_npu_is_not_reported():
    assert only(FUSED_ADAMW, "ASC303") == []
    assert only(FUSED_ADAMW, "ASC303", version="2.1.0") == []
    assert only("import torch\nopt = torch.optim.SGD(params, lr=0.1, fused=True)\n", "ASC303") == []
    # near misses: a version whose wheel has no such kernel, or no wheel (unknown); Adam's kernel is not in 2.8.0
    assert len(only(FUSED_ADAMW, "ASC303", version="2.2.0")) == 1
    assert len(only("import torch\nopt = torch.optim.Adam(params, fused=True)\n", "ASC303", version="2.8.0")) == 1
    # near misses: fused off, or on only where CUDA is (oumi 0.9 builders/optimizers.py:45: False on the NPU)
    for fused in ("False", "torch.cuda.is_available()", "None"):
        assert len(only(FUSED_ADAMW.replace("True", fused), "ASC303")) == 1


def test_import_aliases_resolve():
    source = "from torch.optim import AdamW as W\nopt = W(params, lr=1e-3)\n"
    assert single(source, "ASC303").api == "torch.optim.AdamW"
    assert only("def AdamW(p):\n    return p\nimport torch\nopt = AdamW(params)\n", "ASC303") == []


def test_matmul_operator_needs_a_tensor_when_the_function_uses_numpy():
    numpy_function = "import numpy as np\nimport torch\ndef f(a, b):\n    a = np.log(a)\n    return a @ b.transpose(-2, -1)\n"
    assert only(numpy_function, "ASC303") == []
    uses_numpy = "import numpy as np\nimport torch\ndef f(a, b):\n    print(np.pi)\n    return a @ b.transpose(-2, -1)\n"
    assert only(uses_numpy, "ASC303") == []
    # the file imports numpy, this function never uses it: per function, not per file (issue 14)
    numpy_file = "import numpy as np\nimport torch\ndef f(a, b):\n    return a @ b.transpose(-2, -1)\n"
    assert [f.line for f in only(numpy_file, "ASC303")] == [4]
    tensor = "import numpy as np\nimport torch\ndef f(a: torch.Tensor, b):\n    return a @ b.transpose(-2, -1)\n"
    assert [f.line for f in only(tensor, "ASC303")] == [4]


# -- ASC304: x[mask] = value ---------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    "x = torch.randn(8)\nx[x > 0] = 0",
    "x = torch.randn(8)\nm = x > 0\nx[~m] = -1.5",
    "x = torch.randn(8)\nx[(x > 0) & (x < 1)] = 1",
    "x = torch.randn(8)\nx[torch.isnan(x)] = 0",
    "x = torch.randn(8)\nm = torch.zeros(8, dtype=torch.bool)\nx[m] = 0",
    "x = torch.randn(8)\nx[idx.bool()] = 0",
    "x = torch.randn(8)\nx[x.to(torch.bool)] = float('inf')",
    "x = torch.randn(8)\nx[x == 0] = torch.finfo(x.dtype).min",
    "from math import inf\nx = torch.randn(8)\nx[x == 0] = -inf",
])
def test_index_put_fires(body):
    source = "import torch\n" + body + "\n"
    finding = single(source, "ASC304")
    assert finding.line == source.count("\n")
    assert finding.tips == "torch_npu.contrib.function.npu_fast_condition_index_put"


@pytest.mark.parametrize("source", [
    "import numpy as np\nimport torch\na = np.zeros(3)\na[a > 0] = 0\n",                   # numpy array
    "import numpy as np\nimport torch\ndef f(a):\n    a[a > 0] = 0\n    return np.sum(a)\n",  # used as an array
    "import numpy as np\nimport torch\ndef f(a, b):\n    b = np.ones(3)\n    a[a > 0] = 0\n",  # function uses numpy
    "import torch\nd = {}\nd[k > 0] = 1\n",                                             # dict
    "import torch\nlst = [1, 2]\nlst[i == 0] = 3\n",                                    # list
    "import torch\ndef f(df):\n    df.loc[df['a'] > 0] = 0\n",                          # pandas .loc
    "import torch\nsd = {}\nfor k, v in model.state_dict().items():\n    sd[k] = v\n",  # the official tool's FP
    "import torch\nx = torch.randn(8)\nx[idx] = 0\n",                                   # integer index
    "import torch\nx = torch.randn(8)\nx[0 < x < 1] = 0\n",                              # chained comparison
])
def test_index_put_near_misses(source):
    assert only(source, "ASC304") == []


def test_numpy_a_gt_0_is_silent_but_the_tensor_twin_fires():
    assert only("import numpy as np\na = np.arange(5)\na[a > 0] = 0\n", "ASC304") == []
    assert len(only("import torch\na = torch.arange(5)\na[a > 0] = 0\n", "ASC304")) == 1


def test_index_put_rewrite_is_offered_only_for_fresh_local_tensors():
    fresh = single("import torch\ndef f(s):\n    x = s * 2\n    x[x > 0] = 0\n    return x\n", "ASC304")
    assert fresh.rewrite.kind is Kind.INDEX_PUT and "--fix rewrites it" in fresh.message
    param = single("import torch\ndef f(x: torch.Tensor):\n    x[x > 0] = 0\n", "ASC304")
    assert param.rewrite is None and "not rewritten" in param.message
    view = single("import torch\ndef f(s: torch.Tensor):\n    x = s.view(-1)\n    x[x > 0] = 0\n", "ASC304")
    assert view.rewrite is None
    stored = single("import torch\ndef f(self, s):\n    x = torch.zeros(3, device=s.device)\n    self.buf = x\n"
                    "    x[x > 0] = 1\n", "ASC304")
    assert stored.rewrite is None
    # a mask over fewer dimensions than the target (diffusers 0.42.1 value_guided_sampling.py:107) would
    # broadcast along the wrong ones in npu_fast_condition_index_put; one built from the target is its shape
    narrow = single("import torch\ndef f(s, timesteps):\n    grad = s * 2\n    grad[timesteps < 2] = 0\n"
                    "    return grad\n", "ASC304")
    assert narrow.rewrite is None and "the mask may not have the target's shape" in narrow.message
    own = single("import torch\ndef f(s, lo, hi):\n    x = s * 2\n    keep = (x > lo) & (x < hi)\n"
                 "    x[~keep] = 0\n    return x\n", "ASC304")
    assert own.rewrite is not None


# -- ASC304: fused patterns ----------------------------------------------------------------------
def fused(source, **kwargs):
    return [(f.line, f.end_line, f.tips) for f in only(source, "ASC304", **kwargs)]


HAND_RMSNORM = """
import torch
import torch.nn as nn

class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
"""


def test_rmsnorm_module_written_by_hand():
    assert fused(HAND_RMSNORM) == [(14, 15, "torch_npu.npu_rms_norm")]


@pytest.mark.parametrize("body", [
    "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
    "return x * torch.rsqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + eps)",
    "ms = (x * x).mean(-1, keepdim=True)\n    return x / torch.sqrt(ms + eps)",
    "return x.float() * (x.float().square().mean(-1, keepdim=True) + eps).rsqrt()",
    # a dimension that is not a literal may be the last one (litgpt 0.5.13 model.py:1319, ``dim=self.dim``, -1 by
    # default); the last dimension of a 3-D tensor
    "return x * torch.rsqrt(torch.mean(x * x, dim=self.dim, keepdim=True) + eps)",
    "return x * torch.rsqrt(torch.mean(x**2, dim=2, keepdim=True) + eps)",
])
def test_rmsnorm_spellings(body):
    source = f"import torch\ndef norm(x, eps):\n    {body}\n"
    assert [t for _, _, t in fused(source)] == ["torch_npu.npu_rms_norm"]


@pytest.mark.parametrize("body", [
    # LayerNorm: the squared value is centred
    "xc = x - x.mean(-1, keepdim=True)\n    return xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps)",
    # the scaled tensor is not the squared one
    "return y * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
    "return x * torch.rsqrt(x.pow(3).mean(-1, keepdim=True) + eps)",
    "return x * torch.rsqrt(eps)",
    # the mean is not over the last dimension: a pixel norm over the channels of a feature map (diffusers 0.42.1
    # autoencoder_kl_ltx2_audio.py:93; timm 1.0.31 fast_norm.py:181), every element
    "return x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + eps)",
    "return x * torch.rsqrt(x.pow(2).mean() + eps)",
])
def test_rmsnorm_near_misses(body):
    assert fused(f"import torch\ndef norm(x, y, eps):\n    {body}\n") == []


PIXEL_NORM = """
import torch
class PixelNorm(torch.nn.Module):
    def __init__(self, dim: int = {default}, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x):
        mean_sq = torch.mean(x**2, dim=self.dim, keepdim=True)
        return x / torch.sqrt(mean_sq + self.eps)
"""


def test_rmsnorm_over_a_dimension_the_class_keeps():
    # diffusers 0.42.1 autoencoder_kl_ltx2_audio.py:87-95: a pixel norm over the channels (dim 1 by default)
    assert fused(PIXEL_NORM.format(default=1)) == []
    # litgpt 0.5.13 model.py:1302-1320: RMSNorm(size, dim=-1)
    assert [t for _, _, t in fused(PIXEL_NORM.format(default=-1))] == ["torch_npu.npu_rms_norm"]


@pytest.mark.parametrize("body", [
    "x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1), dim=-1)",
    "x1 = x[..., : x.shape[-1] // 2]\n    x2 = x[..., x.shape[-1] // 2 :]\n    return torch.cat((-x2, x1), dim=-1)",
    "return torch.cat([-x[..., 32:], x[..., :32]], -1)",
])
def test_rotate_half(body):
    source = f"import torch\ndef rotate_half(x):\n    {body}\n"
    assert [t for _, _, t in fused(source)] == ["torch_npu.npu_rotary_mul"]


@pytest.mark.parametrize("body", [
    "x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((x2, -x1), dim=-1)",   # halves in the other order
    "x1, x2 = x.chunk(2, dim=-1)\n    return torch.cat((-x2, x1))",           # along dim 0
    "x1, x2 = x.chunk(2)\n    return torch.cat((-x2, x1), dim=-1)",           # chunked along dim 0
    "x1, x2 = x.chunk(3, dim=-1)[:2]\n    return torch.cat((-x2, x1), dim=-1)",
    "return torch.cat((-y, x), dim=-1)",                                      # two unrelated tensors
])
def test_rotate_half_near_misses(body):
    assert fused(f"import torch\ndef rotate_half(x, y):\n    {body}\n") == []


def test_swiglu_and_geglu():
    source = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class GatedMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.SiLU()

        def swiglu(self, x):
            a, b = x.chunk(2, dim=-1)
            return self.act(a) * b

        def sigmoid_form(self, x):
            gate, value = torch.chunk(x, 2, -1)
            return gate * torch.sigmoid(gate) * value

        def geglu(self, x):
            x, gate = x.chunk(2, dim=-1)
            return F.gelu(x) * gate
    """
    assert [(line, t) for line, _, t in fused(source)] == [
        (13, "torch_npu.npu_swiglu"), (17, "torch_npu.npu_swiglu"), (21, "torch_npu.npu_geglu")]


@pytest.mark.parametrize("body", [
    "return F.silu(self.w1(x)) * self.w3(x)",           # two projections, not halves of one tensor
    "a, b = x.chunk(2, dim=-1)\n        return F.silu(a) * c",
    "a, b = x.chunk(2, dim=-1)\n        return F.relu(a) * b",
    "a, b = x.chunk(2, dim=-1)\n        return a * b",
])
def test_swiglu_near_misses(body):
    source = f"import torch.nn.functional as F\nclass M:\n    def f(self, x, c):\n        {body}\n"
    assert fused(source) == []


TIMM_ATTENTION = """
import torch
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, dim, num_heads=8):
        super().__init__()
        self.scale = (dim // num_heads) ** -0.5
        self.attn_drop = nn.Dropout(0.1)

    def forward(self, q, k, v):
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)
        return attn @ v
"""

BERT_ATTENTION = """
import math
import torch
from torch import nn

def attention(query_layer, key_layer, value_layer, attention_mask, dropout, head_size):
    attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
    attention_scores = attention_scores / math.sqrt(head_size)
    attention_scores = attention_scores + attention_mask
    attention_probs = nn.functional.softmax(attention_scores, dim=-1)
    attention_probs = dropout(attention_probs)
    return torch.matmul(attention_probs, value_layer)
"""


def test_attention_patterns():
    assert fused(TIMM_ATTENTION) == [(12, 15, "torch_npu.npu_fusion_attention")]
    masked = TIMM_ATTENTION.replace("attn = attn.softmax(dim=-1)",
                                    "attn = attn.masked_fill(mask, float('-inf')).float().softmax(dim=-1)")
    assert fused(masked) == [(12, 15, "torch_npu.npu_fusion_attention")]
    # BERT's dropout is a module passed in: the probabilities are not followed through it
    assert fused(BERT_ATTENTION) == []
    with_f_dropout = BERT_ATTENTION.replace("dropout(attention_probs)", "nn.functional.dropout(attention_probs, 0.1)")
    assert fused(with_f_dropout) == [(7, 12, "torch_npu.npu_fusion_attention")]


def test_attention_written_with_einsum():
    # neuralforecast 3.0.2 models/timellm.py:154-161, the reprogramming cross-attention
    source = ("import math\nimport torch\nclass Reprogramming:\n    def reprogramming(self, target, source, value):\n"
              "        B, L, H, E = target.shape\n        scale = 1.0 / math.sqrt(E)\n"
              "        scores = torch.einsum('blhe,she->bhls', target, source)\n"
              "        A = torch.softmax(scale * scores, dim=-1)\n"
              "        return torch.einsum('bhls,she->blhe', A, value)\n")
    assert fused(source) == [(7, 9, "torch_npu.npu_fusion_attention")]
    # the weights as the second operand of the einsum
    swapped = source.replace("torch.einsum('bhls,she->blhe', A, value)", "torch.einsum('she,bhls->blhe', value, A)")
    assert fused(swapped) == [(7, 9, "torch_npu.npu_fusion_attention")]
    # q @ k with relative-position scores added by an einsum (transformers 4.57.6 altclip modeling_altclip.py:221-233):
    # the attention starts at q @ k
    relative = ("import torch\nclass SelfAttention:\n    def forward(self, q, k, v, pos):\n"
                "        scores = torch.matmul(q, k.transpose(-1, -2))\n"
                "        if self.relative:\n            scores = scores + torch.einsum('bhld,lrd->bhlr', q, pos)\n"
                "        probs = torch.softmax(scores, dim=-1)\n        return torch.matmul(probs, v)\n")
    assert fused(relative) == [(4, 8, "torch_npu.npu_fusion_attention")]


def test_attention_einsum_contracting_one_index_per_product():
    # torchgeo 0.8.1 models/croma.py:261, spaces in the equation
    source = ("import torch\nfrom torch import einsum\nclass Attention:\n    def forward(self, q, k, v):\n"
              "        scores = einsum('b h i d, b h j d -> b h i j', q, k) * self.scale\n"
              "        attn = scores.softmax(dim=-1)\n        return einsum('b h i j, b h j d -> b h i d', attn, v)\n")
    assert fused(source) == [(5, 7, "torch_npu.npu_fusion_attention")]
    # espnet 202511 enh/layers/uses.py:364: attention across channels with time, frequency and features summed in
    # one product; the fused kernel contracts one head dimension
    channels = ("import torch\nclass ChannelAttention:\n    def forward(self, Q, K, V, T):\n"
                "        attn_mat = torch.einsum('bhtcfn,bhtefn->bhce', Q / T, K)\n"
                "        attn_mat = torch.nn.functional.softmax(attn_mat, dim=-1)\n"
                "        return torch.einsum('bhce,bhtefn->bhtcfn', attn_mat, V)\n")
    assert fused(channels) == []


@pytest.mark.parametrize("body", [
    # einsums that are no attention: a softmax of one operand, three operands, no softmax between them
    "return torch.einsum('bij,bjk->bik', torch.softmax(x, dim=-1), v)",
    "return torch.einsum('bij,bjk,bk->bi', torch.softmax(torch.einsum('bd,bd->b', q, k), -1), v, x)",
    "return torch.einsum('bij,bjk->bik', torch.einsum('bid,bjd->bij', q, k), v)",
    "return torch.softmax(self.fc(x), dim=-1) @ v",     # softmax of a projection, not of q @ k
    "return (q @ k.transpose(-2, -1)) @ v",             # no softmax
    "return torch.sigmoid(q @ k.transpose(-2, -1)) @ v",
])
def test_attention_near_misses(body):
    assert fused(f"import torch\nclass A:\n    def f(self, q, k, v, x):\n        {body}\n") == []


def test_add_layer_norm():
    source = """
    import torch.nn as nn
    import torch.nn.functional as F

    class Output(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.dense = nn.Linear(hidden, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, hidden_states, input_tensor):
            hidden_states = self.dense(hidden_states)
            return self.LayerNorm(hidden_states + input_tensor)

        def functional(self, a, b):
            return F.layer_norm(a + b, a.shape[-1:])

        def near_misses(self, a, b):
            return self.LayerNorm(a) + b, self.dense(a + b), F.layer_norm(a * b, a.shape[-1:])
    """
    assert fused(source) == [(13, 13, "torch_npu.npu_add_layer_norm"), (16, 16, "torch_npu.npu_add_layer_norm")]


_NORM_CHOICE = """
import torch.nn as nn

class EncoderLayer(nn.Module):
    def __init__(self, hidden_size, {param}):
        super().__init__()
        if {test}:
            self.norm_attn = {other}
        else:
            self.norm_attn = nn.LayerNorm(hidden_size)

    def forward(self, src, src2):
        return self.norm_attn(src + src2)
"""


@pytest.mark.parametrize("param,test,other", [
    # neuralforecast 3.0.2 patchtst.py:522-527 (TSTEncoderLayer): BatchNorm by default
    ('norm="BatchNorm"', '"batch" in norm.lower()', "nn.Sequential(Transpose(1, 2), nn.BatchNorm1d(hidden_size))"),
    # gluonts 0.16.2 nursery/daf/network/kernel.py:142-157: no norm by default
    ('norm="none"', 'norm == "none"', "nn.Identity()"),
    ('norm="instance"', 'norm == "instance" or norm == "batch"', "nn.InstanceNorm1d(hidden_size)"),
    ('norm="batch", affine=True', 'norm != "layer" and affine', "nn.BatchNorm1d(hidden_size)"),
])
def test_add_layer_norm_not_chosen_by_the_defaults(param, test, other):
    assert fused(_NORM_CHOICE.format(param=param, test=test, other=other)) == []


@pytest.mark.parametrize("param,test,other", [
    # demucs 4.1.0 transformer.py:429-434: GroupNorm only when ``group_norm`` is set, False by default
    ("group_norm=False", "group_norm", "MyGroupNorm(int(group_norm), hidden_size)"),
    # darts 0.41.0 tide_model.py:47 (and gluonts tide/module.py): no default, the caller decides
    ("use_layer_norm", "not use_layer_norm", "None"),
    ("norm", '"batch" in norm.lower()', "nn.BatchNorm1d(hidden_size)"),
    # diffusers 0.42.1 prior_transformer.py: no norm at all by default is not another norm
    ("norm_in_type=None", "norm_in_type is None", "None"),
    # the chosen branch builds a LayerNorm too
    ('norm="batch"', 'norm == "batch"', "nn.Sequential(Transpose(1, 2), nn.LayerNorm(hidden_size))"),
])
def test_add_layer_norm_chosen_or_undecided(param, test, other):
    assert fused(_NORM_CHOICE.format(param=param, test=test, other=other)) == [(13, 13, "torch_npu.npu_add_layer_norm")]
    # a default the constructor rebinds before the test
    rebound = _NORM_CHOICE.replace("super().__init__()", "super().__init__()\n        norm = norm or 'layer'")
    assert fused(rebound.format(param='norm="batch"', test='"batch" in norm.lower()', other="nn.BatchNorm1d(8)")) \
        == [(14, 14, "torch_npu.npu_add_layer_norm")]


def test_patterns_outside_functions_are_not_fused_candidates():
    assert fused("import torch\nx1, x2 = x.chunk(2, dim=-1)\ny = torch.cat((-x2, x1), dim=-1)\n") == []


# -- the sample project ----------------------------------------------------------------------------
def test_yolo_mini_sample_fires_every_affinity_code():
    found = set()
    for path in sorted(EXAMPLES.rglob("*.py")):
        for f in run_rules(path.read_text(encoding="utf-8"), codes=["ASC3"]):
            found.add((path.name, f.code, f.tips))
    assert {
        ("common.py", "ASC301", "torch_npu.contrib.module.Focus"),
        ("common.py", "ASC302", "torch_npu.contrib.module.ChannelShuffle"),
        ("common.py", "ASC304", "torch_npu.npu_rms_norm"),
        ("common.py", "ASC304", "torch_npu.npu_rotary_mul"),
        ("common.py", "ASC304", "torch_npu.npu_swiglu"),
        ("detect.py", "ASC304", "torch_npu.contrib.function.npu_fast_condition_index_put"),
        ("train.py", "ASC303", "torch_npu.optim.NpuFusedAdamW"),
    } <= found


@pytest.mark.parametrize("source,advice", [
    ("import torch\nx = torch.randn(8, 2)\nx[x[:, 0] > 0, 1] = 0\n", "masked_fill_"),  # mask in a tuple index
    ("import torch\ndef f(x):\n    keep = x.new_ones(8) > 0\n    x[:, keep] = 0\n", "masked_fill_"),
    ("import torch\ndef f(b, s):\n    keep = s > 0.5\n    b[keep] = b.new_zeros(4)\n", "masked_scatter_"),
    ("import torch\nx = torch.randn(8)\nx[x > 0] = y[x > 0]\n", "masked_scatter_"),  # a tensor value
])
def test_index_put_beyond_the_affinity_api_names_the_right_replacement(source, advice):
    findings = only(source, "ASC304")
    assert len(findings) == 1 and advice in findings[0].message and findings[0].rewrite is None
