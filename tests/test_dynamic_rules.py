"""ASC401-404: dynamic-shape hints, with the near misses that must stay silent."""
import pytest

from conftest import run_rules


def lines(source, code):
    return [f.line for f in run_rules(source, codes=[code])]


@pytest.mark.parametrize("source", [
    "import torch\nidx = torch.nonzero(x, as_tuple=True)\n",
    "import torch\nv = torch.unique_consecutive(x)\n",
    "import torch\nc = torch.bincount(labels)\n",
    "from torch import where\ni = where(mask)\n",
    "import torch\nidx = torch.argwhere(x)\n",
    "import torch\nx = torch.randn(3)\ny = x.masked_select(x > 0)\n",
    "import torch\nx = torch.randn(3)\nn = torch.Tensor.nonzero(x)\n",
    "import torch\ncounts = torch.randint(1, 4, (8,))\ny = torch.repeat_interleave(counts)\n",
    "import torch\nx = torch.randn(3)\nr = torch.randint(0, 3, (3,))\ny = x.repeat_interleave(r)\n",
    "import torch\ndef f(x: torch.Tensor):\n    keep = x > 0\n    return keep.nonzero()\n",
])
def test_asc401_fires(source):
    assert len(lines(source, "ASC401")) == 1


@pytest.mark.parametrize("source", [
    "import numpy as np\ni = np.where(a > 0)\n",  # numpy, not torch
    "import torch\nimport numpy as np\nu = np.unique(torch_out)\n",
    "import torch\nx = torch.randn(3)\ny = x.repeat_interleave(2)\n",  # constant repeats
    "import torch\ny = torch.where(c, a, b)\n",  # three-argument where keeps the shape
    "import torch\ny = torch.where(condition=c, input=a, other=b)\n",
    "import torch\ndef where(c):\n    return c\ny = where(m)\n",  # a local function
    "import torch\nclass Table:\n    def unique(self):\n        pass\nTable().unique()\n",
    "import torch\nidx = torch.nonzero_static(x, size=4)\n",
    "import torch\nrows = df.where(df > 0)\n",  # pandas-style method on an unknown object
    # repeats built from literals: the output length is fixed by the code (3), not by data
    "import torch\nx = torch.randn(3)\nr = torch.tensor([1, 2, 3])\ny = x.repeat_interleave(r)\n",
])
def test_asc401_near_misses(source):
    assert lines(source, "ASC401") == []


@pytest.mark.parametrize("source,line", [
    ("import torch\nx = torch.randn(5)\nm = (x > 0) & (x < 1)\ny = x[m]\n", 4),
    ("import torch\nx = torch.randn(5)\ny = x[torch.isfinite(x)]\n", 3),
    ("import torch\nx = torch.randn(5)\ny = x[x.gt(0)]\n", 3),
    ("import torch\nkeep = torch.zeros(4, dtype=torch.bool)\ny = boxes[keep]\n", 3),
    ("import torch\ny = feats[~(feats == 0)]\n", 2),
    ("import torch\nfor x, y in loader:\n    out = x[x != pad]\n", 3),
])
def test_asc402_fires(source, line):
    assert lines(source, "ASC402") == [line]


@pytest.mark.parametrize("source", [
    "import torch\nx = torch.randn(5)\nx[x < 0] += 1\n",  # index put (augmented), not a read
    "import torch\nx = torch.randn(5)\ndel x[x > 0]\n",
    "import torch\ny = weights[name in table]\n",  # membership test indexes with a Python bool
    "import torch\nx = torch.randn(5)\ny = x[x.argmax()]\n",  # an index, not a mask
    "import torch\nimport numpy as np\narr = np.array(v)\ny = arr[arr > 0]\n",
    "import torch\ny = batch[i > 0]\n",  # unrelated comparison of unknown values
    "import torch\nx = torch.randn(5)\ndef f(keep):\n    return x[keep]\n",  # parameter shadows nothing known
])
def test_asc402_near_misses(source):
    assert lines(source, "ASC402") == []


