"""What a name says about a data loader (``train_loader``, ``valDl``), shared by ASC404 and the loop injector, and
which code the loader's workers run on the host (ASC101-103, ASC304)."""
from __future__ import annotations

import ast
import re
from typing import List

from ..semantic import project
from ..semantic.values import places_on_device

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
# strategies and Megatron-Energon's task encoders, whose ``encode_sample``/``batch``/``encode_batch`` run before the
# DataLoader moves the batch to the main process (nemo 2.5 ``MultiModalTaskEncoder``); not "Processor" (diffusers'
# attention processors and transformers' logits processors run on the device)
_PIPELINE_CLASS = re.compile(r"Collator|(Dataset|ProcessingStrategy|TaskEncoder)$")


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


def only_the_pipeline_calls(ctx) -> bool:
    """Inside a top-level function, or a method of a top-level class, that only the data pipeline calls: every call
    of it in its project is in code ``in_data_pipeline``, in a datasets module or in another such function of the
    file (nemo 2.5 vlm/neva/data/sequence_packing.py ``convert_to_packed``, called in energon task encoders and a
    dataset's ``collate_fn``; unsloth utils/mm_packing.py ``_strip_padding``, through ``pack_multimodal_documents``
    in a collator); for a method, every call of a method so named, whatever its receiver (mmdet 3.1.0
    structures/bbox/horizontal_boxes.py ``HorizontalBoxes.project_``, called only by the geometric transforms of
    ``datasets/transforms/``). Not a function or class of the package's public interface, whose users may call it
    anywhere, nor one the project never calls, nor a special method (Python calls it unspelled)."""
    return _in_pipeline_helper(ctx, ctx.stack)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _pipeline_helper(ctx, function: ast.AST) -> bool:
    answers = ctx.memo("pipeline_helpers", lambda c: {})
    found = answers.get(id(function))
    if found is None:
        answers[id(function)] = False  # while asked: a cycle of calls shows no pipeline
        found = answers[id(function)] = _pipeline_callers(ctx, function)
    return found


def _pipeline_callers(ctx, function: ast.AST) -> bool:
    cls = ctx.model.scope(function).node
    method = isinstance(cls, ast.ClassDef)
    calls = [call for call in ctx.model.calls(function.name) if isinstance(call.func, ast.Attribute)] if method \
        else ctx.model.summaries.call_sites(function)
    own = [_around(ctx.model.scope(call)) for call in calls]
    own = [around for around in own if function not in around]  # not its own recursive calls
    if not all(in_data_pipeline(around) and _keeps_on_host(around) or _in_pipeline_helper(ctx, around)
               for around in own):
        return False  # the file's own calls first: they settle most functions without reading the package
    path = ctx.module_path()
    if path is None or project.public(path, cls.name if method else function.name):
        return False
    elsewhere = project.callers_elsewhere(path, function.name, _may_feed, method)
    return elsewhere is not None and bool(own or elsewhere) and all(
        (in_data_pipeline(around) or datasets_module(module) or data_pipeline_module(module)) and _keeps_on_host(around)
        for module, around in elsewhere)


def _in_pipeline_helper(ctx, around: List[ast.AST]) -> bool:
    """Is the innermost of ``around`` (the module's nodes around a node, outermost first) in a top-level function, or
    a method of a top-level class, that only the pipeline calls?"""
    if len(around) > 2 and isinstance(around[1], ast.ClassDef) and isinstance(around[2], _FUNCTIONS):
        return not around[2].name.startswith("__") and _pipeline_helper(ctx, around[2])
    return len(around) > 1 and isinstance(around[1], _FUNCTIONS) and _pipeline_helper(ctx, around[1])


# words of a module that may run code for the loader's workers (``in_data_pipeline``): one with none of them, outside
# a datasets folder, calls no function from there (a model's modules, which import the attention helpers)
_PIPELINE_WORDS = re.compile(r"collate|__getitem__|__iter__|Collator|Dataset|ProcessingStrategy|TaskEncoder")


def _may_feed(module: str, text: str) -> bool:
    return datasets_module(module) or data_pipeline_module(module) or bool(_PIPELINE_WORDS.search(text))


def _keeps_on_host(around: List[ast.AST]) -> bool:
    """The function making the call places nothing on a device: a batch helper named for collating that moves the
    batch (ms_swift rlhf_trainers/utils.py ``collate_to_grpo_micro_batch``) runs in the trainer, not a worker."""
    function = next((node for node in reversed(around) if isinstance(node, _FUNCTIONS)), None)
    return function is not None and not places_on_device(function)


def _around(scope) -> List[ast.AST]:
    """The nodes of ``scope`` and the scopes around it, outermost first (the module's)."""
    found = []
    while scope is not None:
        found.append(scope.node)
        scope = scope.parent
    return found[::-1]
