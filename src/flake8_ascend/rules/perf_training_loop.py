"""ASC501, ASC502, ASC513, ASC514: work that stalls the NPU on every training step.

"Every training step" is decided by ``flake8_ascend.detect.training`` (see its
docstring and docs/advice.md): inside a training loop, not in a periodic
``if step % N == 0:`` branch.
"""
from __future__ import annotations

import ast
from typing import Optional

from ..calls import MISSING, argument, callee, is_constant, last_names
from ..registry import Rule
from ..semantic.values import ARRAY, DEVICE, NUMBER
from ..detect.training import step_words, training
from ._sources import ADVICE_TABLE, ADVISOR_RULES, OFFICIAL_ADVICE
from .value_shapes import size_arguments
from ..walk import walk_tree

_LOOP_WORDS = step_words()
# The frameworks' own documented subclassing examples (transformers "Trainer" guide, Lightning's LitAutoEncoder)
_HF_COMPUTE_LOSS = (
    "import torch\nfrom torch import nn\nfrom transformers import Trainer\n\nclass CustomTrainer(Trainer):\n"
    "    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):\n"
    "        outputs = model(**inputs)\n        loss = outputs.loss\n        return loss\n"
)
_LIT_STEP = (
    "import torch\nimport lightning as L\nfrom torch.nn import functional as F\n\nclass LitAutoEncoder(L.LightningModule):\n"
    "    def training_step(self, batch, batch_idx):\n        x_hat = self.decoder(self.encoder(batch))\n"
    "        loss = F.mse_loss(x_hat, batch)\n        self.log(\"train_loss\", loss)\n        return loss\n"
)
_SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist"})
_DTYPES = frozenset("float16 half bfloat16 float32 float float64 double int8 uint8 int16 short int32 int int64 long "
                    "bool complex64 complex128".split())
_SYNCHRONIZE = frozenset({"torch.cuda.synchronize", "torch.npu.synchronize", "torch_npu.npu.synchronize"})
_EMPTY_CACHE = frozenset({"torch.cuda.empty_cache", "torch.npu.empty_cache", "torch_npu.npu.empty_cache"})
_EMPTY_CACHE_LASTS = last_names(*_EMPTY_CACHE)
_GC_LASTS = last_names("gc.collect")


def _short(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _builtin(func: ast.AST, ctx, *names: str) -> bool:
    return isinstance(func, ast.Name) and func.id in names and ctx.model.binding(func) is None


def _every_step(node: ast.AST, ctx) -> bool:
    """In a training loop or step function, or in a function that such code calls on every step."""
    info = training(ctx)
    return info.runs_every_step(ctx.stack, node) or info.called_every_step(ctx.stack, node, ctx.model)


def _formatted(expr: ast.AST, ctx) -> bool:
    """``"loss %.4f" % loss``: a string formatted from a tensor's value (a string, so not a tensor itself)."""
    return isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod) and ctx.is_tensor(expr.right)


def _to_cpu(call: ast.Call) -> bool:
    device = argument(call, "device", 0)
    return isinstance(call.func, ast.Attribute) and call.func.attr == "to" and is_constant(device, "cpu")


def _syncs_before(receiver: ast.AST) -> bool:
    """Does a receiver chain already hold a host copy (``x.cpu()`` in ``x.cpu().numpy()``)?"""
    while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute):
        if receiver.func.attr in _SYNC_METHODS or _to_cpu(receiver):
            return True
        receiver = receiver.func.value
    return False


# a value passes through these on its way to a test, an index or a size (``a, b = x.item(), y`` included)
_CARRY = (ast.UnaryOp, ast.BoolOp, ast.Compare, ast.BinOp, ast.Slice, ast.Tuple)
_CARRYING_CALLS = frozenset(("range", "int", "bool", "float", "round", "abs", "min", "max"))
_BINDINGS = 3  # how many assignments or returns a value may pass through on its way to a use that steers


def _steers(node: ast.AST, ancestors, ctx, depth: int = 0) -> bool:
    """Does the host value of ``node`` decide what this step does: a branch test, an index or slice, a ``range``,
    the size of a tensor (``F.pad(audio, (0, max_len - n))``), directly or through a local name read there
    (axolotl 0.19.0 ebft/strided.py:608-612, ``max_prompt_len`` -> ``anchor_offset`` -> ``num_blocks`` ->
    ``if num_blocks <= 0``; nemo 2.5.0 msdd_models.py:522, ``stt, end = int(stt.item()), int(end.item())`` then a
    slice; ms_swift 4.6.0 optimizers/muonclip.py:260, ``float(max_tensor.item())`` then a test), or through the
    function's ``return`` where a call of it in this file steers (espnet 202511 lightning_espnet_model.py:46, a NaN
    flag that ``_sync2skip`` returns to ``if any_invalid:``)? The step needs it then and there, so reading it every N
    steps is no option. A ``while`` test is not such a use: a stopping criterion can be checked every N steps.
    ``ancestors`` run innermost first."""
    child, element = node, None  # element: the item of a tuple the value went through
    for parent in ancestors:
        if isinstance(parent, (ast.If, ast.IfExp, ast.Assert)) and child is parent.test or (
                isinstance(parent, ast.comprehension) and any(child is test for test in parent.ifs)) or (
                isinstance(parent, ast.Subscript) and child is parent.slice):
            return True
        if isinstance(parent, ast.Call):
            if any(child is size for size in size_arguments(parent, ctx)):
                return True
            if not (isinstance(parent.func, ast.Name) and parent.func.id in _CARRYING_CALLS):
                return False
            if parent.func.id == "range":
                return True
        elif isinstance(parent, ast.Return):
            function = ctx.model.function(parent)
            return element is None and function is not None and depth < _BINDINGS and any(
                _steers(call, reversed(ctx.model.ancestors(call)), ctx, depth + 1)
                for call in ctx.model.summaries.call_sites(function))
        elif isinstance(parent, ast.Assign) and depth < _BINDINGS and len(parent.targets) == 1 and \
                child is parent.value:
            target = _bound_name(parent.targets[0], child, element)
            if target is None:
                return False
            owner = ctx.model.function(parent) or ctx.tree
            return any(_steers(read.node, read.path, ctx, depth + 1) for read in ctx.model.reads(owner, target))
        elif not isinstance(parent, _CARRY):
            return False
        element = child if isinstance(parent, ast.Tuple) else None
        child = parent
    return False


