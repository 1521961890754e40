"""ASC202: hard-coded CUDA devices (``.cuda()``, ``"cuda:0"`` device strings, formatted ``f"cuda:{rank}"``, and
Lightning's ``accelerator="cuda"``/``"gpu"``, which ``data/frameworks.json`` traces to Lightning's sources)."""
from __future__ import annotations

import ast
import re
from typing import FrozenSet, Optional, Tuple

from ..data import load_frameworks
from ..registry import Rule
from .cuda_api import CHOSEN_DEFAULT, DISPATCHES_PER_DEVICE, OPTIONAL_REPORT
from ..detect.device_dispatch import (SHOWN_BY, chooses_onnx_providers, counts_flops, cuda_branch_test,
                                      disables_a_report, gates_reports_through_name, guarded_branch, has_npu_branch,
                                      keeps_unsupported_out, moves_tested_object, nccl_branch_test, npu_skips,
                                      offline_cpu_fallback, only_makes_contiguous, optional_cuda_branch,
                                      sets_cuda_switch, shown_through_name, skipping_exit, turns_off,
                                      unmet_cuda_request)
from ..detect.cuda_fixes import method_fix, string_fix
from ..detect.device_defaults import CUDA_STRING, defaulted, default_unused, mentions_device_arg
from ..detect.cuda_packages import cuda_implementation, on_cuda_package_path
from ..detect.transfer_to_npu import migrated
from ..walk import assign_targets, walk_tree

_CUDA_TEMPLATE = re.compile(r"cuda:(\{[^{}]*\}|%[ds])")  # 'cuda:{}'.format(rank), 'cuda:%d' % rank
_DEVICE_FUNCTIONS = frozenset({"torch.device", "torch.autocast", "torch.amp.autocast", "torch.Generator",
                               "torch.set_default_device", "torch.amp.GradScaler",
                               # device_type first (torch 2.13 distributed/device_mesh.py, re-exported by
                               # torch.distributed)
                               "torch.distributed.device_mesh.init_device_mesh",
                               "torch.distributed.init_device_mesh"})
_DEVICE_METHODS = frozenset({"to", "to_empty"})
# ``.cuda()`` is ``.to('cuda')``: in one function it is the same hard-coded device as a ``'cuda'`` string (whose
# finding's API is that repr), so either repeats the other (demucs 4.1.0 distrib.py:64 and :72, judged a repeat);
# one inside a CUDA-only branch is named by the finding on the branch's test instead. So is Lightning's accelerator
# 'cuda' or 'gpu' the same device choice (litgpt 0.5.13 api.py:216 and :241, judged a repeat)
_CUDA_DEVICE = repr("cuda")


def _device_names(ctx) -> FrozenSet[str]:
    """Names the file passes where a device goes (``device=d``, ``.to(d)``, ``torch.device(d)``): a string
    bound to one of them (a module constant, a parameter default) reaches a device argument."""
    def build(_) -> FrozenSet[str]:
        keywords = set(ctx.data.transfer_to_npu.get("device_kwargs_list", ())) | {"device", "map_location"}
        names = set()
        for node in walk_tree(ctx.tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in _DEVICE_METHODS) or (
                    isinstance(func, (ast.Name, ast.Attribute)) and ctx.qualname(func) in _DEVICE_FUNCTIONS):
                names.update(a.id for a in node.args[:1] if isinstance(a, ast.Name))
            names.update(k.value.id for k in node.keywords if k.arg in keywords and isinstance(k.value, ast.Name))
        return frozenset(names)
    return ctx.memo("device_names", build)


