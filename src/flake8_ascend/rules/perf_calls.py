"""ASC507, ASC508, ASC511, ASC512, ASC515: debugging switches, data types and layers that slow NPU training."""
from __future__ import annotations

import ast

from ..calls import argument, callee, env_settings, is_constant, last_names
from ..detect.device_dispatch import npu_skips
from ..registry import Rule
from ._sources import ADVICE_TABLE, ADVISOR_RULES, OFFICIAL_ADVICE
from ..walk import walk_tree

_SET_ANOMALY = frozenset({"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"})
_DETECT_ANOMALY = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})
_DOUBLE_DTYPES = {
    "torch.float64": "torch.float64", "torch.double": "torch.float64",
    "torch.complex128": "torch.complex128", "torch.cdouble": "torch.complex128",
}
_DOUBLE_TENSORS = frozenset({"torch.DoubleTensor", "torch.cuda.DoubleTensor"})
_ANOMALY_LASTS = last_names(*_SET_ANOMALY, *_DETECT_ANOMALY)
_DOUBLE_LASTS = last_names(*_DOUBLE_DTYPES, *_DOUBLE_TENSORS)
_SYNCBN = ("torch.nn.SyncBatchNorm", "torch.nn.SyncBatchNorm.convert_sync_batchnorm")


class AnomalyDetectionOn(Rule):
    code = "ASC507"
    summary = "autograd anomaly detection switched on (set_detect_anomaly(True), detect_anomaly())"
    node_types = (ast.Call,)
    trigger_words = ("anomaly",)
    why = (
        "Anomaly detection records a Python traceback for every forward op and checks every backward "
        "result for NaN, which forces a host synchronisation per op. It is a debugging aid; left on, it "
        "slows training many times over. Fires on `set_detect_anomaly(True)` and on `detect_anomaly()`; "
        "a flag (`set_detect_anomaly(args.debug)`) or `False` does not fire."
    )
    example = "torch.autograd.set_detect_anomaly(True)"
    use_instead = "Delete it, or tie it to a debug flag: `torch.autograd.set_detect_anomaly(args.debug)`."
    source = f"{OFFICIAL_ADVICE} api_performance_dict; {ADVICE_TABLE}"
    fires = [
        ("import torch\ntorch.autograd.set_detect_anomaly(True)\n", 2),
        ("from torch.autograd import detect_anomaly\nwith detect_anomaly():\n    loss.backward()\n", 2),
        ("import torch\ntorch.autograd.set_detect_anomaly(mode=True, check_nan=True)\n", 2),
    ]
    passes = [
        "import torch\ntorch.autograd.set_detect_anomaly(False)\n",
        "import torch\ntorch.autograd.set_detect_anomaly(args.debug)\n",
        "def set_detect_anomaly(flag):\n    pass\nset_detect_anomaly(True)\n",
    ]

    def check(self, node, ctx) -> None:
        qualname = callee(node, ctx, _ANOMALY_LASTS)
        if qualname in _DETECT_ANOMALY or (qualname in _SET_ANOMALY and is_constant(argument(node, "mode", 0), True)):
            ctx.report(node, self.code, f"{qualname} keeps autograd anomaly detection on: every op records a "
                       "traceback and backward syncs to check for NaN (remove it outside debugging) "
                       "[debug mode left on]", api=qualname, tips="remove anomaly detection for training runs")


_IDEOGRAM = (
    "import torch\n\ndef _logit_normal_sigmas(num_inference_steps, mu, std, device=None):\n"
    "    intervals = torch.linspace(0.0, 1.0, num_inference_steps + 1, dtype=torch.float64)\n"
    "    z = torch.special.ndtri(intervals)\n    t = 1.0 - torch.special.expit(mu + std * z)\n"
    "    sigmas = (1.0 - t).flip(0)\n    return {move}\n"
)
_APG = (
    "import torch\n\ndef normalized_guidance(pred_cond, diff, dim):\n    if {test}:\n"
    "        v0, v1 = diff.cpu().double(), pred_cond.cpu().double()\n    else:\n"
    "        v0, v1 = {other}\n    return torch.nn.functional.normalize(v1, dim=dim)\n"
)
_FLOW_MAP = (
    "import torch\n\ndef set_timesteps(num_inference_steps, device=None):\n"
    "    is_mps, is_npu = device.type == 'mps', device.type == 'npu'\n"
    "    working_sigmas = torch.linspace(1.0, 0.0, num_inference_steps + 1, dtype=torch.float64)[:-1]\n"
    "    out_dtype = torch.float32 if {test} else torch.float64\n"
    "    full_sigmas = torch.cat([working_sigmas, working_sigmas.new_zeros(1)])\n"
    "    return full_sigmas.to(device=device, dtype=out_dtype)\n"
)


