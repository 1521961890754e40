"""ASC403: shapes taken from tensor values (``x[: n.item()]``, ``torch.zeros(int(t.sum()))``)."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from ..detect.once_per_call import runs_once
from ..registry import Rule
from ..semantic.values import BUILT_ON_HOST, HOST
from .value_dependent_ops import DYNAMIC_SOURCE

ALL = -1  # every positional argument is a size
_SIZE_KEYWORDS = ("size", "shape", "sizes", "split_size_or_sections", "split_size", "length", "steps", "k",
                  "num_samples", "repeats", "output_size", "pad", "scale_factor", "n", "m", "indices_or_sections")
# Which positional arguments give a shape: torch functions by qualified name, tensor methods by name.
_FUNCTIONS: Dict[str, Tuple[int, ...]] = {
    **{f"torch.{n}": (ALL,) for n in "zeros ones empty rand randn arange eye randperm empty_strided".split()},
    "torch.full": (0,), "torch.randint": (), "torch.linspace": (2,), "torch.logspace": (2,),
    "torch.reshape": (1,), "torch.split": (1,), "torch.tensor_split": (1,), "torch.chunk": (1,),
    "torch.narrow": (3,), "torch.topk": (1,), "torch.multinomial": (1,), "torch.repeat_interleave": (1,),
    "torch.nn.functional.pad": (1,), "torch.nn.functional.interpolate": (1, 2),
    "torch.nn.functional.adaptive_avg_pool1d": (1,), "torch.nn.functional.adaptive_avg_pool2d": (1,),
    "torch.nn.functional.adaptive_max_pool2d": (1,), "torch.nn.functional.one_hot": (1,),
}
_METHODS: Dict[str, Tuple[int, ...]] = {
    **{n: (ALL,) for n in "view reshape expand repeat new_zeros new_ones new_empty resize_".split()},
    "new_full": (0,), "narrow": (2,), "split": (0,), "tensor_split": (0,), "chunk": (0,), "topk": (0,),
    "unflatten": (1,), "repeat_interleave": (0,), "unfold": (1,), "multinomial": (0,),
}


# Reductions of a whole tensor to one element (no ``dim``): a 0-d tensor, converted like ``.item()`` by a size.
_SCALAR_REDUCTIONS = frozenset("sum max min amax amin argmax argmin count_nonzero prod".split())
_NAME_STEPS = 4  # ``n = m`` hops followed back to the element a name holds


_QUEUE = ("import torch\ndef enqueue(self, keys: torch.Tensor, queue_ptr: torch.Tensor, valid):\n"
          "    batch_size = keys.shape[0]\n    ptr = int(queue_ptr)\n    self.queue[:, ptr:{stop}] = keys.transpose(0, 1)\n")

_LENGTH_MASK = ("import torch\ndef create_length_mask(length: torch.Tensor, max_len, device):\n"
                "    mask = torch.zeros(len(length), max_len)\n{moved}    for i in range(len(length)):\n"
                "        mask[i, : length[i]] = 1\n{after}    return mask\n")

_SLICED_EMBEDDINGS = ("import torch\ndef f(self, audio_tensors, lengths: torch.Tensor, records):\n"
                      "    embs = self.model(audio_tensors)\n{copy}    offset = 0\n    for length in lengths:\n"
                      "        records.append(embs[offset : offset + length])\n        offset += length\n")


class ShapeFromValue(Rule):
    code = "ASC403"
    summary = "shape taken from tensor values (.item(), int(t.sum()), .tolist() feeding sizes or slices)"
    node_types = (ast.Subscript, ast.Call)
    why = (
        "A size read out of a tensor (`n.item()`, `int(mask.sum())`, `lengths.tolist()`) changes with the data, "
        "so the tensors built or sliced with it get a new shape every time and the NPU compiles new kernels; "
        "reading the value also stalls the host until the device catches up. A slice `x[p:p + n]` holds `n` "
        "elements wherever `p` points, so only `n` is asked about. A slice read from a `.cpu()` copy, or written "
        "into a tensor on the host (one made with no device and moved to the device only afterwards), never reaches "
        "the NPU and is not reported; a tensor made on the host with a size or slice read from data may still be "
        "moved there."
    )
    example = "valid = x[: n.item()]\nbuf = torch.zeros(int(mask.sum()))"
    use_instead = (
        "Keep sizes static: allocate the maximum size and mask or pad the rest, slice on the CPU, or bucket the "
        "sizes to a few fixed values so only a few shapes ever reach the NPU."
    )
    source = DYNAMIC_SOURCE
    fires = [
        ("import torch\ny = x[: n.item()]\n", 2),
        ("import torch\nmask = torch.rand(8) > 0.5\nbuf = torch.zeros(int(mask.sum()))\n", 3),
        ("import torch\ncounts = torch.bincount(expert_ids)\nparts = torch.split(x, counts.tolist())\n", 3),
        ("import torch\ncount = lengths.max().item()\nbuf = x.new_zeros(count, 4)\n", 3),
        ("import torch\nfor n in sizes.tolist():\n    y = x[:n]\n", 3),
        ("import torch\nh = torch.randn(4, 8)\nk = h.view(-1, int(h.argmax()))\n", 3),
        # a tensor element used as a size: an implicit .item()
        ("import torch\ndef f(scores, labels, num_classes):\n    counts = torch.bincount(labels, minlength=num_classes)\n"
         "    for i in range(num_classes):\n        top = scores[:, i].topk(k=counts[i])\n", 5),
        ("import torch\ndef f(x: torch.Tensor, lengths: torch.Tensor):\n    for n in lengths:\n"
         "        y = x[:n]\n", 4),
        ("import torch\ndef f(feats, num_per_img: torch.Tensor):\n    return torch.split(feats, num_per_img[0])\n", 3),
        # a count defined on another line (yolov5 utils/segment/loss.py:127)
        ("import torch\ndef f(targets: torch.Tensor, i, na):\n    num = (targets[:, 0] == i).sum()\n"
         "    return torch.arange(num).view(1, num).repeat(na, 1)\n", 4),
        # near misses of a host tensor: made there and moved with its new shape (espnet 202511
        # asr_transducer/utils.py:138, funasr 1.4.16 paraformer/model.py:445)
        ("import torch\ndef f(lengths: torch.Tensor):\n    max_len = int(lengths.max())\n"
         "    return torch.arange(max_len).expand(len(lengths), max_len).to(lengths)\n", 4),
        ("import torch\ndef f(n: torch.Tensor, k, device):\n    return torch.randperm(100)[:n.item()].to(device)\n", 3),
        # a bound on a count read from data (diffusers scheduling_block_refinement.py:324)
        ("import torch\nk = min(num_to_transfer, int(active_block[b].sum().item()))\n_, idx = torch.topk(confidence[b], k=k)\n",
         3),
        # near misses of a fixed-length slice: a length read from the data, a stop that is not the start plus it
        (_QUEUE.format(stop="ptr + int(valid.sum())"), 5),
        (_QUEUE.format(stop="2 * ptr"), 5),
        # near misses of a host mask: moved to the device before the slice, or made on the device of an input
        (_LENGTH_MASK.format(moved="    mask = mask.to(device)\n", after=""), 6),
        ("import torch\ndef f(x, length: torch.Tensor):\n    mask = torch.zeros(len(length), 9, device=x.device)\n"
         "    for i in range(len(length)):\n        mask[i, : length[i]] = 1\n", 5),
        ("import torch\ntorch.set_default_device('cuda')\n" + _LENGTH_MASK.format(moved="", after=""), 7),
        # near miss of the .cpu() copy below: the model's output sliced where the model left it
        (_SLICED_EMBEDDINGS.format(copy=""), 6),
    ]
    passes = [
        # a mask built on the host and moved to the device after the slices (s3prl 0.4.17
        # downstream/diarization/utils.py:19-25), a model's output copied with .cpu() before it is sliced
        # (downstream/sws2013/expert.py:137-143)
        _LENGTH_MASK.format(moved="", after="    mask = mask.to(device)\n"),
        _SLICED_EMBEDDINGS.format(copy="    embs = embs.detach().cpu()\n"),
        # a queue written at a pointer read from a tensor: the slice holds batch_size keys wherever it starts
        # (mmselfsup 1.0.0 models/algorithms/moco.py:80-86, densecl.py:96)
        _QUEUE.format(stop="ptr + batch_size"),
        _QUEUE.format(stop="batch_size + ptr"),
        # diffusers z_image/pipeline_z_image_omni.py:332: the sizes of one image, from its processor's batch
        "import torch\nclass Pipe:\n    def prepare_siglip_embeds(self, images, device):\n        for image in images:\n"
        "            siglip_inputs = self.siglip_processor(images=[image], return_tensors='pt').to(device)\n"
        "            shape = siglip_inputs.spatial_shapes[0]\n"
        "            hidden_state = self.siglip(**siglip_inputs).last_hidden_state\n"
        "            hidden_state = hidden_state[:, : shape[0] * shape[1]]\n",
        "import torch\ny = x[: len(x) // 2]\n",
        "import torch\nbuf = torch.zeros(n)\n",
        "import numpy as np\na = np.arange(5)\nn = a.max().item()\nb = a[:n]\n",
        "import torch\nlr = scheduler.get_last_lr()\nloss_value = loss.item()\nprint(loss_value)\n",
        "import torch\ny = torch.full((4,), v.item())\n",
        "import torch\nn = t.item()\nn = 3\ny = x[:n]\n",
        # sizes from lists, tuples, numpy arrays, shapes and constant tables (mmdet solov2_head.py:391)
        "import torch\ndef f(featmap_sizes):\n    return torch.zeros([0, featmap_sizes[0], featmap_sizes[1]])\n",
        "import numpy as np\nimport torch\ndef f(x):\n    sizes = np.array([2, 3])\n    return x.split(sizes[0])\n",
        "import torch\ndef f(x: torch.Tensor):\n    return x.new_zeros(x.shape[0], 4)\n",
        "import torch\ndef f(x):\n    table = torch.tensor([1, 2, 4])\n    return x.view(-1, table[1])\n",
        # mmdet solo_head.py:567: level bounds from the config, the same every step
        "import torch\ndef f(labels, scores, grids):\n    bounds = labels.new_tensor(grids).pow(2).cumsum(0)\n"
        "    return scores.new_ones(bounds[-1])\n",
        "import torch\ndef f(x: torch.Tensor, idx: torch.Tensor):\n    return x[:, idx[0]]\n",
        # a tensor element as the receiver of a size query (mmpose rtmo_head.py:201, litgpt utils.py:324)
        "import torch\ndef f(x: torch.Tensor):\n    for i in range(len(x)):\n"
        "        a, b = x[i].split(x[i].size(1) // 2, 1)\n",
        # mmdet horizontal_boxes.py:353: a numpy mask array sliced by box coordinates
        "import numpy as np\nimport torch\ndef f(boxes, h, w):\n    m = np.zeros((len(boxes), h, w))\n"
        "    m[0, int(boxes[0, 1]):int(boxes[0, 3])] = 1\n    return m\n",
        # a Python number computed from a static size (diffusers autoencoder_kl_kvae_video.py:454)
        "import torch\ndef f(input: torch.Tensor):\n    time_factor = 1.0 + 1.0 * (input.size(2) > 1)\n"
        "    if isinstance(time_factor, torch.Tensor):\n        time_factor = time_factor.item()\n"
        "    return input.repeat_interleave(int(time_factor), dim=2)\n",
        # a table of sizes read back (diffusers pipeline_ernie_image.py:201)
        "import torch\ndef f(hs, device):\n    lens = torch.tensor([t.shape[0] for t in hs], device=device)\n"
        "    Tmax = int(lens.max().item())\n    return torch.zeros((len(hs), Tmax, 8), device=device)\n",
        "import torch\nt = torch.tensor([2, 3])\nparts = torch.split(x, t.tolist())\n",
        # once per request in an inference pipeline (diffusers pipeline_qwenimage.py:183, kolors img2img :597)
        "import torch\nclass Pipe:\n    def _extract_masked_hidden(self, hidden_states, mask):\n"
        "        valid_lengths = mask.bool().sum(dim=1)\n"
        "        return torch.split(hidden_states[mask.bool()], valid_lengths.tolist(), dim=0)\n"
        "    @torch.no_grad()\n    def __call__(self, h, m):\n        return self._extract_masked_hidden(h, m)\n",
        "import torch\nclass Pipe:\n    def get_timesteps(self, cutoff):\n"
        "        n = (self.scheduler.timesteps < cutoff).sum().item()\n"
        "        return self.scheduler.timesteps[len(self.scheduler.timesteps) - n:]\n"
        "    @torch.no_grad()\n    def __call__(self, cutoff):\n        timesteps = self.get_timesteps(cutoff)\n",
        # construction runs once (diffusers autoencoder_vidtok.py:84)
        "import torch\nclass Q(torch.nn.Module):\n    def __init__(self, levels):\n        super().__init__()\n"
        "        self.register_buffer('_levels', torch.tensor(levels))\n"
        "        self.codebook_size = self._levels.prod().item()\n"
        "        self.codes = self.indices_to_codes(torch.arange(self.codebook_size))\n",
    ]

    def check(self, node, ctx) -> None:
        if isinstance(node, ast.Subscript):
            found = self._in_slices(node.slice, ctx)
            if found is not None and (ctx.values.not_tensor(node.value) or _host_slice(node, ctx)):
                return  # slicing a numpy array, a list or a CPU tensor by a tensor's value keeps the NPU out of it
        else:
            found = self._in_sizes(node, ctx)
        if found is not None and not runs_once(node, ctx):  # once per object or request: one shape for every step
            text = ast.unparse(found)[:40]
            ctx.report(node, self.code, f"shape taken from a tensor value ({text}): every new value is a new "
                       "shape for the NPU", api=text, tips="keep sizes static: pad to a maximum or mask")

    def _in_slices(self, index: ast.AST, ctx) -> Optional[ast.AST]:
        for part in index.elts if isinstance(index, ast.Tuple) else [index]:
            if isinstance(part, ast.Slice) and not _fixed_length(part, ctx):
                for bound in (part.lower, part.upper, part.step):
                    found = _mentions_readout(bound, ctx)
                    if found is not None:
                        return found
        return None

    def _in_sizes(self, call: ast.Call, ctx) -> Optional[ast.AST]:
        sizes = size_arguments(call, ctx)
        if not sizes:
            return None
        # tensor repeats are a tensor's job, not a size read out of one (ASC401 has them)
        func = call.func
        elements = not (ctx.chain(func) or getattr(func, "attr", "")).endswith("repeat_interleave")
        for size in sizes:
            found = _mentions_readout(size, ctx, elements)
            if found is not None:
                return found
        return None


def _host_slice(node: ast.Subscript, ctx) -> bool:
    """A slice the NPU never sees: written into a tensor on the host, whose shape it does not change (s3prl 0.4.17
    nn/pit.py:19-25, ``mask[i, :length[i]] = 1`` of a ``torch.zeros(...)`` moved only afterwards), or read from a
    ``.cpu()`` copy (downstream/sws2013/expert.py:137-143). A slice read from a tensor made on the host with no
    device may still go to the device with its new shape (``torch.randperm(n)[:k].to(device)``)."""
    values = ctx.values
    if isinstance(node.ctx, ast.Store):
        return values.on_host_here(node.value)
    return values.of(node.value).device == HOST


def _fixed_length(part: ast.Slice, ctx) -> bool:
    """``x[ptr:ptr + n]`` (or ``n + ptr``): the slice holds ``n`` elements wherever a tensor's value puts its start (mmselfsup 1.0.0
    models/algorithms/moco.py:86, a MoCo queue written at ``ptr = int(self.queue_ptr)``), so the shape is ``n``'s."""
    upper = part.upper
    if part.step is not None or part.lower is None or not (isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add)):
        return False
    start = ast.dump(part.lower)
    return any(ast.dump(one) == start and _mentions_readout(other, ctx) is None
               for one, other in ((upper.left, upper.right), (upper.right, upper.left)))


