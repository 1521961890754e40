"""The mmcv.ops table ASC206 uses: in sync with its facts, and right on the names the real corpora import."""
from __future__ import annotations

from pathlib import Path

import pytest

from flake8_ascend.data import load_mmcv_ops
from conftest import load_tool

REPO = Path(__file__).resolve().parent.parent


def _builder():
    return load_tool("build_mmcv_ops")


def test_packaged_table_matches_a_rebuild():
    assert _builder().main(["--check"]) == 0, "run tools/build_mmcv_ops.py"


@pytest.mark.parametrize("name", ["point_sample", "PSAMask", "nms", "batched_nms", "roi_align", "RoIAlign",
                                  "sigmoid_focal_loss", "CrissCrossAttention", "GroupAll", "merge_cells.SumCell",
                                  # Python paths: deform_conv.py:104 `if ctx.device == 'npu'` (torch_npu kernels),
                                  # multi_scale_deform_attn.py:366 (pure PyTorch when the tensor is not on CUDA)
                                  "DeformConv2d", "deform_conv2d", "ModulatedDeformConv2dPack",
                                  "MultiScaleDeformableAttention", "MaskedConv2d"])
def test_not_cuda_only(name):  # pure Python, an NPU kernel in mmcv/ops/csrc/pytorch/npu, or a Python NPU path
    table = load_mmcv_ops()
    assert name in table["not_cuda_only"] and name not in table["cuda_only"]


@pytest.mark.parametrize("name,op", [("multi_scale_deform_attn.MultiScaleDeformableAttnFunction", "ms_deform_attn_forward"),
                                     ("carafe.CARAFEPack", "carafe_forward"),
                                     ("PointsSampler", "furthest_point_sampling_forward")])  # through a dispatch table
def test_cuda_only(name, op):
    assert op in load_mmcv_ops()["cuda_only"][name]


def test_an_op_with_cpu_and_cuda_kernels_but_no_npu_one_is_cuda_only():
    builder = _builder()
    assert builder._cuda_only_ops({"a": "CPU, CUDA", "b": "CUDA, NPU", "c": "CPU", "d": "none"}) == ["a"]


@pytest.mark.parametrize("source,paths", [
    # mmcv 2.1.0 deform_conv.py:104 and multi_scale_deform_attn.py:366, fused_bias_leakyrelu.py:261, bias_act.py:166
    ("def f(ctx, x):\n    if ctx.device == 'npu':\n        return F._npu_forward(ctx, x)\n    return ext(x)\n",
     ["npu:2"]),
    ("def f(v):\n    if IS_CUDA_AVAILABLE and v.is_cuda:\n        o = F.apply(v)\n    else:\n        o = ref(v)\n"
     "    return o\n", ["not-cuda:2"]),
    ("def f(x):\n    if not x.is_cuda:\n        return ref(x)\n    return F.apply(x)\n", ["not-cuda:2"]),
    ("def f(x):\n    if x.is_cuda:\n        return F.apply(x)\n    return ref(x)\n", ["not-cuda:2"]),
    # near misses: box_iou_rotated.py:145 only rescales for the NPU kernel; carafe.py:68 requires CUDA
    ("def f(b):\n    if b.device.type == 'npu':\n        b = b * s\n    return ext(b)\n", []),
    ("def f(g):\n    assert g.is_cuda\n    return ext(g)\n", []),
    ("def f(x):\n    if x.is_cuda:\n        x = x.contiguous()\n    return ext(x)\n", []),
])
def test_python_paths(source, paths):
    import ast
    assert _builder()._python_paths(ast.parse(source)) == paths