_TO_HOST = frozenset(("cpu", "numpy", "tolist", "item"))


def _copied_to_host(node: ast.Call, ctx) -> bool:
    """``x.double().cpu().numpy()`` (whisper 20250625 timing.py:151): the float64 copy is made for the host, where
    the float64 work runs; nothing in float64 stays on the NPU."""
    parent = ctx.parent
    return isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in _TO_HOST


class DoublePrecisionTensor(Rule):
    code = "ASC508"
    summary = "float64 / complex128 tensors (.double(), dtype=torch.float64), which NPUs run on the AI CPU"
    node_types = (ast.Call, ast.Name, ast.Attribute)
    names = "imported"
    trigger_words = ("float64", "double", "complex128", "DoubleTensor")
    why = (
        "The NPU's AI cores compute in float32 and lower precision. Operators given float64 (or "
        "complex128) tensors fall back to AI CPU kernels, which are far slower and add transfers between "
        "the compute units; the msprof-analyze advisor reports them as AI CPU hot spots. "
        "`transfer_to_npu` even maps `DoubleTensor` to `FloatTensor`. Fires on `.double()`, on "
        "`torch.float64`/`torch.double`/`torch.complex128`/`torch.cdouble` passed to a call, and on "
        "`torch.DoubleTensor(...)`; comparisons like `x.dtype == torch.float64` do not fire, nor does a `.double()` "
        "copied straight to the host (`x.double().cpu().numpy()`)."
    )
    example = "x = torch.zeros(n, dtype=torch.float64)\ny = x.double()"
    use_instead = "Use float32 (`dtype=torch.float32`, `.float()`); keep float64 maths on the CPU, outside the NPU graph."
    source = (f"{ADVISOR_RULES}aicpu_rules.yaml; Ascend-mstt profiler/msprof_analyze/advisor/doc/Samples of AI CPU "
              "Operator Replacement.md; torch_npu/contrib/transfer_to_npu.py; "
              f"{ADVICE_TABLE}")
    fires = [
        ("import torch\nx = torch.zeros(3, dtype=torch.float64)\n", 2),
        ("import torch\ny = x.double()\n", 2),
        ("import torch\nx = x.to(torch.double)\n", 2),
        ("import torch\ntorch.set_default_dtype(torch.float64)\n", 2),
        ("import torch\nt = torch.DoubleTensor([1.0])\n", 2),
        ("import torch\ndef f(x):\n    w = torch.ones(3, dtype=torch.float64)\n    return (x * w).to(x.device)\n", 3),
        # near misses of the host schedules below: moved in float64; a dtype test that names only MPS; a helper
        # given the dtype and a device whose result is a tensor, not a dtype
        (_IDEOGRAM.format(move="sigmas[:-1].to(device=device)"), 4),
        (_FLOW_MAP.format(test="is_mps"), 5),
        # near miss of a float64 copy for the host: the float64 result is used on the device first
        ("import torch\ndef dtw(x):\n    return dtw_cpu((x.double() * 2).cpu().numpy())\n", 3),
        (_APG.format(test='diff.device.type == "mps"', other="diff.double(), pred_cond"), 7),
        ("import torch\nfrom .grids import make_grid\n\ndef f(pos):\n"
         "    grid = make_grid(torch.float64, pos.device)\n    return grid\n", 5),
    ]
    passes = [
        "import torch\nok = x.dtype == torch.float64\n",
        "import numpy as np\na = np.zeros(3, dtype=np.float64)\n",
        "import torch\nx = torch.zeros(3, dtype=torch.float32)\n",
        "y = x.double(2)\n",
        "import sympy\ndef f(p16):\n    return p16.double()\n",  # no torch in the file: not a tensor
        "import torch\nTYPES = {torch.float64: 'double'}\n",
        "import torch\ndef weights(sizes):\n    return torch.arange(len(sizes), dtype=torch.float64)\n",
        # converted on the CPU (timm 1.0.31 data/scheduled_sampler.py:143-148; a .cpu() copy)
        "import torch\ndef weights(sizes):\n    d = torch.arange(len(sizes)).abs()\n"
        "    return (d == d.min()).to(torch.float64)\n",
        "def f(output):\n    kept = output.cpu()\n    return kept.double()\n",
        # a float64 copy made for the host (whisper 20250625 timing.py:151)
        "import torch\ndef dtw(x):\n    return dtw_cpu(x.double().cpu().numpy())\n",
        # moved to the CPU by another method of the class
        "class Meter:\n    def update(self, pred):\n        self.preds = pred.detach().cpu()\n"
        "    def merge(self, pred):\n        self.preds = pred.detach().cpu().clone()\n    def value(self):\n"
        "        return self.preds.double().mean()\n",
        "import torch\ndef f(x):\n    t = torch.zeros(3, dtype=torch.float64, device='cpu')\n    return x.to('cuda') + 1\n",
        # diffusers adaptive_projected_guidance.py:242: the else of the NPU/MPS branch, which computes on the CPU
        _APG.format(test='diff.device.type in {"mps", "npu"}', other="diff.double(), pred_cond.double()"),
        # diffusers pipeline_ideogram4.py:88: a float64 schedule built on the CPU, converted where it is moved
        _IDEOGRAM.format(move="sigmas[:-1].to(dtype=torch.float32, device=device)"),
        # diffusers scheduling_flow_map_euler_discrete.py:177: moved with a dtype that is float32 on an NPU
        _FLOW_MAP.format(test="(is_mps or is_npu)"),
        # diffusers transformer_hidream_image.py:98: a helper picks the dtype for the device (float32 on npu)
        "import torch\nfrom ...utils.torch_utils import maybe_adjust_dtype_for_device\n\n"
        "def rope(pos: torch.Tensor, dim: int, theta: int) -> torch.Tensor:\n"
        "    dtype = maybe_adjust_dtype_for_device(torch.float64, pos.device)\n"
        "    scale = torch.arange(0, dim, 2, dtype=dtype, device=pos.device) / dim\n    return 1.0 / (theta**scale)\n",
    ]

    def check(self, node, ctx) -> None:
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "double" and not node.args and not node.keywords \
                    and ctx.chain(func) is None and not ctx.values.host_side(func.value) \
                    and not (ctx.values.on_host(func.value) and _converted_when_placed(node, ctx)) \
                    and not _copied_to_host(node, ctx) \
                    and (ctx.values.imports_torch() or ctx.values.is_tensor(func.value)):
                self._report(node, ctx, "torch.Tensor.double", ".double()")
            return
        if isinstance(node, ast.Attribute) and node.attr not in _DOUBLE_LASTS:
            return  # a bare name may be an alias (``from torch import float64 as f8``): resolved below
        qualname = ctx.chain(node)
        if qualname in _DOUBLE_TENSORS:
            if isinstance(ctx.parent, ast.Call) and ctx.parent.func is node:
                self._report(node, ctx, qualname, qualname)
            return
        dtype = _DOUBLE_DTYPES.get(qualname or "")
        parent = ctx.parent
        if dtype and (isinstance(parent, ast.keyword) or (isinstance(parent, ast.Call) and node in parent.args)):
            call = ctx.stack[-2] if isinstance(parent, ast.keyword) and len(ctx.stack) > 1 else parent
            if isinstance(call, ast.Call) and (ctx.values.host_only(call) or (
                    isinstance(call.func, ast.Attribute) and call.func.attr in ("to", "type")
                    and ctx.values.host_side(call.func.value))):
                return  # a CPU table (timm scheduled_sampler.py:143, 148): the NPU never sees it
            if isinstance(call, ast.Call) and (_chosen_per_device(call, ctx) and _gives_dtype(call, ctx) or (
                    ctx.values.on_host(call) and _converted_when_placed(call, ctx))):
                return
            self._report(node, ctx, dtype, qualname)

    def _report(self, node, ctx, api, spelling) -> None:
        if npu_skips(node, ctx):
            return  # the else of a test that is True on an NPU, whose own branch avoids float64
        ctx.report(node, self.code, f"{spelling} makes double-precision tensors, which NPU operators run on the "
                   "slow AI CPU (use float32) [float64/complex128 on NPU]", api=api, tips="use float32")


