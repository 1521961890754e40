"""ASC503-ASC506: constructor arguments that leave NPU training slower than it needs to be.

An argument counts as "set" when the call passes it, by keyword or
position, to anything but the literal that causes the slowdown; a call with
``**kwargs`` that does not name it is left alone (its value is unknown).
"""
from __future__ import annotations

import ast
import re

from ..calls import MISSING, argument, callee, is_constant, last_names
from ..registry import Rule
from ._sources import ADVICE_TABLE, ADVISOR_RULES, OFFICIAL_ADVICE
from ..detect.training import source_text, training
from ..walk import walk_tree

_DATALOADER = "torch.utils.data.DataLoader"
_DDP = "torch.nn.parallel.DistributedDataParallel"
_LASTS = last_names(_DATALOADER, _DDP)


def _left_default(call: ast.Call, keyword: str, index: int, *bad) -> bool:
    """Is the parameter missing (not hidden in ``**kwargs``) or set to one of the ``bad`` literals?"""
    value = argument(call, keyword, index)
    return value is MISSING or (value is not None and is_constant(value, *bad))


# Libraries that decode images, audio or video into arrays: a loader in a file that imports one carries media.
_MEDIA_LIBRARIES = frozenset({
    "torchvision", "PIL", "cv2", "torchaudio", "librosa", "soundfile", "imageio", "skimage", "decord", "av",
    "albumentations", "scipy.io.wavfile",
})
_MEDIA_WORDS = ("image", "img", "pixel", "audio", "wav", "video", "frame", "mel", "spectrogram", "picture")
_FLOAT_FACTORIES = frozenset({"torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty", "torch.full"})


def _media_import(tree: ast.AST) -> str:
    """The first image/audio/video library the file imports, or ``""``."""
    for node in walk_tree(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            for library in _MEDIA_LIBRARIES:
                if name == library or name.startswith(library + "."):
                    return library
    return ""


def _batch_names(call: ast.Call, ctx) -> str:
    """A media word in the names the loader's batches get: ``for images, labels in loader`` (also through
    ``enumerate``/``tqdm``-like wrappers), or the loader's or dataset's own name (``train_image_loader``)."""
    names = []
    parent = ctx.parent
    target = parent.targets[0] if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None
    if isinstance(target, (ast.Name, ast.Attribute)):
        loader = target.id if isinstance(target, ast.Name) else target.attr
        names.append(loader)
        for node in walk_tree(ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef) or ctx.tree):
            if isinstance(node, (ast.For, ast.comprehension)) and _iterates(node.iter, loader):
                names.extend(n.id for n in walk_tree(node.target) if isinstance(n, ast.Name))
    dataset = argument(call, "dataset", 0)
    if isinstance(dataset, (ast.Name, ast.Attribute)):
        names.append(dataset.id if isinstance(dataset, ast.Name) else dataset.attr)
    return next((n for n in names if any(t.startswith(_MEDIA_WORDS) for t in _words(n))), "")


def _words(name: str) -> list:
    """``train_imageLoader2`` -> ["train", "image", "loader"]: a media word must start a word
    (``dataframe`` is no frame)."""
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)]


def _iterates(expr: ast.AST, loader: str) -> bool:
    """``loader``, ``self.loader``, or a call wrapping it (``enumerate(loader)``, ``tqdm(loader)``)."""
    if isinstance(expr, ast.Call):
        return any(_iterates(a, loader) for a in expr.args)
    if isinstance(expr, ast.Name):
        return expr.id == loader
    return isinstance(expr, ast.Attribute) and expr.attr == loader


def _float_tensor_dataset(call: ast.Call, ctx) -> bool:
    """``TensorDataset(x, ...)`` whose first tensor is built here as a float tensor of rank 3 or more
    (``torch.randn(64, 3, 64, 64)``): image- or audio-shaped samples, default-collated into large batches."""
    dataset = argument(call, "dataset", 0)
    if isinstance(dataset, ast.Name):
        dataset = _bound_value(dataset.id, call, ctx)
    if not (isinstance(dataset, ast.Call) and dataset.args
            and ctx.chain(dataset.func) == "torch.utils.data.TensorDataset"):
        return False
    first = dataset.args[0]
    first = _bound_value(first.id, call, ctx) if isinstance(first, ast.Name) else first
    if not (isinstance(first, ast.Call) and ctx.chain(first.func) in _FLOAT_FACTORIES):
        return False
    size = first.args[0] if len(first.args) == 1 and isinstance(first.args[0], (ast.Tuple, ast.List)) else None
    dims = size.elts if size is not None else first.args
    return len(dims) >= 3