@pytest.mark.parametrize("source,line", [
    ("import torch\ny = x[n.item():]\n", 2),
    ("import torch\ny = x[:, : k.item() + 1]\n", 2),
    ("import torch\nn = int(mask.sum())\nbuf = torch.empty(n, 3)\n", 3),
    ("import torch\na, b = sizes.tolist()\nz = torch.zeros(a)\n", 3),
    ("import torch\nimport math\nn = math.ceil(t.max())\nz = torch.arange(n)\n", 4),
    ("import torch\nz = torch.randint(0, 5, size=(n.item(),))\n", 2),
    ("import torch\nvals, idx = scores.topk(k=num.item())\n", 2),
    ("import torch.nn.functional as F\ny = F.pad(x, (0, int(gap.max())))\n", 2),
])
def test_asc403_fires(source, line):
    assert lines(source, "ASC403") == [line]


@pytest.mark.parametrize("source", [
    "import torch\nlogger.info(loss.item())\n",  # a value read, not used as a size
    "import torch\ny = x[: x.size(0) // 2]\n",  # shape-derived, not value-derived
    "import torch\nn = int(args.batch)\ny = torch.zeros(n)\n",  # int() of an unknown non-tensor
    "import torch\ny = x[: len(t.tolist())]\n",  # len() of the list is a shape
    "import torch\nz = torch.full((3,), int(t.max()))\n",  # a fill value, not a size
    "import torch\nn = t.item()\ndef f(n):\n    return x[:n]\n",  # the parameter shadows the host value
    "import torch\nimport numpy as np\nv = np.arange(4)\nz = torch.zeros(int(v.sum()))\n",
    "import torch\ndef item():\n    return 3\ny = x[: item()]\n",
])
def test_asc403_near_misses(source):
    assert lines(source, "ASC403") == []


DL = "from torch.utils.data import DataLoader\n"


@pytest.mark.parametrize("source,line", [
    (DL + "self_loader = DataLoader(ds, batch_size=8, shuffle=(sampler is None))\n", 2),
    (DL + "class T:\n    def setup(self):\n        self.train_dl = DataLoader(ds, batch_size=8)\n", 4),
    (DL + "loader = DataLoader(trainset, 8)\n", 2),
    (DL + "loader = DataLoader(ds, 8, True)\n", 2),
    ("import torch.utils.data as tud\nl = tud.DataLoader(d, batch_size=4, shuffle=True, drop_last=False)\n", 2),
    ("from torch.utils.data.dataloader import DataLoader\nl = DataLoader(d, batch_size=4, shuffle=True)\n", 2),
])
def test_asc404_fires(source, line):
    assert lines(source, "ASC404") == [line]


@pytest.mark.parametrize("source", [
    DL + "loader = DataLoader(ds, 8, True, None, None, 0, None, False, True)\n",  # positional drop_last=True
    DL + "eval_loader = DataLoader(ds, batch_size=8, sampler=s)\n",
    DL + "def validate(ds):\n    return DataLoader(ds, batch_size=8, shuffle=True)\n",
    DL + "loaders = {'valid': DataLoader(train_ds, batch_size=8, shuffle=True)}\n",
    DL + "loader = DataLoader(ds, batch_size=None, shuffle=True)\n",  # no batching
    DL + "loader = DataLoader(ds, batch_size=1, shuffle=True)\n",
    DL + "loader = DataLoader(ds, batch_size=8, shuffle=False)\n",
    DL + "loader = DataLoader(ds, *rest)\n",
    "from mylib import DataLoader\nloader = DataLoader(ds, batch_size=8, shuffle=True)\n",
])
def test_asc404_near_misses(source):
    assert lines(source, "ASC404") == []


def test_hints_share_one_report_file():
    from flake8_ascend.registry import all_rules
    assert {r.report.value for r in all_rules() if r.code.startswith("ASC4")} == {"dynamic_shape_hints.csv"}


def test_noqa_silences_a_hint():
    from flake8_ascend.engine import unsuppressed
    source = "import torch\nidx = torch.nonzero(x)  # noqa: ASC401\n"
    findings = run_rules(source, codes=["ASC401"])
    assert findings and unsuppressed(findings, source.splitlines(keepends=True)) == []


# Issue 27: what runs once (per request, per object, on the way to an error) and one-element index lookups are
# silent; their near misses still fire.
_PIPE = "import torch\nclass Pipe:\n"
_NO_GRAD_CALL = "    @torch.no_grad()\n    def __call__(self, latents, mask, timesteps):\n"


