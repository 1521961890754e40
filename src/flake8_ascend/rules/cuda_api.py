"""ASC201: ``torch.cuda.*`` API use, and whether ``transfer_to_npu`` maps it."""
from __future__ import annotations

import ast

from ..registry import Rule
from ..detect.device_dispatch import (architecture_gate, counts_flops, cuda_branch_test, decided_with_npu_case,
                                      disables_a_report, guarded_branch, has_npu_branch, in_cuda_test,
                                      in_tensor_dispatch_test, keeps_unsupported_out, names_a_type,
                                      nccl_branch_test, npu_skips, offline_cpu_fallback, only_reported,
                                      optional_cuda_branch, redundant_reseed, tensor_dispatch,
                                      tensor_dispatched_flag, turns_off, unmet_cuda_request)
from ..detect.training import last_name
from ..detect.cuda_fixes import name_fix
from ..detect.device_defaults import in_unused_default
from ..detect.cuda_packages import cuda_implementation, on_cuda_package_path
from ..detect.transfer_to_npu import quiet
from ..walk import assign_targets


DISPATCHES_PER_DEVICE = (
    "import torch\n\ndef init_device(device_type, device):\n"
    "    if device_type == 'cuda':\n        assert torch.cuda.is_available(), 'no CUDA'\n"
    "    if device_type == 'npu':\n        assert torch.npu.is_available(), 'no NPU'\n"
    "    is_cuda = device.type == 'cuda' and torch.cuda.is_available()\n    return is_cuda\n"
)


OPTIONAL_REPORT = (
    "import torch\n\ndef report(device_type, output):\n    if device_type == 'cuda':\n"
    "        memory_used = torch.cuda.max_memory_allocated() / 1e9\n"
    "        output += f'| Memory Used: {memory_used:.02f} GB'\n    return output\n"
)


_APEX_OPTIMIZERS = (
    "import torch\n\ndef create_optimizer(opt_info, params):\n    if opt_info.opt_class.startswith('{prefix}'):\n"
    "        assert torch.cuda.is_available(), 'CUDA required for APEX optimizers'\n"
    "        opt_class = _import_class(opt_info.opt_class)\n    return opt_class(params)\n")


_FLAG_OFF = ("import torch\nclass Recipe:\n    def setup(self, cfg):\n        self._log_peak = cfg.log_peak\n"
             "        if self._log_peak and not torch.cuda.is_available():\n            log.warning('no CUDA: no peak memory')\n"
             "            self._log_peak = False\n\n    def step(self):\n        if self._log_peak:\n            {use}\n")

_PROFILER_DUMP = ("import torch\ndef trace_handler(prof, rank, out):\n"
                  "    if prof.profile_memory and torch.cuda.is_available():\n        try:\n"
                  "            prof.export_memory_timeline(f'{{out}}/rank{{rank}}_memory-timeline.html')\n"
                  "        except Exception as e:\n            {handler}\n"
                  "        torch.cuda.memory._dump_snapshot(f'{{out}}/rank{{rank}}_memory_snapshot.pickle')\n")


# oumi 0.9 utils/torch_utils.py:78-93: an early return without CUDA, then only log lines
_VERSIONS_LOG = ("import torch\nimport logging\nlogger = logging.getLogger(__name__)\ndef log_versioning_info():\n"
                 "    logger.info(f'Torch version: {{torch.__version__}}')\n    if not torch.cuda.is_available():\n"
                 "        logger.info('CUDA is not available!')\n        {leave}\n"
                 "    if hasattr(torch, 'version'):\n        logger.info(f'CUDA version: {{torch.version.cuda}}')\n"
                 "    logger.info(f'CuDNN version: {{format_cudnn_version(torch.backends.cudnn.version())}}')\n{after}")

_DATA_PARALLEL = ("import torch\ndef auto_model(model, idist):\n"
                  "    if torch.cuda.device_count() > 1 and 'cuda' in idist.device().type:\n"
                  "        model = {wrap}(model)\n    return model\n")
# a figure kept in a name that the log line reads (ignite 0.5.5 handlers/fbresearch_logger.py:153-160)
_MEMORY_LINE = ("import torch\nMB = 1024.0 * 1024.0\ndef log_every(engine, logger):\n    cuda_max_mem = ''\n"
                "    if torch.cuda.is_available():\n        cuda_max_mem = {value}\n"
                "    logger.info(' | '.join([f'Epoch {{engine.epoch}}', cuda_max_mem]))\n")

# memory figures logged, and logged again through a difference (ms-swift 4.4.0 rlhf_trainers/utils.py:424-458)
_PROFILED = ("import torch\ndef profile_memory(name):\n    before = torch.cuda.memory_allocated() / 1024**3\n"
             "    logger.info(f'[{{name}}] Before: {{before:.2f}} GiB')\n    yield\n"
             "    after = torch.cuda.memory_allocated() / 1024**3\n    change = after - before\n"
             "    logger.info(f'[{{name}}] After: {{after:.2f}} GiB, Change = {{change:+.2f}} GiB')\n{end}")

# a CUDA synchronize beside a clock read (llm-foundry 0.22.0 command_utils/eval.py:166-178)
_TIMED_EVAL = ("import time\nimport torch\ndef evaluate(trainer, log, name):\n    if torch.cuda.is_available():\n"
               "        torch.cuda.synchronize()\n    a = time.time()\n    trainer.eval()\n"
               "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    b = time.time()\n{use}\n")

