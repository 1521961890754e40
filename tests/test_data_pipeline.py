"""detect/loader_names.data_pipeline_module: the transforms of a datasets package run on the host, in the loader's
workers, so the engine keeps advice for the NPU out of them (a CUDA finding stays)."""
import ast

import pytest

from flake8_ascend.config import make_config
from flake8_ascend.detect.loader_names import data_pipeline_module
from flake8_ascend.engine import lint

# mmyolo 0.6.0 datasets/transforms/keypoint_structure.py:118-143, a keypoint structure of the transforms
SOURCE = """\
import torch
def clip_(keypoints, img_shape, homography_matrix):
    keypoints[keypoints[..., 0] > img_shape[1]] = 0
    moved = keypoints.to('cuda')
    return torch.matmul(homography_matrix, moved)
"""


@pytest.mark.parametrize("path, host", [
    ("mmyolo/datasets/transforms/keypoint_structure.py", True), ("mmdet/datasets/pipelines/loading.py", True),
    ("pkg\\datasets\\transforms\\formatting.py", True),
    # near misses: GPU augmentations outside a datasets package (torchgeo 0.8.1 transforms/, anomalib 2.7.0
    # data/transforms/), a module named transforms, the models
    ("torchgeo/transforms/transforms.py", False), ("anomalib/data/transforms/center_crop.py", False),
    ("pkg/datasets/transforms.py", False), ("mmyolo/models/dense_heads/yolov5_head.py", False),
])
def test_data_pipeline_modules(path, host):
    assert data_pipeline_module(path) is host


def test_advice_stays_out_of_the_pipeline_but_a_cuda_finding_does_not():
    config = make_config()

    def codes(path):
        return sorted({f.code for f in lint(ast.parse(SOURCE), SOURCE.splitlines(True), path, config)})
    assert codes("mmyolo/datasets/transforms/keypoint_structure.py") == ["ASC202"]
    assert set(codes("mmyolo/models/keypoint_structure.py")) > {"ASC202"}
