"""ASC402: reading a tensor through a boolean mask (``x[x > 0]``, ``boxes[keep]``)."""
from __future__ import annotations

import ast

from ..detect.once_per_call import runs_once
from ..detect.training import training
from ..registry import Rule
from ..semantic.values import ARRAY, COMPARE, CONTAINER, MASK, OTHER
from .value_dependent_ops import DYNAMIC_SOURCE

_MASK_METHOD_NAMES = frozenset("isnan isinf isfinite bool logical_not eq ne gt ge lt le".split())


def same_expression(a: ast.AST, b: ast.AST) -> bool:
    """Do two expressions spell the same thing (``x`` and ``x``, ``self.x`` and ``self.x``)?"""
    return type(a) is type(b) and ast.dump(a, annotate_fields=False) == ast.dump(b, annotate_fields=False)


_TOKENS = (
    "import torch\n\nclass Pipeline:\n    def encode_prompt(self, full_texts, image, device):\n"
    "        untruncated_ids = self.tokenizer(\n            text=full_texts, images=image, return_tensors=\"pt\", "
    "padding=\"longest\"\n        )[\"input_ids\"]{move}\n"
    "        for i, text in enumerate(full_texts):\n            tokens = untruncated_ids[i]\n"
    "            tokens = tokens[tokens != self.tokenizer.image_token_id]\n"
)


def _prompt_preprocessing(node: ast.AST, ctx) -> bool:
    """The mask is the padding mask (or ids) of a batch the same function tokenized (``return_tensors="pt"``),
    outside training (no ``backward`` in the function, no training loop in the file): the read keeps each
    prompt's real tokens once per call (diffusers z_image/pipeline_z_image_inpaint.py:302), a length the text
    fixes and the model consumes as it is."""
    function = ctx.model.function(node)
    if function is None or training(ctx).loops:
        return False
    return not any("backward" in line for line in ctx.lines[function.lineno - 1:function.end_lineno])


_PIPELINE = (
    "import torch\n\nclass QwenImagePipeline:\n    def _extract_masked_hidden(self, hidden_states, mask):\n"
    "        bool_mask = mask.bool()\n        selected = hidden_states[bool_mask]\n"
    "        return torch.split(selected, bool_mask.sum(dim=1).tolist(), dim=0)\n\n"
    "    @torch.no_grad()\n    def __call__(self, x, mask, timesteps):\n{call}        return x\n")


