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
                                  "sigmoid_focal_loss", "CrissCrossAttention", "GroupAll", "merge_cells.SumCell"])
def test_not_cuda_only(name):  # pure Python, or an NPU kernel in mmcv/ops/csrc/pytorch/npu
    table = load_mmcv_ops()
    assert name in table["not_cuda_only"] and name not in table["cuda_only"]


@pytest.mark.parametrize("name,op", [("DeformConv2d", "deform_conv_forward"), ("deform_conv2d", "deform_conv_forward"),
                                     ("MultiScaleDeformableAttention", "ms_deform_attn_forward"),
                                     ("carafe.CARAFEPack", "carafe_forward"),
                                     ("PointsSampler", "furthest_point_sampling_forward")])  # through a dispatch table
def test_cuda_only(name, op):
    assert op in load_mmcv_ops()["cuda_only"][name]


def test_an_op_with_cpu_and_cuda_kernels_but_no_npu_one_is_cuda_only():
    builder = _builder()
    assert builder._cuda_only_ops({"a": "CPU, CUDA", "b": "CUDA, NPU", "c": "CPU", "d": "none"}) == ["a"]