def _bound_value(name: str, call: ast.Call, ctx):
    """The value of the last ``name = value`` before ``call`` in its function (or module)."""
    value = None
    for node in walk_tree(ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef) or ctx.tree):
        if isinstance(node, ast.Assign) and node.lineno < call.lineno and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value if value is None or node.lineno > value.lineno else value
    return value


def media_evidence(call: ast.Call, ctx) -> str:
    """Why this loader's items are decoded media, or ``""``: a media library imported by the file, media names
    on its batches."""
    library = ctx.memo("media_import", lambda c: _media_import(c.tree))
    if library:
        return f"the file imports {library}"
    name = _batch_names(call, ctx)
    return f"its batches are {name}" if name else ""


def pinning_evidence(call: ast.Call, ctx) -> str:
    """Why this loader's batches are large enough for pinned memory to matter, or ``""``: decoded media, or a
    TensorDataset of rank-3+ float tensors."""
    evidence = media_evidence(call, ctx)
    if evidence:
        return evidence
    if _float_tensor_dataset(call, ctx):
        return "it collates float tensors of rank 3 or more"
    return ""


class DataLoaderWithoutPinMemory(Rule):
    code = "ASC503"
    summary = "DataLoader of image, audio or large float batches without pin_memory=True"
    node_types = (ast.Call,)
    trigger_words = ("DataLoader",)
    why = (
        "Batches in pageable host memory are first staged into a pinned buffer before the DMA to the NPU, "
        "and the copy cannot overlap with compute. `pin_memory=True` makes the workers hand over page-locked "
        "batches, so `.to(device, non_blocking=True)` really is asynchronous. That is worth a change only when "
        "batches are large: images, audio, video (megabytes per step). A batch of token ids is a few hundred "
        "KB whose copy takes microseconds, so the advice needs evidence in the code: the file imports an "
        "image/audio/video library (torchvision, PIL, cv2, torchaudio, librosa, soundfile, imageio, skimage, "
        "decord, av, albumentations), the batches or the loader or dataset are named as media "
        "(`for images, labels in loader`), or the dataset is a `TensorDataset` of float tensors of rank 3 or "
        "more built in the same function. Without such evidence it stays silent."
    )
    example = (
        "from torchvision import datasets\nloader = DataLoader(datasets.ImageFolder(root), batch_size=64, "
        "num_workers=8)"
    )
    use_instead = "`DataLoader(dataset, ..., pin_memory=True)`"
    source = f"{OFFICIAL_ADVICE} api_parameters_performance_dict; {ADVISOR_RULES}dataloader.yaml; {ADVICE_TABLE}"
    fires = [
        ("import torchvision\nfrom torch.utils.data import DataLoader\nl = DataLoader(ds, batch_size=8, num_workers=4)\n",
         3),
        ("from PIL import Image\nimport torch\nl = torch.utils.data.DataLoader(ds, 8, num_workers=4, pin_memory=False)\n",
         3),
        # the examples' yolo_mini/train.py:27: default collate of image-shaped float tensors
        ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndef build():\n"
         "    images = torch.randn(64, 3, 64, 64)\n    labels = torch.randint(0, 10, (64,))\n"
         "    return DataLoader(TensorDataset(images, labels), batch_size=8, num_workers=4)\n", 6),
        ("from torch.utils.data import DataLoader\nloader = DataLoader(data, batch_size=8)\nfor images in loader:\n"
         "    pass\n", 2),
        ("from torch.utils.data import DataLoader\ntrain_audio = DataLoader(ds, batch_size=8, num_workers=2)\n", 2),
    ]
    passes = [
        "import torchvision\nfrom torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=4, pin_memory=True)\n",
        "import torchvision\nfrom torch.utils.data import DataLoader\nl = DataLoader(ds, pin_memory=args.pin)\n",
        "import torchvision\nfrom torch.utils.data import DataLoader\nl = DataLoader(ds, **loader_kwargs)\n",
        "import torchvision\nfrom torch.utils.data import DataLoader\nl = DataLoader(ds, 8, True, None, None, 4, None, True)\n",
        "import torchvision\nfrom mylib import DataLoader\nl = DataLoader(ds)\n",
        # litgpt 0.5 data/alpaca.py:94: token ids of an SFT collate, a few hundred KB per batch
        "import torch\nfrom torch.utils.data import DataLoader\nclass Alpaca:\n    def train_dataloader(self):\n"
        "        return DataLoader(self.train_dataset, batch_size=self.batch_size, shuffle=True,\n"
        "                          num_workers=self.num_workers, collate_fn=get_sft_collate_fn(self.max_seq_length))\n",
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nids = torch.randint(0, 100, (64, 512))\n"
        "l = DataLoader(TensorDataset(ids), batch_size=8)\n",
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nx = torch.randn(64, 16)\n"
        "l = DataLoader(TensorDataset(x), batch_size=8)\n",
        "from torch.utils.data import DataLoader\ntrain_dataframe_loader = DataLoader(ds, batch_size=8)\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _LASTS) != _DATALOADER or not _left_default(node, "pin_memory", 7, False):
            return
        evidence = pinning_evidence(node, ctx)
        if evidence:
            ctx.report(node, self.code, f"DataLoader without pin_memory=True, and its batches are large ({evidence}): "
                       "host-to-NPU copies are staged and cannot overlap with compute (pass pin_memory=True) "
                       "[pin_memory defaults to False]", api=_DATALOADER, tips="set pin_memory=True")


class DataLoaderWithoutWorkers(Rule):
    code = "ASC504"
    summary = "DataLoader of image, audio or video items with num_workers=0 (the default)"
    node_types = (ast.Call,)
    trigger_words = ("DataLoader",)
    why = (
        "With `num_workers=0` the training process itself loads and augments every batch between steps, "
        "so the NPU waits for data on each step. Worker processes prepare batches in parallel with training. "
        "That is worth a change when loading an item is work: decoding and augmenting images, audio or video. "
        "Items already in memory (token ids, a `TensorDataset`, a table) are indexed in microseconds and "
        "workers only add start-up time, so the advice needs the same evidence as ASC503: the file imports an "
        "image/audio/video library or the batches, loader or dataset are named as media."
    )
    example = "from torchvision import datasets\nloader = DataLoader(datasets.ImageFolder(root), batch_size=64, pin_memory=True)"
    use_instead = "`DataLoader(dataset, ..., num_workers=N)` with N > 0 (e.g. the CPU cores per device)."
    source = f"{OFFICIAL_ADVICE} api_parameters_performance_dict; {ADVISOR_RULES}dataloader.yaml; {ADVICE_TABLE}"
    fires = [
        ("import torchvision\nfrom torch.utils.data import DataLoader\nl = DataLoader(ds, batch_size=8, pin_memory=True)\n", 3),
        ("from PIL import Image\nfrom torch.utils.data import DataLoader\nl = DataLoader(ds, 8, num_workers=0)\n", 3),
        ("from torch.utils.data import DataLoader\nloader = DataLoader(data, batch_size=8)\nfor images, labels in loader:\n"
         "    pass\n", 2),
    ]
    passes = [
        # items already in memory: token ids, a table, tensors (pytorch-forecasting-like and SFT loaders)
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, batch_size=8, pin_memory=True)\n",
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nx = torch.randn(64, 3, 32, 32)\n"
        "l = DataLoader(TensorDataset(x), batch_size=8)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=4)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=args.workers)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, **kw)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, 8, True, None, None, 4)\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _LASTS) != _DATALOADER or not _left_default(node, "num_workers", 5, 0):
            return
        evidence = media_evidence(node, ctx)
        if evidence:
            ctx.report(node, self.code, f"DataLoader decodes media in the training process ({evidence}; "
                       "num_workers=0): the NPU waits for data every step (pass num_workers > 0) [num_workers defaults to 0]",
                       api=_DATALOADER, tips="set num_workers > 0")


def _for_inference(node: ast.Call, ctx) -> bool:
    """The DDP wrapper serves inference: the function assigns it to a name it then puts in eval mode
    (``model = DistributedDataParallel(model, ...)`` ... ``model.eval()``, mmdet 3.1.0 utils/benchmark.py:199-205)
    and nothing in the file runs a backward pass. Buckets only group gradients, so their size changes nothing."""
    statement = ctx.parent
    if not (isinstance(statement, ast.Assign) and statement.value is node and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)) or "backward" in source_text(ctx):
        return False
    function = ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef)
    name = statement.targets[0].id
    return function is not None and any(
        isinstance(read.path[0], ast.Attribute) and read.path[0].attr == "eval" and len(read.path) > 1
        and isinstance(read.path[1], ast.Call) and read.path[1].func is read.path[0]
        for read in ctx.model.reads(function, name))