# a flag a forward sets only for inputs on CUDA (mmagic 1.2.0 basicvsr_plusplus_net.py:277-279, 299-302)
_CPU_CACHE = ("import torch\nclass BasicVSR:\n    def propagate(self, hr):\n        if self.cpu_cache:\n"
              "            torch.cuda.empty_cache()\n        return hr\n\n    def forward(self, lqs, cfg):\n"
              "        if lqs.size(1) > self.cpu_cache_length and lqs.is_cuda:\n            self.cpu_cache = True\n"
              "        else:\n            self.cpu_cache = {other}\n        return self.propagate(lqs)\n")

# a device default chosen at definition; the one construction in the file passes the device (gluonts 0.16.2
# nursery/robust-mts-attack/attack_modules/attack_var.py:137-143, 197-200)
CHOSEN_DEFAULT = ("import torch\nfrom torch import nn\nclass AttackLoss(nn.Module):\n"
                  "    def __init__(self, c, device='cuda' if torch.cuda.is_available() else 'cpu'):\n"
                  "        super().__init__()\n        self.device = device\n"
                  "class Attack:\n    def __init__(self, params):\n        self.loss = AttackLoss(1.0{passed})\n")


# a model-complexity tool (mmyolo 0.6.0 .mim/tools/analysis_tools/get_flops.py:8-12, 68-80): a FLOP count is the
# same wherever the model sits
FLOP_TOOL = ("try:\n    from {counter}\nexcept ImportError:\n    raise ImportError('upgrade the counter')\n"
             "import torch\ndef inference(model, inputs):\n    if torch.cuda.is_available():\n        model.cuda()\n"
             "    return count(model, inputs=inputs)\n")


# a GPU-monitoring metric that imports NVML's bindings first (ignite 0.5.5 metrics/gpu_info.py:36-44)
GPU_INFO = ("import torch\nclass GpuInfo(Metric):\n    def __init__(self):\n        try:\n"
            "            from pynvml.smi import nvidia_smi\n        except ImportError:\n            {handler}\n"
            "        if not torch.cuda.is_available():\n            raise RuntimeError('This contrib module requires available GPU')\n")