def _bound_name(target: ast.AST, value: ast.AST, element: Optional[ast.AST]) -> Optional[str]:
    """The name an assignment binds the value to: ``n = <value>``, or the matching name of ``a, b = x, <value>``."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and element is not None and len(
            target.elts) == len(value.elts):
        for name, item in zip(target.elts, value.elts):
            if item is element:
                return name.id if isinstance(name, ast.Name) else None
    return None


_OPTIM_INDEX = ("import torch\nfor batch in data:\n    loss, idx = f(batch)\n    loss.backward()\n"
                "    if idx.dim() == 1:\n        idx = idx[0].item()\n    else:\n        idx = idx.item()\n"
                "{use}    log(f'optim{{idx}}')\n")
_ACCUMULATION = ("for i, x in enumerate(data):\n    loss = f(x)\n    loss.backward()\n    if (i + 1) % accumulation == 0:\n"
                 "        opt.step()\n{log}")

_TOKEN_COUNT = ("def train(model, loader, device, pad_id):\n    seen = 0\n    for ids in loader:\n"
                "        seen += ids.ne(pad_id).sum().item()\n{move}        loss.backward()\n")
_LOG_GUARD = ("def log_step(loss, step):\n{guard}    print(loss.item())\n"
              "for step, x in enumerate(data):\n    loss = f(x)\n    loss.backward()\n    log_step(loss, step)\n")


# torchtitan 0.3.0 trainer.py:883-893: a token count built on the host and summed into from each batch's labels
_HOST_COUNT = ("import torch\ndef train(data):\n    n = torch.tensor(0, dtype=torch.int64)\n"
               "    for x, labels in data:\n        {add}\n        f(x, labels).backward()\n        print(int(n))\n")
_METRIC_HELPER = ("import torch\ndef metrics(p: torch.Tensor, n):\n    masked = p > 0.5\n"
                  "    avg = p[masked].mean().item() if {test} else 0.0\n    return avg\n"
                  "for x in data:\n    loss = f(x)\n    loss.backward()\n    metrics(x, len(x))\n")


class HostSyncInTrainingLoop(Rule):
    code = "ASC501"
    summary = "host synchronisation on every training step (.item(), .cpu(), .numpy(), print(tensor), float(loss))"
    node_types = (ast.Call, ast.FormattedValue)
    trigger_words = _LOOP_WORDS
    why = (
        "NPU kernels run asynchronously behind a task queue. Reading a tensor's value on the host "
        "(`.item()`, `.cpu()`, `.numpy()`, `.tolist()`, `float(t)`, printing or formatting a tensor) or calling "
        "`synchronize()` makes the Python thread wait until every queued kernel has finished, so the host "
        "cannot run ahead and the device idles while the next step is dispatched. Once per step this costs "
        "a noticeable share of step time. Fires inside a training loop (a loop that calls `.backward()` or "
        "`optimizer.step()`), in a function such a loop calls on every step (not under an `if` there, nor in a "
        "conditional expression unless its test is a tensor's truth value: that line waits either way), and in an "
        "optimizer's own `step`; "
        "not on a tensor built on the host, not where the value steers the step (a branch test, an index, "
        "a slice, a `range`, a tensor's size, directly, through `int()`/`float()`/`round()`/`abs()`, through a "
        "local name, or through the function's `return` where a call of it in the same file steers: reading it "
        "every N steps is no option), not "
        "outside loops, not in a periodic `if step % N == 0:` logging branch nor after a periodic guard that "
        "leaves (`if step % N != 0: return`, `if not metrics.should_log(step): return`), not in a branch that switches off its own test "
        "(`if self.log_images: self.log_images = False`, it runs once), not in the "
        "branch a NaN or an infinity takes (`if not torch.isfinite(grad_norm):`, a skipped step), and not on a "
        "value already on the host (a numpy array, a number, a CPU tensor: `.numpy()` without `.cpu()` or "
        "`force=True` only works on one; a batch the step moves to the device only after the read, on every path: "
        "`model(ids.to(device))`)."
    )
    example = ("for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    opt.step()\n"
               "    print(loss.item())")
    use_instead = (
        "Log every N steps (`if step % 50 == 0:`), or accumulate on the device "
        "(`total += loss.detach()`) and read the value once per epoch."
    )
    source = (
        "Ascend/pytorch docs/zh/developer_notes/npugraph.md (host syncs such as .item()/.cpu() listed as unsuitable "
        f"in captured regions); msprof-analyze advisor synchronize rule ({ADVISOR_RULES}synchronize.yaml); "
        f"{ADVICE_TABLE}"
    )
    fires = [
        ("for x in data:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n    total += loss.item()\n", 5),
        # a periodic branch that runs the optimizer step is the step of gradient accumulation, not a logging branch
        # (torchtune 0.6.1 recipes/full_finetune_single_device.py:720)
        (_ACCUMULATION.format(log="        print(loss.item())\n"), 6),
        # near misses of a count before the move: moved in a branch, or beside another tensor
        (_TOKEN_COUNT.format(move="        if not sharded:\n            ids = ids.to(device)\n"
                                  "        loss = model(ids)\n"), 4),
        (_TOKEN_COUNT.format(move="        loss = model(ids.to(weights.device))\n"), 4),
        # near misses of an error path: the branch goes on; of a skipped non-finite step: the finite branch
        ("for x in data:\n    loss = f(x)\n    loss.backward()\n    if loss > 10:\n"
         "        print('inputs', x.sum().item())\n        continue\n", 5),
        ("import torch\nfor x in data:\n    loss = f(x)\n    loss.backward()\n"
         "    grad_norm = torch.nn.utils.clip_grad_norm_(params, 1.0)\n"
         "    if grad_norm is None or torch.isfinite(grad_norm):\n        print(f'grad norm {grad_norm}')\n"
         "        opt.step()\n", 7),
        ("def train(loader):\n    for x in loader:\n        loss = f(x)\n        loss.backward()\n"
         "        print(loss)\n", 5),
        ("for x in data:\n    loss = f(x)\n    loss.backward()\n    optimizer.step()\n"
         "    print(f'{loss:.3f}')\n", 5),
        ("for x in data:\n    loss = f(x)\n    loss.backward()\n    history.append(float(loss))\n", 4),
        ("import torch\nfor x in data:\n    loss = f(x)\n    loss.backward()\n    torch.cuda.synchronize()\n", 5),
        ("for x in data:\n    out = model(x)\n    loss = f(out)\n    loss.backward()\n"
         "    preds = out.detach().cpu().numpy()\n", 5),
        ("def step(batch):\n    loss = f(batch)\n    loss.backward()\n    return loss.item()\n"
         "for batch in data:\n    step(batch)\n", 4),
        # a helper every step calls (funasr 1.4.16 train_utils/trainer_ds.py:695 -> log:908)
        ("def log(loss_dict):\n    loss = loss_dict['loss'].detach().cpu().item()\n    print(loss)\n"
         "for x in data:\n    loss = f(x)\n    loss.backward()\n    log({'loss': loss})\n", 2),
        # near misses of a steering value: one only logged, one compared and then logged
        ("import torch\nfor x in data:\n    loss = f(x)\n    loss.backward()\n    value = loss.item()\n"
         "    history.append(value)\n", 5),
        ("import torch\nfor x in data:\n    loss = f(x)\n    loss.backward()\n    log(best > loss.item())\n", 5),
        # ... and near misses of a value that steers through float() or a return: a loss only summed for the log
        # (unsloth 2026.10.9 studio diffusion_dit_trainer.py:2895), a rounded value only logged, a returned value
        # the caller only logs, a value returned in a tuple (always true, whatever it holds)
        ("for x in data:\n    loss = f(x)\n    loss.backward()\n    step_loss += float(loss.detach()) / accumulation\n",
         4),
        ("for x in data:\n    loss = f(x)\n    loss.backward()\n    value = round(loss.item(), 4)\n"
         "    history.append(value)\n", 4),
        ("def step(batch):\n    loss = f(batch)\n    loss.backward()\n    return loss.item()\n"
         "for batch in data:\n    history.append(step(batch))\n", 4),
        ("def step(batch):\n    loss = f(batch)\n    loss.backward()\n    return loss.item(), len(batch)\n"
         "for batch in data:\n    if step(batch):\n        done += 1\n", 4),
        # the .item() of an index that is a tensor is a sync, whatever the name holds afterwards
        (_OPTIM_INDEX.format(use=""), 6),
        # near misses of a size: a value passed to a function that takes no size, an unpacked value only logged
        ("import torch\nimport torch.nn.functional as F\nfor audio, lens in data:\n    max_len = lens.max().item()\n"
         "    loss = f(F.relu(audio), max_len)\n    loss.backward()\n", 4),
        ("import torch\nfor x, seg in data:\n    stt, end = int(seg[0].item()), 0\n    loss = f(x)\n"
         "    loss.backward()\n    print(stt)\n", 3),
        # near misses of a periodic guard that leaves: one that does not leave, one that leaves on no period; of a
        # branch that runs once: one that switches off another flag; of a host value: numpy(force=True) copies
        (_LOG_GUARD.format(guard="    if step % every != 0:\n        print('skip')\n"), 4),
        (_LOG_GUARD.format(guard="    if rank != 0:\n        return\n"), 4),
        # near misses of a logging-step guard: HF's ``args.should_log`` says whether this process logs, not when
        (_LOG_GUARD.format(guard="    if not args.should_log:\n        return\n"), 4),
        # ... nor a name bound to the question and then to something else
        (_LOG_GUARD.format(guard="    should_log = self.metrics_processor.should_log(step)\n    should_log = True\n"
                                "    if not should_log:\n        return\n"), 6),
        ("for x in data:\n    loss = f(x)\n    loss.backward()\n    if self.log_images:\n"
         "        self.logged = True\n        print(loss.item())\n", 6),
        ("for x in data:\n    loss = f(x)\n    loss.backward()\n    history.append(loss.detach().numpy(force=True))\n",
         4),
        # near miss of a count kept on the host: rebound, not updated in place (the sum goes where ``labels`` is)
        (_HOST_COUNT.format(add="n = n + (labels != -100).sum()"), 7),
        # a helper's conditional expression whose test is a tensor's truth value waits whichever side it takes
        # (axolotl 0.19.0 integrations/diffusion/trainer.py:273)
        (_METRIC_HELPER.format(test="masked.any()"), 4),
        # an optimizer's own step runs on every optimizer step (mmpretrain 1.2.0 engine/optimizers/lars.py:105)
        ("import torch\nclass LARS(torch.optim.Optimizer):\n    def step(self, closure=None):\n"
         "        for p in self.params:\n            norm = torch.norm(p).item()\n", 5),
        # Lightning calls training_step on every batch (its docs' LitAutoEncoder, printing the loss)
        (_LIT_STEP.replace('        self.log("train_loss", loss)', '        print(loss.item())'), 9),
        # the project's own LightningModule lives in another file (pytorch-forecasting-style `class TFT(BaseModel)`):
        # training_step is the per-step hook of Lightning and of the HF Trainer alike
        (_LIT_STEP.replace("import lightning as L\n", "from .base import BaseModel\n")
         .replace("(L.LightningModule)", "(BaseModel)").replace('        self.log("train_loss", loss)',
                                                               '        self.log("train_loss", loss.item())'), 9),
    ]
    passes = [
        "loss = f(x)\nloss.backward()\nprint(loss.item())\n",
        "for i, x in enumerate(data):\n    loss = f(x)\n    loss.backward()\n    opt.step()\n"
        "    if i % 10 == 0:\n        print(loss.item())\n",
        _ACCUMULATION.format(log="        if step % 10 == 0:\n            print(loss.item())\n"),
        # on the way to an error: it runs once (neuralforecast 3.0.2 common/_base_model.py:1278-1282)
        "for x in data:\n    loss = f(x)\n    loss.backward()\n    if torch.isnan(loss):\n"
        "        print('inputs', torch.isnan(x).sum())\n        raise Exception('Loss is NaN, training stopped.')\n",
        "for epoch in range(3):\n    for x in data:\n        loss = f(x)\n        loss.backward()\n"
        "    print(loss.item())\n",
        # the branch of a non-finite value: the step is skipped (espnet 202511 espnet2/train/gan_trainer.py:281,
        # funasr 1.4.16 train_utils/trainer.py:486)
        "import torch\nfor x in data:\n    loss = f(x)\n    loss.backward()\n"
        "    grad_norm = torch.nn.utils.clip_grad_norm_(params, 1.0)\n"
        "    if grad_norm is None or torch.isfinite(grad_norm):\n        opt.step()\n    else:\n"
        "        logging.warning(f'The grad norm is {grad_norm}. Skipping updating the model.')\n",
        "for x in data:\n    loss = f(x)\n    loss.backward()\n    if torch.isnan(loss):\n"
        "        print('inputs', torch.isnan(x).sum())\n        continue\n",
        "for x in data:\n    y = model(x)\n    print(y.item())\n",
        "for x in data:\n    loss = f(x)\n    loss.backward()\n    opt.step()\n    print(f'step {step}')\n",
        "for x in data:\n    loss = f(x)\n    loss.backward()\n    scheduler.step()\n    lr = float(lr_value)\n",
        "def log(loss):\n    print(loss.item())\nfor x in data:\n    loss = f(x)\n    loss.backward()\n",
        _LIT_STEP,  # self.log keeps the value on the device
        _LIT_STEP + "    def validation_step(self, batch, batch_idx):\n        print(self.encoder(batch).sum().item())\n",
        # a training_step of a class that subclasses nothing: no framework calls it
        "class Plain:\n    def training_step(self, batch):\n        return self.loss(batch).item()\n",
        # a tensor built on the host, never moved: reading it waits for nothing (diffusers 0.42.1
        # pipeline_stable_diffusion_diffedit.py:153, in a loss the denoising loop backpropagates)
        "import torch\ndef auto_corr_loss(noise, generator=None):\n"
        "    roll = torch.randint(noise.shape[2] // 2, (1,), generator=generator).item()\n    return noise.roll(roll)\n"
        "for t in steps:\n    loss = auto_corr_loss(latents)\n    loss.backward()\n",
        # a helper the loop calls only under a periodic branch; the step of a class that is no optimizer
        "def log(loss):\n    print(loss.item())\nfor i, x in enumerate(data):\n    loss = f(x)\n    loss.backward()\n"
        "    if i % 10 == 0:\n        log(loss)\n",
        "class Env:\n    def step(self, action):\n        return self.state.sum().item()\n",
        # a count on the loader's batch before the step moves it to the device: a host tensor; a count built on the
        # host and updated in place, which never moves it
        _HOST_COUNT.format(add="n += (labels != -100).sum()"),
        _TOKEN_COUNT.format(move="        loss = model(ids.to(device))\n"),
        # the value steers the step: a flag that skips the batch (espnet 202511 lightning_espnet_model.py:46), a
        # count that sizes a slice or a loop
        "import torch\nfor x in data:\n    loss = f(x)\n    bad = torch.isnan(loss).any().item()\n    if bad:\n"
        "        continue\n    loss.backward()\n",
        "import torch\nfor x, lens in data:\n    n = lens.max().item()\n    loss = f(x[:, :n])\n    loss.backward()\n",
        "import torch\nfor x in data:\n    loss = f(x)\n    for _ in range(int(x.sum().item())):\n        pass\n"
        "    loss.backward()\n",
        # a size: the padding of a batch (nemo 2.5.0 tts/models/audio_codec.py:443), and bounds unpacked from a
        # tuple before a slice (nemo 2.5.0 asr/models/msdd_models.py:522)
        "import torch\nimport torch.nn.functional as F\nfor audio, lens in data:\n    max_len = lens.max().item()\n"
        "    loss = f(F.pad(audio, (0, max_len - audio.shape[1])))\n    loss.backward()\n",
        "import torch\nfor x, seg in data:\n    stt, end = int(seg[0].item()), int(seg[1].item())\n"
        "    end = min(end, stt + 100)\n    loss = f(x[:, stt:end])\n    loss.backward()\n",
        # through float() to a test (ms_swift 4.6.0 optimizers/muonclip.py:260), through three assignments to the
        # count of blocks (axolotl 0.19.0 ebft/strided.py:612), through a helper's return to its caller's test
        # (espnet 202511 lightning_espnet_model.py:46)
        "import torch\nfor x in data:\n    loss = f(x)\n    loss.backward()\n    peak = float(x.abs().max().item())\n"
        "    if peak > tau:\n        clip(params)\n",
        "import torch\nfor x, lens in data:\n    longest = lens.max().item()\n    offset = max(longest + 1, 8)\n"
        "    blocks = (x.shape[1] - offset) // 4 + 1\n    if blocks <= 0:\n        continue\n    f(x).backward()\n",
        "import torch\ndef any_nan(loss):\n    flag = torch.isnan(loss).any().item()\n    return flag\n"
        "for x in data:\n    loss = f(x)\n    bad = any_nan(loss)\n    if bad:\n        continue\n"
        "    loss.backward()\n",
        # a number, not a tensor: the index after .item() in either branch (espnet 202511 gan_trainer.py:305)
        _OPTIM_INDEX.format(use="    opt = optimizers[idx]\n"),
        # ... and its near miss: a test of a number, so the read may not run on every call
        _METRIC_HELPER.format(test="n > 0"),
        # already on the host: .numpy() raises on a device tensor, so the net trains on the CPU (gluonts 0.16
        # torch/model/deep_npts/_estimator.py:388); a numpy array's .item()
        "for x, y in data:\n    loss = f(x, y)\n    loss.backward()\n    optimizer.step()\n"
        "    total += loss.detach().numpy().item()\n",
        "import numpy as np\nfor x in data:\n    loss = f(x)\n    loss.backward()\n    v = np.mean(scores).item()\n",
        # after a periodic guard that returns (nemo 2.5.0 tts/models/spectrogram_enhancer.py:320-326); in a branch
        # that switches off its own test, run once (nemo 2.5.0 tts/models/fastpitch.py:452-457)
        _LOG_GUARD.format(guard="    if step % every != 0:\n        return\n"),
        # after a guard that asks whether the step logs (torchtitan 0.3.0 experiments/forge/example_train.py:348)
        _LOG_GUARD.format(guard="    if not self.metrics_processor.should_log(step):\n        return\n"),
        # ... or a name bound to that question earlier (torchtitan 0.3.0 experiments/torchft/trainer.py:392-494)
        _LOG_GUARD.format(guard="    should_log = self.metrics_processor.should_log(step)\n    if not should_log:\n"
                                "        return\n"),
        "for x in data:\n    loss = f(x)\n    loss.backward()\n    if self.log_images and self.logger:\n"
        "        self.log_images = False\n        print(loss.item())\n",
    ]

    def check(self, node, ctx) -> None:
        if not self._candidate(node):
            return
        info = training(ctx)
        if not (info.loops or info.step_functions):
            return
        found = self._sync(node, ctx)
        if found and _every_step(node, ctx) and not _steers(node, reversed(ctx.stack), ctx):
            what, api = found
            ctx.report(node, self.code,
                       f"{what} waits for the NPU on every training step (read values every N steps or "
                       f"keep them on the device) [host sync: {api}]",
                       api=api, tips="read tensor values every N steps, not every step",
                       family="host sync")  # one problem per function, whichever call makes it

    @staticmethod
    def _candidate(node) -> bool:
        """A cheap syntactic filter before any resolution: could this node be a host sync?"""
        if isinstance(node, ast.FormattedValue):
            return True
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr in _SYNC_METHODS or func.attr in ("to", "synchronize")
        return isinstance(func, ast.Name) and func.id in ("print", "float", "int", "bool", "synchronize")

    @staticmethod
    def _sync(node, ctx):
        """(text, api) when ``node`` copies a tensor to the host or waits for the device."""
        if isinstance(node, ast.FormattedValue):
            tensor = _device_tensor(node.value, ctx)
            return (f"formatting {_short(node.value)}", "torch.Tensor.__format__") if tensor else None
        func = node.func
        if isinstance(func, ast.Attribute) and ctx.chain(func) is None and not node.args:
            if func.attr in _SYNC_METHODS and not _syncs_before(func.value) and not _host_value(func.value, ctx) \
                    and (func.attr != "tolist" or ctx.is_tensor(func.value)) and (
                    func.attr != "numpy" or is_constant(argument(node, "force"), True)):
                return _short(node), f"torch.Tensor.{func.attr}"
        if _to_cpu(node) and not _syncs_before(func.value) and ctx.chain(func) is None:
            return _short(node), "torch.Tensor.to"
        if _builtin(func, ctx, "float", "int", "bool") and len(node.args) == 1 and _device_tensor(node.args[0], ctx):
            return _short(node), f"torch.Tensor.__{func.id}__"
        if _builtin(func, ctx, "print") and any(_device_tensor(a, ctx) or _formatted(a, ctx) for a in node.args):
            return _short(node), "torch.Tensor.__repr__"
        qualname = ctx.chain(func)
        if qualname in _SYNCHRONIZE:
            return qualname + "()", qualname
        return None


def _device_tensor(expr: ast.AST, ctx) -> bool:
    """A tensor not known to be on the host: converting or printing it copies it from the device."""
    return ctx.is_tensor(expr) and not _host_value(expr, ctx)


def _host_value(expr: ast.AST, ctx) -> bool:
    """Already on the host: a CPU tensor, a numpy array or a number (``np.mean(a).item()`` waits for nothing), or a
    tensor the step moves to the device only later (``values.host_here``)."""
    return ctx.values.on_host_here(expr) or ctx.values.of(expr).kind in (ARRAY, NUMBER)


def _device_like(expr, ctx) -> bool:
    """A device argument of ``.to()``: an accelerator device string, ``torch.device(...)``, or a name
    that is not a dtype (``device``, ``args.device``, ``self.dev``)."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, str) and expr.value.split(":")[0] in ("cuda", "npu")
    if isinstance(expr, ast.Call):
        return ctx.qualname(expr.func) == "torch.device"
    if isinstance(expr, (ast.Name, ast.Attribute)):
        name = expr.id if isinstance(expr, ast.Name) else expr.attr
        return "dtype" not in name.lower() and not (ctx.qualname(expr) or "").startswith("torch.") \
            and not _names_dtype(expr, ctx)
    return False


