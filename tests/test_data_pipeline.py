"""detect/loader_names.data_pipeline_module: the transforms of a datasets package run on the host, in the loader's
workers, so the engine keeps advice for the NPU out of them (a CUDA finding stays)."""
import ast

import pytest

from flake8_ascend.config import Config, make_config
from flake8_ascend.data import default_version
from flake8_ascend.detect.loader_names import data_pipeline_module, datasets_module
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


def _codes(source, path="pkg/models/head.py", select=None):
    found = lint(ast.parse(source), source.splitlines(True), path, make_config())
    return sorted(f.code for f in found if select is None or f.code in select)


def test_advice_stays_out_of_the_pipeline_but_a_cuda_finding_does_not():
    assert sorted(set(_codes(SOURCE, "mmyolo/datasets/transforms/keypoint_structure.py"))) == ["ASC202"]
    assert set(_codes(SOURCE, "mmyolo/models/keypoint_structure.py")) > {"ASC202"}


@pytest.mark.parametrize("path, host", [
    ("torchgeo/datasets/pastis.py", True), ("xtuner/dataset/preference_dataset.py", True),
    ("funasr/datasets/sense_voice_datasets/datasets.py", True), ("pkg\\datasets\\folder.py", True),
    # near misses: a data folder also holds code run on device batches (timm 1.0.31 data/naflex_random_erasing.py in
    # the prefetch loader, anomalib 2.7.0 data/utils/tiler.py in the model), a module named datasets, a longer name
    ("timm/data/naflex_random_erasing.py", False), ("anomalib/data/utils/tiler.py", False),
    ("pkg/datasets.py", False), ("pkg/mydatasets/folder.py", False), ("pkg/dataset_utils/pack.py", False),
])
def test_datasets_modules(path, host):
    assert datasets_module(path) is host


# torchgeo 0.8.1 datasets/pastis.py:255-262, instance ids read in a dataset's __getitem__ from a numpy array
PASTIS = """\
import torch
class PASTIS(torch.utils.data.Dataset):
    def __getitem__(self, index):
        instance_ids = torch.from_numpy(self.load(index))
        return instance_ids[instance_ids != 0]
"""
DEVICE = """\
import torch
class Head(torch.nn.Module):
    def forward(self, instance_ids):
        return instance_ids[instance_ids != 0]
"""
# a datasets folder's loader builder (mmdet 2.x datasets/builder.py-style): the loader's settings stay reported
LOADER = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder
def build_train_loader(root, batch_size):
    train_loader = DataLoader(ImageFolder(root), batch_size=batch_size, shuffle=True)
    return train_loader
def unpad(lengths: torch.Tensor, x):
    return x[:lengths.max().item()]
"""


def test_op_advice_stays_out_of_dataset_methods_and_datasets_folders():
    advisory = {"ASC402", "ASC403", "ASC404", "ASC503", "ASC504"}
    assert _codes(PASTIS, select=advisory) == []
    assert _codes(DEVICE, select=advisory) == ["ASC402"]  # near miss: the same read in a module's forward
    assert _codes(DEVICE, path="torchgeo/datasets/pastis.py", select=advisory) == []
    assert _codes(LOADER, select=advisory) == ["ASC403", "ASC404", "ASC503", "ASC504"]
    assert _codes(LOADER, path="mmdet/datasets/builder.py", select=advisory) == ["ASC404", "ASC503", "ASC504"]


# an op without an NPU kernel and a restricted argument (ASC101, ASC103) on a sample, and the same lines in a model
RESCALE = """\
import torch
import torch.nn.functional as F
def rescale(img, ratio):
    background = torch.mode(img.flatten()).values
    return F.interpolate(img[None] - background, scale_factor=ratio, mode='bilinear')
"""
SAMPLE = """\
import torch
import torch.nn.functional as F
class Resized(torch.utils.data.Dataset):
    def __getitem__(self, index):
        img = self.load(index)
        background = torch.mode(img.flatten()).values
        return F.interpolate(img[None] - background, scale_factor=0.5, mode='bilinear')