def size_arguments(call: ast.Call, ctx) -> List[ast.AST]:
    """The arguments of ``call`` that give a tensor's shape (``torch.zeros(n)``, ``F.pad(x, (0, n))``,
    ``x.view(b, n)``); none for numpy's ``reshape``/``repeat``, whose shapes the NPU never sees."""
    func = call.func
    qualname = ctx.chain(func)
    if qualname is not None:
        positions = _FUNCTIONS.get(qualname)
    elif isinstance(func, ast.Attribute):
        positions = _METHODS.get(func.attr)
        if positions is not None and ctx.values.is_array(func.value):
            return []
    else:
        positions = None
    if positions is None:
        return []
    sizes = [k.value for k in call.keywords if k.arg in _SIZE_KEYWORDS]
    if ALL in positions:
        return sizes + call.args
    return sizes + [call.args[p] for p in positions if p < len(call.args)]


def _mentions_readout(node: Optional[ast.AST], ctx, direct: bool = True) -> Optional[ast.AST]:
    """The first value read out of a tensor inside an expression (``n.item() + 1``), skipping ``len(...)``.

    ``direct``: the node is the size itself or an operand of one (``counts[i] + 1``, ``(h[0], w)``), not a
    receiver (``x[i].size(1)``), so a tensor element here is converted to a number.
    """
    if node is None:
        return None
    if ctx.values.readout(node) or (direct and _tensor_element(node, ctx)):
        return node
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
        return None
    if isinstance(node, (ast.Lambda, ast.comprehension, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
        return None
    operands = isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List))
    for child in ast.iter_child_nodes(node):
        found = _mentions_readout(child, ctx, direct and operands)
        if found is not None:
            return found
    return None