def _names_dtype(expr: ast.AST, ctx) -> bool:
    """A local name bound to a torch dtype: ``precision = torch.bfloat16 if bf16 else torch.float16``."""
    if not isinstance(expr, ast.Name):
        return False
    owner = ctx.model.function(expr)
    binding = ctx.model.flow(owner or ctx.tree).binding(expr)
    value = binding.value if binding is not None and binding.index is None else None
    options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    return value is not None and all(
        (ctx.qualname(o) or "").rsplit(".", 1)[-1] in _DTYPES for o in options if isinstance(o, ast.Attribute))\
        and all(isinstance(o, ast.Attribute) for o in options)


def _loop_data(expr, ctx) -> bool:
    """Is ``expr`` (``x``, ``batch["img"]``, ``batch.img``) rooted in a target of an enclosing ``for``?"""
    while isinstance(expr, (ast.Subscript, ast.Attribute)):
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return False
    for parent in reversed(ctx.stack):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(parent, (ast.For, ast.AsyncFor)) and any(
                isinstance(n, ast.Name) and n.id == expr.id for n in walk_tree(parent.target)):
            return True
    return False


class BlockingCopyInTrainingLoop(Rule):
    code = "ASC502"
    summary = "host-to-device copy without non_blocking=True on every training step (.to(device), .npu(), .cuda())"
    node_types = (ast.Call,)
    trigger_words = _LOOP_WORDS
    why = (
        "A blocking copy makes the host wait until the batch has reached the NPU before it dispatches the "
        "next kernel. With `non_blocking=True` (and a DataLoader with `pin_memory=True`) the copy is queued "
        "like a kernel and overlaps with compute. Fires on `.to(<device>)` without `non_blocking` inside a "
        "training loop, and on `.npu()` / `.cuda()` of a known tensor or of a batch from the loop's `for` "
        "target (`Module.cuda()` has no `non_blocking`, so modules are left alone)."
    )
    example = "for x, y in loader:\n    x, y = x.to(device), y.to(device)\n    ..."
    use_instead = "`x = x.to(device, non_blocking=True)`, and build the DataLoader with `pin_memory=True`."
    source = f"{OFFICIAL_ADVICE} api_parameters_performance_dict (tensor.to non_blocking); {ADVICE_TABLE}"
    fires = [
        ("for x, y in data:\n    x = x.to(device)\n    loss = f(x, y)\n    loss.backward()\n", 2),
        ("for x in data:\n    x = x.npu()\n    loss = f(x)\n    loss.backward()\n", 2),
        ("for batch in data:\n    img = batch['img'].cuda(0)\n    f(img).backward()\n", 2),
        ("for x in data:\n    x = x.to('npu:0')\n    loss = f(x)\n    loss.backward()\n", 2),
        ("for x in data:\n    x = x.to(self.device, torch.float16)\n    f(x).backward()\n", 2),
    ]
    passes = [
        "for x in data:\n    x = x.to(device, non_blocking=True)\n    loss = f(x)\n    loss.backward()\n",
        "x = x.to(device)\nloss = f(x)\nloss.backward()\n",
        "for x in data:\n    x = x.to(device)\n    y = model(x)\n",
        "import torch\nfor x in data:\n    x = x.to(torch.float16)\n    f(x).backward()\n",
        "for x in data:\n    x = x.to(dtype)\n    f(x).backward()\n",
        # casts of batches already on the device, and dtypes chosen at run time
        "for x, y in data:\n    x = x.cuda(non_blocking=True)\n    x = x.to(memory_format)\n    f(x).backward()\n",
        "import torch\nprecision = torch.bfloat16 if bf16 else torch.float16\nfor x in data:\n"
        "    x = x.to(precision)\n    f(x).backward()\n",
        "for x in data:\n    x = x.to(**kw)\n    f(x).backward()\n",
        "for x in data:\n    x = x.cuda(non_blocking=True)\n    f(x).backward()\n",
        "for x in data:\n    net = copy.deepcopy(model).cuda(rank)\n    net(x).sum().backward()\n",
        "for x in data:\n    model.npu()\n    model(x).sum().backward()\n",
    ]

    def check(self, node, ctx) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("to", "npu", "cuda") or ctx.chain(func):
            return
        if argument(node, "non_blocking", 2 if func.attr == "to" else 1) is not MISSING:
            return
        if func.attr == "to":
            device = argument(node, "device", 0)
            if device is None or device is MISSING or not _device_like(device, ctx):
                return
            if ctx.values.of(func.value).device == DEVICE:
                return  # already placed on the device (``x.cuda(non_blocking=True)`` earlier): a cast at most
        info = training(ctx)
        if not info.loops or (func.attr != "to" and not (
                ctx.is_tensor(func.value) or _loop_data(func.value, ctx))):
            return  # Module.cuda()/.npu() take no non_blocking: only tensors and loader batches qualify
        if info.runs_every_step(ctx.stack, node):
            ctx.report(node, self.code,
                       f"{_short(node)} copies to the device synchronously on every training step "
                       "(pass non_blocking=True, with pin_memory=True in the DataLoader) [blocking H2D copy]",
                       api=f"torch.Tensor.{func.attr}", tips="pass non_blocking=True (with pin_memory=True)")