_NPU_NAMES = ("npu",)


def _names_npu(test: ast.AST) -> bool:
    """A test that asks whether the device is an NPU: ``is_npu``, ``device.type == "npu"``,
    ``device.type in ("mps", "npu")``, ``is_mps or is_npu``; not a negated one (``is_mps`` alone is not)."""
    for node in walk_tree(test):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) or isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot)) for op in node.ops):
            return False
    for node in walk_tree(test):
        text = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else \
            node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
        if any(word in text.lower().split("_") or text.lower() == word for word in _NPU_NAMES):
            return True
    return False


def _device_argument(arg: ast.AST) -> bool:
    """``device``, ``x.device``, ``torch.device(...)``: an argument that names a device."""
    if isinstance(arg, ast.Name):
        return arg.id == "device" or arg.id.endswith("_device")
    if isinstance(arg, ast.Attribute):
        return arg.attr == "device"
    return isinstance(arg, ast.Call) and getattr(arg.func, "attr", getattr(arg.func, "id", "")) == "device"


def _chosen_per_device(call: ast.Call, ctx) -> bool:
    """``maybe_adjust_dtype_for_device(torch.float64, x.device)`` (diffusers utils/torch_utils.py, which returns
    float32 on "mps"/"npu"): a helper outside torch given the dtype together with a device picks the dtype per
    device; the float64 is a request, not what the NPU gets."""
    qualname = ctx.qualname(call.func) or ""
    if qualname.startswith("torch.") or isinstance(call.func, ast.Attribute) and qualname == "":
        return False  # a torch API, or a method (``x.to(torch.float64, device)`` moves x)
    return any(_device_argument(a) for a in list(call.args) + [k.value for k in call.keywords])


