"""ASC401: ops whose output shape depends on the values of their input."""
from __future__ import annotations

import ast

from typing import Dict, Optional

from ..calls import argument, is_constant, passed
from ..detect.once_per_call import runs_once
from ..registry import Rule
from ..walk import assign_targets, walk_tree

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
        # diffusers transformer_qwenimage21.py:928: repeats chosen by a mask
        ("import torch\nrepeats = torch.where(img_mask, 4, 1)[0]\nimage_pad_mask = torch.repeat_interleave(img_mask[0], repeats)\n",
         3),
        ("import torch\nx = torch.randn(8)\nkeep = x > 0\npos = keep.argwhere()\n", 4),
        ("import torch\ndef f(rois, scale):\n    s = rois.new_zeros(3)\n    return (rois[:, 0] > scale).nonzero()\n", 4),
        ("import torch\ndef f(gt_inds):\n    pos = torch.sort(gt_inds)[0]\n    return pos.unique()\n", 4),
        ("import torch\ndef sample(sampler, result):\n    neg_inds = sampler.sample_neg(result)\n"
         "    return neg_inds.unique()\n", 4),
        # an equality whose positions index other tensors (mmdet pseudo_sampler.py:48)
        ("import torch\ndef f(gt_inds: torch.Tensor, priors):\n"
         "    neg_inds = torch.nonzero(gt_inds == 0, as_tuple=False).squeeze(-1)\n    return priors[neg_inds]\n", 3),
        # a table of -1 the function writes into (mmdet sort_tracker.py:227)
        ("import torch\ndef f(bboxes: torch.Tensor, matches, active_ids):\n"
         "    ids = torch.full((bboxes.size(0),), -1).to(bboxes.device)\n"
         "    for r, c in matches:\n        ids[c] = active_ids[r]\n    return torch.nonzero(ids == -1).squeeze(1)\n", 6),
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
        # where one value sits in a schedule: one or two matches, one element taken
        # (diffusers scheduling_consistency_models.py:338, scheduling_ddpm.py:661, scheduling_piflow.py:315)
        "import torch\ndef index_for_timestep(timestep, schedule_timesteps: torch.Tensor):\n"
        "    indices = (schedule_timesteps == timestep).nonzero()\n    pos = 1 if len(indices) > 1 else 0\n"
        "    return indices[pos].item()\n",
        "import torch\ndef previous_timestep(timesteps: torch.Tensor, timestep):\n"
        "    index = (timesteps == timestep).nonzero(as_tuple=True)[0][0]\n    return timesteps[index + 1]\n",
        "import torch\ndef f(schedule_timesteps: torch.Tensor, timestep):\n"
        "    indices = torch.nonzero(schedule_timesteps == timestep).flatten()\n    if not indices.numel():\n"
        "        raise ValueError(timestep)\n    return int(indices[1 if indices.numel() > 1 else 0].item())\n",
        # a schedule built from literals and sizes (diffusers scheduling_minimax_h3.py:159)
        "import torch\ndef f(n):\n    base = torch.linspace(1.0, 0.0, n)\n    return torch.unique_consecutive(base / (1 + base))\n",
        # on the way to an error (diffusers ltx2/dfr_layout.py:440)
        "import torch\ndef f(keepers: torch.Tensor):\n    if not bool((keepers > 0).all()):\n"
        "        unclaimed = (keepers == 0).nonzero(as_tuple=False).squeeze(1).tolist()\n"
        "        raise ValueError(f'{unclaimed} fall outside every tile')\n",
        # once per request in an inference pipeline (diffusers pipeline_hunyuan_video_image2video.py:355)
        "import torch\nclass Pipe:\n    def _get_llama_prompt_embeds(self, text_input_ids, token_id):\n"
        "        batch_indices, end_header_indices = torch.where(text_input_ids == token_id)\n"
        "        return end_header_indices\n"
        "    @torch.no_grad()\n    def __call__(self, ids):\n        return self._get_llama_prompt_embeds(ids, 7)\n",
    ]

    def check(self, node, ctx) -> None:
        values = ctx.values
        func = node.func
        qualname = ctx.chain(func)
        if qualname is None:
            if not isinstance(func, ast.Attribute) or values.on_host(func.value) or not (
                    values.is_tensor(func.value) or (func.attr in _NOT_NUMPY and values.maybe_tensor(func.value))):
                return
            name, receiver_args, data = f"torch.Tensor.{func.attr}", 1, func.value
        else:
            name, receiver_args, data = qualname, 0, node.args[0] if node.args else None
            if data is not None and values.on_host(data):
                return  # a CPU tensor: its shapes never reach the NPU
        if name in _FUNCTIONS:
            api, reason = name, "its output holds as many elements as the data selects"
        elif name == "torch.where" and len(node.args) == 1 and not node.keywords:
            api, reason = "torch.where with one argument", "it is nonzero(as_tuple=True) in disguise"
        elif name in ("torch.repeat_interleave", "torch.Tensor.repeat_interleave"):
            if any(k.arg == "output_size" for k in node.keywords):
                return
            repeats = passed(node, "repeats", 1 - receiver_args)
            only_repeats = repeats is None and not receiver_args and len(node.args) == 1
            if not (only_repeats or (repeats is not None and values.is_tensor(repeats))):
                return
            api, reason = name, "tensor-valued repeats make the output length data-dependent"
            data = data if only_repeats else repeats
        else:
            return
        if data is not None and values.of(data).const:
            return  # built from literals and sizes: the same output shape every time for the same sizes
        if name.rsplit(".", 1)[-1] in _LOOKUPS and _single_lookup(node, data, name, ctx):
            return
        if runs_once(node, ctx):
            return  # once per object or per request: one shape, reused by every step after
        self._emit(node, ctx, api, reason)

    def _emit(self, node, ctx, api: str, reason: str) -> None:
        ctx.report(node, self.code, f"{api} has a value-dependent output shape ({reason}; each new shape "
                   f"compiles new NPU kernels)", api=api,
                   tips="keep shapes static: 3-argument torch.where, masked_fill, padding to a fixed size")