class EmptyCacheInTrainingLoop(Rule):
    code = "ASC513"
    summary = "empty_cache() on every training step"
    node_types = (ast.Call,)
    trigger_words = ("empty_cache",)
    why = (
        "`empty_cache()` hands the caching allocator's free blocks back to the driver. The next step must "
        "allocate them again through the device runtime, which is slow and synchronises with the device, "
        "and it does not give the process more memory to use. Called every step it adds that cost to every "
        "step. Fires on `torch.npu.empty_cache()` / `torch.cuda.empty_cache()` inside a training loop."
    )
    example = "for x in loader:\n    loss = f(x)\n    loss.backward()\n    torch.npu.empty_cache()"
    use_instead = "Remove it from the loop; if memory is fragmented, set `PYTORCH_NPU_ALLOC_CONF=expandable_segments:True`."
    source = (
        "PyTorch docs, CUDA semantics > Memory management (empty_cache releases cached blocks, it does not "
        "increase the memory available to PyTorch); torch_npu mirrors the allocator (torch_npu.npu.empty_cache); "
        f"{ADVISOR_RULES}environment_variable_info.yaml (PYTORCH_NPU_ALLOC_CONF expandable_segments); "
        f"{ADVICE_TABLE}"
    )
    fires = [
        ("import torch\nfor x in data:\n    f(x).backward()\n    opt.step()\n    torch.npu.empty_cache()\n", 5),
        ("import torch_npu\nfor x in data:\n    f(x).backward()\n    torch_npu.npu.empty_cache()\n", 4),
        # in the step's try block, not its handler
        ("import torch\nfor x in data:\n    try:\n        f(x).backward()\n        torch.cuda.empty_cache()\n"
         "    except RuntimeError:\n        continue\n", 5),
        # a loss helper every step calls
        ("import torch\ndef compute_loss(pred, y):\n    loss = crit(pred, y)\n    torch.cuda.empty_cache()\n"
         "    return loss\nfor x, y in data:\n    loss = compute_loss(model(x), y)\n    loss.backward()\n"
         "    opt.step()\n", 4),
        ("import torch\nclass Trainer:\n    def _loss(self, x):\n        torch.cuda.empty_cache()\n"
         "        return self.model(x).sum()\n    def fit(self):\n        for x in self.data:\n"
         "            self._loss(x).backward()\n", 4),
        # the HF Trainer calls compute_loss on every step (its docs' subclassing example, plus empty_cache)
        (_HF_COMPUTE_LOSS.replace("        return loss", "        torch.cuda.empty_cache()\n        return loss"), 9),
        # ...and a helper it calls, through a subclass of the file's own Trainer subclass
        (_HF_COMPUTE_LOSS + "class Second(CustomTrainer):\n    def compute_loss(self, model, inputs, **kw):\n"
         "        return self.free(model, inputs)\n    def free(self, model, inputs):\n"
         "        torch.cuda.empty_cache()\n        return model(**inputs).loss\n", 14),
    ]
    passes = [
        "import torch\nfor x in data:\n    f(x).backward()\ntorch.npu.empty_cache()\n",
        # an out-of-memory retry: the handler runs after a failed step, not on every step (s3prl 0.4.17
        # downstream/runner.py:327)
        "import torch\nfor x in data:\n    try:\n        f(x).backward()\n    except RuntimeError as e:\n"
        "        if 'out of memory' in str(e):\n            torch.cuda.empty_cache()\n            continue\n"
        "        raise\n",
        # a compute_loss of a class that is no framework's Trainer; the framework's evaluation hook
        _HF_COMPUTE_LOSS.replace("(Trainer)", "(object)").replace("        return loss",
                                                                  "        torch.cuda.empty_cache()\n        return loss"),
        _LIT_STEP + "    def validation_step(self, batch, batch_idx):\n        torch.cuda.empty_cache()\n",
        "import torch\nfor i, x in enumerate(data):\n    f(x).backward()\n    if i % 1000 == 0:\n"
        "        torch.cuda.empty_cache()\n",
        "for x in data:\n    f(x).backward()\n    cache.empty_cache()\n",
        # helpers called by validation only, under a condition, periodically, or once after training
        "import torch\ndef evaluate(x):\n    torch.cuda.empty_cache()\n    return model(x)\n"
        "for x in data:\n    f(x).backward()\nfor x in val:\n    evaluate(x)\n",
        "import torch\ndef compute_loss(x):\n    if low_memory:\n        torch.cuda.empty_cache()\n"
        "    return f(x)\nfor x in data:\n    compute_loss(x).backward()\n",
        "import torch\ndef clean():\n    torch.cuda.empty_cache()\nfor i, x in enumerate(data):\n"
        "    f(x).backward()\n    if i % 100 == 0:\n        clean()\n",
        "import torch\ndef clean():\n    torch.cuda.empty_cache()\nfor x in data:\n    f(x).backward()\nclean()\n",
    ]

    def check(self, node, ctx) -> None:
        qualname = callee(node, ctx, _EMPTY_CACHE_LASTS)
        if qualname in _EMPTY_CACHE and _every_step(node, ctx):
            ctx.report(node, self.code, f"{qualname}() on every training step forces the allocator to refetch "
                       "device memory each step (remove it from the loop) [empty_cache in the training loop]",
                       api=qualname, tips="remove empty_cache from the training loop")