class BooleanMaskRead(Rule):
    code = "ASC402"
    summary = "boolean-mask indexing read (x[x > 0], boxes[keep] with a mask)"
    node_types = (ast.Subscript,)
    why = (
        "Indexing with a boolean mask returns as many rows as the mask holds True values, so the result's shape "
        "changes from batch to batch and the NPU recompiles the ops that consume it. As for ASC401 and ASC403, a "
        "read that runs once per object, per call of an inference entry point (a pipeline's `encode_prompt`, "
        "outside the denoising loop; a no_grad `infer`/`inference` method outside its loops; a loop that only "
        "prepares each input and appends it to a list counts as once) or per evaluation (a "
        "metric's `compute`/`compute_metrics`) brings one shape that the steps after it reuse, and is not reported."
    )
    example = "positives = scores[scores > 0.5]"
    use_instead = (
        "Keep the full shape and neutralise the unwanted elements: `torch.where(mask, x, 0)`, "
        "`x.masked_fill(~mask, 0)`, or weight a loss by `mask.float()`; select on the CPU if you must."
    )
    source = DYNAMIC_SOURCE
    fires = [
        ("import torch\ny = x[x > 0]\n", 2),
        ("import torch\nscores = torch.rand(10)\nkeep = scores > 0.5\nboxes = b[keep]\n", 4),
        ("import torch\ndef f(x: torch.Tensor):\n    return x[~torch.isnan(x)]\n", 3),
        ("import torch\nx = torch.randn(4, 4)\ny = x[:, x[0] > 0]\n", 3),
        ("import torch\ny = loss[loss.isfinite()]\n", 2),
        ("import torch\ndef f(scores, thr):\n    keep = scores > thr\n    return scores[keep], torch.nonzero(keep)\n", 4),
        ("import torch\ndef f(o):\n    m, i = o.max(dim=0)\n    return i[m > 0.5]\n", 4),
        ("import torch\nx = torch.randn(4, 4)\ny = x[x[:, 0] > 0, 1:]\n", 3),
        # a numpy mask still selects a data-dependent number of rows of a tensor (mmdet byte_tracker.py:252)
        ("import numpy as np\nimport torch\ndef f(inds: np.ndarray, boxes: torch.Tensor):\n"
         "    valid = inds > -1\n    return boxes[valid]\n", 5),
        # a mask that arrives as a parameter from the file's call site, or from torch.cat of a list of masks
        ("import torch\ndef _pick(boxes, keep):\n    return boxes[keep]\n"
         "def post(boxes: torch.Tensor, scores: torch.Tensor):\n    return _pick(boxes, scores > 0.3)\n", 3),
        ("import torch\ndef f(x: torch.Tensor, ys, thrs):\n    masks = []\n    for t in thrs:\n"
         "        masks.append(x > t)\n    keep = torch.cat(masks)\n    return ys[keep]\n", 7),
        # near misses of the reads below: the table moved, or combined with a tensor of unknown device (it is
        # wherever that one is); a tokenizer's padding mask read in a training step
        ("import torch\n\nclass Encoder:\n    def training_step(self, texts):\n"
         "        enc = self.tokenizer(texts, padding=True, return_tensors='pt').to(self.device)\n"
         "        hidden = self.text_encoder(**enc).last_hidden_state\n"
         "        loss = hidden[enc.attention_mask.bool()].pow(2).mean()\n        loss.backward()\n", 7),
        ("import torch\ndef kept(n, drop, device):\n    idx = torch.arange(n)\n    idx = idx.to(device)\n"
         "    return idx[idx != drop]\n", 5),
        ("import torch\ndef kept(n, x):\n    idx = torch.arange(n) + x\n    return idx[idx > 0]\n", 4),
        # near miss of a read once per call: the pipeline calls the helper in its denoising loop
        (_PIPELINE.format(call="        for t in timesteps:\n            x = self._extract_masked_hidden(x, mask)\n"), 6),
    ]
    passes = [
        "import numpy as np\na = np.arange(5)\nb = a[a > 2]\n",
        "import torch\ny = state_dict[key]\n",
        "import torch\nx = torch.randn(4)\nx[x > 0] = 0\n",
        "import torch\nflag = options[n > 0]\n",
        "import torch\nx = torch.randn(4)\ny = x[:2]\n",
        "import torch\nkeep = torch.rand(3) > 0.5\nkeep = [1, 2]\ny = b[keep]\n",
        "import numpy as np\nimport torch\ndef f(sem):\n    ids = np.unique(sem)\n    return ids[ids != 255]\n",
        "import numpy as np\ndef f(p):\n    p = p[p > -1]\n    return np.mean(p) if p.size else 0\n",
        "import numpy as np\nimport torch\ndef f(inds: np.ndarray):\n    valid = inds > -1\n    return inds[valid]\n",
        "import torch\nt = torch.arange(10, device='cpu')\ny = t[t > 3]\n",
        "import torch\ndef f(x):\n    return x[x.shape[0] > 2]\n",
        # mmseg dice_loss.py:71: a mask from a constant table always keeps the same number of classes
        "import torch\ndef f(pred, ignore_index=255):\n    n = pred.size(1)\n"
        "    return pred[:, torch.arange(n) != ignore_index]\n",
        # the helper's call sites pass numpy masks; a list of index tensors; tensors another method moved to the CPU
        "import numpy as np\nimport torch\ndef _pick(boxes, keep):\n    return boxes[keep]\n"
        "def post(boxes, scores):\n    return _pick(np.asarray(boxes), np.asarray(scores) > 0.3)\n",
        "import torch\ndef f(x: torch.Tensor, ys, thrs):\n    inds = []\n    for t in thrs:\n"
        "        inds.append(torch.nonzero(x > t))\n    return ys[torch.cat(inds)]\n",
        "import torch\nclass Post:\n    def _host(self, x: torch.Tensor):\n        if x.dim() == 1:\n"
        "            return x.cpu()\n        return x.detach().cpu()\n    def run(self, x: torch.Tensor):\n"
        "        y = self._host(x)\n        return y[y > 0]\n",
        # diffusers kandinsky5/pipeline_kandinsky_i2i.py:228: tokenizer ids (CPU tensors, never moved)
        _TOKENS.format(move=""),
        _TOKENS.format(move=".to(device)"),
        # diffusers z_image/pipeline_z_image_inpaint.py:302: each prompt's real tokens, once per pipeline call
        "import torch\n\nclass ZImagePipeline:\n    def _encode_prompt(self, prompt, device, max_sequence_length=512):\n"
        "        text_inputs = self.tokenizer(prompt, padding='max_length', max_length=max_sequence_length,\n"
        "                                     truncation=True, return_tensors='pt')\n"
        "        text_input_ids = text_inputs.input_ids.to(device)\n"
        "        prompt_masks = text_inputs.attention_mask.to(device).bool()\n"
        "        prompt_embeds = self.text_encoder(input_ids=text_input_ids, attention_mask=prompt_masks,\n"
        "                                          output_hidden_states=True).hidden_states[-2]\n"
        "        embeddings_list = []\n        for i in range(len(prompt_embeds)):\n"
        "            embeddings_list.append(prompt_embeds[i][prompt_masks[i]])\n        return embeddings_list\n",
        # once per pipeline call: the prompt's valid tokens, extracted before the denoising loop (diffusers 0.42.1
        # pipelines/qwenimage/pipeline_qwenimage.py:179-182)
        _PIPELINE.format(call="        x = self._extract_masked_hidden(x, mask)\n        for t in timesteps:\n"
                              "            x = x + t\n"),
        # a mask of a table built without a device in a function, read there (on the CPU)
        "import torch\ndef kept(n, drop):\n    idx = torch.arange(n)\n    return idx[idx != drop]\n",
        # the values and indices of a reduction of a CPU copy are on the CPU too (nougat 0.1.17 model.py:614-622)
        "import torch\ndef repeats(scores, pad_id):\n    logits = torch.stack(scores, 1).cpu().max(-1)\n"
        "    values, indices = logits.values, logits.indices\n    return values[0, indices[0] != pad_id]\n",
    ]

    def check(self, node, ctx) -> None:
        if not isinstance(node.ctx, ast.Load):  # x[mask] = v is an index put (ASC304), not a read
            return
        index = node.slice
        if isinstance(index, (ast.Constant, ast.Slice)):
            return
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        values = ctx.values
        for part in parts:
            if isinstance(part, (ast.Constant, ast.Slice)) or (not isinstance(part, ast.Name) and values.of(part).const):
                continue  # a constant mask written in place (``torch.arange(n) != k``; a name may be filled later)
            index = values.of(part)
            if index.encoding and _prompt_preprocessing(node, ctx):
                continue
            if (index.kind == MASK or self._masks_itself(node.value, part, ctx) or (
                    (index.kind == COMPARE or index.boolean) and values.is_tensor(node.value))) \
                    and not values.on_host_here(node.value) \
                    and not runs_once(node, ctx):
                ctx.report(node, self.code, f"boolean-mask read {ast.unparse(node)[:60]} has a data-dependent "
                           "length (each new length compiles new NPU kernels)",
                           api="tensor[bool mask]", tips="torch.where(mask, x, 0) / masked_fill keep the shape")
                return

    def _masks_itself(self, value: ast.AST, index: ast.AST, ctx) -> bool:
        """``x[x > 0]`` / ``x[x.isnan()]``: a mask built from the indexed value itself, not numpy's."""
        if ctx.values.of(value).kind in (ARRAY, CONTAINER, OTHER) or ctx.values.of(index).kind not in (
                COMPARE, "mask", "unknown"):
            return False
        if isinstance(index, ast.Compare):
            return (len(index.ops) == 1 and not isinstance(index.ops[0], (ast.In, ast.NotIn, ast.Is, ast.IsNot))
                    and (same_expression(index.left, value) or same_expression(index.comparators[0], value)))
        if isinstance(index, ast.Call) and isinstance(index.func, ast.Attribute):
            return index.func.attr in _MASK_METHOD_NAMES and same_expression(index.func.value, value)
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.Invert):
            return self._masks_itself(value, index.operand, ctx)
        return False
