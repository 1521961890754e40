"""Opt-in: ``third_party`` on mmcv 2.1.0's sdist, whose ops have CUDA kernels and, for some, NPU ones.

Set ``FLAKE8_ASCEND_MMCV`` to the unpacked sdist (``benchmarks/bench_third_party.py mmcv`` downloads
it; never in CI).  The NPU side is read here independently of the tool: an operator has an NPU
implementation when ``mmcv/ops/csrc/pytorch/npu`` registers ``<op>_impl`` or defines ``<op>_npu``.
"""
from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path

import pytest

from flake8_ascend import cli

SOURCE = os.environ.get("FLAKE8_ASCEND_MMCV")
pytestmark = pytest.mark.skipif(not SOURCE, reason="set FLAKE8_ASCEND_MMCV to an unpacked mmcv-2.1.0 sdist")


def rows(path: Path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))[1:]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    err = io.StringIO()
    code = cli.main(["-q", "-m", "third_party", "-i", SOURCE, "-o", str(out), "-v", "2.6.0", "--jedi-seconds", "0"],
                    out=io.StringIO(), err=err)
    assert code == 0, err.getvalue()
    return out / f"{Path(SOURCE).resolve().name}_analysis"


@pytest.fixture(scope="module")
def npu_ops():
    found = set()
    for path in (Path(SOURCE) / "mmcv" / "ops" / "csrc" / "pytorch" / "npu").glob("*.cpp"):
        text = path.read_text(encoding="utf-8", errors="replace")
        found.update(re.findall(r"REGISTER_NPU_IMPL\(\s*(\w+?)_impl\b", text))
        found.update(re.findall(r"\b(\w+?)_npu\s*\(", text))
    return found


def test_ops_with_an_npu_implementation_are_not_unsupported(report, npu_ops):
    ops = {row[0]: row for row in rows(report / "cuda_op.csv")}
    with_npu = {name for name, row in ops.items() if row[2].startswith("has an NPU implementation")}
    assert {"nms", "roi_align_forward", "roi_align_backward", "sigmoid_focal_loss_forward"} <= with_npu
    assert with_npu == {name for name in ops if name in npu_ops}
    full = rows(report / "full_unsupported_results.csv")
    ends = {line.split(" -> ")[-1].split(" (")[0] for row in full for line in row[3].splitlines()}
    assert not ends & with_npu
    names = {name for row in full for name in row[1].splitlines()}
    assert not {"mmcv.ops.nms", "mmcv.ops.nms.nms", "mmcv.ops.roi_align", "mmcv.ops.RoIAlign"} & names


def test_mmcv_ops_functions_that_call_cuda_only_ops_are_named(report):
    ops = {row[0]: row for row in rows(report / "cuda_op.csv")}
    tips = ops["deform_conv_forward"][2]
    assert tips.startswith("no NPU implementation") and "kernels: CPU, CUDA" in tips
    names = {name for row in rows(report / "full_unsupported_results.csv") for name in row[1].splitlines()}
    assert {"mmcv.ops.deform_conv2d", "mmcv.ops.DeformConv2d", "mmcv.ops.deform_conv.DeformConv2dFunction.forward",
            "mmcv.ops.SyncBatchNorm", "mmcv.ops.knn"} <= names
    assert sum(name.startswith("mmcv.ops.") for name in names) > 200