class GcCollectInTrainingLoop(Rule):
    code = "ASC514"
    summary = "gc.collect() on every training step"
    node_types = (ast.Call,)
    trigger_words = ("gc",)
    why = (
        "A full Python garbage collection pauses the host thread; while it runs no kernel is dispatched and "
        "the NPU goes idle. The msprof-analyze advisor reports such GC pauses as a cause of free time on the "
        "device. Called every step, the pause is paid every step. Fires on `gc.collect()` inside a training loop."
    )
    example = "for x in loader:\n    loss = f(x)\n    loss.backward()\n    gc.collect()"
    use_instead = "Collect every N steps or once per epoch; avoid reference cycles; `gc.freeze()` after start-up."
    source = f"{ADVISOR_RULES}gc.yaml; {ADVICE_TABLE}"
    fires = [("import gc\nfor x in data:\n    f(x).backward()\n    opt.step()\n    gc.collect()\n", 5),
             ("import gc\ndef tidy():\n    gc.collect()\ndef train_step(x):\n    f(x).backward()\n    opt.step()\n"
              "    tidy()\nfor x in data:\n    train_step(x)\n", 3)]
    passes = [
        "import gc\nfor x in data:\n    f(x).backward()\ngc.collect()\n",
        "import gc\nfor i, x in enumerate(data):\n    f(x).backward()\n    if i % 500 == 0:\n        gc.collect()\n",
        "for x in data:\n    f(x).backward()\n    pool.collect()\n",
        "import gc\nclass A:\n    def tidy(self):\n        gc.collect()\nclass B:\n    def fit(self):\n"
        "        for x in data:\n            f(x).backward()\n            self.tidy()\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _GC_LASTS) == "gc.collect" and _every_step(node, ctx):
            ctx.report(node, self.code, "gc.collect() pauses the host on every training step, leaving the NPU "
                       "idle (collect every N steps) [Python GC in the training loop]",
                       api="gc.collect", tips="collect every N steps or once per epoch")
