"""ASC401: ops whose output shape depends on the values of their input."""
from __future__ import annotations

import ast

from ..calls import passed
from ..registry import Rule

DYNAMIC_SOURCE = (
    "Ascend ascend-pytorch-crowdintelligence-doc, pytorch-train-guide, 'dynamic shape' (the NPU compiles "
    "operators online and recompiles them for every new shape; dynamic shapes come mostly from nonzero and "
    "tensor[index] selection); PyTorch docs of the listed ops (output size depends on the data)"
)
# Always value-dependent, whatever the arguments.
_NAMES = ("nonzero", "masked_select", "unique", "unique_consecutive", "argwhere", "bincount")
_FUNCTIONS = frozenset(f"torch.{n}" for n in _NAMES) | frozenset(f"torch.Tensor.{n}" for n in _NAMES)
# Methods numpy arrays, lists and dicts do not have (pandas has ``unique``): on an unknown receiver in a
# function that never uses numpy or pandas, they are tensor methods (mmdet base_sampler.py:127).
_NOT_NUMPY = frozenset(("unique", "unique_consecutive", "bincount", "argwhere", "masked_select"))


class ValueDependentShape(Rule):
    code = "ASC401"
    summary = "op whose output shape depends on tensor values (nonzero, masked_select, unique, 1-arg where...)"
    node_types = (ast.Call,)
    trigger_words = _NAMES + ("where", "repeat_interleave")
    why = (
        "The NPU compiles kernels for each input shape. `nonzero`, `masked_select`, `unique`, `argwhere`, "
        "`bincount`, one-argument `where` and `repeat_interleave` with tensor repeats return as many elements as "
        "the data selects, so every batch can bring a new shape: the op and everything downstream recompile "
        "and training slows down."
    )
    example = "idx = torch.nonzero(scores > 0.5)"
    use_instead = (
        "Keep shapes static: `torch.where(cond, a, b)` (three arguments) or `masked_fill` instead of selecting, "
        "`nonzero_static(size=...)` or padding to a maximum size; run value-dependent post-processing on the CPU."
    )
    source = DYNAMIC_SOURCE
    fires = [
        ("import torch\nidx = torch.nonzero(x)\n", 2),
        ("import torch\nrows, cols = torch.where(x > 0)\n", 2),
        ("import torch\nx = torch.randn(8)\nidx = (x > 0).nonzero()\n", 3),
        ("import torch\nx = torch.randn(8)\nvals = x.unique()\n", 3),
        ("from torch import masked_select\ny = masked_select(a, m)\n", 2),
        ("import torch\nr = torch.tensor([1, 2])\ny = torch.repeat_interleave(x, r, dim=0)\n", 3),
        ("import torch\nx = torch.randn(8)\nkeep = x > 0\npos = keep.argwhere()\n", 4),
        ("import torch\ndef f(rois, scale):\n    s = rois.new_zeros(3)\n    return (rois[:, 0] > scale).nonzero()\n", 4),
        ("import torch\ndef f(gt_inds):\n    pos = torch.sort(gt_inds)[0]\n    return pos.unique()\n", 4),
        ("import torch\ndef sample(sampler, result):\n    neg_inds = sampler.sample_neg(result)\n"
         "    return neg_inds.unique()\n", 4),
    ]
    passes = [
        "import numpy as np\nidx = np.nonzero(a)\n",
        "import torch\ny = torch.where(x > 0, x, torch.zeros_like(x))\n",
        "def nonzero(a):\n    return a\nidx = nonzero(3)\n",
        "import torch\ny = torch.repeat_interleave(x, 2, dim=0)\n",
        "import torch\nr = torch.tensor([1, 2])\ny = torch.repeat_interleave(x, r, dim=0, output_size=3)\n",
        "import pandas as pd\nvals = pd.Series([1, 1]).unique()\n",
        "import pandas as pd\nimport torch\ndef f(x):\n    print(pd.__version__)\n    return x.unique()\n",
        "import torch\ndef f(x):\n    return x.nonzero()\n",  # numpy arrays have nonzero() too
        "import torch\nclass Vocab:\n    def unique(self):\n        return 1\n    def f(self):\n        return self.unique()\n",
        "import numpy as np\nimport torch\ndef f(a):\n    b = np.asarray(a)\n    return b.nonzero()\n",
        "import torch\nw = torch.tensor([1, 2, 2], device='cpu')\nu, c = torch.unique(w, return_counts=True)\n",
        "import torch\nt = torch.tensor([1, 2]).cpu()\ni = t.nonzero()\n",
    ]

    def check(self, node, ctx) -> None:
        values = ctx.values
        func = node.func
        qualname = ctx.chain(func)
        if qualname is None:
            if not isinstance(func, ast.Attribute) or values.on_host(func.value) or not (
                    values.is_tensor(func.value) or (func.attr in _NOT_NUMPY and values.maybe_tensor(func.value))):
                return
            name, receiver_args = f"torch.Tensor.{func.attr}", 1
        else:
            name, receiver_args = qualname, 0
            if node.args and values.on_host(node.args[0]):
                return  # a CPU tensor: its shapes never reach the NPU
        if name in _FUNCTIONS:
            self._emit(node, ctx, name, "its output holds as many elements as the data selects")
        elif name == "torch.where" and len(node.args) == 1 and not node.keywords:
            self._emit(node, ctx, "torch.where with one argument", "it is nonzero(as_tuple=True) in disguise")
        elif name in ("torch.repeat_interleave", "torch.Tensor.repeat_interleave"):
            if any(k.arg == "output_size" for k in node.keywords):
                return
            repeats = passed(node, "repeats", 1 - receiver_args)
            only_repeats = repeats is None and not receiver_args and len(node.args) == 1
            if only_repeats or (repeats is not None and values.is_tensor(repeats)):
                self._emit(node, ctx, name, "tensor-valued repeats make the output length data-dependent")

    def _emit(self, node, ctx, api: str, reason: str) -> None:
        ctx.report(node, self.code, f"{api} has a value-dependent output shape ({reason}; each new shape "
                   f"compiles new NPU kernels)", api=api,
                   tips="keep shapes static: 3-argument torch.where, masked_fill, padding to a fixed size")