def _gives_dtype(call: ast.Call, ctx) -> bool:
    """The call's result is a dtype: bound to a name like ``freqs_dtype`` or passed as ``dtype=``."""
    stack = ctx.stack
    parent = stack[stack.index(call) - 1] if call in stack and stack.index(call) > 0 else None
    if isinstance(parent, ast.keyword):
        return parent.arg == "dtype"
    return isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name) \
        and parent.targets[0].id.endswith("dtype")


def _double_on_npu(dtype, owner, ctx, depth: int = 0) -> bool:
    """Could the dtype expression a placement converts to be float64 on an NPU?  Unknown dtypes could."""
    if isinstance(dtype, str):
        return dtype in _DOUBLE_DTYPES
    if depth > 4:
        return True
    if isinstance(dtype, ast.Name):
        resolved = ctx.model.flow(owner).resolve(dtype)
        return resolved is dtype or _double_on_npu(resolved, owner, ctx, depth + 1)
    if isinstance(dtype, ast.IfExp):  # ``torch.float32 if (is_mps or is_npu) else torch.float64``
        return not _names_npu(dtype.test) or _double_on_npu(dtype.body, owner, ctx, depth + 1)
    if isinstance(dtype, ast.Call):
        return not _chosen_per_device(dtype, ctx)
    qualname = ctx.chain(dtype) if isinstance(dtype, ast.Attribute) else None
    return qualname is None or not qualname.startswith("torch.") or qualname in _DOUBLE_DTYPES