"""


def test_kernel_findings_stay_out_of_dataset_methods_and_datasets_folders():
    kernels = {"ASC101", "ASC103"}
    assert _codes(RESCALE, select=kernels) == ["ASC101", "ASC103"]  # near miss: a model's helper
    assert _codes(RESCALE, path="pkg/datasets/transforms/resize.py", select=kernels) == []
    assert _codes(SAMPLE, select=kernels) == []


# transformers 4.57.6 data/data_collator.py:1088-1091-style masking in a collator, and the same lines in a module
COLLATED = """\
import torch
class {name}:
    def {method}(self, inputs: torch.Tensor, special_tokens_mask):
        labels = inputs.clone()
        probability_matrix = torch.full(labels.shape, 0.15)
        masked_indices = torch.bernoulli(probability_matrix).bool()
        labels[~masked_indices] = -100
        return labels[labels != -100]
"""


@pytest.mark.parametrize("name, method, quiet", [
    ("DataCollatorForLanguageModeling", "torch_mask_tokens", True), ("SFTDataCollatorWith4DAttentionMask", "pad", True),
    ("Batcher", "smart_batching_collate", True), ("Batcher", "pad_collate_fn", True),
    ("LlavaNextTaskEncoder", "pack_selected_samples", True),  # nemo 2.5 vlm/llava_next/data/task_encoder.py:190
    # near misses: a logits processor and a module run on the device, a method that collects results, a model's
    # text encoder, a task encoder's settings
    ("MaskLogitsProcessor", "torch_mask_tokens", False), ("MaskedLM", "forward", False),
    ("Evaluator", "collect_results", False), ("CLIPTextEncoder", "forward", False),
    ("TaskEncoderConfig", "masked", False),
])
def test_collators_run_in_the_loader(name, method, quiet):
    found = _codes(COLLATED.format(name=name, method=method), select={"ASC304", "ASC402"})
    assert (found == []) is quiet


# nemo 2.5 vlm/neva/data/sequence_packing.py:103-149, a packing helper, and its callers: an energon task encoder
# (multimodal/data/energon/task_encoder.py:294-311) and a dataset's collate_fn (vlm/neva/data/preloaded.py:438-455)
PACKING = """\
import torch


def convert_to_packed(tokens, labels):
    packed_labels = torch.cat(labels, dim=0).unsqueeze(0)
    packed_loss_mask = torch.ones_like(packed_labels, dtype=torch.float, device=packed_labels.device)
    packed_loss_mask[packed_labels < 0] = 0.0
    return packed_loss_mask
"""
ENCODER = """\
from .packing import convert_to_packed


class MultiModalTaskEncoder:
    def pack_selected_samples(self, samples):
        return convert_to_packed([s.tokens for s in samples], [s.labels for s in samples])
"""
COLLATE = """\
from pkg import packing


class NevaDataset:
    def collate_fn(self, instances):
        return packing.convert_to_packed([i["tokens"] for i in instances], [i["labels"] for i in instances])
"""
# s3prl 0.4.17 pretrain/mockingjay/dataset.py:20: imported as run from inside the package's folder
TOP_LEVEL = """\
from packing import convert_to_packed


class KaldiAcousticDataset:
    def __getitem__(self, index):
        return convert_to_packed(self.tokens[index], self.labels[index])
"""
FORWARD = """\
from .packing import convert_to_packed


class Model:
    def forward(self, tokens, labels):
        return convert_to_packed(tokens, labels)
"""


@pytest.mark.parametrize("callers, init, lines", [
    ([ENCODER, COLLATE], "", []),
    ([ENCODER], "", []),
    ([TOP_LEVEL], "", []),
    # near misses: a model's forward calls it too; nothing in the project calls it; the package exports it, so its
    # users may call it anywhere
    ([ENCODER, COLLATE, FORWARD], "", [7]),
    ([TOP_LEVEL, FORWARD.replace("from .packing", "from packing")], "", [7]),
    ([], "", [7]),
    ([COLLATE], "from .packing import convert_to_packed\n", [7]),
])
def test_op_advice_stays_out_of_functions_only_the_pipeline_calls(tmp_path, callers, init, lines):
    assert _package_lines(tmp_path, "packing", PACKING, callers, "ASC304", init) == lines


def _package_lines(root, name, source, callers, code, init=""):
    """The lines of ``code``'s findings in the module ``name`` of a package ``pkg`` beside modules ``callers``."""
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(init)
    (package / f"{name}.py").write_text(source)
    for number, caller in enumerate(callers):  # a caller's text, or (its path in the package, its text)
        where, text = caller if isinstance(caller, tuple) else (f"caller{number}.py", caller)
        (package / where).parent.mkdir(parents=True, exist_ok=True)
        (package / where).write_text(text)
    config = Config(default_version(), root=str(root))
    found = lint(ast.parse(source), source.splitlines(True), f"pkg/{name}.py", config)
    return [f.line for f in found if f.code == code]