# diffusers 0.42.1 pipeline_stable_diffusion_3_controlnet_inpainting.py:863, called at :1252 in a loop over the
# control images that prepares each one and appends it to a list (:1251-1264)
_MASK_IMAGE = ("    def mask_image(self, image: torch.Tensor, mask: torch.Tensor):\n"
               "        masked_image = image.clone()\n        masked_image[(mask > 0.5).repeat(1, 3, 1, 1)] = -1\n"
               "        return masked_image\n")


@pytest.mark.parametrize("source,code,line", [
    # inside the denoising loop of the entry point: once per step
    (_PIPE + _NO_GRAD_CALL + "        for t in timesteps:\n            n = mask.sum().item()\n"
     "            latents = latents[:, :n]\n", "ASC403", 7),
    # a helper called inside that loop
    (_PIPE + "    def trim(self, latents, mask):\n        return latents[:, : mask.sum().item()]\n" + _NO_GRAD_CALL
     + "        for t in timesteps:\n            latents = self.trim(latents, mask)\n", "ASC403", 4),
    # no inference entry point: a model's forward runs every step
    ("import torch\nclass M(torch.nn.Module):\n    def forward(self, h, mask):\n"
     "        return torch.split(h, mask.sum(dim=1).tolist())\n", "ASC403", 4),
    # ``__call__`` without no_grad / inference_mode is no inference entry point
    (_PIPE + "    def __call__(self, h, mask):\n        return torch.split(h, mask.sum(dim=1).tolist())\n", "ASC403", 4),
    # near miss of a loop that maps each input: this one carries the latents from step to step
    (_PIPE + _MASK_IMAGE + _NO_GRAD_CALL + "        for t in timesteps:\n"
     "            latents = self.mask_image(latents, mask)\n            frames.append(latents)\n", "ASC304", 5),
    # a module function only called inside the loop
    ("import torch\ndef trim(latents, mask):\n    return latents[:, : mask.sum().item()]\n" + _PIPE + _NO_GRAD_CALL
     + "        for t in timesteps:\n            latents = trim(latents, mask)\n", "ASC403", 3),
    # the default under ``if mask is None`` is not all the mask can be (diffusers transformer_cogview4.py:430)
    ("import torch\ndef f(h, text_attn_mask=None):\n    if text_attn_mask is None:\n"
     "        text_attn_mask = torch.ones((2, 8), dtype=torch.int32)\n    lengths = torch.sum(text_attn_mask, dim=1)\n"
     "    return torch.split(h, lengths.tolist())\n", "ASC403", 6),
    # a table the function writes data into
    ("import torch\ndef f(x, hits):\n    counts = torch.zeros(4, dtype=torch.long)\n    counts[hits] += 1\n"
     "    return x[: counts.max().item()]\n", "ASC403", 5),
    # a 0-d reduction used as a size on another line
    ("import torch\ndef f(x: torch.Tensor, scores: torch.Tensor):\n    n = scores.argmax()\n    return x[:n]\n",
     "ASC403", 4),
    # an ``if`` that does not end in raise is no error path
    ("import torch\ndef f(keepers: torch.Tensor):\n    if not bool((keepers > 0).all()):\n"
     "        unclaimed = (keepers == 0).nonzero(as_tuple=False).squeeze(1).tolist()\n        print(unclaimed)\n",
     "ASC401", 4),
    # lookups: positions that index, a threshold, positions iterated or returned
    ("import torch\ndef f(labels: torch.Tensor, feats, c):\n    pos = (labels == c).nonzero().squeeze(1)\n"
     "    return feats[pos]\n", "ASC401", 3),
    ("import torch\ndef f(scores: torch.Tensor):\n    return (scores > 0.5).nonzero()[0]\n", "ASC401", 3),
    ("import torch\ndef f(labels: torch.Tensor, c):\n    rows, cols = torch.where(labels == c)\n    return rows\n",
     "ASC401", 3),
    ("import torch\ndef f(labels: torch.Tensor, c):\n    for i in (labels == c).nonzero():\n        print(i)\n",
     "ASC401", 3),
    ("import torch\ndef f(labels: torch.Tensor, c):\n    return (labels == c).nonzero()[0:2]\n", "ASC401", 3),
])
def test_runs_every_step_still_fires(source, code, line):
    assert lines(source, code) == [line]


