"""ASC503-ASC506: constructor arguments that leave NPU training slower than it needs to be.

An argument counts as "set" when the call passes it, by keyword or
position, to anything but the literal that causes the slowdown; a call with
``**kwargs`` that does not name it is left alone (its value is unknown).
"""
from __future__ import annotations

import ast

from ..calls import MISSING, argument, callee, is_constant, last_names
from ..registry import Rule
from ._sources import ADVICE_TABLE, ADVISOR_RULES, OFFICIAL_ADVICE
from ..detect.training import source_text, training

_DATALOADER = "torch.utils.data.DataLoader"
_DDP = "torch.nn.parallel.DistributedDataParallel"
_LASTS = last_names(_DATALOADER, _DDP)


def _left_default(call: ast.Call, keyword: str, index: int, *bad) -> bool:
    """Is the parameter missing (not hidden in ``**kwargs``) or set to one of the ``bad`` literals?"""
    value = argument(call, keyword, index)
    return value is MISSING or (value is not None and is_constant(value, *bad))


class DataLoaderWithoutPinMemory(Rule):
    code = "ASC503"
    summary = "DataLoader without pin_memory=True"
    node_types = (ast.Call,)
    trigger_words = ("DataLoader",)
    why = (
        "Batches in pageable host memory are first staged into a pinned buffer before the DMA to the NPU, "
        "and the copy cannot overlap with compute. `pin_memory=True` makes the workers hand over page-locked "
        "batches, so `.to(device, non_blocking=True)` really is asynchronous."
    )
    example = "loader = DataLoader(dataset, batch_size=64, num_workers=8)"
    use_instead = "`DataLoader(dataset, ..., pin_memory=True)`"
    source = f"{OFFICIAL_ADVICE} api_parameters_performance_dict; {ADVISOR_RULES}dataloader.yaml; {ADVICE_TABLE}"
    fires = [
        ("from torch.utils.data import DataLoader\nl = DataLoader(ds, batch_size=8, num_workers=4)\n", 2),
        ("import torch\nl = torch.utils.data.DataLoader(ds, 8, num_workers=4, pin_memory=False)\n", 2),
    ]
    passes = [
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=4, pin_memory=True)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, pin_memory=args.pin)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, **loader_kwargs)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, 8, True, None, None, 4, None, True)\n",
        "from mylib import DataLoader\nl = DataLoader(ds)\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _LASTS) == _DATALOADER and _left_default(node, "pin_memory", 7, False):
            ctx.report(node, self.code, "DataLoader without pin_memory=True: host-to-NPU copies are staged and "
                       "cannot overlap with compute (pass pin_memory=True) [pin_memory defaults to False]",
                       api=_DATALOADER, tips="set pin_memory=True")


class DataLoaderWithoutWorkers(Rule):
    code = "ASC504"
    summary = "DataLoader with num_workers=0 (the default)"
    node_types = (ast.Call,)
    trigger_words = ("DataLoader",)
    why = (
        "With `num_workers=0` the training process itself loads and augments every batch between steps, "
        "so the NPU waits for data on each step. Worker processes prepare batches in parallel with training."
    )
    example = "loader = DataLoader(dataset, batch_size=64, pin_memory=True)"
    use_instead = "`DataLoader(dataset, ..., num_workers=N)` with N > 0 (e.g. the CPU cores per device)."
    source = f"{OFFICIAL_ADVICE} api_parameters_performance_dict; {ADVISOR_RULES}dataloader.yaml; {ADVICE_TABLE}"
    fires = [
        ("from torch.utils.data import DataLoader\nl = DataLoader(ds, batch_size=8, pin_memory=True)\n", 2),
        ("from torch.utils.data import DataLoader\nl = DataLoader(ds, 8, num_workers=0)\n", 2),
    ]
    passes = [
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=4)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=args.workers)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, **kw)\n",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, 8, True, None, None, 4)\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _LASTS) == _DATALOADER and _left_default(node, "num_workers", 5, 0):
            ctx.report(node, self.code, "DataLoader loads batches in the training process (num_workers=0): the NPU "
                       "waits for data every step (pass num_workers > 0) [num_workers defaults to 0]",
                       api=_DATALOADER, tips="set num_workers > 0")


class DdpWithoutBucketSize(Rule):
    code = "ASC505"
    summary = "DistributedDataParallel without bucket_cap_mb"
    node_types = (ast.Call,)
    trigger_words = ("DistributedDataParallel",)
    why = (
        "DDP all-reduces gradients in buckets of `bucket_cap_mb` (25 MB by default). On Ascend every bucket "
        "is one HCCL collective with a fixed launch cost, so small buckets mean many collectives per step; "
        "the official migration tool advises a much larger bucket (500 MB)."
    )
    example = "model = DistributedDataParallel(model, device_ids=[rank])"
    use_instead = "`DistributedDataParallel(model, device_ids=[rank], bucket_cap_mb=500)`, then tune by profiling."
    source = f"{OFFICIAL_ADVICE} api_parameters_performance_dict; {ADVICE_TABLE}"
    fires = [
        ("from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, device_ids=[0])\n", 2),
        ("import torch\nm = torch.nn.parallel.DistributedDataParallel(m)\n", 2),
    ]
    passes = [
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, bucket_cap_mb=500)\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, **ddp_kwargs)\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, None, None, 0, True, None, 200)\n",
        "from fairscale import DistributedDataParallel\nm = DistributedDataParallel(m)\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _LASTS) == _DDP and argument(node, "bucket_cap_mb", 6) is MISSING:
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
