"""ASC203: cuDNN / CUDA backend switches."""
from __future__ import annotations

import ast

from ..detect.device_dispatch import cuda_branch_test
from ..detect.training import source_text
from ..registry import Rule


_STATUS_WORDS = {"partial": "supported with restrictions", "unknown": "of unknown support"}

# Plain boolean flags that only configure cuDNN / cuBLAS.  On an NPU they stay ordinary Python attributes: reading
# one returns what the script set, and setting one changes nothing.  What the NPU does anyway decides whether a
# setting loses anything (torch_npu docs torch-backends.md; HF32 defaults in rules_data/sources/advice/hf32_switches.tsv):
# - ``benchmark``: the NPU runs no per-shape algorithm search that the flag could turn on or off;
# - ``enabled``: there is no cuDNN to turn off, the NPU kernels run either way;
# - ``allow_tf32``: ASC608 owns it, firing only where the HF32 counterpart's NPU default differs from the value set;
# - ``deterministic = True``: the one intent that is lost; torch_npu's kernels become deterministic through
#   ``torch.use_deterministic_algorithms(True)``, so it fires unless the file calls that too.
_FLAGS = frozenset({
    "torch.backends.cudnn.benchmark",
    "torch.backends.cudnn.enabled",
    "torch.backends.cudnn.deterministic",
    "torch.backends.cudnn.allow_tf32",
    "torch.backends.cuda.matmul.allow_tf32",
    # torch 2.9's spelling of the TF32 switches (torch/backends/cudnn/__init__.py, cuda/__init__.py: fp32_precision)
    "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.cudnn.fp32_precision",
    "torch.backends.cudnn.conv.fp32_precision",
    "torch.backends.cudnn.rnn.fp32_precision",
})
# sdp_kernel's switches: every one left on (or not named) selects what torch picks anyway
_SDP_SWITCHES = ("enable_flash", "enable_math", "enable_mem_efficient", "enable_cudnn")
_DETERMINISTIC = "torch.backends.cudnn.deterministic"


def _assigned(node: ast.AST, ctx) -> "ast.expr | None":
    """The value assigned to ``node`` when it is the target of an assignment, else None."""
    parent = ctx.parent
    if isinstance(parent, ast.Assign) and any(target is node for target in parent.targets):
        return parent.value
    if isinstance(parent, (ast.AnnAssign, ast.AugAssign)) and parent.target is node:
        return parent.value
    return None


def _all_enabled(call: ast.AST, func: ast.AST) -> bool:
    """``sdp_kernel(...)`` called with every backend switch a literal True (axolotl 0.19.0 train.py:209)."""
    return isinstance(call, ast.Call) and call.func is func and not call.args and all(
        k.arg in _SDP_SWITCHES and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)


class CudaBackendSwitch(Rule):
    code = "ASC203"
    summary = "cuDNN / CUDA backend switch (torch.backends.cudnn.*, torch.backends.cuda.*) whose intent the NPU loses"
    node_types = (ast.Name, ast.Attribute)
    names = "imported"
    trigger_words = ("cud",)
    why = (
        "These switches tune NVIDIA libraries. On NPU most are accepted but change nothing. A flag whose setting "
        "matches what the NPU does anyway is not reported: `cudnn.benchmark` (no per-shape algorithm search on the "
        "NPU), `cudnn.enabled`, reading any of the flags, and `allow_tf32` or torch 2.9's `fp32_precision` (ASC608 reports it where the HF32 "
        "counterpart's NPU default differs). `cudnn.deterministic = True` is reported unless the file also calls "
        "`torch.use_deterministic_algorithms`, the switch that makes torch_npu's kernels deterministic. Every "
        "other use (`cudnn.is_available()`, `cudnn.version()`, `cudnn.flags(...)`, `cuda.sdp_kernel(...)` unless every backend is left on, "
        "`cuda.matmul.allow_fp16_reduced_precision_reduction`, ...) is reported: it answers or selects something "
        "CUDA-only."
    )
    example = "torch.backends.cudnn.deterministic = True"
    use_instead = ("Drop the switch, or set the NPU counterpart (`torch.use_deterministic_algorithms(True)`, "
                   "`torch.npu.matmul.allow_hf32`, `torch.npu.conv.allow_hf32`).")
    source = "Ascend/pytorch docs torch-backends.md (rules_data/sources/cuda/cuda_api_catalog.tsv)"
    fires = [
        # yolov5 utils/general.py init_seeds, without its use_deterministic_algorithms line
        ("import torch\ntorch.backends.cudnn.deterministic = True\n", 2),
        ("import torch\nif torch.backends.cudnn.is_available():\n    pass\n", 2),
        ("from torch.backends import cuda\nwith cuda.sdp_kernel(enable_math=False):\n    pass\n", 2),
        # near miss of every backend left on: one switched off
        ("import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,\n"
         "                                    enable_mem_efficient=True):\n    pass\n", 2),
        ("import torch\ntorch.backends.cudnn.deterministic = args.deterministic\n", 2),
    ]
    passes = [
        "import torch\ntorch.backends.mkldnn.enabled = True\n",
        "cudnn = {}\ncudnn.benchmark = 1\n",
        # diffusers utils/torch_utils.py enable_full_determinism
        "import torch\ntorch.use_deterministic_algorithms(True)\ntorch.backends.cudnn.deterministic = True\n"
        "torch.backends.cudnn.benchmark = False\ntorch.backends.cuda.matmul.allow_tf32 = False\n",
        # yolov5 utils/dataloaders.py LoadStreams
        "import torch\ntorch.backends.cudnn.benchmark = True  # faster for fixed-size inference\n",
        # yolov5 utils/autobatch.py check_train_batch_size
        "import torch\nif torch.backends.cudnn.benchmark:\n    pass\n",
        "import torch\ntorch.backends.cudnn.deterministic = False\n",
        "from torch.backends import cuda\ncuda.matmul.allow_tf32 = True\n",
        # every backend left on: the defaults (axolotl 0.19.0 train.py:209); torch 2.9's TF32 switch (its
        # utils/config/__init__.py:191)
        "import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=True,\n"
        "                                    enable_mem_efficient=True):\n    pass\n",
        "import torch\ntorch.backends.cudnn.fp32_precision = 'tf32'\n",
    ]

    def check(self, node, ctx) -> None:
        qualname = ctx.chain(node)
        if not qualname or not qualname.startswith(("torch.backends.cudnn.", "torch.backends.cuda.")):
            return
        if qualname in _FLAGS:
            value = _assigned(node, ctx)
            if (qualname != _DETERMINISTIC or value is None
                    or (isinstance(value, ast.Constant) and not value.value)
                    or "use_deterministic_algorithms" in source_text(ctx)):
                return
            ctx.report(node, self.code, f"{qualname} = {ast.unparse(value)} does not make the NPU deterministic "
                       "(call torch.use_deterministic_algorithms(True) as well)", api=qualname,
                       tips="torch.use_deterministic_algorithms(True)")
            return
        if qualname == "torch.backends.cuda.sdp_kernel" and _all_enabled(ctx.parent, node):
            return  # sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True): the defaults
        row = ctx.data.api_status(qualname)
        listed = (f"torch_npu {ctx.data.version} lists it as {_STATUS_WORDS.get(row[0], row[0])}" if row
                  else f"not in the torch_npu {ctx.data.version} list")
        ctx.report(node, self.code, f"{qualname} is a CUDA backend switch ({listed}; it does not tune the NPU)",
                   api=qualname, tips=listed, guard=cuda_branch_test(node, ctx))