@pytest.mark.parametrize("source,code", [
    # the public helpers of a pipeline (called by the user once per request)
    (_PIPE + "    def encode_prompt(self, h, mask):\n        return torch.split(h, mask.sum(dim=1).tolist())\n"
     + _NO_GRAD_CALL + "        pass\n", "ASC403"),
    # the entry point outside its loop (diffusers pipeline_kandinsky_t2i.py:704)
    (_PIPE + _NO_GRAD_CALL + "        rope = torch.arange(mask.diff().max().item())\n        for t in timesteps:\n"
     "            pass\n", "ASC403"),
    # a module function the pipeline calls once (diffusers pipeline_longcat_audio_dit.py:61)
    ("import torch\ndef _lens_to_mask(lengths):\n    length = int(lengths.amax().item())\n"
     "    return torch.arange(length)[None, :] < lengths[:, None]\n" + _PIPE + _NO_GRAD_CALL
     + "        m = _lens_to_mask(mask)\n", "ASC403"),
    # a loop of the entry point that only prepares each input and appends it, like a comprehension (diffusers 0.42.1
    # pipeline_stable_diffusion_3_controlnet_inpainting.py:1251-1264)
    (_PIPE + _MASK_IMAGE + _NO_GRAD_CALL + "        images = []\n        for image_ in latents:\n"
     "            image_ = self.mask_image(image_, mask)\n            images.append(image_)\n"
     "        for t in timesteps:\n            pass\n", "ASC304"),
    (_PIPE + _MASK_IMAGE + _NO_GRAD_CALL + "        for i, image_ in enumerate(latents):\n"
     "            images.append(self.mask_image(image_, mask))\n", "ASC304"),
    # a lookup read through a truth test and a comparison (diffusers scheduling_consistency_decoder.py:198)
    ("import torch\ndef step(timesteps: torch.Tensor, timestep, x):\n    idx = torch.where(timesteps == timestep)[0]\n"
     "    if idx == len(timesteps) - 1:\n        return x\n", "ASC401"),
    # the EOS position: the first match only (diffusers scheduling_block_refinement.py:401)
    ("import torch\ndef f(cur_x: torch.Tensor, eos):\n    eos_pos = (cur_x == eos).nonzero(as_tuple=True)\n"
     "    if len(eos_pos[0]) == 0:\n        return None\n    return int(eos_pos[0][0].item())\n", "ASC401"),
])
def test_runs_once_is_silent(source, code):
    assert lines(source, code) == []


# A metric class (a base named ``...Metric``): ``compute``/``compute_metrics`` and what only they reach run once per
# evaluation; ``update``/``process`` and their helpers run per batch.
_METRIC = "import torch\nfrom torchmetrics import Metric\nclass AUPRO(Metric):\n"
_AP = ("import torch\ndef _average_precision(pred, target):\n    tps = torch.cumsum(target == 1, 0)\n"
       "    tps[torch.logical_not(target == 1)] = 0\n    return tps\n"
       "class AveragePrecision(BaseMetric):\n")


@pytest.mark.parametrize("source,line", [
    # the per-batch hooks (ignite 0.5.5 object_detection_average_precision_recall.py:336, mmagic 1.2.0
    # base_sample_wise_metric.py:98)
    (_METRIC + "    def update(self, preds: torch.Tensor, target):\n        preds[preds < 0.5] = 0\n", 5),
    ("import torch\nclass SampleWise(BaseMetric):\n    def process(self, data_batch, data_samples):\n"
     "        mask = torch.as_tensor(data_batch['mask'])\n        mask[mask != 0] = 1\n", 5),
    # a helper that ``update`` calls
    (_METRIC + "    def _clip(self, preds: torch.Tensor):\n        preds[preds < 0.5] = 0\n"
     "    def update(self, preds, target):\n        self._clip(preds)\n", 5),
    # a def nested in ``__init__`` (ignite's ``box_iou``): called from anywhere
    (_METRIC + "    def __init__(self):\n        def box_iou(inter, union):\n            iou = inter / union\n"
     "            iou[iou.isnan()] = 0\n            return iou\n        self.box_iou = box_iou\n", 7),
    # ``compute`` of a class that is no metric
    ("import torch\nclass Head(torch.nn.Module):\n    def compute(self, preds: torch.Tensor):\n"
     "        preds[preds < 0.5] = 0\n", 4),
    # a module function that ``compute_metrics`` and ``process`` both call
    (_AP + "    def process(self, data_batch, data_samples):\n        _average_precision(data_batch, data_samples)\n"
     "    def compute_metrics(self, results):\n        return _average_precision(*results)\n", 4),
])
def test_metric_batch_code_still_fires(source, line):
    assert lines(source, "ASC304") == [line]


