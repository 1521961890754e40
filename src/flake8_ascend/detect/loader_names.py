"""What a name says about a data loader (``train_loader``, ``valDl``), shared by ASC404 and the loop injector, and
which code the loader's workers run on the host (ASC101-103, ASC304)."""
from __future__ import annotations

import ast
import re
from typing import List

_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_EVAL_PREFIXES = ("val", "test", "eval")
_EVAL_WORDS = frozenset({"dev", "predict", "prediction", "infer", "inference", "valid", "validation"})


def words(text: str) -> List[str]:
    """Lower-case words of an identifier (``trainLoader``, ``val_dl`` -> ``train loader``, ``val dl``)."""
    return [w.lower() for w in _WORD.findall(text)]


def says_eval(text: str) -> bool:
    return any(w.startswith(_EVAL_PREFIXES) or w in _EVAL_WORDS for w in words(text))


def says_train(text: str) -> bool:
    return any("train" in w for w in words(text))


def says_loader(name: str) -> bool:
    return any("loader" in w or w == "dl" for w in words(name))


# classes whose methods prepare samples or batches in the DataLoader's workers: datasets, collators (transformers
# 4.57.6 ``DataCollatorForLanguageModeling``, llamafactory ``SFTDataCollatorWith4DAttentionMask``), processing
# strategies; not "Processor" (diffusers' attention processors and transformers' logits processors run on the
# device)
_PIPELINE_CLASS = re.compile(r"Collator|(Dataset|ProcessingStrategy)$")


def in_data_pipeline(stack) -> bool:
    """Inside code a DataLoader worker runs, on the host: a collate function (``collate_fn``, ``pad_collate``,
    ``smart_batching_collate``), ``__getitem__`` / ``__iter__`` of a class (a Dataset), or a method of a class named
    for a dataset, a collator or a processing strategy (axolotl 0.19.0 processing_strategies.py:389, ``labels[~keep]
    = -100`` in ``ProcessingStrategy.process_labels``). ``stack``: the ancestors of the node, outermost first."""
    for node in reversed(stack):
        if node.__class__ is ast.ClassDef and _PIPELINE_CLASS.search(node.name):
            return True
        if node.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and (
                "collate" in node.name or node.name in ("__getitem__", "__iter__")):
            return True
    return False


# a package's datasets folder (torchgeo 0.8.1 ``datasets/pastis.py``, funasr ``datasets/sense_voice_datasets/``, xtuner
# ``dataset/preference_dataset.py``): its modules are the Dataset classes and their helpers; not a ``data`` folder,
# which also holds code that runs on batches on the device (timm 1.0.31 ``data/naflex_random_erasing.py`` in the
# prefetch loader, anomalib 2.7.0 ``data/utils/tiler.py`` in the model)
_DATASETS_MODULE = re.compile(r"(^|[\\/])datasets?[\\/]")


def datasets_module(path: str) -> bool:
    """Is ``path`` a module of a package's datasets folder? Its tensors are samples the loader's workers build on
    the host."""
    return bool(_DATASETS_MODULE.search(path))


# OpenMMLab's layout (mmdet, mmseg, mmpose, mmaction2, mmocr, mmyolo, mmdet3d, mmpretrain, mmagic; mmdet 2.x's
# ``datasets/pipelines``): the modules of a datasets package's transforms are the steps of the dataset's pipeline,
# which its ``__getitem__`` runs in the loader's workers
_PIPELINE_MODULE = re.compile(r"(^|[\\/])datasets[\\/](transforms|pipelines)[\\/]")


def data_pipeline_module(path: str) -> bool:
    """Is ``path`` a module of a datasets package's transforms (``mmyolo/datasets/transforms/keypoint_structure.py``,
    ``mmaction/datasets/transforms/processing.py``)? Its tensors are samples on the host: advice for the NPU does
    not concern it."""
    return bool(_PIPELINE_MODULE.search(path))