def _converted_when_placed(node: ast.AST, ctx) -> bool:
    """Every move of data to a device in the function converts it to a dtype that is not float64 on an NPU
    (diffusers pipeline_ideogram4.py:88: a float64 schedule built on the CPU, then ``.to(dtype=torch.float32,
    device=device)``; scheduling_flow_map_euler_discrete.py:177: ``dtype=out_dtype``, float32 for npu): the
    float64 values stay on the host."""
    owner = ctx.model.function(node)
    if owner is None:
        return False
    return all(dtype is not None and not _double_on_npu(dtype, owner, ctx)
               for _, dtype in ctx.values.data_placements(owner))


def _env_rule_check(rule, node, ctx, name: str, slow) -> None:
    for variable, value in env_settings(node, ctx):
        if variable == name and isinstance(value, ast.Constant) and slow(str(value.value).strip()):
            rule.emit(node, ctx, str(value.value))


class LaunchBlockingSet(Rule):
    code = "ASC511"
    summary = "ASCEND_LAUNCH_BLOCKING=1 set in code (synchronous kernel launch)"
    node_types = (ast.Assign, ast.Call)
    trigger_words = ("ASCEND_LAUNCH_BLOCKING",)
    why = (
        "`ASCEND_LAUNCH_BLOCKING=1` makes every operator launch wait for the operator to finish, which is "
        "useful to find the op behind an error but removes all host/device overlap (and the task queue). "
        "Fires when the script sets it to 1 through `os.environ` or `os.putenv`."
    )
    example = 'os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"'
    use_instead = "Remove it (or set 0) for training; set it only on the command line while debugging."
    source = f"{ADVISOR_RULES}synchronize.yaml, environment_variable_info.yaml; {ADVICE_TABLE}"
    fires = [
        ('import os\nos.environ["ASCEND_LAUNCH_BLOCKING"] = "1"\n', 2),
        ('import os\nos.environ.setdefault("ASCEND_LAUNCH_BLOCKING", "1")\n', 2),
    ]
    passes = [
        'import os\nos.environ["ASCEND_LAUNCH_BLOCKING"] = "0"\n',
        'import os\nflag = os.environ.get("ASCEND_LAUNCH_BLOCKING", "1")\n',
        'env = {}\nenv["ASCEND_LAUNCH_BLOCKING"] = "1"\n',
    ]

    def check(self, node, ctx) -> None:
        _env_rule_check(self, node, ctx, "ASCEND_LAUNCH_BLOCKING", lambda v: v == "1")

    def emit(self, node, ctx, value) -> None:
        ctx.report(node, self.code, "ASCEND_LAUNCH_BLOCKING=1 makes every NPU operator launch synchronous "
                   "(unset it for training) [debug setting in code]", api="ASCEND_LAUNCH_BLOCKING",
                   tips="unset ASCEND_LAUNCH_BLOCKING or set 0")


class VerboseCannLogging(Rule):
    code = "ASC512"
    summary = "ASCEND_GLOBAL_LOG_LEVEL below 3 (debug/info/warning CANN logs) set in code"
    node_types = (ast.Assign, ast.Call)
    trigger_words = ("ASCEND_GLOBAL_LOG_LEVEL",)
    why = (
        "CANN writes its logs from the operator launch path; at level 0-2 (debug, info, warning) it writes "
        "so much that training slows down. 3 (error) is the level for training runs. Fires when the script "
        "sets the variable to 0, 1 or 2."
    )
    example = 'os.environ["ASCEND_GLOBAL_LOG_LEVEL"] = "1"'
    use_instead = 'Set `ASCEND_GLOBAL_LOG_LEVEL=3` (or leave it unset) for training.'
    source = f"{ADVISOR_RULES}environment_variable_info.yaml; {ADVICE_TABLE}"
    fires = [
        ('import os\nos.environ["ASCEND_GLOBAL_LOG_LEVEL"] = "0"\n', 2),
        ('import os\nos.environ.update(ASCEND_GLOBAL_LOG_LEVEL="1")\n', 2),
    ]
    passes = [
        'import os\nos.environ["ASCEND_GLOBAL_LOG_LEVEL"] = "3"\n',
        'import os\nos.environ["ASCEND_GLOBAL_LOG_LEVEL"] = level\n',
    ]

    def check(self, node, ctx) -> None:
        _env_rule_check(self, node, ctx, "ASCEND_GLOBAL_LOG_LEVEL", lambda v: v in ("0", "1", "2"))

    def emit(self, node, ctx, value) -> None:
        ctx.report(node, self.code, f"ASCEND_GLOBAL_LOG_LEVEL={value} turns on verbose CANN logging, which slows "
                   "every operator launch (use 3, errors only) [log level below 3]", api="ASCEND_GLOBAL_LOG_LEVEL",
                   tips="export ASCEND_GLOBAL_LOG_LEVEL=3")