class DdpWithoutBucketSize(Rule):
    code = "ASC505"
    summary = "DistributedDataParallel without bucket_cap_mb"
    node_types = (ast.Call,)
    trigger_words = ("DistributedDataParallel",)
    why = (
        "DDP all-reduces gradients in buckets of `bucket_cap_mb` (25 MB by default). On Ascend every bucket "
        "is one HCCL collective with a fixed launch cost, so small buckets mean many collectives per step; "
        "the official migration tool advises a much larger bucket (500 MB). A wrapper the function puts in eval "
        "mode, in a file that runs no backward, all-reduces no gradients and is not reported."
    )
    example = "model = DistributedDataParallel(model, device_ids=[rank])"
    use_instead = "`DistributedDataParallel(model, device_ids=[rank], bucket_cap_mb=500)`, then tune by profiling."
    source = f"{OFFICIAL_ADVICE} api_parameters_performance_dict; {ADVICE_TABLE}"
    fires = [
        ("from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, device_ids=[0])\n", 2),
        ("import torch\nm = torch.nn.parallel.DistributedDataParallel(m)\n", 2),
        # near misses of an inference wrapper: the file trains it too, the model put in eval mode is another name
        ("from torch.nn.parallel import DistributedDataParallel\ndef run(model, x):\n"
         "    ddp = DistributedDataParallel(model)\n    ddp.eval()\n    ddp(x).sum().backward()\n", 3),
        ("from torch.nn.parallel import DistributedDataParallel\ndef run(model, x):\n"
         "    ddp = DistributedDataParallel(model)\n    model.eval()\n    return ddp\n", 3),
    ]
    passes = [
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, bucket_cap_mb=500)\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, **ddp_kwargs)\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, None, None, 0, True, None, 200)\n",
        "from fairscale import DistributedDataParallel\nm = DistributedDataParallel(m)\n",
        # a wrapper for an inference benchmark: put in eval mode, no backward in the file (mmdet 3.1.0
        # utils/benchmark.py:196-205)
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel\ndef _init_model(self, model):\n"
        "    model = model.cuda()\n    if self.distributed:\n        model = DistributedDataParallel(\n"
        "            model, device_ids=[torch.cuda.current_device()], broadcast_buffers=False,\n"
        "            find_unused_parameters=False)\n    model.eval()\n    return model\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _LASTS) == _DDP and argument(node, "bucket_cap_mb", 6) is MISSING and \
                not _for_inference(node, ctx):
            ctx.report(node, self.code, "DistributedDataParallel keeps 25 MB gradient buckets: many small HCCL "
                       "all-reduces per step (pass a larger bucket_cap_mb, e.g. 500) [bucket_cap_mb not set]",
                       api=_DDP, tips="set bucket_cap_mb=500, then tune")