class CudaApi(Rule):
    code = "ASC201"
    summary = "torch.cuda API use; says whether transfer_to_npu maps it or it needs a manual rewrite"
    node_types = (ast.Name, ast.Attribute)
    names = "imported"
    trigger_words = ("cuda",)
    why = (
        "`torch.cuda` drives NVIDIA devices. `torch_npu.contrib.transfer_to_npu` redirects the names that "
        "`torch_npu.npu` also provides; every other name must be rewritten by hand. A file that imports "
        "transfer_to_npu is only told about the names it does not map; so is one that imports a library module "
        "importing it (MindSpeed's `mindspeed.megatron_adaptor`), or whose package `__init__` does either. Not "
        "reported where an NPU run skips the "
        "call without loss (a report, also the rest of a function after `if not torch.cuda.is_available(): return` "
        "when it only logs, an estimate left `None`, a CUDA reseed after `torch.manual_seed`, a "
        "CUDA-graph step marker, a CUDA synchronize right before or after a clock read whose wall time is only logged, a gate on the NVIDIA compute capability that picks no precision (kernels built for an "
        "SM version, which no NPU has) asked after a CUDA test or of a tensor's device, a CUDA case that only raises, "
        "a request for CUDA, or an object off the CPU, where CUDA is missing (the code's own answer for a machine "
        "without CUDA; for the object, one that raises nothing), a memory figure that only goes into a print, a log or text formatted with words, a "
        "local name (or one at the top of a program, a module nothing imports) holding the answer or a device built "
        "from it whose every read only prints, logs or formats it "
        "into a message, directly or through another local name only shown (a change of two logged memory "
        "figures), the default of a device parameter that every call of it passes, a model-complexity tool "
        "that imports a FLOP counter), "
        "where the function also chooses the NPU (a test for it, or `'npu'` as a value) or a flag holding the answer "
        "is only tested in such functions, in a CUDA implementation (a module importing cupy, pycuda or numba's "
        "CUDA target unconditionally: it needs another implementation, ASC206's finding), "
        "where a tensor's own `.is_cuda` (or a `self` flag the class sets true only under it) picks a CUDA path (a "
        "tensor on the NPU takes the other one), where the "
        "name is only a type (an annotation, a `Union[...]`), on the opt-in path of a package with no NPU build "
        "(xformers, bitsandbytes; the NVIDIA-only library of an optional feature: NVML's bindings, Horovod, Nunchaku, "
        "SonicMoE; also past a function's `try` import of it whose handler raises), under a CPU fallback in an offline converter, or in test code (`--lint-tests`). "
        "Inside a branch that only CUDA takes (`if torch.cuda.is_available():`, `if device.type == 'cuda':`) the "
        "finding on the test stands for the calls inside: it says the branch turns off on an NPU and names them, "
        "and `--fix` still rewrites each. So does ASC204's finding on a backend's comparison with NCCL (`if backend "
        "== 'nccl':`, its `elif`, the `else` of `!=`, and what is `and`-ed after it) for the calls of that branch, "
        "which an NPU run takes once the comparison says 'hccl'. The uses of one part of torch.cuda (streams and events, the random-number "
        "state, the device's properties) in one function are one port: later ones fold into the first as repeats."
    )
    example = "torch.cuda.set_device(local_rank)"
    use_instead = ("Call `torch_npu.npu.<name>` (or `torch.npu.<name>`), or import `torch_npu.contrib.transfer_to_npu` "
                   "first. `ascend-analyse --fix --select ASC2` rewrites the names the version's `torch_npu.npu` has and "
                   "adds `import torch_npu`.")
    source = "torch_npu wheel: torch_npu/npu/__init__.py __all__ and torch_npu/contrib/transfer_to_npu.py"
    fires = [
        # near misses of a wall time only logged: the clock read is returned (yolov5 7.0.14 utils/torch_utils.py
        # ``time_sync``), or kept beside the log line
        ("import time\nimport torch\ndef time_sync():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
         "    now = time.time()\n    return now\n", 4),
        ("import time\nimport torch\ndef evaluate(trainer, log, name, a):\n    trainer.eval()\n"
         "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    b = time.time()\n"
         "    log.info(f'Ran {name} eval in: {b - a} seconds')\n    return b - a\n", 5),
        # near misses of the NVIDIA-only library of an optional feature: an import whose handler goes on without
        # it, a distributed backend's class not named after Horovod
        (GPU_INFO.format(handler="nvidia_smi = None"), 8),
        ("import torch\nclass _NativeDistModel(ComputationModel):\n    def _create_from_backend(self, backend, **kwargs):\n"
         "        dist.init_process_group(backend)\n        if torch.cuda.is_available():\n"
         "            torch.cuda.set_device(self.get_local_rank())\n", 5),
        # near miss of a model-complexity tool: thop's ``profile`` also names general profilers (time, memory)
        (FLOP_TOOL.format(counter="thop import profile as count"), 7),
        # near miss of a device default no call relies on: the construction leaves the device out
        (CHOSEN_DEFAULT.format(passed=""), 4),
        # near misses of an early return before log lines: the rest also picks the device; the return hands a value
        # on
        (_VERSIONS_LOG.format(leave="return", after="    torch.cuda.set_device(0)\n"), 6),
        (_VERSIONS_LOG.format(leave="return 'cpu'", after="    return 'cuda'\n"), 6),
        # near misses: the return leaves a ``try`` whose function goes on to hand the device on (unsloth 2026.10.9
        # studio/backend/core/inference/diffusion_measured_peaks.py:648-656); the return leaves only a loop's pass
        ("import torch\ndef current_device_name():\n    try:\n        if not torch.cuda.is_available():\n"
         "            return None\n    except Exception:\n        return None\n    return device_name('cuda')\n", 4),
        ("import torch\ndef log_loop(xs):\n    for x in xs:\n        if not torch.cuda.is_available():\n"
         "            return\n    print(torch.cuda.get_device_name())\n", 4),
        # the uses of torch.cuda's streams in one function are one port (xtuner 0.2.0
        # _lite/patches/mixins/generate.py:72-85)
        ("import torch\ndef init_cuda_graph(self, input_ids):\n    s = torch.cuda.Stream()\n"
         "    s.wait_stream(torch.cuda.current_stream())\n    with torch.cuda.stream(s):\n"
         "        self.graph_logits = self.forward(input_ids)\n", 3),
        # near miss of a flag decided with an NPU case: a function that reads it has none
        ("import torch\nis_cuda_available = torch.cuda.is_available()\n\ndef get_device_name():\n"
         "    if is_cuda_available:\n        return 'cuda'\n    return 'cpu'\n\ndef get_device():\n"
         "    return 'npu' if is_npu_available else get_device_name()\n", 2),
        # near miss of the branch above: its work (DistributedDataParallel) runs on the NPU
        (_DATA_PARALLEL.format(wrap="torch.nn.parallel.DistributedDataParallel"), 3),
        # near misses of words: a device string kept in the name, a count given to the launcher, an entry keyed for
        # code
        (_MEMORY_LINE.format(value='f"cuda:{torch.cuda.current_device()}"'), 5),
        ("import os\nimport torch\ndef setup():\n    os.environ['LOCAL_WORLD_SIZE'] = str(torch.cuda.device_count())\n", 4),
        ("import torch\ndef setup():\n    return {'num_gpus': torch.cuda.device_count()}\n", 3),
        # near miss of an object off the CPU where CUDA is missing: the branch raises, as an NPU object would make it
        ("import torch\ndef load(metric):\n    if not torch.cuda.is_available() and metric.device.type != 'cpu':\n"
         "        raise RuntimeError('saved on a GPU')\n    return metric\n", 3),
        # near miss of a flag set only for CUDA inputs: the class also sets it from configuration
        (_CPU_CACHE.format(other="cfg.cpu_cache"), 5),
        ("import torch\ntorch.cuda.synchronize()\n", 2),
        ("from torch import cuda as c\nc.synchronize()\n", 2),
        ("import torch\ng = torch.cuda.CUDAGraph()\n", 2),
        # transfer_to_npu maps no torch.cuda.nvtx (torch_npu.npu has none)
        ("import torch\nimport torch_npu.contrib.transfer_to_npu\ntorch.cuda.nvtx.range_push('step')\n", 3),
        # a CUDA case with no NPU case next to it
        ("import torch\n\ndef sync(device):\n    if device.type == 'cuda':\n        torch.cuda.synchronize()\n"
         "    elif device.type == 'mps':\n        torch.mps.synchronize()\n", 5),
        # a guard that decides the training path: the NPU run takes the other one (litgpt 0.5.13 utils.py:375)
        ("import torch\nif torch.cuda.is_available():\n"
         "    precision = 'bf16-mixed'\nelse:\n    precision = '32-true'\nfabric = L.Fabric(precision=precision)\n", 2),
        ("import torch\nif torch.cuda.is_available():\n    scaler = torch.amp.GradScaler('cuda')\n", 2),
        # near miss of timm's APEX path below: a string that names no CUDA-only package
        (_APEX_OPTIMIZERS.format(prefix="torch.optim."), 5),
        # near misses of the branches an NPU run may skip: an estimate with a real default (not None), a CUDA
        # reseed without torch.manual_seed, a requirement that raises where CUDA is missing, the path that runs
        # when the CUDA-only package is not used
        ("import torch\nbatch = 8\nif torch.cuda.is_available():\n    batch = 2 * batch\nrun(batch)\n", 3),
        ("import torch\ndef seed_all(seed, device):\n    if device.type == 'cuda':\n"
         "        torch.cuda.manual_seed(seed)\n", 4),
        # near miss of an unmet CUDA request: CUDA present, not missing, decides the branch
        ("import torch\ndef load(self):\n    device = torch.device(self.device_name)\n"
         "    if device.type == 'cuda' and torch.cuda.is_available():\n        torch.cuda.set_device(device)\n", 4),
        # near miss of the enum-typed switch: no NPU case beside it
        ("import torch\ndef set_rng_state(state, device_type):\n    if device_type == DeviceType.CUDA:\n"
         "        torch.cuda.set_rng_state_all(state)\n    elif device_type == DeviceType.XPU:\n"
         "        torch.xpu.set_rng_state_all(state)\n", 4),
        ("import random\nimport torch\ndef seed_all(seed):\n    random.seed(seed)\n    torch.cuda.manual_seed_all(seed)\n",
         5),
        ("import torch\ndef check():\n    if not torch.cuda.is_available():\n        raise ValueError('no GPU')\n", 3),
        # near miss of a flag switched off that only gates a report: it also decides the precision
        (_FLAG_OFF.format(use="self.model.half()"), 5),
        ("import torch\ndef attn(use_xformers):\n    if use_xformers:\n        pass\n    else:\n"
         "        torch.cuda.synchronize()\n", 6),
        # near miss of a diagnostic: a function named for a setup, not a check
        ("import torch\ndef setup(fabric, devices):\n    if torch.cuda.is_available() and devices > 1:\n"
         "        setup_nvlink(fabric)\n    fabric.launch()\n", 3),
        # near misses of a value only reported, a tensor's dispatch and a type: the statistic kept for later use,
        # a self.is_cuda flag set from the configuration (timm 1.0.31 data/loader.py:127-135), a runtime type check
        ("import torch\ndef peak():\n    used = torch.cuda.max_memory_allocated()\n    return used\n", 3),
        # near miss of a figure shown through another name: that name is also returned
        (_PROFILED.format(end="    return change\n"), 3),
        # near miss of a name at the top of a program only shown: a function of the module also reads it
        ("import torch\nnum_gpus = torch.cuda.device_count()\nprint(' > Number of GPUs: ', num_gpus)\n"
         "def main():\n    return Trainer(num_gpus=num_gpus)\n", 2),
        ("import torch\nclass Prefetcher:\n    def __iter__(self):\n        if self.is_cuda:\n"
         "            stream = torch.cuda.Stream()\n", 5),
        ("import torch\ndef check(x):\n    return isinstance(x, torch.cuda.FloatTensor)\n", 3),
        # near misses of an NPU case: another accelerator's question, an NPU question and-ed with more
        ("import torch\ndef sync():\n    if is_torch_xpu_available():\n        torch.xpu.synchronize()\n    else:\n"
         "        torch.cuda.synchronize()\n", 6),
        ("import torch\ndef sync(fast):\n    if is_torch_npu_available() and fast:\n        pass\n    else:\n"
         "        torch.cuda.synchronize()\n", 6),
        # the calls of a CUDA-only branch whose test has no finding of its own (a flag)
        ("import torch\ndef setup(use_gpu, rank):\n    if use_gpu:\n        torch.cuda.set_device(rank)\n", 4),
        # near miss of a local alias of print: one of its bindings is not a report
        ("import torch\ndef start(fabric=None):\n    if fabric is not None:\n        run = fabric.print\n"
         "    else:\n        run = launch\n    if torch.cuda.is_available():\n        run('GPU')\n", 7),
        # near misses of a name only shown: the device printed and also used, the flag printed and also tested
        ("import torch\ndef main(model):\n    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
         "    print(f'Device: {device}')\n    model.to(device)\n", 3),
        ("import torch\ndef main(model):\n    cuda = torch.cuda.is_available()\n    print('CUDA:', cuda)\n"
         "    if cuda:\n        model.half()\n", 3),
        # near misses of a device-string dispatch and of CUDA library switches: no NPU case beside the CUDA one;
        # a branch that also decides the precision
        ("import torch\ndef set_device(device):\n    if device.startswith('cuda:'):\n"
         "        torch.cuda.set_device(device)\n", 4),
        ("import torch\ndef main(model):\n    if torch.cuda.is_available():\n"
         "        torch.backends.cudnn.benchmark = True\n        model.half()\n", 3),
        # near misses of an NVIDIA architecture gate: it decides a precision the NPU has; a capability only printed
        # is no gate (and no report either: it is kept)
        ("import torch\nuse_bf16 = torch.cuda.get_device_capability()[0] >= 8\n", 2),
        ("import torch\ndef dtype():\n    if torch.cuda.get_device_capability() >= (8, 0):\n"
         "        return torch.bfloat16\n    return torch.float32\n", 3),
        ("import torch\ncapability = torch.cuda.get_device_capability()\n", 2),
        # near miss of a protected gate: asked bare, it raises on a machine without CUDA
        ("import torch\nif torch.cuda.get_device_capability()[0] >= 9:\n    use_fp8_kernels = True\n", 2),
        # near miss of an export failure only logged: the handler changes what runs next
        (_PROFILER_DUMP.format(handler="prof = None"), 3),
        # near miss of a CUDA implementation: cupy imported under a try keeps a fallback that runs
        ("import torch\ntry:\n    import cupy as cp\nexcept ImportError:\n    cp = None\n"
         "def flush():\n    torch.cuda.synchronize()\n", 7),
        # near miss of a statistic formatted into text: no words, a value kept
        ("import torch\ndef mem():\n    return '{:.3f}'.format(torch.cuda.memory_allocated() / 2**30)\n", 3),
    ]
    passes = [
        CHOSEN_DEFAULT.format(passed=", device=params.device"),
        FLOP_TOOL.format(counter="mmengine.analysis import get_model_complexity_info as count"),
        # a debugging switch under a flag that is False on an NPU (audiocraft 1.3.0 solvers/magnet.py:174-182)
        "import torch\ndef run_step(self, idx, batch):\n    check_synchronization_points = idx == 1 and self.device == 'cuda'\n"
        "    if check_synchronization_points:\n        torch.cuda.set_sync_debug_mode('warn')\n    return self.model(batch)\n",
        # a test that keeps the NPU out of a branch whose work it does not support (ignite 0.5.5
        # distributed/auto.py:231-233); DataParallel has its own ASC101
        _DATA_PARALLEL.format(wrap="torch.nn.parallel.DataParallel"),
        # figures that only become words: a message kept in a name for the log line, an entry of a system report
        # labelled for a person (ignite 0.5.5 handlers/fbresearch_logger.py:153-155, stable-baselines3 2.9.2
        # common/utils.py:615)
        _MEMORY_LINE.format(value='f"GPU Max Mem: {torch.cuda.max_memory_allocated() / MB:.0f} MB"'),
        # an early return without CUDA, then only log lines (oumi 0.9 utils/torch_utils.py:78-93)
        _VERSIONS_LOG.format(leave="return", after=""),
        "import torch\ndef log_it(path):\n    with open(path) as f:\n        if not torch.cuda.is_available():\n"
        "            return\n        print(torch.cuda.get_device_name(), file=f)\n    print('done')\n",
        "import torch\ndef get_system_info():\n    env_info = {'PyTorch': torch.__version__, "
        "'GPU Enabled': str(torch.cuda.is_available())}\n    return env_info\n",
        "class A:\n    def __init__(self):\n        self.cuda = False\n",
        # a report switched off without CUDA: the flag only gates the report (torchtune 0.6.1 recipes)
        _FLAG_OFF.format(use="log.info(torch.cuda.max_memory_allocated())"),
        # timm 1.0.31 optim/_optim_factory.py:206: the requirement of an opt-in CUDA-only package (ASC206's finding)
        _APEX_OPTIMIZERS.format(prefix="apex."),
        "from numba import cuda\n@cuda.jit\ndef k(a):\n    pass\n",
        "import torch\nx = torch.zeros(1)\n",
        # migrated: transfer_to_npu maps these (any import form)
        "import torch\nfrom torch_npu.contrib import transfer_to_npu\ntorch.cuda.synchronize()\n",
        "import torch\nimport torch_npu.contrib.transfer_to_npu  # noqa: F401\ng = torch.cuda.CUDAGraph()\n",
        "from torch_npu.contrib.transfer_to_npu import *\nimport torch\ntorch.cuda.random.manual_seed(0)\n",
        # the CUDA case of code that also has an NPU case (timm 1.0.31 utils/distributed.py:161-164, loader.py:127)
        DISPATCHES_PER_DEVICE,
        # an optional report the NPU run skips (litgpt 0.5.13 utils.py:860-863, api.py:612-615)
        OPTIONAL_REPORT,
        # a diagnostic only CUDA runs (litgpt 0.5.13 finetune/adapter.py:145)
        "import torch\ndef setup(fabric, devices):\n    if torch.cuda.is_available() and devices > 1:\n"
        "        check_nvlink_connectivity(fabric)\n    fabric.launch()\n",
        "import torch\nif torch.cuda.is_available():\n    name = torch.cuda.get_device_name(0)\n"
        "    logger.info(f'running on {name}')\n",
        # an estimate that stays unknown (None) on an NPU (litgpt 0.5.13 utils.py:1102-1110)
        "import torch\ndef estimate(total_gb):\n    available = None\n    fits = None\n"
        "    if torch.cuda.is_available():\n        try:\n"
        "            available = torch.cuda.get_device_properties(0).total_memory / 2**30\n"
        "            fits = total_gb < available\n        except Exception:\n            pass\n"
        "    return {'available': available, 'fits': fits}\n",
        # a CUDA reseed after torch.manual_seed, which seeds the NPU too (diffusers 0.42.1 pipeline_glm_image.py:435)
        "import torch\ndef seed(generator, device):\n    seed = generator.initial_seed()\n    torch.manual_seed(seed)\n"
        "    if device is not None and device.type == 'cuda':\n        torch.cuda.manual_seed(seed)\n",
        # a CUDA case of an enum-typed device switch with its NPU case (llamafactory 0.9.5 v1/core/utils/checkpoint.py:108)
        "import torch\ndef set_rng_state(state, device_type):\n    if device_type == DeviceType.CUDA:\n"
        "        torch.cuda.set_rng_state_all(state)\n    elif device_type == DeviceType.NPU:\n"
        "        torch.npu.set_rng_state_all(state)\n",
        # a library's CUDA question beside its NPU question (llamafactory 0.9.5 extras/env.py:51)
        "import torch\nfrom transformers.utils import is_torch_cuda_available, is_torch_npu_available\ndef info():\n"
        "    info = {}\n    if is_torch_cuda_available():\n        info['GPU type'] = torch.cuda.get_device_name()\n"
        "    if is_torch_npu_available():\n        info['NPU type'] = torch.npu.get_device_name()\n    return info\n",
        # a CUDA request where CUDA is missing, answered with the CPU (funasr 1.4.16
        # moss_transcribe_diarize/model.py:380)
        "import torch\ndef load(self):\n    device = torch.device(self.device_name)\n"
        "    if device.type == 'cuda' and not torch.cuda.is_available():\n        device = torch.device('cpu')\n"
        "    self.model.to(device)\n",
        # an object off the CPU where CUDA is missing, rebuilt on the host (chemprop 2.2.1 models/model.py:250-257)
        "import torch\ndef load_submodules(cls, hparams):\n    hparams['metrics'] = [\n        cls._rebuild_metric(metric)\n"
        "        if not hasattr(metric, '_defaults')\n        or (not torch.cuda.is_available() and metric.device.type != 'cpu')\n"
        "        else metric\n        for metric in hparams['metrics']\n    ]\n",
        # a missing CUDA only warned about (espnet 202511 espnet/mt/pytorch_backend/mt.py:97); near miss: the check
        # that raises, above
        "import logging\nimport torch\ndef train(args):\n    if not torch.cuda.is_available():\n"
        "        logging.warning('cuda is not available')\n    model = build(args)\n",
        # the same reseed outside a branch (llamafactory 0.9.5 v1/utils/helper.py:34)
        "import torch\ndef enable_full_determinism(seed):\n    torch.manual_seed(seed)\n    torch.cuda.manual_seed(seed)\n"
        "    torch.cuda.manual_seed_all(seed)\n",
        # a CUDA-graph step marker (diffusers 0.42.1 pipeline_pag_controlnet_sd.py:1236-1241)
        "import torch\nfor t in steps:\n    if torch.cuda.is_available() and compiled:\n"
        "        torch._inductor.cudagraph_mark_step_begin()\n    step(t)\n",
        # the opt-in path of a package with no NPU build (diffusers 0.42.1 models/attention.py:221-230)
        "import torch\ndef set_xformers(use_memory_efficient_attention_xformers):\n"
        "    if use_memory_efficient_attention_xformers:\n        if not is_xformers_available():\n"
        "            raise ModuleNotFoundError('xformers')\n        elif not torch.cuda.is_available():\n"
        "            raise ValueError('xformers needs a GPU')\n",
        "import torch\nclass BnB8BitQuantizer:\n    def update_device_map(self, device_map):\n"
        "        return device_map or {'': torch.cuda.current_device()}\n",
        # the NVIDIA-only library of an optional feature: a GPU-monitoring metric past its import of NVML's
        # bindings (ignite 0.5.5 metrics/gpu_info.py:36-44), Horovod's backend (ignite 0.5.5
        # distributed/comp_models/horovod.py:79-87), a Nunchaku quantizer (diffusers 0.42.1
        # quantizers/nunchaku/nunchaku_quantizer.py:18-32)
        GPU_INFO.format(handler="raise ModuleNotFoundError('This contrib module requires pynvml to be installed.')"),
        "import torch\nclass _HorovodDistModel(ComputationModel):\n    def _create_from_backend(self, backend, **kwargs):\n"
        "        hvd.init(comm=kwargs.get('comm', None))\n        self._setup_attrs()\n        if torch.cuda.is_available():\n"
        "            torch.cuda.set_device(self.get_local_rank())\n",
        "import torch\nclass NunchakuLiteQuantizer(DiffusersQuantizer):\n    def validate_environment(self, *args, **kwargs):\n"
        "        cuda_available = torch.cuda.is_available()\n        if not cuda_available:\n"
        "            raise ValueError('Loading Nunchaku checkpoints requires a CUDA-capable NVIDIA GPU.')\n",
        # a memory figure that only goes into a print (litgpt 0.5.13 generate/sequentially.py:287)
        "import sys\nimport torch\ndef main():\n"
        "    print(f'Memory used: {torch.cuda.max_memory_allocated() / 1e9:.02f} GB', file=sys.stderr)\n",
        # a vendor diagnostic that only prints, through a local alias of print (litgpt 0.5.13 utils.py:719-744)
        "import torch\ndef check_nvlink_connectivity(fabric=None):\n    if fabric is not None:\n"
        "        custom_print = fabric.print\n    else:\n        custom_print = print\n    try:\n"
        "        if torch.cuda.is_available():\n            device_properties = torch.cuda.get_device_properties(0)\n"
        "            gpu_name = device_properties.name.lower()\n            if 'nvidia' in gpu_name:\n"
        "                _check_nvidia_connectivity(custom_print)\n            else:\n"
        "                custom_print(f'Unrecognized GPU vendor: {device_properties.name}')\n        else:\n"
        "            custom_print('No GPUs available')\n    except Exception as e:\n"
        "        custom_print(f'An error occurred while checking GPU connectivity: {e}')\n",
        # a local name whose every read only shows it: printed (litgpt 0.5.13 api.py:703-704), formatted into the
        # text of an environment report (diffusers 0.42.1 commands/env.py:80, 164), logged itself and through a
        # difference that is only logged (ms-swift 4.4.0 rlhf_trainers/utils.py:424-458)
        "import torch\ndef benchmark_dict_to_markdown_table():\n"
        "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n    print(f'Device: {device}\\n')\n",
        "import torch\ndef run(pt_version):\n    pt_cuda_available = 'NA'\n    if is_torch_available():\n"
        "        pt_cuda_available = torch.cuda.is_available()\n"
        "    info = {'PyTorch version (GPU?)': f'{pt_version} ({pt_cuda_available})'}\n    print(info)\n    return info\n",
        _PROFILED.format(end=""),
        # a name at the top of a program that only a print reads (coqui-tts 0.27.2 bin/train_encoder.py:37-39)
        "import torch\nnum_gpus = torch.cuda.device_count()\nprint(' > Number of GPUs: ', num_gpus)\n",
        # a flag set only for CUDA inputs (mmagic 1.2.0 basicvsr_plusplus_net.py:277-279, 299-302)
        _CPU_CACHE.format(other="False"),
        # the same with the CUDA question first (mmseg 1.2.2 models/losses/focal_loss.py:272)
        "import torch\ndef loss(pred, target):\n    if torch.cuda.is_available() and pred.is_cuda:\n"
        "        return cuda_focal_loss(pred, target)\n    return py_focal_loss(pred, target)\n",
        # a tensor's own device picks the CUDA kernel; on the NPU it takes the other path (diffusers 0.42.1
        # quantizers/bfl/utils.py:176-193)
        "import torch\ndef forward(self, inputs):\n    if inputs.is_cuda and torch.cuda.get_device_capability("
        "inputs.device) >= (8, 9):\n        return fp8_linear(inputs)\n    return reference_linear(inputs)\n",
        # only a type (mmpose 1.3.2 structures/multilevel_pixel_data.py:10-12)
        "from typing import Union\nimport torch\nIndexType = Union[str, slice, torch.cuda.LongTensor, "
        "torch.cuda.BoolTensor]\n",
        "import torch\ndef to_mask(x: torch.cuda.BoolTensor) -> torch.cuda.BoolTensor:\n    return x\n",
        # the code's own NPU case comes first; the NPU never reaches the CUDA one (diffusers 0.42.1
        # training_utils.py:75-78)
        "import torch\ndef set_seed(seed):\n    torch.manual_seed(seed)\n    if is_torch_npu_available():\n"
        "        torch.npu.manual_seed_all(seed)\n    else:\n        torch.cuda.manual_seed_all(seed)\n",
        "import torch\ndef sync():\n    if hasattr(torch, 'npu') and torch.npu.is_available():\n        torch.npu.synchronize()\n"
        "    elif torch.cuda.is_available():\n        torch.cuda.synchronize()\n",
        # a CUDA case first and the NPU case next to it (trl/transformers style per-device dispatch)
        "import torch\ndef free_memory():\n    if torch.cuda.is_available():\n        torch.cuda.empty_cache()\n"
        "    elif is_torch_npu_available():\n        torch.npu.empty_cache()\n",
        # a device string dispatched by its prefix, with an NPU case (open_clip 3.2.0 distributed.py:48-51)
        "import torch\ndef set_device(device):\n    if device.startswith('cuda:'):\n        torch.cuda.set_device(device)\n"
        "    elif device.startswith('npu:'):\n        torch.npu.set_device(device)\n",
        # a branch that only sets cuBLAS / cuDNN switches, which reach no NPU kernel (open_clip 3.2.0 main.py:74-80;
        # the TF32 switch is ASC608's)
        "import torch\ndef main(args):\n    if torch.cuda.is_available():\n"
        "        torch.backends.cuda.matmul.allow_tf32 = True\n        torch.backends.cudnn.benchmark = True\n"
        "        torch.backends.cudnn.deterministic = False\n",
        # an NVIDIA architecture gate: kernels for an SM version (flex attention from SM 7.5, torchtune 0.6.1
        # utils/_import_guard.py:13; diffusers 0.42.1 attention_dispatch.py:478), the NPU takes the portable path
        "import torch\n_SUPPORTS_FLEX_ATTENTION = (\n    torch.cuda.is_available() and torch.cuda.get_device_capability() "
        ">= (7, 5)\n)\n",
        "import torch\ndef check(query, major, minor):\n    if torch.cuda.get_device_capability(query.device) < (major, minor):\n"
        "        raise ValueError('needs a newer GPU')\n",
        # the profiler's CUDA memory timeline and snapshot, an export failure only logged (torchtune 0.6.1
        # training/_profiler.py:115-125)
        _PROFILER_DUMP.format(handler="log.warning(f'Failed to export memory timeline: {e}')"),
        # a flag read only by tests of functions with an NPU case (xtuner 0.2.0 utils/device.py:23-40), and an NPU
        # device chosen in the CUDA test's else (xtuner 0.2.0 _lite/device.py:5-13)
        "import torch\nis_cuda_available = torch.cuda.is_available()\n\ndef get_device_name():\n"
        "    if is_cuda_available:\n        device = 'cuda'\n    elif is_npu_available:\n        device = 'npu'\n"
        "    else:\n        device = 'cpu'\n    return device\n",
        "import torch\ndef get_device():\n    device = None\n    if torch.cuda.is_available():\n        device = 'cuda'\n"
        "    else:\n        try:\n            import torch_npu\n            device = 'npu'\n        except ImportError:\n"
        "            pass\n    return device\n",
        # an NPU case beside the CUDA one, in a flag (torchtune 0.6.1 training/precision.py:63-71)
        "import torch\ndef verify_bf16_support():\n    cuda_support = torch.cuda.is_available() and "
        "torch.cuda.is_bf16_supported()\n    npu_support = is_npu_available and torch.npu.is_bf16_supported()\n"
        "    return cuda_support or npu_support\n",
        # a CUDA implementation: a module written in numba's CUDA target (nemo 2.5.0
        # collections/asr/parts/numba/rnnt_loss/rnnt.py:32, 409) or on cupy buffers (verl 0.9.1
        # checkpoint_engine/nixl_checkpoint_engine.py:24-25, 400)
        "import torch\nfrom numba import cuda\ndef rnnt_loss_gpu(acts):\n"
        "    stream = cuda.external_stream(torch.cuda.current_stream(acts.device).cuda_stream)\n",
        "import torch\nfrom unittest.mock import patch\nwith patch('importlib.metadata.distributions', return_value=[]):\n"
        "    import cupy as cp\ndef fill(self):\n    torch.cuda.synchronize()\n",
        # a CUDA synchronize that only makes a logged wall time exact (llm-foundry 0.22.0 command_utils/eval.py:166-178)
        _TIMED_EVAL.format(use="    log.info(f'Ran {name} eval in: {b - a} seconds')"),
        # statistics formatted into words for the log (funasr 1.4.16 train_utils/trainer.py:714-722)
        "import torch\ndef log(self):\n    gpu_info = ('GPU, memory: usage: {:.3f} GB, peak: {:.3f} GB'.format(\n"
        "        torch.cuda.memory_allocated() / 1024 ** 3, torch.cuda.max_memory_allocated() / 1024 ** 3))\n"
        "    text = 'reserved: %.1f GB' % (torch.cuda.memory_reserved() / 2**30)\n    return gpu_info, text\n",
    ]

    def check(self, node, ctx) -> None:
        qualname = ctx.chain(node)
        if not qualname or not qualname.startswith("torch.cuda.") or qualname.startswith("torch.cuda.amp"):
            return
        guard = cuda_branch_test(node, ctx)
        if quiet(ctx, qualname) or ((guard is not None or in_cuda_test(node, ctx)) and has_npu_branch(ctx)) or \
                optional_cuda_branch(node, ctx) or on_cuda_package_path(node, ctx) or offline_cpu_fallback(node, ctx) or \
                disables_a_report(node, ctx) or architecture_gate(node, ctx) or keeps_unsupported_out(node, ctx) or \
                decided_with_npu_case(node, ctx):
            return
        if tensor_dispatch(guard) or in_tensor_dispatch_test(node, ctx) or tensor_dispatched_flag(node, ctx) or \
                only_reported(node, qualname, ctx) or names_a_type(node, ctx) or npu_skips(node, ctx) or \
                redundant_reseed(node, qualname, ctx) or unmet_cuda_request(node, ctx) or \
                in_unused_default(node, ctx) or counts_flops(ctx) or cuda_implementation(ctx):
            return
        name = qualname.split(".")[2]
        data = ctx.data
        if not data.npu_all:
            how = f"no torch_npu.npu data for torch_npu {data.version}: check it by hand"
        elif name in data.npu_all:
            how = f"transfer_to_npu maps it to torch_npu.npu.{name}"
        else:
            how = f"torch_npu.npu has no {name} in torch_npu {data.version}: rewrite by hand"
        branch = guarded_branch(node, ctx) if qualname == "torch.cuda.is_available" else None
        if branch is not None:  # the test decides the training path
            how = f"{how}; without it {turns_off(branch)}"
        rewrite = None if qualname == "torch.cuda.is_available" and _kept_as_cuda_flag(ctx) else name_fix(qualname, ctx)
        ctx.report(node, self.code, f"{qualname} is a CUDA API ({how})", api=qualname, tips=how, rewrite=rewrite,
                   guard=guard or nccl_branch_test(node, ctx), family=CUDA_FAMILIES.get(name, ""))


