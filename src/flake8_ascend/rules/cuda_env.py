"""ASC208: the CUDA device-visibility environment variable, which the NPU runtime ignores."""
from __future__ import annotations

import ast

from ..calls import env_settings
from ..registry import Rule

CUDA_VARIABLE = "CUDA_VISIBLE_DEVICES"
NPU_VARIABLE = "ASCEND_RT_VISIBLE_DEVICES"
_READERS = frozenset({"os.getenv", "os.environ.get"})


class CudaVisibleDevices(Rule):
    code = "ASC208"
    summary = "CUDA_VISIBLE_DEVICES set or read in code (the NPU runtime reads ASCEND_RT_VISIBLE_DEVICES)"
    node_types = (ast.Assign, ast.Call, ast.Subscript)
    trigger_words = (CUDA_VARIABLE,)
    why = (
        "CANN chooses the devices a process sees from `ASCEND_RT_VISIBLE_DEVICES`; `CUDA_VISIBLE_DEVICES` "
        "changes nothing on an NPU machine, so device selection written for GPUs (or `'-1'` to force the CPU) "
        "silently stops working. transfer_to_npu does not rewrite environment variables."
    )
    example = "os.environ['CUDA_VISIBLE_DEVICES'] = args.device"
    use_instead = "Set `ASCEND_RT_VISIBLE_DEVICES` instead (same comma-separated device IDs, in ascending order)."
    source = ("CANN environment variable reference: ASCEND_RT_VISIBLE_DEVICES "
              "(hiascend.com document envref_07_0028)")
    fires = [
        # yolov5 7.0.14 utils/torch_utils.py:115 and :117
        ("import os\nif cpu:\n    os.environ['CUDA_VISIBLE_DEVICES'] = '-1'\n", 3),
        ("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = device\n", 2),
        ("import os\nos.environ.setdefault('CUDA_VISIBLE_DEVICES', '0')\n", 2),
        ("import os\nvisible = os.environ.get('CUDA_VISIBLE_DEVICES', '')\n", 2),
        ("import os\nn = len(os.environ['CUDA_VISIBLE_DEVICES'].split(','))\n", 2),
        ("from torch_npu.contrib import transfer_to_npu\nimport os\nos.putenv('CUDA_VISIBLE_DEVICES', '1')\n", 3),
    ]
    passes = [
        "import os\nos.environ['ASCEND_RT_VISIBLE_DEVICES'] = '0,1'\n",
        "print('set CUDA_VISIBLE_DEVICES to choose GPUs')\n",
        "'''Export CUDA_VISIBLE_DEVICES before launching.'''\n",
        "config = {}\nconfig['CUDA_VISIBLE_DEVICES'] = '0'\n",
        "import os\nname = 'CUDA_VISIBLE_DEVICES'\n",
    ]

    def check(self, node, ctx) -> None:
        if isinstance(node, ast.Subscript):  # a read: os.environ["CUDA_VISIBLE_DEVICES"]
            found = isinstance(node.ctx, ast.Load) and _names_it(node.slice) and ctx.qualname(node.value) == "os.environ"
        elif isinstance(node, ast.Call) and ctx.qualname(node.func) in _READERS:
            found = bool(node.args) and _names_it(node.args[0])
        else:
            found = any(name == CUDA_VARIABLE for name, _ in env_settings(node, ctx))
        if found:
            ctx.report(node, self.code, f"{CUDA_VARIABLE} does not choose NPUs (set {NPU_VARIABLE}, the variable "
                       "the NPU runtime reads)", api=CUDA_VARIABLE, tips=f"{CUDA_VARIABLE} -> {NPU_VARIABLE}")


def _names_it(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == CUDA_VARIABLE