class DdpAccumulationWithoutNoSync(Rule):
    code = "ASC506"
    summary = "DistributedDataParallel with gradient accumulation but no no_sync()"
    node_types = (ast.Call,)
    trigger_words = ("DistributedDataParallel",)
    why = (
        "DDP all-reduces the gradients on every `backward()`. With gradient accumulation only the last "
        "micro-batch before `optimizer.step()` needs it; the others pay a full HCCL all-reduce for nothing. "
        "Fires on the DDP construction when the same file steps the optimizer inside a periodic "
        "`if ... % N ...:` branch of a training loop and never uses `no_sync`."
    )
    example = (
        "model = DDP(model)\nfor i, x in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n"
        "    if (i + 1) % accum == 0:\n        opt.step()"
    )
    use_instead = "Run the non-stepping micro-batches under `with model.no_sync():` so only the last one all-reduces."
    source = f"{OFFICIAL_ADVICE} performance_api_suggest_use; {ADVICE_TABLE}"
    fires = [
        ("from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, bucket_cap_mb=100)\n"
         "for i, x in enumerate(data):\n    m(x).sum().backward()\n    if (i + 1) % 4 == 0:\n"
         "        optimizer.step()\n", 2),
    ]
    passes = [
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m)\n"
        "for x in data:\n    m(x).sum().backward()\n    optimizer.step()\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m)\n"
        "for i, x in enumerate(data):\n    ctx = m.no_sync() if (i + 1) % 4 else nullcontext()\n"
        "    with ctx:\n        m(x).sum().backward()\n    if (i + 1) % 4 == 0:\n        optimizer.step()\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m)\n"
        "for x in data:\n    m(x).sum().backward()\n    if not skip_step:\n        optimizer.step()\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _LASTS) != _DDP or not training(ctx).accumulates or "no_sync" in source_text(ctx):
            return
        ctx.report(node, self.code, "DDP model trained with gradient accumulation all-reduces on every micro-batch "
                   "(run the non-stepping backward passes under model.no_sync()) [optimizer.step() every N steps]",
                   api=_DDP, tips="wrap accumulation steps in model.no_sync()")