# torch.cuda names by the part of torch.cuda they belong to (torch 2.13.0: torch/cuda/streams.py with the stream
# functions of torch/cuda/__init__.py, torch/cuda/random.py; tests/test_cuda_families.py checks them against torch):
# the uses of one part in one function are one port (xtuner 0.2.0 _lite/patches/mixins/generate.py:72-85, a stream,
# the current stream and ``with torch.cuda.stream(s)``), folded into the first finding as a repeat. So are the
# questions about the device's properties, which torch/cuda/__init__.py answers from one
# ``get_device_properties(device)`` (``get_device_capability`` returns its major and minor, ``get_device_name`` its
# name): instructlab-training 0.16.2 instructlab/training/model.py:464 and :468 ask the capability and the
# properties in one flash-attention gate. Not torch/cuda/memory.py: a statistic there is a report, ``empty_cache``
# an action (yolov5 7.0.14 utils/torch_utils.py:190 and :198, the second judged right on its own)
CUDA_FAMILIES = {
    **dict.fromkeys(("Stream", "ExternalStream", "Event", "StreamContext", "current_stream", "default_stream",
                     "set_stream", "stream"), "streams"),
    **dict.fromkeys(("get_device_properties", "get_device_capability", "get_device_name"), "properties"),
    **dict.fromkeys(("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
                     "get_rng_state_all", "set_rng_state", "set_rng_state_all"), "random"),
}


def _kept_as_cuda_flag(ctx) -> bool:
    """``cuda = torch.cuda.is_available() and ...``, ``use_cuda=torch.cuda.is_available()``: the answer is kept as
    a CUDA flag, which code uses to pick CUDA-only libraries (yolov5 7.0.14 export.py:194 installs onnxruntime-gpu
    on it), so it stays a question about CUDA: no rewrite."""
    for holder in reversed(ctx.stack):
        if isinstance(holder, ast.keyword):
            return "cuda" in (holder.arg or "").lower()
        if isinstance(holder, (ast.Assign, ast.AnnAssign)):
            targets = assign_targets(holder)
            return any("cuda" in last_name(target).lower() for target in targets)
        if isinstance(holder, (ast.stmt, ast.Lambda)):
            return False
    return False