def _in_converter(ctx) -> bool:
    """Inside a library's own conversion helper (``def convert_sync_batchnorm(module, process_group=None)``, timm
    1.0.31 layers/norm_act.py:167-205): it builds the SyncBatchNorm layers its caller asked for, and the choice
    (a ``--sync-bn`` flag) is the caller's."""
    function = ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef)
    return function is not None and function.name.lstrip("_").startswith("convert_sync")


class SyncBatchNormLayers(Rule):
    code = "ASC515"
    summary = "SyncBatchNorm, slow on NPU when the model has many BatchNorm layers"
    node_types = (ast.Call,)
    trigger_words = ("SyncBatchNorm",)
    why = (
        "SyncBatchNorm all-reduces the batch statistics in every BN layer, forward and backward, and its "
        "forward runs many small ops dispatched from Python. The msprof-analyze advisor flags models with "
        "more than 20 SyncBatchNorm layers, where this dominates the step. Fires on "
        "`nn.SyncBatchNorm.convert_sync_batchnorm(...)` and `nn.SyncBatchNorm(...)`; how many layers the model "
        "has is only known at run time, so check before acting. Inside a library's own conversion helper "
        "(`def convert_sync_batchnorm(...)`) it is not reported: the helper's caller makes the choice."
    )
    example = "model = nn.SyncBatchNorm.convert_sync_batchnorm(model)"
    use_instead = ("Keep plain BatchNorm when the per-device batch is large enough; otherwise use the faster "
                   "SyncBatchNorm forward the advisor's sync_batchnorm rule describes.")
    source = f"{ADVISOR_RULES}sync_batchnorm.yaml; {ADVICE_TABLE}"
    fires = [
        ("import torch.nn as nn\nmodel = nn.SyncBatchNorm.convert_sync_batchnorm(model)\n", 2),
        ("import torch\nbn = torch.nn.SyncBatchNorm(64)\n", 2),
        # near miss of a conversion helper: a model builder that converts its own layers (mmdet 3.1.0 rtmdet.py:51)
        ("import torch.nn as nn\nclass RTMDet:\n    def __init__(self, use_syncbn=True):\n        if use_syncbn:\n"
         "            nn.SyncBatchNorm.convert_sync_batchnorm(self)\n", 5),
    ]
    passes = [
        "import torch.nn as nn\nbn = nn.BatchNorm2d(64)\n",
        "from apex.parallel import SyncBatchNorm\nbn = SyncBatchNorm(64)\n",
        # a library's own conversion helper: its caller decides (timm 1.0.31 layers/norm_act.py:167-186)
        "import torch\ndef convert_sync_batchnorm(module, process_group=None):\n    module_output = module\n"
        "    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):\n"
        "        module_output = torch.nn.SyncBatchNorm(module.num_features, module.eps, process_group=process_group)\n"
        "    return module_output\n",
    ]

    def check(self, node, ctx) -> None:
        qualname = callee(node, ctx, last_names(*_SYNCBN))
        if qualname in _SYNCBN and not _in_converter(ctx):
            ctx.report(node, self.code, f"{qualname} all-reduces statistics in every BN layer; with many layers "
                       "(the advisor flags more than 20) it dominates the NPU step (keep it only where needed) "
                       "[SyncBatchNorm cost]", api=qualname, tips="drop SyncBatchNorm or use a faster forward "
                       "when the model has more than 20 BN layers")
