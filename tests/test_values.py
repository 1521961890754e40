"""The value model (semantic/values.py): what expressions are, evidence from use, and the real-snippet fixtures."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import run_rules
from flake8_ascend.semantic import values as model
from flake8_ascend.semantic.model import SemanticModel

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "values"


def value_of_last(source: str) -> model.Value:
    """The value of the last expression statement (the model needs no walk position)."""
    tree = ast.parse(source)
    semantic = SemanticModel(tree, source.splitlines(keepends=True))
    last = max((n for n in ast.walk(tree) if isinstance(n, ast.Expr)), key=lambda n: n.lineno)
    return semantic.value_of(last.value)


_ITEM_IN_BRANCHES = "def f(i):\n    if i.dim() == 1:\n        i = i[0].item()\n    else:\n        i = i.item()\n    i\n"


@pytest.mark.parametrize("source,kind", [
    # torch's stubs
    ("import torch\ntorch.sparse.sum(x, dim=1)\n", model.TENSOR),
    ("import torch\ntorch.isnan(x)\n", model.MASK),
    ("import torch\nv, i = torch.topk(x, 3)\ni\n", model.TENSOR),
    ("import torch\nr = torch.unique(x, return_counts=True)\nr[1]\n", model.TENSOR),
    ("import torch\nrows, cols = torch.where(x > 0)\ncols\n", model.TENSOR),
    ("import torch\nx = torch.randn(3)\nx.max(dim=0).values\n", model.TENSOR),
    ("import torch\nx = torch.randn(3)\nx.item()\n", model.NUMBER),
    ("import torch\nx = torch.randn(3)\nx.shape\n", model.CONTAINER),
    # masks
    ("import torch\nx = torch.randn(3)\n(x > 0) & (x < 1)\n", model.MASK),
    ("import torch\nx = torch.randn(3)\n~(x > 0).any(1)\n", model.MASK),
    ("import torch\nx = torch.randn(3)\nm = x > 0\ntorch.stack([m, m]).view(-1)\n", model.MASK),
    ("import torch\nx = torch.randn(3)\nx.any()\n", model.TENSOR),  # a 0-d flag, not a mask to index with
    # a triangle of a boolean tensor keeps its dtype (doctr 0.12.0 parseq/pytorch.py:309); of a float one, not a mask
    ("import torch\ndef f(n):\n    torch.triu(torch.ones(n, n, dtype=torch.bool), 2)\n", model.MASK),
    ("import torch\ndef f(n):\n    torch.ones(n, n).tril()\n", model.TENSOR),
    # evidence from use, per function
    ("import torch\ndef f(x):\n    x.unsqueeze(0)\n    x\n", model.TENSOR),
    ("import torch\ndef f(x):\n    y = x.size(0)\n    x\n", model.TENSOR),
    ("import torch\ndef f(x):\n    torch.cat([x, x])\n    x\n", model.TENSOR),
    ("import torch\ndef f(x, t):\n    m = x > t\n    torch.nonzero(m)\n    m\n", model.MASK),
    ("import numpy as np\ndef f(x):\n    np.mean(x)\n    x\n", model.ARRAY),
    ("def f(x):\n    x.astype(int)\n    x\n", model.ARRAY),
    # a loss: what a backward call differentiates, whatever its assignment says
    ("def f(x):\n    loss = crit(x)\n    loss.backward()\n    loss\n", model.TENSOR),
    ("def f(parts):\n    loss = sum(parts.values())\n    loss.backward()\n    loss\n", model.TENSOR),
    ("def f(x, n):\n    loss = crit(x)\n    (loss / n).backward()\n    loss\n", model.TENSOR),
    ("def f(x):\n    loss = crit(x)\n    scaler.scale(loss).backward()\n    loss\n", model.TENSOR),
    ("def f(x):\n    loss = crit(x)\n    accelerator.backward(loss)\n    loss.detach() * 2\n", model.TENSOR),
    # self attributes, helpers, module constants
    ("import torch\nclass A:\n    def __init__(self):\n        self.w = torch.ones(3)\n    def f(self):\n"
     "        self.w\n", model.TENSOR),
    ("import torch\ndef helper(x):\n    return torch.relu(x)\ndef f(y):\n    helper(y)\n", model.TENSOR),
    ("import torch\nEPS = 1e-6\ndef f():\n    EPS\n", model.NUMBER),
    # .item() gives a Python number whatever the receiver, here the other branch's number that flow reads (espnet
    # 202511 gan_trainer.py:203-205); before, the parameter's tensor evidence (``i.dim()``) won
    (_ITEM_IN_BRANCHES, model.NUMBER),
])
def test_kinds(source, kind):
    assert value_of_last(source).kind == kind


@pytest.mark.parametrize("source", [
    "def f(x):\n    x\n",                                                   # an untyped parameter
    "import numpy as np\nimport torch\ndef f(x):\n    np.sum(x)\n    x.unsqueeze(0)\n    x\n",  # conflicting evidence
    "import torch\ndef f(model):\n    model.to('cuda')\n    model\n",         # modules have .to too
    "import torch\ndef f(model):\n    model.device\n    model\n",              # ... and often .device
    # a call of the module itself (nemo 2.5.0 speech_llm/modules/perception_modules.py:185, a bug of its own)
    "import torch\ndef f(encoded):\n    torch([x.unsqueeze(-1) for x in encoded], dim=-1)\n",
])
def test_unknown_without_evidence(source):
    assert value_of_last(source).kind == model.UNKNOWN


@pytest.mark.parametrize("source,kind", [
    ("import numpy as np\nids = np.unique(a)\nids[ids != 255]\n", model.ARRAY),   # mmdet local_visualizer.py:350
    ("import pandas as pd\ndf = pd.read_csv(p)\ndf['a'] > 0\n", model.ARRAY),
    ("xs = [1, 2]\nxs\n", model.CONTAINER),
    ("d = {}\nd\n", model.CONTAINER),
    ("import torch\ndef f(x):\n    x.shape[0] > 2\n", model.NUMBER),         # .shape comparisons are Python bools (ints)
    ("def f(x):\n    len(x)\n", model.NUMBER),
    ("name = 'cuda'\nname\n", model.OTHER),
    # the receiver of a framework's backward is the framework, not a loss
    ("def f(x):\n    accelerator = make()\n    accelerator.backward(crit(x))\n    accelerator\n", model.UNKNOWN),
    ("def f(parts):\n    loss = sum(parts.values())\n    loss\n", model.NUMBER),  # no backward: a sum
])
def test_near_misses_are_not_tensors(source, kind):
    assert value_of_last(source).kind == kind


@pytest.mark.parametrize("source,device,const", [
    ("import torch\ntorch.tensor([1, 2], device='cpu')\n", model.HOST, True),
    ("import torch\nx = torch.ones(3)\nx.cuda()\n", model.DEVICE, True),
    ("import torch\nx = torch.randn(3)\nx.cuda()\n", model.DEVICE, False),  # random, not a constant table
    ("import torch\ndef f(x):\n    x.view(-1)\n    x.cpu()\n", model.HOST, False),
    ("import torch\ntorch.arange(4) * 2\n", None, True),
    ("import torch\ndef f(x):\n    x.view(-1)\n    torch.arange(4) * x\n", None, False),
])
def test_device_and_constant_tables(source, device, const):
    value = value_of_last(source)
    assert (value.device, value.const) == (device, const)


# Across boundaries: parameters from the file's call sites, lists grown by append, other methods.
@pytest.mark.parametrize("source,kind", [
    ("import torch\ndef f(x: torch.Tensor):\n    g(x > 0)\ndef g(m):\n    m\n", model.MASK),
    ("import torch\nclass A:\n    def f(self, x: torch.Tensor):\n        self.g(x, mask=x > 0)\n"
     "    def g(self, x, mask):\n        mask\n", model.MASK),
    ("import torch\ndef f(x: torch.Tensor):\n    g(x.isnan())\n    g()\ndef g(m=None):\n    m\n", model.UNKNOWN),
    ("import torch\ndef f(x: torch.Tensor):\n    g(x > 0)\n    g([1, 2])\ndef g(m):\n    m\n", model.UNKNOWN),
    ("import torch\ndef f(args):\n    g(*args)\ndef g(m):\n    m\n", model.UNKNOWN),
    ("import numpy as np\ndef f(a):\n    g(np.asarray(a) > 0)\ndef g(m):\n    m\n", model.UNKNOWN),  # tensors only
    ("import torch\ndef f(xs):\n    masks = []\n    for x in xs:\n        masks.append(torch.isnan(x))\n"
     "    torch.cat(masks)\n", model.MASK),
    ("import torch\ndef f(xs):\n    inds = []\n    for x in xs:\n        inds.append(torch.nonzero(x))\n"
     "    torch.cat(inds)\n", model.TENSOR),                                   # index tensors, not masks
    ("import torch\ndef f(x: torch.Tensor):\n    ms = [x.isnan(), x.isinf()]\n    a, b = ms\n    b\n", model.MASK),
    ("import torch\ndef f(xs):\n    rows = []\n    rows.append([0, 1])\n    torch.cat(rows)\n", model.TENSOR),
])
def test_values_across_boundaries(source, kind):
    assert value_of_last(source).kind == kind


def test_host_copies_made_in_other_methods_stay_on_the_host():
    source = ("import torch\nclass A:\n    def keep(self, t: torch.Tensor):\n        self.cache = t.cpu()\n"
              "    def refresh(self, t: torch.Tensor):\n        self.cache = t.detach().cpu()\n"
              "    def _host(self, x: torch.Tensor):\n        if x.dim() == 1:\n            return x.cpu()\n"
              "        return x.detach().cpu()\n    def use(self, x):\n        self.cache\n        self._host(x)\n")
    assert value_of_last(source).device == model.HOST
    assert value_of_last(source.rsplit("        self._host", 1)[0]).device == model.HOST


def test_readout_numbers():
    assert value_of_last("import torch\nx = torch.randn(3)\nint(x.sum())\n").readout
    assert not value_of_last("def f(x):\n    len(x)\n").readout
    assert value_of_last(_ITEM_IN_BRANCHES).readout  # read out of the tensor in either branch
    assert not value_of_last("def f(n: int):\n    n.item()\n").readout  # a number, but not read out of a tensor


@pytest.mark.parametrize("source,readout", [
    # a bound on a number read from data is read from data (diffusers scheduling_block_refinement.py:324)
    ("import torch\ndef f(active: torch.Tensor, n):\n    min(n, int(active.sum().item()))\n", True),
    ("import torch\ndef f(steps, strength):\n    min(int(steps * strength), steps)\n", False),
    # a constant table holds literals and sizes (diffusers pipeline_ernie_image.py:200)
    ("import torch\ndef f(hs):\n    lens = torch.tensor([t.shape[0] for t in hs])\n    int(lens.max().item())\n", False),
    ("import torch\ndef f(x: torch.Tensor):\n    torch.tensor(x.tolist()).max().item()\n", True),  # data in
    # a default filled in under ``if m is None`` is not all ``m`` can hold (diffusers transformer_cogview4.py:430)
    ("import torch\ndef f(m=None):\n    if m is None:\n        m = torch.ones(2, 8)\n    m.sum(dim=1).tolist()\n", True),
    ("import torch\ndef f(m=None):\n    if m is None:\n        m = torch.ones(2, 8)\n        m.sum(dim=1).tolist()\n", False),
    # a table the function writes into holds data (mmdet sort_tracker.py:227)
    ("import torch\ndef f(i, v):\n    ids = torch.full((4,), -1)\n    ids[i] = v\n    ids.max().item()\n", True),
    ("import torch\ndef f(v: torch.Tensor):\n    ids = torch.full((4,), -1)\n    ids.add_(v)\n    ids.max().item()\n", True),
    ("import torch\ndef f(i):\n    ids = torch.full((4,), -1)\n    ids[i] = 0\n    ids.max().item()\n", True),  # where: data
    ("import torch\ndef f():\n    ids = torch.full((4,), -1)\n    ids[0] = 0\n    ids.max().item()\n", False),
    # scaled by numbers, still a table (timm pos_embed_rel.py:406)
    ("import torch\ndef f(w):\n    t = torch.arange(4.0)\n    t[0] /= (w - 1)\n    t *= 8\n    t.max().item()\n", False),
    # a tensor of shapes is a constant table (diffusers transformer_wan_animate_2.py:833)
    ("import torch\ndef f(xs):\n    g = torch.stack([torch.tensor(u.shape[2:]) for u in xs])\n    g.tolist()\n", False),
])
def test_readouts_of_data_only(source, readout):
    assert value_of_last(source).readout == readout


@pytest.mark.parametrize("source,kind", [
    # a comparison of numbers is a bool, a Python int (diffusers autoencoder_kl_kvae_video.py:450)
    ("import torch\ndef f(x: torch.Tensor):\n    1.0 + 1.0 * (x.size(2) > 1)\n", model.NUMBER),
    ("import torch\ndef f(x: torch.Tensor):\n    x.size(2)\n", model.NUMBER),
    ("import torch\ndef f(x: torch.Tensor):\n    x.size(dim=2)\n", model.NUMBER),
    ("import torch\ndef f(x: torch.Tensor):\n    x.size()\n", model.CONTAINER),
    # annotated Python numbers (diffusers sana_wm/cam_utils.py:256)
    ("import torch\ndef f(stride: int):\n    stride - 1\n", model.NUMBER),
    ("import torch\ndef f(vae_stride: tuple[int, int, int]):\n    a, b = vae_stride[0], vae_stride[-1]\n    a\n",
     model.NUMBER),
    ("import torch\nclass int:\n    pass\ndef f(stride: int):\n    stride\n", model.UNKNOWN),  # not the builtin
])
def test_python_numbers(source, kind):
    assert value_of_last(source).kind == kind


def test_tensor_only_methods_are_tensor_methods_in_the_stubs():
    table = model.torch_types()
    for name in model.TENSOR_ONLY:
        assert f"torch.Tensor.{name}" in table["returns"] or f"torch.Tensor.{name}" in table["attributes"], name


def _expected(path: Path):
    text = path.read_text(encoding="utf-8")
    codes = re.search(r"# codes: (.*)", text).group(1).split()
    expected = set()
    for number, line in enumerate(text.splitlines(), 1):
        match = re.search(r"# expect: ([A-Z0-9 ]+)$", line)
        if match:
            expected.update((number, code) for code in match.group(1).split())
    return text, codes, expected


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.py")), ids=lambda p: p.stem)
def test_real_snippets(path):
    text, codes, expected = _expected(path)
    found = set()
    for finding in run_rules(text, codes=codes):  # a repeat in one function is named by the first finding
        repeats = re.search(r"\(again in this function on lines? ([\d, ]+)\)$", finding.message)
        lines = [finding.line, *(int(n) for n in repeats.group(1).split(", "))] if repeats else [finding.line]
        found.update((line, finding.code) for line in lines)
    assert found == expected


_META = ("import torch\ndef skeleton(build, device):\n    with torch.device({device}):\n        return build()\n"
         "def token_types(input_ids):\n    types = torch.zeros(len(input_ids))\n    types\n")
_POSE_INVERSE = ("import torch\ndef prepare_camera(poses_c2w):\n    poses = torch.from_numpy(poses_c2w).float()\n"
                 "    return pose_inverse(poses[0:1])\ndef pose_inverse(T44: torch.Tensor):\n"
                 "    R = T44[..., :3, :3]\n    R\n")
_COUNTED = ("import torch\ndef step(batches, device):\n    n = torch.tensor(0, dtype=torch.int64)\n{move}"
            "    for labels in batches:\n        n += (labels != -100).sum()\n    n\n")
_JOINED = ("import torch\ndef evaluate(model, loader):\n    images, texts = [], []\n    for batch in loader:\n"
           "        out = model(batch)\n        images.append(out['image'].cpu())\n"
           "        texts.append(out['text']{text})\n"
           "    torch.cat(texts)\n")


@pytest.mark.parametrize("source,device", [
    # built with no device inside a function: on the host where it is read, until the flow moves it
    ("import torch\ndef f(n):\n    t = torch.linspace(0, 1, n, dtype=torch.float64)\n    t\n", model.BUILT_ON_HOST),
    ("import torch\ndef f(n):\n    t = torch.arange(n)\n    t * 2\n", model.BUILT_ON_HOST),
    ("import torch\ndef f(a):\n    torch.from_numpy(a)\n", model.HOST),
    ("import torch\ndef f(n):\n    a = torch.arange(n, device='cpu')\n    torch.arange(n, device=a.device)\n",
     model.HOST),
    # a tokenizer's batch of CPU tensors (diffusers kandinsky5 pipeline_kandinsky_i2i.py:215)
    ("import torch\ndef f(self, p):\n    ids = self.tokenizer(p, return_tensors='pt')['input_ids']\n    ids[0]\n",
     model.BUILT_ON_HOST),
    ("import torch\ndef f(self, p):\n    self.tokenizer(p, return_tensors='pt').attention_mask\n", model.BUILT_ON_HOST),
    # a legacy constructor is a CPU tensor type, and a *_like of it stays there (peft 0.17.1 tuners/cpt/model.py:113)
    ("import torch\ndef f(mask):\n    torch.Tensor(mask).long()\n", model.BUILT_ON_HOST),
    ("import torch\ndef f(mask):\n    torch.ones_like(torch.Tensor(mask)).to(torch.float32) * 1e-10\n",
     model.BUILT_ON_HOST),
    # near misses: moved, combined with a tensor of unknown place, module level, __init__, a default-device
    # context, a tensor given to torch.tensor, a self attribute (a buffer or parameter the module moves)
    ("import torch\ndef f(n, x):\n    t = torch.linspace(0, 1, n)\n    t = t.to(x.device)\n    t\n", None),
    ("import torch\ndef f(self, p, d):\n    self.tokenizer(p, return_tensors='pt').to(d).attention_mask\n", None),
    ("import torch\ndef f(self, p, d):\n    self.tokenizer(p, return_tensors='pt').input_ids.to(d)\n", None),
    ("import torch\ndef f(n, x):\n    t = torch.arange(n)\n    t * x\n", None),
    ("import torch\ndef f(n, x):\n    torch.tensor(2.0) * x\n", None),
    ("import torch\ndef f(n, x):\n    torch.cat([torch.zeros(n), x])\n", None),
    ("import torch\nt = torch.arange(3)\nt\n", None),
    ("import torch\nclass A:\n    def __init__(self):\n        t = torch.arange(3)\n        t\n", None),
    ("import torch\ndef f(n):\n    with torch.device('cuda'):\n        t = torch.arange(n)\n    t\n", None),
    ("import torch\ndef f(x):\n    torch.tensor(x)\n", None),
    # a legacy constructor in __init__ (a parameter's data, moved with the module), or moved
    ("import torch\nclass A:\n    def __init__(self, n):\n        t = torch.Tensor(n)\n        t\n", None),
    ("import torch\ndef f(mask, x):\n    torch.LongTensor(mask).to(x.device)\n", None),
    ("import torch\nclass A:\n    def reset(self):\n        self.t = torch.zeros(3)\n    def f(self):\n"
     "        self.t\n", None),
    # a file that builds a model skeleton on ``meta`` keeps its factories on the host (ms_swift template/base.py:270,
    # :2222); near miss: a default device of unknown kind
    (_META.format(device="'meta'"), model.BUILT_ON_HOST),
    (_META.format(device="device"), None),
    # a tensor parameter that every caller in the file passes from the host (diffusers sana_wm/cam_utils.py:243-276);
    # near miss: another caller passes a tensor of unknown place
    (_POSE_INVERSE, model.HOST),
    ("import torch\ndef relative(x):\n    return pose_inverse(x.float())\n" + _POSE_INVERSE, None),
    # a join of CPU copies (open_clip open_clip_train/train.py:273-317); near misses: one item not copied
    (_JOINED.format(text=".cpu()"), model.HOST),
    (_JOINED.format(text=""), None),
    ("import torch\ndef f(model, a, b):\n    torch.cat([model(a).cpu(), model(b).cpu()])\n", model.HOST),
    ("import torch\ndef f(model, xs):\n    torch.cat([model(x).cpu() for x in xs])\n", model.HOST),
    ("import torch\ndef f(model, xs):\n    torch.cat([model(x) for x in xs])\n", None),
    # an in-place update keeps a tensor where it is (torchtitan 0.3.0 trainer.py:883-893, ``local_valid_tokens``
    # summed into from each batch's labels); near misses: moved before the update, a plain rebinding
    (_COUNTED.format(move=""), model.BUILT_ON_HOST),
    (_COUNTED.format(move="    n = n.to(device)\n"), None),
    (_COUNTED.format(move="").replace("n += ", "n = n + "), None),
    # the results of a reduction along a dimension are where its input is (nougat 0.1.17 model.py:614-615); near
    # miss: an input of unknown place
    ("import torch\ndef f(scores):\n    logits = torch.stack(scores, 1).cpu().max(-1)\n    logits.values\n",
     model.HOST),
    ("import torch\ndef f(scores):\n    values, indices = torch.stack(scores).cpu().topk(3)\n    indices\n",
     model.HOST),
    ("import torch\ndef f(scores):\n    logits = torch.stack(scores, 1).max(-1)\n    logits.values\n", None),
])
def test_host_built_values(source, device):
    assert value_of_last(source).device == device


def test_list_of_numbers_annotation_is_not_a_tensor():
    source = ("import torch\nfrom typing import List, Optional\n"
              "def f(sigmas: Optional[List[float]] = None, ts: list[int] | None = None):\n"
              "    torch.tensor(sigmas)\n    torch.tensor(ts)\n")
    assert value_of_last(source).device == model.BUILT_ON_HOST
    assert value_of_last(source.replace("torch.tensor(ts)", "ts")).kind == model.CONTAINER


def test_a_pil_image_annotation_is_not_a_tensor():
    # diffusers 0.37 image_processor.py:524, ``def binarize(self, image: PIL.Image.Image)``; near misses: no
    # annotation, a tensor annotation
    source = ("import PIL.Image\nimport torch\ndef binarize(image: PIL.Image.Image):\n    image[image < 0.5] = 0\n"
              "    image\n")
    tree = ast.parse(source)
    values = SemanticModel(tree, source.splitlines(keepends=True)).values
    image = tree.body[2].body[1].value
    assert values.of(image).kind == model.OTHER and not values.maybe_tensor(image)
    for annotation, maybe in (("", True), (": torch.Tensor", True)):
        changed = source.replace(": PIL.Image.Image", annotation)
        tree = ast.parse(changed)
        values = SemanticModel(tree, changed.splitlines(keepends=True)).values
        assert values.maybe_tensor(tree.body[2].body[1].value) is maybe


def test_data_placements_and_their_dtypes():
    source = ("import torch\ndef f(a, b, c, device, out_dtype):\n    torch.zeros(3, device=device)\n"
              "    a.to(dtype=torch.float32, device=device)\n    b.to(device, out_dtype)\n    c.to(device).float()\n"
              "    torch.tensor(a, device=device)\n    a.to(torch.float64)\n    b.cpu()\n")
    tree = ast.parse(source)
    semantic = SemanticModel(tree, source.splitlines(keepends=True))
    found = [(call.lineno, ast.unparse(dtype) if isinstance(dtype, ast.AST) else dtype)
             for call, dtype in semantic.values.data_placements(tree.body[1])]
    assert sorted(found) == [(4, "torch.float32"), (5, "out_dtype"), (6, "torch.float32"), (7, None)]


def _host_at_last_put(source: str) -> bool:
    """``host_here`` of the tensor the last index put (``x[...] = v``) writes into."""
    tree = ast.parse(source)
    semantic = SemanticModel(tree, source.splitlines(keepends=True))
    put = max((n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign))
               and isinstance(getattr(n, "target", None) or n.targets[0], ast.Subscript)), key=lambda n: n.lineno)
    return semantic.values.host_here((getattr(put, "target", None) or put.targets[0]).value)


# scvi-tools 1.4.2 model/_multivi.py:565-574 (and _peakvi.py:370-379): a host copy, updated in place under branches
_IMPUTED = ("import torch\ndef impute(self, post, normalize_cells, threshold):\n    for tensors in post:\n"
            "        outputs = self.module(tensors)\n        p = outputs['p'].cpu()\n{between}"
            "        if normalize_cells:\n            p *= outputs['libsize_acc'].cpu()\n"
            "        if threshold:\n            p[p < threshold] = 0\n")
# kraken 7.1.1 blla.py:106-121: the PIL transforms' tensor, moved through a view inside two ``with`` blocks
_SEGMENT = ("import torch\ndef segment(im, mask, model, transforms, device):\n    tensor_im = transforms(im)\n"
            "    if mask:\n        tensor_im[~transforms(mask).bool()] = 0\n{move}")
_MOVE = "model.nn(tensor_im.unsqueeze(0).to(device))"
_CALIBRATED = ("import torch\ndef fit(uncs, targets, mask, neg):\n    targets = targets.float()\n"
               "    targets[targets == 0] = neg[targets == 0]\n    for j in range(uncs.shape[1]):\n"
               "        mask_j = mask[:, j]\n        t = {read}\n")


@pytest.mark.parametrize("source,host", [
    (_IMPUTED.format(between=""), True),
    (_SEGMENT.format(move=f"    with torch.autocast('cuda'):\n        with torch.no_grad():\n            o = {_MOVE}\n"
                          "    return o\n"), True),
    (_SEGMENT.format(move=f"    return {_MOVE}\n"), True),
    # near misses: a copy in a branch of its own (mmdet 3.1.0 models/task_modules/assigners/
    # approx_max_iou_assigner.py:130-154, ``if assign_on_cpu: approxs = approxs.cpu()``); a copy rebound to a
    # device tensor before the read
    ("import torch\ndef assign(self, overlaps, on_cpu, thr):\n    if on_cpu:\n        overlaps = overlaps.cpu()\n"
     "    overlaps[overlaps < thr] = -1\n", False),
    (_IMPUTED.format(between="        p = p.to(self.device)\n"), False),
    # a move in a branch, a move beside another tensor (``labels.to(logits.device)`` only puts them together)
    (_SEGMENT.format(move=f"    if device != 'cpu':\n        o = {_MOVE}\n"), False),
    ("import torch\ndef f(labels, logits, ignore):\n    labels[labels == ignore] = -100\n"
     "    return labels.to(logits.device)\n", False),
    # a conversion through a table of dtypes (funasr 1.4.16 models/fun_asr_nano/model.py:358-380)
    ("import torch\ndef f(self, e, t):\n    e[e < t] = 0\n    return self.llm(e.to(dtype_map[self.llm_dtype]))\n", False),
    # a copy to the host after the read (deepspeed 0.19.8 sequence/fpdt_layer.py:1282-1293, saved for backward)
    ("import torch\ndef f(ctx, x, t):\n    x[x < t] = 0\n    ctx.save_for_backward(x.to('cpu'))\n", False),
    # a conversion to a dtype kept in an attribute (unsloth 2026.10.9 studio/backend/core/inference/
    # diffusion_native_quant.py:398-406, ``h.to(self.compute_dtype)``)
    ("import torch\ndef f(self, w, t):\n    h = build(device=w.device)\n    h[h < t] = 0\n"
     "    self.register_buffer('rot_h', h.to(self.compute_dtype))\n", False),
    # a loop that moves the name in one iteration and reads it in the next; a copy before a loop that rebinds it
    ("import torch\ndef f(x, n, device):\n    for _ in range(n):\n        x[x < 0] = 0\n        x = x.to(device)\n",
     False),
    ("import torch\ndef f(model, x, n):\n    x = x.cpu()\n    for _ in range(n):\n        x[x < 0] = 0\n"
     "        x = model(x)\n", False),
    # ... but a loop target is bound afresh in each iteration
    ("import torch\ndef f(loader, device, model):\n    for x in loader:\n        x[x < 0] = 0\n"
     "        x = x.to(device)\n        model(x)\n", True),
    # the same tensor converted by .numpy() with no move before it, which only a CPU tensor allows (chemprop 2.2.1
    # uncertainty/calibrator.py:380-389, Platt scaling's targets)
    (_CALIBRATED.format(read="targets[:, j][mask_j].numpy()"), True),
    (_CALIBRATED.format(read="targets[:, j][mask_j].detach().numpy()"), True),
    # near misses: .numpy() of a .cpu() copy (the device tensor is read before it), of force=True (which copies from
    # any device), of another binding of the name, of another name
    (_CALIBRATED.format(read="targets[:, j][mask_j].cpu().numpy()"), False),
    (_CALIBRATED.format(read="targets[:, j][mask_j].numpy(force=True)"), False),
    (_CALIBRATED.format(read="None\n        targets = targets.cpu()\n        t = targets.numpy()"), False),
    (_CALIBRATED.format(read="uncs[:, j].numpy()"), False),
])
def test_host_here(source, host):
    assert _host_at_last_put(source) is host


def test_host_here_in_a_while_test():
    """A ``while`` test reads the name again after each iteration: here after the body moved it."""
    source = ("import torch\ndef f(x, device):\n    x = x.cpu()\n    while x.sum().item() > 0:\n"
              "        x = step(x.to(device))\n")
    tree = ast.parse(source)
    read = tree.body[1].body[1].test.left.func.value.func.value
    assert SemanticModel(tree, source.splitlines(keepends=True)).values.host_here(read) is False
    unmoved = source.replace("x = step(x.to(device))", "y = step(x)")  # ... and a loop that leaves it alone
    tree = ast.parse(unmoved)
    read = tree.body[1].body[1].test.left.func.value.func.value
    assert SemanticModel(tree, unmoved.splitlines(keepends=True)).values.host_here(read) is True


def test_host_here_beside_other_placements():
    """A placement that is no method call (``Buffer(n, device=device)``) moves no name."""
    source = ("import torch\ndef f(x, n, device):\n    x[x < 0] = 0\n    buf = Buffer(n, device=device)\n"
              "    return x, buf\n")
    assert _host_at_last_put(source) is False