# unsloth utils/mm_packing.py:41-50: a helper of a packing function that a collator calls (trainer.py:96-110)
MM_PACKING = """\
import torch


def _strip_padding(doc):
    keep = doc["attention_mask"][0].bool()
    return doc["input_ids"][:, keep]


def pack_documents(docs):
    return torch.cat([_strip_padding(doc) for doc in docs], dim=1)
"""
VISION_COLLATOR = """\
from .mm_packing import pack_documents


class VisionDataCollator:
    def __call__(self, examples):
        return pack_documents([self.collate([example]) for example in examples])
"""


@pytest.mark.parametrize("callers, lines", [
    ([VISION_COLLATOR], []),
    # near misses: the collator moves the batch to the device (a trainer's batch helper, not a loader worker's:
    # ms_swift rlhf_trainers/utils.py:2197-2248); a model's forward packs too
    ([VISION_COLLATOR.replace("for example in examples])", "for example in examples]).to(self.device)")], [6]),
    ([VISION_COLLATOR, FORWARD.replace(".packing import convert_to_packed", ".mm_packing import pack_documents")
      .replace("convert_to_packed(tokens, labels)", "pack_documents(tokens)")], [6]),
])
def test_op_advice_stays_out_of_the_helpers_of_functions_only_the_pipeline_calls(tmp_path, callers, lines):
    assert _package_lines(tmp_path, "mm_packing", MM_PACKING, callers, "ASC402") == lines


# mmdet 3.1.0 structures/bbox/horizontal_boxes.py:184-198, a method of the boxes, and its only callers: the geometric
# transforms of the datasets' pipeline (datasets/transforms/geometric.py:138, transforms.py:2846), and another method
# of the boxes that only they call
BOXES = """\
import torch


class HorizontalBoxes:
    def project_(self, homography_matrix):
        boxes = self.tensor
        homography_matrix = boxes.new_tensor(homography_matrix)
        corners = self.hbox2corner(boxes)
        corners = torch.cat([corners, corners.new_ones(*corners.shape[:-1], 1)], dim=-1)
        corners_T = torch.transpose(corners, -1, -2)
        corners_T = torch.matmul(homography_matrix, corners_T)
        self.tensor = self.corner2hbox(torch.transpose(corners_T, -1, -2))

    def rotate_(self, matrix):
        self.project_(matrix)
"""
GEOMETRIC = ("datasets/transforms/geometric.py", """\
class GeomTransform:
    def _transform_bboxes(self, results):
        results["gt_bboxes"].project_(self.homography_matrix)

    def _rotate_bboxes(self, results):
        results["gt_bboxes"].rotate_(self.rotation_matrix)
""")
HEAD = ("models/head.py", """\
class Head:
    def predict(self, boxes, matrix):
        boxes.project_(matrix)
""")


@pytest.mark.parametrize("callers, init, lines", [
    ([GEOMETRIC], "", []),
    # near misses: a model's head calls a method so named too; nothing in the project calls it; the package exports
    # its class, so its users may call it anywhere
    ([GEOMETRIC, HEAD], "", [11]),
    ([], "", [11]),
    ([GEOMETRIC], "from .boxes import HorizontalBoxes\n", [11]),
])
def test_op_advice_stays_out_of_methods_only_the_pipeline_calls(tmp_path, callers, init, lines):
    assert _package_lines(tmp_path, "boxes", BOXES, callers, "ASC603", init) == lines