# -- index lookups: where in a 1-D table one value sits ----------------------------------------------------
_LOOKUPS = frozenset(("nonzero", "where", "argwhere"))
# Methods that keep a tensor of positions a tensor of positions (``.flatten()``, ``.long()``).
_KEEP_POSITIONS = frozenset("flatten squeeze view reshape ravel long int to cpu cuda npu contiguous".split())
# Methods and builtins that ask for one element, a count or a flag: never a shape for later ops.
_SINGLE_METHODS = frozenset(("item", "numel", "size", "dim", "any", "all", "nelement"))
_SINGLE_BUILTINS = frozenset(("len", "int", "float", "bool"))
_TRUTH = (ast.If, ast.While, ast.IfExp, ast.Assert)
_USE_STEPS = 6  # names followed from one use to the next


def _single_lookup(call: ast.Call, mask: Optional[ast.AST], name: str, ctx) -> bool:
    """``(timesteps == t).nonzero()`` whose result only ever gives one element (``[0][0]``, ``[k].item()``,
    ``len(...)``, a comparison): where one value sits in a table, whose entries are distinct. The op sees one or
    two matches every time, and nothing after it takes the positions as a shape. A match of anything but ``==``
    (``scores > thr``), or positions that index, are iterated or returned, still change every shape after."""
    if not _equality(mask):
        return False
    as_tuple = is_constant(argument(call, "as_tuple"), True)
    shape = "tuple" if name.endswith("where") or as_tuple else "rows"
    owner = ctx.model.function(call) or ctx.tree
    parents = ctx.memo(f"parents:{id(owner)}", lambda c: _parents(owner))
    return _only_elements(call, shape, parents, owner, ctx, 0)


def _equality(mask: Optional[ast.AST]) -> bool:
    if isinstance(mask, ast.Compare):
        return len(mask.ops) == 1 and isinstance(mask.ops[0], ast.Eq)
    return isinstance(mask, ast.Call) and isinstance(mask.func, ast.Attribute) and mask.func.attr == "eq" \
        and len(mask.args) == 1


def _parents(owner: ast.AST) -> Dict[int, ast.AST]:
    found = {}
    for parent in walk_tree(owner):
        for child in ast.iter_child_nodes(parent):
            found[id(child)] = parent
    return found


def _only_elements(expr: ast.AST, shape: str, parents: Dict[int, ast.AST], owner: ast.AST, ctx, steps: int) -> bool:
    """Does every use of ``expr`` (a tuple of position tensors, a (n, d) tensor of rows, or 1-D positions) end in
    one element, a count or a flag?"""
    while True:
        parent = parents.get(id(expr))
        if isinstance(parent, ast.Subscript) and parent.value is expr:
            parts = parent.slice.elts if isinstance(parent.slice, ast.Tuple) else [parent.slice]
            if any(isinstance(p, ast.Slice) for p in parts) or any(ctx.values.is_tensor(p) for p in parts):
                return False
            if shape != "tuple":
                return True  # one position, or one row of a (n, d) tensor
            shape, expr = "positions", parent
        elif isinstance(parent, ast.Attribute) and parent.value is expr:
            if parent.attr == "shape":
                return True
            call = parents.get(id(parent))
            if not (isinstance(call, ast.Call) and call.func is parent) or shape == "tuple":
                return False
            if parent.attr in _SINGLE_METHODS:
                return True
            if parent.attr not in _KEEP_POSITIONS:
                return False
            shape, expr = "positions", call
        elif isinstance(parent, ast.Call) and expr in parent.args:
            return isinstance(parent.func, ast.Name) and parent.func.id in _SINGLE_BUILTINS
        elif isinstance(parent, (ast.Compare, ast.BoolOp)) or (isinstance(parent, ast.UnaryOp) and isinstance(
                parent.op, ast.Not)) or (isinstance(parent, _TRUTH) and parent.test is expr):
            return True  # a flag: a comparison or a truth test needs one element
        elif isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is expr and steps < _USE_STEPS:
            targets = assign_targets(parent)
            if len(targets) != 1:
                return False
            target = targets[0]
            if isinstance(target, ast.Name):
                return _uses_single(target.id, parent, shape, parents, owner, ctx, steps)
            if isinstance(target, ast.Tuple) and shape == "tuple" and all(isinstance(e, ast.Name) for e in target.elts):
                return all(_uses_single(e.id, parent, "positions", parents, owner, ctx, steps) for e in target.elts)
            return False
        else:
            return False


def _uses_single(name: str, statement: ast.AST, shape: str, parents: Dict[int, ast.AST], owner: ast.AST, ctx,
                 steps: int) -> bool:
    flow = ctx.model.flow(owner)
    for node in walk_tree(owner):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            binding = flow.binding(node)
            if binding is not None and binding.value is statement.value and not _only_elements(
                    node, shape, parents, owner, ctx, steps + 1):
                return False
    return True