def _tensor_element(node: ast.AST, ctx, depth: int = 0) -> bool:
    """``counts[i]`` of a tensor, ``lengths.max()``, or a name bound to one (``n = counts[i]``, ``for n in
    counts``): a 0-d tensor that a size converts with an implicit ``.item()``.  Slices and index tensors keep a
    tensor a tensor; reductions along a dimension are tensors of sizes; constant tables are not data."""
    if isinstance(node, ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(p, ast.Slice) or ctx.values.is_tensor(p) for p in parts):
            return False
        value = ctx.values.of(node.value)
    elif isinstance(node, ast.Call):
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in _SCALAR_REDUCTIONS) or node.args or node.keywords:
            return False
        value = ctx.values.of(func.value)  # ``t.max()``: the whole tensor reduced to one element
    elif isinstance(node, ast.Name):
        owner = ctx.model.function(node)
        binding = ctx.model.flow(owner or ctx.tree).binding(node)
        if binding is None:
            return False
        if binding.each is None:  # ``n = counts[i]`` on an earlier line
            return binding.value is not None and binding.index is None and depth < _NAME_STEPS and \
                _tensor_element(binding.value, ctx, depth + 1)
        value = ctx.values.of(binding.each)
    else:
        return False
    # not an element of a tensor built on the host (read without a device sync) or of a tokenizer's or
    # processor's batch (``inputs.spatial_shapes[0]``, ``text_inputs.length``: the sizes of one input, set once)
    return value.tensor and not value.const and value.device != BUILT_ON_HOST and not value.encoding