def _mentions_device(node: ast.AST) -> bool:
    """A name or attribute whose spelling says it holds a device (``device``, ``self.dev_type``...)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    name = name.lower()
    return "device" in name or name in ("dev", "type", "map_location")


def _formatted(node: ast.Constant, ctx) -> Optional[Tuple[ast.AST, int]]:
    """A ``cuda:N`` device built at run time: the expression that builds it and the stack index above it
    (``f'cuda:{rank}'``, ``'cuda:{}'.format(rank)``, ``'cuda:%d' % rank``, ``'cuda:' + str(rank)``)."""
    stack, value = ctx.stack, node.value
    parent = stack[-1] if stack else None
    if value == "cuda:" and isinstance(parent, ast.JoinedStr) and parent.values[0] is node and len(parent.values) == 2:
        return parent, len(stack) - 2
    if value == "cuda:" and isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add) and parent.left is node:
        return parent, len(stack) - 2
    if _CUDA_TEMPLATE.fullmatch(value):
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mod) and parent.left is node:
            return parent, len(stack) - 2
        if isinstance(parent, ast.Attribute) and parent.attr == "format" and len(stack) > 1 and isinstance(
                stack[-2], ast.Call) and stack[-2].func is parent:
            return stack[-2], len(stack) - 3
    return None


def _handed_on(ctx, top: int) -> bool:
    """A built ``cuda:N`` (under ``stack[top]``) given to a call that does not show it, or returned: a string of that
    shape means nothing but a device (mmaction2 1.2.0 lfb.py:97, ``self.load_lfb(f'cuda:{local_rank}')``)."""
    stack = ctx.stack
    i = top
    while i >= 0 and isinstance(stack[i], (ast.IfExp, ast.BoolOp)):
        i -= 1
    if i >= 0 and isinstance(stack[i], ast.keyword):
        i -= 1
    holder = stack[i] if i >= 0 else None
    if isinstance(holder, ast.Return):
        return True
    if not isinstance(holder, ast.Call):
        return False
    func = holder.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name not in SHOWN_BY and not name.endswith(("Error", "Exception", "Warning"))


def _accelerator_names(ctx) -> FrozenSet[str]:
    """Names the file passes as ``accelerator=`` to a Lightning class that takes one."""
    def build(_) -> FrozenSet[str]:
        calls = load_frameworks()["accelerator_calls"]
        return frozenset(k.value.id for node in walk_tree(ctx.tree) if isinstance(node, ast.Call)
                         and ctx.qualname(node.func) in calls for k in node.keywords
                         if k.arg == "accelerator" and isinstance(k.value, ast.Name))
    return ctx.memo("accelerator_names", build)


def _names_accelerator(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "accelerator" in name.lower()


def _accelerator_context(ctx, node: ast.Constant) -> bool:
    """Is the string a Lightning accelerator: ``L.Fabric(accelerator='cuda')``, a name passed there, a parameter
    ``accelerator='gpu'``, or a test of one (``accelerator not in ('cuda', 'gpu')``)?"""
    stack = ctx.stack
    parent = stack[-1] if stack else None
    if isinstance(parent, (ast.Tuple, ast.List, ast.Set)):  # one finding per container: its first CUDA flag
        flags = load_frameworks()["cuda_accelerators"]
        if next(e for e in parent.elts if isinstance(e, ast.Constant) and e.value in flags) is not node:
            return False
    i = len(stack) - 1
    while i > 0 and isinstance(stack[i], (ast.IfExp, ast.BoolOp, ast.Tuple, ast.List, ast.Set)):
        i -= 1
    holder = stack[i] if stack else None
    if isinstance(holder, ast.keyword):
        return holder.arg == "accelerator" and i > 0 and isinstance(stack[i - 1], ast.Call) and ctx.qualname(
            stack[i - 1].func) in load_frameworks()["accelerator_calls"]
    if isinstance(holder, (ast.Assign, ast.AnnAssign)):
        targets = assign_targets(holder)
        return any(isinstance(t, ast.Name) and t.id in _accelerator_names(ctx) for t in targets)
    if isinstance(holder, ast.arguments):
        default = stack[i + 1] if i + 1 < len(stack) else node
        return any("accelerator" in a.arg.lower() for a in defaulted(holder, default))
    if isinstance(holder, ast.Compare):
        return any(_names_accelerator(side) for side in [holder.left, *holder.comparators])
    return False


def _asks_for_cuda(test: ast.AST, ctx) -> bool:
    """The condition calls ``torch.cuda.is_available()``."""
    return any(isinstance(node, ast.Call) and ctx.qualname(node.func) == "torch.cuda.is_available"
               for node in walk_tree(test))


_LOGGED_STATS = ("def log_step(self, loss):\n    log_dict = {{'loss': loss}}\n"
                 "    if self._device.type == 'cuda' and self._log_peak_memory_stats:\n"
                 "        log_dict.update(get_memory_stats(device=self._device))\n{end}")

# torchtune 0.6.1 recipes/ppo_full_finetune_single_device.py:126-131 and :1031: a report switched off off CUDA
_PEAK_MEMORY_FLAG = (
    "class Recipe:\n    def setup(self, cfg):\n        self._log_peak = cfg.get('log_peak_memory_stats', False)\n"
    "        if self._log_peak and self._device.type != 'cuda':\n"
    "            log.info('training does not use cuda. Setting log_peak_memory_stats=False.')\n"
    "            self._log_peak = False\n\n    def step(self, loss):\n"
    "        if self._log_peak:\n            log.info(get_memory_stats(device=self._device))\n{more}"
)

_TF32_WARNING = ("import warnings\nimport torch\n\ndef warn_reproducibility(device, model):\n"
                 "    if (device.type == 'cuda') and (\n        torch.backends.cuda.matmul.allow_tf32 or "
                 "torch.backends.cudnn.allow_tf32\n    ):\n        {then}\n")



_RANKED_DEVICE = ("import os\nimport torch\ndef get_device_name():\n    if torch.cuda.is_available():\n"
                  "        return f'cuda:{{int(os.environ.get(\"LOCAL_RANK\", 0))}}'\n{npu}    return 'cpu'\n")

_SYNC_CHECK = ("import torch\nclass Solver:\n    def prepare(self, batch, check_synchronization_points=False):\n"
               "        if self.device == 'cuda' and check_synchronization_points:\n"
               "            torch.cuda.set_sync_debug_mode('warn')\n        return batch\n\n"
               "    def run_step(self, idx, batch):\n        check_synchronization_points = idx == 1 and self.device == 'cuda'\n"
               "        batch = self.prepare(batch, check_synchronization_points)\n{use}")

# the HF-style detour around torch's memory-efficient SDPA on CUDA (llamafactory 0.9.5 longlora.py:320-323)
_CONTIGUOUS = ("def attend(query_states, key_states, causal_mask):\n"
               "    if query_states.device.type == 'cuda' and causal_mask is not None:\n"
               "        query_states = query_states.contiguous()\n        {second}\n"
               "    return query_states @ key_states\n")


# a base class built only through its subclasses, which hand their ``**kwargs`` to ``super().__init__`` (mmyolo 0.6.0
# .mim/tools/analysis_tools/optimize_anchors.py:125-137, 206-216, 609-631)
SUBCLASS_BUILT = ("class BaseOptimizer:\n    def __init__(self, dataset, device='cuda:0'):\n"
                  "        self.device = device\nclass KMeansOptimizer(BaseOptimizer):\n"
                  "    def __init__(self, iters, {own}**kwargs):\n"
                  "        super().__init__(**kwargs)\n"
                  "def main(args, dataset):\n    return KMeansOptimizer(iters=10, dataset=dataset{passed})\n")


# a kernel's device check that only raises (axolotl 0.19.0 integrations/kernels/libs/sonicmoe/experts.py:141-160)
SONICMOE_CHECK = ("def {name}(self, hidden_states, top_k_index, top_k_weights):\n"
                  "    from transformers.integrations.sonicmoe import sonicmoe_experts_forward\n"
                  "    if hidden_states.device.type != 'cuda':\n        raise ValueError('sonicmoe requires CUDA device')\n"
                  "    return sonicmoe_experts_forward(self, hidden_states, top_k_index, top_k_weights)\n")


class HardCodedCudaDevice(Rule):
    code = "ASC202"
    summary = "hard-coded CUDA device (.cuda(), 'cuda:N' device strings)"
    node_types = (ast.Call, ast.Constant)
    trigger_words = ("cuda", "accelerator")
    why = (
        "An NPU is device type `npu`: `.cuda()` and `'cuda'` device strings fail on a machine without CUDA. "
        "In a file that imports transfer_to_npu only comparisons are reported: it rewrites `.cuda()` and the "
        "devices passed to torch, but `x.device.type == 'cuda'` is then False. Also reported: `f'cuda:{rank}'` and "
        "other device strings built at run time, and Lightning's `accelerator='cuda'`/`'gpu'` (Lightning has no NPU "
        "accelerator). A `== 'cuda'` test whose branch only reports (memory statistics, logging, a debugging switch, "
        "also through a flag that holds the test) is not: the NPU run only misses the report; nor one whose branch "
        "only picks ONNX Runtime's execution provider (the model runs there, not in torch), or only makes tensors "
        "contiguous (a detour around a CUDA attention kernel's bug); nor is a CUDA string or "
        "`.cuda()` on the opt-in path of a package with no NPU build (xformers, bitsandbytes; the NVIDIA-only library of "
        "an optional feature: NVML's bindings, Horovod, Nunchaku, SonicMoE: under a test for it, in a function or class "
        "named after it, or after a function's own import of it), nor a device bound to a local name whose every read "
        "only prints, logs or formats it into a message (directly or through another local name that is only shown), "
        "nor a `device='cuda'` parameter default (or `'cuda' if ... else 'cpu'`) when the file calls the function (or the "
        "class's methods sharing that default, or builds the class through subclasses that hand it their `**kwargs`) "
        "and every call passes the device; nor in a model-complexity tool "
        "(a module that imports a FLOP counter: the count is the same on the CPU); nor in a CUDA implementation (a "
        "module importing cupy, pycuda or numba's CUDA target unconditionally: it needs another implementation, "
        "ASC206's finding); nor a `.cuda()` of an object under a test of its own device (`if "
        "next(m.parameters()).is_cuda: m.cuda()`: on an NPU it is on the NPU and stays there); nor a configured "
        "device compared with 'cuda' only to fill a library's `use_cuda=` / `using_cuda=` switch; nor, in an offline "
        "converter (a path naming `convert`), a CUDA choice whose other side is the CPU. Test code is left out "
        "(`--lint-tests` reports it). Inside a branch only CUDA takes, or the branch of a backend's comparison with "
        "NCCL (`if backend == 'nccl':`, ASC204's finding), the finding on the test stands for the devices inside "
        "and `--fix` still rewrites each. A `.cuda()` is `.to('cuda')`: in one function it, `'cuda'` device strings "
        "and a Lightning accelerator `'cuda'`/`'gpu'` are one hard-coded device, so later ones fold into the first as "
        "repeats."
    )
    example = "model = model.cuda()\nx = x.to('cuda:0')"
    use_instead = ("Use `.npu()` / `'npu:N'`, or better a device chosen once (`torch.device(args.device)`). "
                   "`ascend-analyse --fix --select ASC2` rewrites both where the string reaches a device (not comparisons, "
                   "which decide what code runs, and not `.cuda()` in a file that defines its own `cuda` method).")
    source = "torch_npu transfer_to_npu.py (device_kwargs_list, Tensor.cuda -> Tensor.npu)"
    fires = [
        # near miss of an NVIDIA-only feature's device check: a feature of the package's own (activation
        # offloading, torchtune 0.6.1 recipes/full_finetune_single_device.py:166-170), which an NPU could run
        ("class Recipe:\n    def __init__(self, cfg):\n        if self._enable_activation_offloading:\n"
         "            if self._device.type != 'cuda':\n"
         "                raise RuntimeError('enable_activation_offloading should only be True when training on CUDA')\n", 4),
        # near miss of a FLOP profiler's device option: the module imports no counter
        ("import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--device', default='cuda', type=str)\n",
         3),
        # near miss of a branch that only picks ONNX Runtime's provider: it also places the torch model
        ("def providers(device, model):\n    if device.type == 'cuda':\n"
         "        providers = ['CUDAExecutionProvider']\n        model = model.to(device)\n    return providers\n", 2),
        # near misses of a default no call relies on and of a CUDA-only detour: a construction that leaves the
        # device out, a branch that also moves a tensor
        (CHOSEN_DEFAULT.format(passed=""), 4),
        (_CONTIGUOUS.format(second="key_states = key_states.to('cpu')"), 2),
        # near miss of a flag that only gates a debugging switch: it also picks where the batch goes
        (_SYNC_CHECK.format(use="        return batch.to('cuda' if check_synchronization_points else 'cpu')\n"), 9),
        # near miss of the chain above: no NPU case
        (_RANKED_DEVICE.format(npu=""), 5),
        ("model = Net().cuda()\n", 1),
        # near miss of an object moved where its own device already is: another object moved under the test, left
        # on the CPU beside an NPU tensor (s3prl 0.4.17 nn/speaker_loss.py:117-118)
        ("def forward(self, x, label):\n    delt_costh = torch.zeros(x.size()).scatter_(1, label, self.m)\n"
         "    if x.is_cuda:\n        delt_costh = delt_costh.cuda()\n    return x - delt_costh\n", 4),
        # a choice between CUDA and the CPU, handed to the project's own mover (espnet 202511
        # espnet2/main_funcs/collect_stats.py:52)
        ("def collect(itr, ngpu, model):\n    for keys, batch in itr:\n"
         "        batch = to_device(batch, 'cuda' if ngpu > 0 else 'cpu')\n        model(**batch)\n", 3),
        # near misses of a base class built through a subclass: the construction leaves the device out, the
        # subclass keeps the device to itself, nothing builds the subclass (only the base, with the device)
        (SUBCLASS_BUILT.format(own="", passed=""), 2),
        (SUBCLASS_BUILT.format(own="device='npu', ", passed=", device=args.device"), 2),
        (SUBCLASS_BUILT.format(own="", passed=", device=args.device").replace(
            "KMeansOptimizer(iters=10, ", "BaseOptimizer("), 2),
        # near miss of a constructor default: one construction relies on it
        ("import torch\nclass Prefetcher:\n    def __init__(self, loader, device=torch.device('cuda')):\n"
         "        self.device = device\n\ndef make(loader, device):\n    return Prefetcher(loader, device=device), "
         "Prefetcher(loader)\n", 3),
        # near miss of a CUDA case that only asserts: it also moves the model
        ("import torch\ndef main(args, model):\n    if args.device == 'cuda:0':\n        assert torch.cuda.is_available()\n"
         "        model.to(args.device)\n", 3),
        # near miss of an NPU case: an NPU question and-ed with something else decides nothing alone
        ("def place(model, fast):\n    if is_torch_npu_available() and fast:\n        return model.npu()\n"
         "    return model.cuda()\n", 4),
        ("import torch\nd = torch.device('cuda:0')\n", 2),
        ("state = torch.load(p, map_location='cuda')\n", 1),
        ("device = 'cuda' if ok else 'cpu'\n", 1),
        ("x = x.to('cuda')\n", 1),
        ("if x.device.type == 'cuda':\n    model.half()\n", 1),
        # near miss of a CUDA case beside an NPU case: the function has no NPU case
        ("import torch\ndef place(model):\n    if torch.cuda.is_available():\n        model = model.cuda()\n"
         "    return model\n", 4),
        ("import torch\ndef _get_device_type_from_env():\n    if torch.cuda.is_available():\n        device = 'cuda'\n"
         "    elif torch.xpu.is_available():\n        device = 'xpu'\n    else:\n        device = 'cpu'\n    return device\n", 4),
        # near miss of a warning: the branch also changes what runs
        (_TF32_WARNING.format(then="model = model.half()"), 5),
        # a built device handed to a method or returned (mmaction2 1.2.0 roi_heads/shared_heads/lfb.py:97)
        ("class LFB:\n    def __init__(self, local_rank):\n        self.load_lfb(f'cuda:{local_rank}')\n", 3),
        ("def where(rank):\n    return 'cuda:{}'.format(rank)\n", 2),
        # a branch that decides the training path (litgpt 0.5.13 pretrain.py:216: the fused optimizer)
        ("if fabric.device.type == 'cuda':\n    opt = AdamW(params, fused=True)\n", 1),
        ("if x.device.type == 'cuda':\n    x = x.half()\n", 1),
        # transfer_to_npu rewrites no comparison
        ("import torch_npu.contrib.transfer_to_npu\nif x.device.type == 'cuda':\n    model.half()\n", 2),
        # devices as values: parameter defaults (mmdet dist_utils.py:148) and module constants
        ("def sync_random_seed(seed=None, device='cuda'):\n    pass\n", 1),
        ("def init_detector(config, checkpoint=None, dev='cuda:0'):\n    pass\n", 1),
        ("def f(x, where='cuda'):\n    return x.to(where)\n", 1),
        ("GPU = 'cuda:0'\ndef f(x):\n    return x.to(GPU)\n", 1),
        ("import torch\nscaler = torch.amp.GradScaler('cuda')\n", 2),
        # a device mesh's device type (openrlhf 0.11.2 utils/deepspeed/deepspeed.py:106, torchtune 0.6.1
        # recipes/dev/generate_v2_distributed.py:107)
        ("from torch.distributed.device_mesh import init_device_mesh\n"
         "mesh = init_device_mesh('cuda', (dp, sp, tp), mesh_dim_names=('dp', 'sp', 'tp'))\n", 2),
        # a CUDA case with no NPU case next to it
        ("def compile_for(device, model):\n    if device.type == 'cuda':\n        model = torch.compile(model)\n"
         "    elif device.type == 'mps':\n        model = model.half()\n    return model\n", 2),
        # mmdet 3.1.0 .mim/tools/deployment/mmdet_handler.py:18 (the string is chosen by CUDA being there)
        ("import torch\nself.map_location = 'cuda' if torch.cuda.is_available() else 'cpu'\n", 2),
        ("import torch\nwhere = 'cuda' if torch.cuda.is_available() else 'cpu'\n", 2),
        # device strings built at run time
        ("import torch\ndevice = torch.device('cuda:{}'.format(args.local_rank))\n", 2),
        ("model.to(f'cuda:{rank}')\n", 1),
        ("self.device = 'cuda:%d' % local_rank\n", 1),
        ("state = torch.load(path, map_location='cuda:' + str(rank))\n", 1),
        # Lightning's accelerator flags (lightning 2.6.1: 'cuda' is CUDAAccelerator, 'gpu' resolves to MPS or CUDA)
        ("import lightning as L\nfabric = L.Fabric(accelerator='cuda', devices=2)\n", 2),
        ("from lightning.pytorch import Trainer\ntrainer = Trainer(accelerator='gpu')\n", 2),
        # litgpt 0.5.13 api.py:215-216, the name reaches Fabric(accelerator=...)
        ("import lightning as L\nif distribute == 'auto':\n    accelerator = 'cuda'\n"
         "fabric = L.Fabric(accelerator=accelerator)\n", 3),
        ("def setup(accelerator: str = 'gpu'):\n    pass\n", 1),
        ("if accelerator not in ('cuda', 'gpu'):\n    raise ValueError(accelerator)\n", 1),
        # near misses of the branches an NPU run may skip: a branch that also moves data, the path taken when
        # the CUDA-only package is not used
        ("def check(gen, device):\n    if gen.device.type == 'cuda':\n        x = x.to(device)\n"
         "        raise ValueError('mismatch')\n", 2),
        ("def set_processor(use_xformers, q):\n    if use_xformers:\n        pass\n    else:\n"
         "        q = q.to('cuda')\n", 5),
        # near misses of the code after a function's own import of a package with no NPU build: the other branch,
        # and a move before the import
        ("import torch\nclass LoRALinear:\n    def merge(self, weight_data):\n"
         "        if self.linear.weight.dtype == torch.uint8:\n            import bitsandbytes as bnb\n"
         "            self.linear.weight = bnb.nn.Params4bit(weight_data, requires_grad=False)\n"
         "        else:\n            self.linear.weight.cuda()\n", 8),
        ("def load(self):\n    w = self.weight.cuda()\n    import bitsandbytes as bnb\n"
         "    return bnb.nn.Params4bit(w)\n", 2),
        # near miss of a device only shown: it is also returned to the caller
        ("import torch\ndef pick():\n    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
         "    logger.info('Device: %s', device)\n    return device\n", 3),
        # near miss of a flag that only gates a report: it also decides the precision
        (_PEAK_MEMORY_FLAG.format(more="        if self._log_peak:\n            self.model.half()\n"), 4),
        # near miss of figures only logged: the collection is also returned to the caller
        (_LOGGED_STATS.format(end="    return log_dict\n"), 3),
        # a call in the file relies on the default (mmdet 3.1.0 utils/dist_utils.py:68)
        ("def obj2tensor(pyobj, device='cuda'):\n    return torch.tensor(pyobj, device=device)\n\n"
         "def reduce(obj):\n    return obj2tensor(obj)\n", 1),
        # near misses of a library's CUDA switch: the flag also decides the precision; a comparison passed to a
        # parameter that is no switch
        ("def main(args, model, layers):\n    use_cuda = 'cuda' in args.device\n    if use_cuda:\n"
         "        model.half()\n    return GradCAM(model, layers, use_cuda=use_cuda)\n", 2),
        ("def main(args, model):\n    return run(model, fp16='cuda' in args.device)\n", 2),
    ]
    passes = [
        CHOSEN_DEFAULT.format(passed=", device=params.device"),
        # open_clip 3.2.0 open_clip_train/profiler.py:6, 22-23: a FLOP profiler's device option
        "import argparse\nfrom torch.utils.flop_counter import FlopCounterMode\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--device', default='cuda', type=str)\n",
        _CONTIGUOUS.format(second="key_states = key_states.contiguous()"),
        # the CUDA branch only picks ONNX Runtime's provider: the model runs in ONNX Runtime (pyannote.audio 3.3.2
        # pipelines/speaker_verification.py:443-452)
        "def providers(device):\n    if device.type == 'cpu':\n        providers = ['CPUExecutionProvider']\n"
        "    elif device.type == 'cuda':\n        providers = [('CUDAExecutionProvider', {'cudnn_conv_algo_search': 'DEFAULT'})]\n"
        "    else:\n        providers = ['CPUExecutionProvider']\n    return providers\n",
        # a flag whose reads only turn a debugging switch on (audiocraft 1.3.0 solvers/musicgen.py:308-362)
        _SYNC_CHECK.format(use="        if check_synchronization_points:\n            torch.cuda.set_sync_debug_mode('default')\n"),
        # a device built with the rank in the CUDA case of a chain that has its NPU case (sentence-transformers 6.2.0
        # util/environment.py:66-76)
        _RANKED_DEVICE.format(npu="    elif is_torch_npu_available():\n        return 'npu'\n"),
        # near miss of a device mesh: the device type comes from configuration; 'cuda' names a mesh dimension
        "from torch.distributed.device_mesh import init_device_mesh\n"
        "mesh = init_device_mesh(device_type, (2, 4), mesh_dim_names=('cuda', 'tp'))\n",
        # a CUDA case that only warns, the warning built from its class (pyannote.audio 3.3.2
        # utils/reproducibility.py:52-65)
        _TF32_WARNING.format(then="warnings.warn(ReproducibilityWarning('Please disable TensorFloat-32 (TF32)'))"),
        # a CUDA case beside the code's own NPU case, picking a device by what the machine has (torchtune 0.6.1
        # utils/_device.py:106-114)
        "import torch\ndef _get_device_type_from_env():\n    if torch.cuda.is_available():\n        device = 'cuda'\n"
        "    elif is_npu_available:\n        device = 'npu'\n    else:\n        device = 'cpu'\n    return device\n",
        # the code's own NPU case comes first (transformers/accelerate style)
        "def get_device():\n    if is_torch_npu_available():\n        return 'npu:0'\n    else:\n        return 'cuda:0'\n",
        "def get_device():\n    if torch.npu.is_available():\n        return 'npu:0'\n    return 'cuda:0'\n",
        # a constructor's torch.device('cuda') default that every construction in the file overrides (timm 1.0.31
        # data/naflex_loader.py:36 and :415)
        "import torch\nclass Prefetcher:\n    def __init__(self, loader, device=torch.device('cuda')):\n"
        "        self.device = device\n\ndef make(loader, device):\n    return Prefetcher(loader, device=device)\n",
        SUBCLASS_BUILT.format(own="", passed=", device=args.device"),
        # a CUDA case that only asserts (mmpose 1.3.2 .mim/tools/analysis_tools/get_flops.py:122-124)
        "import torch\ndef main(args):\n    if args.device == 'cuda:0':\n        assert torch.cuda.is_available(), 'no CUDA'\n"
        "    run(args)\n",
        "class A:\n    def __init__(self):\n        self.cuda = False\n",
        "path = 'data/cuda/kernels.txt'\n",
        # a CUDA request where CUDA is missing, answered with a clear error (anomalib 2.7.0
        # deploy/inferencers/torch_inferencer.py:163)
        "import torch\ndef pick(device):\n    if device == 'cuda' and not torch.cuda.is_available():\n"
        "        raise ValueError('CUDA device requested but CUDA is not available')\n    return device\n",
        # near miss of the choice with the CPU: a choice between two names that are no devices
        "def kernel_dir(fast):\n    return load('cuda' if fast else 'triton')\n",
        # an object moved to CUDA only when its own parameters are there: on an NPU it stays on the NPU (mmrazor
        # 1.0.0 structures/subnet/fix_subnet.py:160-168)
        "import copy\ndef export(model):\n    copied_model = copy.deepcopy(model)\n"
        "    if next(copied_model.parameters()).is_cuda:\n        copied_model.cuda()\n    return copied_model\n",
        # a CUDA case with the NPU case beside it (open_clip 3.2.0 open_clip_train/profiler.py:138-141)
        "import torch\ndef place(model, device):\n    if torch.cuda.is_available():\n        model = model.cuda()\n"
        "    elif device == 'npu' and torch.npu.is_available():\n        model = model.npu()\n    return model\n",
        # near misses of a built device handed on: shown to a person
        "def show(rank):\n    print(f'cuda:{rank}')\n    logger.info('cuda:{}'.format(rank))\n"
        "    raise ValueError(f'cuda:{rank}')\n",
        "open('cuda')\n",
        "msg = 'cuda'\n",
        "x = x.to('cpu')\n",
        # migrated with transfer_to_npu: .cuda() and device arguments are rewritten
        "import torch\nfrom torch_npu.contrib import transfer_to_npu\nm = Net().cuda()\nx = x.to('cuda:0')\n",
        "import torch_npu.contrib.transfer_to_npu\ndevice = 'cuda' if ok else 'cpu'\n",
        "def f(backend='cuda'):\n    return backend\n",
        "NAME = 'cuda'\nprint(NAME)\n",
        "def f(mode='cuda'):\n    return {'mode': mode}\n",
        # a cuda() override forwarding its caller's request (mmdet kd_one_stage.py:93-94, base_boxes.py:246)
        "class KD(SingleStageDetector):\n    def cuda(self, device=None):\n"
        "        self.teacher_model.cuda(device=device)\n        return super().cuda(device=device)\n",
        "class BaseBoxes:\n    def cuda(self, *args, **kwargs):\n"
        "        return type(self)(self.tensor.cuda(*args, **kwargs), clone=False)\n",
        # the CUDA case of code that also has an NPU case (timm 1.0.31 utils/distributed.py:161-164)
        DISPATCHES_PER_DEVICE,
        "where = 'cuda' if fast else 'cpu'\n",
        # an optional report the NPU run skips (litgpt 0.5.13 utils.py:860)
        OPTIONAL_REPORT,
        # not devices: a formatted message, a 'gpu' that is not an accelerator, an accelerator chosen elsewhere
        "print(f'cuda: {ok}')\n", "name = 'cuda:{} GB'.format(gb)\n", "kind = 'gpu'\n",
        "import lightning as L\nfabric = L.Fabric(accelerator='auto')\n",
        "from accelerate import Accelerator\naccelerator = Accelerator()\n",
        "trainer = MyTrainer(accelerator='gpu')\n",
        # CUDA defaults no call relies on: every call in the file passes the device, to the function or to the
        # class's methods that share the default (mmpose 1.3.2 mlvl_point_generator.py:63-229, edpose_head.py:1191)
        "class PointGenerator:\n    def grid_priors(self, sizes, device='cuda'):\n"
        "        return [self.single_level_grid_priors(s, device=device) for s in sizes]\n\n"
        "    def single_level_grid_priors(self, size, device='cuda'):\n"
        "        return torch.arange(size, device=device)\n\n"
        "    def sparse_priors(self, idxs, device='cuda'):\n        return idxs.to(device)\n",
        "def prepare(targets, device):\n    def indices(now, target, device='cuda'):\n"
        "        return torch.arange(now, device=device)\n    return [indices(t, 4, device) for t in targets]\n",
        # CUDA-only memory profiling and peak-memory figures that only go to the metrics logger (torchtune 0.6.1
        # recipes/full_finetune_distributed.py:897, recipes/dev/grpo_full_finetune_distributed.py:1040)
        "import torch\ndef train(self, idx):\n    if idx == self.profile_step and self._device.type == 'cuda':\n"
        "        torch.cuda.memory._record_memory_history(enabled=None)\n",
        _LOGGED_STATS.format(end="    self._metric_logger.log_dict(log_dict, step=self.global_step)\n"),
        # a flag switched off off CUDA that only gates a report
        _PEAK_MEMORY_FLAG.format(more=""),
        # a check that only raises for a CUDA case (diffusers 0.42.1 utils/torch_utils.py:95)
        "def randn(generator, device):\n    gen_type = generator.device.type\n"
        "    if gen_type != device.type and gen_type == 'cpu':\n        pass\n"
        "    elif gen_type != device.type and gen_type == 'cuda':\n"
        "        raise ValueError(f'Cannot generate a {device} tensor from a generator of type {gen_type}.')\n",
        # after the function's own import of a package with no NPU build, which fails on an NPU first (litgpt
        # 0.5.13 lora.py:149-158)
        "import torch\nclass LoRALinear:\n    def merge(self, weight_data):\n"
        "        if self.linear.weight.dtype == torch.uint8:\n            import bitsandbytes as bnb\n"
        "            weight = self.linear.weight\n"
        "            self.linear.weight = bnb.nn.Params4bit(weight_data, requires_grad=False, **weight.__dict__)\n"
        "            self.linear.weight.cuda(weight.device)\n",
        # a device whose every read only prints it (litgpt 0.5.13 api.py:703-704)
        "import torch\ndef benchmark_dict_to_markdown_table():\n"
        "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n    print(f'Device: {device}\\n')\n",
        # the opt-in path of a package with no NPU build (diffusers 0.42.1 attention_processor.py:424,
        # bnb_quantizer.py:240)
        "import torch\ndef set_xformers(use_xformers):\n    if not is_xformers_available():\n        raise ImportError\n"
        "    else:\n        q = torch.randn((1, 2, 40), device='cuda')\n",
        # the NVIDIA-only kernels of an optional feature (axolotl 0.19.0 integrations/kernels/libs/sonicmoe/experts.py:141-160)
        SONICMOE_CHECK.format(name="sonicmoe_experts_forward_with_lora"),
        "import torch\nclass BnB4BitDiffusersQuantizer:\n    def update_device_map(self, device_map):\n"
        "        if device_map is None:\n            device_map = {'': f'cuda:{torch.cuda.current_device()}'}\n"
        "        return device_map\n",
        # a configured device compared only to set a library's own CUDA switch (mmpretrain 1.2.0
        # .mim/tools/visualization/vis_cam.py:247 and its init_cam(..., use_cuda, ...); stable-baselines3 2.9.2
        # common/base_class.py:568)
        "def init_cam(method, model, target_layers, use_cuda, reshape_transform):\n    return method\n"
        "def main(args, model, layers):\n    use_cuda = ('cuda' in args.device)\n"
        "    cam = init_cam(args.method, model, layers, use_cuda, None)\n",
        "import torch as th\nclass Base:\n    def set_random_seed(self, seed):\n"
        "        set_random_seed(seed, using_cuda=self.device.type == th.device('cuda').type)\n",
        "def main(args, model, layers):\n    return GradCAM(model, layers, use_gpu=True if 'cuda' in args.device else False)\n",
        # a CUDA implementation (cupy buffers)
        "import cupy as cp\nimport torch\ndef to_cupy(t):\n    return cp.asarray(t.to('cuda'))\n",
    ]

    def check(self, node, ctx) -> None:
        if counts_flops(ctx) or cuda_implementation(ctx):
            return  # a model-complexity tool: the count is the same wherever the model sits; a CUDA implementation
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr == "cuda" and ctx.qualname(func) is None
                    and not migrated(ctx) and not self._forwarding(ctx) and not optional_cuda_branch(node, ctx)
                    and not on_cuda_package_path(node, ctx) and not offline_cpu_fallback(node, ctx)
                    and not npu_skips(node, ctx)):
                guard = cuda_branch_test(node, ctx)
                if not (guard is not None and (has_npu_branch(ctx) or moves_tested_object(node, guard))):
                    ctx.report(node, self.code, "hard-coded CUDA device: .cuda() moves to an NVIDIA GPU (use .npu() or "
                               ".to(device))", api=".cuda()", tips="Tensor.cuda/Module.cuda -> npu",
                               rewrite=None if _defines_cuda(ctx) else method_fix(func.attr, ctx),
                               guard=guard or nccl_branch_test(node, ctx),
                               family="" if guard is not None else _CUDA_DEVICE)
            return
        if not isinstance(node.value, str):
            return
        cuda_accelerators = load_frameworks()["cuda_accelerators"]
        if node.value in cuda_accelerators and _accelerator_context(ctx, node):
            ctx.report(node, self.code, f"Lightning accelerator {node.value!r} runs on CUDA only (pass the accelerator "
                       "from configuration, e.g. an NPU accelerator registered with Lightning)",
                       api=f"accelerator={node.value!r}", tips=cuda_accelerators[node.value], family=_CUDA_DEVICE)
            return
        built = _formatted(node, ctx)
        if built is None and not CUDA_STRING.fullmatch(node.value):
            return  # most strings: no device, and the questions below walk up the tree
        if on_cuda_package_path(node, ctx) or offline_cpu_fallback(node, ctx) or npu_skips(node, ctx) or \
                shown_through_name(node, ctx) or unmet_cuda_request(node, ctx):
            return
        guard = cuda_branch_test(node, ctx)
        if built and (self._device_context(ctx, built[0], built[1]) or _handed_on(ctx, built[1])) and not migrated(ctx) \
                and not (guard is not None and has_npu_branch(ctx)):
            ctx.report(node, self.code, f"hard-coded CUDA device {ast.unparse(built[0])} (use 'npu:N' or a configured "
                       "device)", api=repr(node.value), tips="cuda device string -> npu",
                       guard=guard or nccl_branch_test(node, ctx))
            return
        compared = self._compared(ctx)
        if (CUDA_STRING.fullmatch(node.value) and self._device_context(ctx, node)
                and (not migrated(ctx) or compared)
                and not ((compared or guard is not None) and has_npu_branch(ctx))
                and not optional_cuda_branch(node, ctx) and not (compared and (
                    disables_a_report(node, ctx) or keeps_unsupported_out(node, ctx)
                    or gates_reports_through_name(node, ctx) or chooses_onnx_providers(node, ctx)
                    or only_makes_contiguous(node, ctx))) and not sets_cuda_switch(node, ctx)):
            branch = guarded_branch(node, ctx) if compared else None
            effect = turns_off(branch) if branch is not None else skipping_exit(node, ctx) if compared else ""
            what = (f"device test against {node.value!r} is {effect} (test for 'npu' too, or take the device from "
                    "configuration)" if effect else
                    f"hard-coded CUDA device string {node.value!r} (use 'npu' or a configured device)")
            ctx.report(node, self.code, what,
                       api=repr(node.value), tips="cuda device string -> npu",
                       rewrite=None if compared else string_fix(node.value, ctx),  # a comparison gates code
                       guard=guard or nccl_branch_test(node, ctx))

    @staticmethod
    def _forwarding(ctx) -> bool:
        """Inside a ``def cuda(...)`` override: the call passes on a device the caller chose."""
        function = ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef)
        return function is not None and function.name == "cuda"

    @staticmethod
    def _compared(ctx) -> bool:
        return isinstance(ctx.parent, ast.Compare)

    @staticmethod
    def _device_context(ctx, node: ast.AST, top: Optional[int] = None) -> bool:
        """Is the string (or the expression ``node`` that builds one, under ``stack[top]``) in a place that names
        a device, or bound to a name that reaches one?"""
        stack = ctx.stack
        i = len(stack) - 1 if top is None else top
        while i >= 0 and isinstance(stack[i], (ast.IfExp, ast.BoolOp)):
            if isinstance(stack[i], ast.IfExp) and (_asks_for_cuda(stack[i].test, ctx) or (
                    _or_cpu(stack[i]) and i and isinstance(stack[i - 1], (ast.Call, ast.keyword)))):
                if i and isinstance(stack[i - 1], ast.arguments):
                    i -= 1  # a parameter's default, however chosen: a device unless no call relies on it
                    break
                return True  # 'cuda' if torch.cuda.is_available() else 'cpu': chosen as a device
            i -= 1
        if i < 0:
            return False
        holder = stack[i]
        if isinstance(holder, ast.keyword):
            if holder.arg in ctx.data.transfer_to_npu.get("device_kwargs_list", ("device",)) or holder.arg in (
                "device", "device_type", "map_location", "device_id"):
                return True
            call = stack[i - 1] if i else None
            return holder.arg == "default" and isinstance(call, ast.Call) and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str) and "device" in a.value for a in call.args)
        if isinstance(holder, ast.Call):
            func = holder.func
            if isinstance(func, ast.Attribute) and func.attr in _DEVICE_METHODS and ctx.qualname(func) is None:
                return True
            if ctx.qualname(func) not in _DEVICE_FUNCTIONS:
                return False
            if i >= 1 and isinstance(stack[i - 1], ast.arguments):  # def f(device=torch.device('cuda'))
                return HardCodedCudaDevice._device_context(ctx, holder, i - 1)
            return True
        if isinstance(holder, (ast.Assign, ast.AnnAssign)):
            targets = assign_targets(holder)
            return any(_mentions_device(t) or (isinstance(t, ast.Name) and t.id in _device_names(ctx))
                       for t in targets)
        if isinstance(holder, ast.arguments):  # a parameter default: def f(device='cuda')
            default = stack[i + 1] if i + 1 < len(stack) else node
            function = stack[i - 1] if i else None
            return any((mentions_device_arg(a) or a.arg in _device_names(ctx)) and not default_unused(ctx, function, a)
                       for a in defaulted(holder, default))
        if isinstance(holder, ast.Compare):
            return any(_mentions_device(side) for side in [holder.left, *holder.comparators])
        return False


def _or_cpu(choice: ast.IfExp) -> bool:
    """``'cuda' if ngpu > 0 else 'cpu'``: a choice between CUDA and the CPU, handed to a call, is a device whatever
    decides it (espnet 202511 espnet2/main_funcs/collect_stats.py:52); one kept under a name is a device only where
    the name says so or reaches one."""
    return any(isinstance(side, ast.Constant) and side.value == "cpu" for side in (choice.body, choice.orelse))


def _defines_cuda(ctx) -> bool:
    """The file defines a ``cuda`` function or method: its ``.cuda()`` calls may be that one, which has no ``npu``."""
    return ctx.memo("defines_cuda", lambda c: any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "cuda" for n in walk_tree(c.tree)))
