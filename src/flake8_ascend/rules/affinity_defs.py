"""ASC301/ASC302: user-defined classes and functions that re-implement an NPU affinity API."""
from __future__ import annotations

import ast

from ..detect import affinity
from ..registry import Rule

_SOURCE = (
    "rules_data/sources/affinity/affinity_rules.tsv (from the official affinity_list_1_11_0.json and the "
    "op-plugin torch_npu-contrib / torch_npu-optim lists), every target checked against the torch_npu wheels"
)


class AffinityClass(Rule):
    """A class with the name, base class and ``__init__``/``forward`` parameters of an affinity entry.

    Matching rule: the class name equals the entry's; one base resolves to the entry's base
    (``torch.nn.Module``, ``torch.autograd.Function`` or ``torch.optim.Optimizer``); and the
    ``__init__`` and ``forward`` parameter lists the entry gives match by ``affinity.same_signature``:
    same length, names equal after normalisation or synonyms (``c1``/``in_channels``,
    ``x``/``input``), ``self``/``ctx``, defaults, annotations and ``*args``/``**kwargs`` ignored.
    """

    code = "ASC301"
    summary = "user-defined class that re-implements an NPU affinity class (Api Type class)"
    node_types = (ast.ClassDef,)
    trigger_words = tuple(affinity.entries("class"))
    api_type = "class"
    why = (
        "torch_npu ships NPU-tuned versions of common model blocks (YOLOv5 Focus, timm DropPath, fairseq "
        "MultiheadAttention, ROIAlign...); the hand-written block runs as many small, slower NPU kernels."
    )
    example = (
        "class Focus(nn.Module):\n    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True): ...\n"
        "    def forward(self, x): ..."
    )
    use_instead = "Use the class named in the message (e.g. `torch_npu.contrib.module.Focus`) in place of your own."
    source = _SOURCE
    fires = [
        ("import torch.nn as nn\nclass Focus(nn.Module):\n    def __init__(self, c1, c2, k=1, s=1, p=None, g=1,"
         " act=True):\n        super().__init__()\n    def forward(self, x):\n        return x\n", 2),
        ("from torch import nn\nclass DropPath(nn.Module):\n    def __init__(self, drop_prob: float = 0.0):\n"
         "        super().__init__()\n    def forward(self, inputs):\n        return inputs\n", 2),
        ("import torch\nclass RMSpropTF(torch.optim.Optimizer):\n    pass\n", 2),
    ]
    passes = [
        # another base class than the entry's
        "class Focus(object):\n    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True): ...\n"
        "    def forward(self, x): ...\n",
        # different arity of __init__
        "import torch.nn as nn\nclass Focus(nn.Module):\n    def __init__(self, c1, c2):\n        super().__init__()\n"
        "    def forward(self, x):\n        return x\n",
        # deprecated target (torch_npu.contrib.module.Mish warns: use torch.nn.Mish)
        "import torch.nn as nn\nclass Mish(nn.Module):\n    def forward(self, input):\n        return input\n",
        "import torch.nn as nn\nclass Detect(nn.Module):\n    def forward(self, x):\n        return x\n",
    ]

    def check(self, node: ast.ClassDef, ctx) -> None:
        candidates = affinity.entries("class").get(node.name)
        if not candidates:
            return
        bases = [ctx.qualname(base) for base in node.bases]
        entry = affinity.first_available(candidates, ctx.data.version,
                                         lambda e: affinity.class_matches(node, e, bases))
        if entry is not None:
            ctx.report(node, self.code, f"use {entry['target']} instead of the hand-written class {node.name} "
                       f"(NPU affinity API, {affinity.since(entry)})", api=node.name, tips=entry["target"])


class AffinityFunction(Rule):
    """A def with the name and parameter list of an affinity entry (methods and functions alike).

    Matching rule: the function name equals the entry's and its parameter list is the entry's (matched by
    ``affinity.same_signature``, see ASC301) followed only by parameters with defaults; an entry may also name the class the method must be in
    (mmdet's ``DeltaXYWHBBoxCoder.encode``, whose signature other coders share). Several entries may
    share a name (mmdet's YOLO and delta-XYWH ``encode``): the parameter list picks the one. Abstract
    and placeholder defs (``@abstractmethod``, a body of only ``pass``/``...``/docstring/``raise
    NotImplementedError``) are not re-implementations.
    """

    code = "ASC302"
    summary = "user-defined function that re-implements an NPU affinity function (Api Type function)"
    node_types = (ast.FunctionDef, ast.AsyncFunctionDef)
    trigger_words = tuple(affinity.entries("function"))
    api_type = "function"
    why = (
        "torch_npu has NPU kernels for common detection and shuffle helpers (mmdet multiclass_nms, bbox coders, "
        "ShuffleNet channel_shuffle); the Python version runs as many small ops, some on the AI CPU."
    )
    example = "def channel_shuffle(x, groups):\n    ..."
    use_instead = "Call the affinity API named in the message instead (e.g. `torch_npu.contrib.module.ChannelShuffle`)."
    source = _SOURCE
    fires = [
        ("def channel_shuffle(x, groups):\n    return x\n", 1),
        ("class YOLOBBoxCoder:\n    def encode(self, bboxes, gt_bboxes, stride):\n        return bboxes\n", 2),
        ("def multiclass_nms(multi_bboxes, multi_scores, score_thr, nms_cfg, max_num=-1, score_factors=None,\n"
         "                   return_inds=False):\n    return multi_bboxes\n", 1),
        # mmdet 3.1.0 models/layers/bbox_nms.py:12: one more optional parameter (box_dim=4)
        ("def multiclass_nms(\n    multi_bboxes: Tensor,\n    multi_scores: Tensor,\n    score_thr: float,\n"
         "    nms_cfg: ConfigType,\n    max_num: int = -1,\n    score_factors: Optional[Tensor] = None,\n"
         "    return_inds: bool = False,\n    box_dim: int = 4\n) -> Tuple[Tensor, Tensor]:\n"
         "    return multi_bboxes\n", 1),
    ]
    passes = [
        "def channel_shuffle(x, groups, dim):\n    return x\n",  # an extra parameter without a default
        "def multiclass_nms(multi_bboxes, multi_scores, score_thr, nms_cfg, max_num=-1, score_factors=None,\n"
        "                   return_inds=False, *, box_dim):\n    return multi_bboxes\n",
        "def channel_shuffle(x, num_channels):\n    return x\n",
        # the official table's YOLO decode maps to a function no torch_npu wheel has
        "class YOLOBBoxCoder:\n    def decode(self, bboxes, pred_bboxes, stride):\n        return bboxes\n",
        "class Tokenizer:\n    def encode(self, text):\n        return text\n",
        # the delta-XYWH entry is for that class only; an abstract method is no re-implementation
        "class TBLRBBoxCoder:\n    def encode(self, bboxes, gt_bboxes):\n        return bboxes\n",
        "class BaseBBoxCoder:\n    def encode(self, bboxes, gt_bboxes, stride):\n        raise NotImplementedError\n",
    ]

    def check(self, node, ctx) -> None:
        candidates = affinity.entries("function").get(node.name)
        if not candidates:
            return
        owner = ctx.parent.name if isinstance(ctx.parent, ast.ClassDef) else None
        entry = affinity.first_available(candidates, ctx.data.version,
                                         lambda e: affinity.function_matches(node, e, owner))
        if entry is None:
            return
        name = f"{owner}.{node.name}" if owner else node.name
        ctx.report(node, self.code, f"use {entry['target']} instead of the hand-written function {name} "
                   f"(NPU affinity API, {affinity.since(entry)})", api=name, tips=entry["target"])