@pytest.mark.parametrize("source", [
    # anomalib 2.7.0 aupro.py:253: ``compute_pro`` <- ``_compute`` <- ``compute``
    _METRIC + "    def compute_pro(self, fpr: torch.Tensor):\n        fpr[fpr > 0.3] = 0.3\n        return fpr\n"
    "    def _compute(self):\n        return self.compute_pro(self.fpr)\n"
    "    def compute(self):\n        return self._compute()\n",
    # mmpretrain 1.2.0 multi_label.py:419: a module function <- ``calculate`` <- ``compute_metrics``
    _AP + "    def compute_metrics(self, results):\n        return self.calculate(*results)\n"
    "    @staticmethod\n    def calculate(pred, target):\n        return _average_precision(pred, target)\n",
    # anomalib 2.7.0 aupro.py:184: a method nobody in the file calls, the metric's public API
    _METRIC + "    @staticmethod\n    def _make_global_region_labels(cca: torch.Tensor):\n"
    "        cca[cca == 0] = -1\n        return cca\n",
])
def test_metric_result_runs_once(source):
    assert lines(source, "ASC304") == []


def test_metric_result_has_no_dynamic_shape_hints():
    # the confusion matrix of mmaction2 1.2.0 acc_metric.py:310, counted in ``compute``; in ``update`` it is reported
    body = "(self, indices: torch.Tensor, n):\n        return torch.bincount(indices, minlength=n**2)\n"
    assert lines(_METRIC + "    def compute" + body, "ASC401") == []
    assert lines(_METRIC + "    def update" + body, "ASC401") == [5]


# A no_grad / inference_mode method named ``infer`` or ``inference`` is an entry point like the no_grad ``__call__``.
_TTS = "import torch\nclass AcousticModel(torch.nn.Module):\n"
_DURATION = "(self, x, mask):\n        d = torch.round(x)\n        d[d < 1] = 1.0\n        return d\n"


@pytest.mark.parametrize("source,line", [
    # another name (whisper 20250625 decoding.py:62, ``detect_language``), or no decorator (funasr 1.4.16
    # fun_asr_nano/model.py:1020, ``inference_llm``; an ``inference`` that keeps the graph)
    (_TTS + "    @torch.no_grad()\n    def detect_language" + _DURATION, 6),
    (_TTS + "    def inference_llm" + _DURATION, 5),
    (_TTS + "    def inference" + _DURATION, 5),
    # inside the token loop of the entry method (coqui 0.27.2 bark inference_funcs.py:141)
    (_TTS + "    @torch.inference_mode()\n    def inference(self, x, steps):\n        for _ in range(steps):\n"
     "            x[x < 0] = 0\n        return x\n", 6),
    # a module function the entry method calls in its loop
    ("import torch\ndef binarize(mask: torch.Tensor):\n    mask[mask < 0.5] = 0\n    return mask\n"
     "class Inpaint:\n    @torch.no_grad()\n    def infer(self, masks):\n        for m in masks:\n"
     "            binarize(m)\n", 3),
])
def test_inference_method_loops_still_fire(source, line):
    assert lines(source, "ASC304") == [line]


@pytest.mark.parametrize("source", [
    # coqui 0.27.2 delightful_tts/acoustic_model.py:492, once per synthesised utterance
    _TTS + "    @torch.inference_mode()\n    def inference" + _DURATION,
    # mmagic 1.2.0 stable_diffusion_inpaint.py:446, a module function the no_grad ``infer`` calls before its loop
    "import torch\ndef binarize(mask: torch.Tensor):\n    mask[mask < 0.5] = 0\n    return mask\n"
    "class Inpaint:\n    @torch.no_grad()\n    def infer(self, mask, timesteps):\n        mask = binarize(mask)\n"
    "        for t in timesteps:\n            pass\n",
])
def test_inference_method_runs_once(source):
    assert lines(source, "ASC304") == []
