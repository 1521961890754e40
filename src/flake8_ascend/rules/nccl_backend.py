"""ASC204: the NCCL collective backend."""
from __future__ import annotations

import ast

from ..data import load_transfer_to_npu
from ..registry import Rule
from ..detect.cuda_fixes import string_fix
from ..detect.transfer_to_npu import migrated, quiet

_GROUP_FUNCTIONS = ("init_process_group", "new_group", "init_device_mesh")


def _holder(stack) -> int:
    """The index in ``stack`` of what holds the string, seen through ``a if c else b`` and ``a or b``."""
    i = len(stack) - 1
    while i > 0 and isinstance(stack[i], (ast.IfExp, ast.BoolOp)):
        i -= 1
    return i


def _call_name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


class NcclBackend(Rule):
    code = "ASC204"
    summary = "NCCL collective backend ('nccl', Backend.NCCL, is_nccl_available)"
    node_types = (ast.Constant, ast.Name, ast.Attribute)
    trigger_words = ("nccl", "NCCL")
    why = "NCCL is NVIDIA's collective library; on Ascend the backend is HCCL (`'hccl'`)."
    example = "dist.init_process_group('nccl')"
    use_instead = ("Use `backend='hccl'`, or let transfer_to_npu rewrite it; comparisons with 'nccl' must be edited by hand "
                   "after it. `ascend-analyse --fix --select ASC2` rewrites the backend strings, comparisons included; "
                   "`Backend.NCCL` and `is_nccl_available` stay manual.")
    source = "torch_npu transfer_to_npu.py (nccl -> hccl); rules_data/sources/cuda/cuda_api_catalog.tsv"
    fires = [
        ("import torch.distributed as dist\ndist.init_process_group('nccl')\n", 2),
        ("init_process_group(backend='nccl', rank=0)\n", 1),
        ("if args.backend == 'nccl':\n    pass\n", 1),
        ("import torch.distributed as dist\nok = dist.is_nccl_available()\n", 2),
        # yolov5 7.0.14 train.py:611
        ("dist.init_process_group(backend='nccl' if dist.is_nccl_available() else 'gloo')\n", 1),
        # transfer_to_npu rewrites no comparison: the backend is then 'hccl'
        ("import torch.distributed as dist\nimport torch_npu.contrib.transfer_to_npu\n"
         "if dist.get_backend() == 'nccl':\n    pass\n", 3),
    ]
    passes = ["print('nccl')\n", "name = 'nccl_tests.log'\n", "dist.init_process_group('gloo')\n",
              # transfer_to_npu rewrites init_process_group's backend and maps is_nccl_available
              "import torch.distributed as dist\nfrom torch_npu.contrib import transfer_to_npu\n"
              "dist.init_process_group(backend='nccl')\nok = dist.is_nccl_available()\n",
              "import torch.distributed as dist\nfrom torch_npu.contrib import transfer_to_npu\n"
              "dist.init_process_group(backend='nccl' if ok else 'gloo')\n"]

    def check(self, node, ctx) -> None:
        if isinstance(node, ast.Constant):
            if (isinstance(node.value, str) and node.value.lower() == "nccl" and self._backend_context(ctx)
                    and not (migrated(ctx) and self._rewritten(ctx))):
                ctx.report(node, self.code, "NCCL backend 'nccl' does not exist on NPU (use 'hccl')",
                           api="nccl", tips="nccl -> hccl", rewrite=string_fix(node.value, ctx))
            return
        qualname = ctx.chain(node)
        if qualname and quiet(ctx, qualname):
            return
        if qualname in ("torch.distributed.Backend.NCCL", "torch.distributed.is_nccl_available",
                        "torch.distributed.ProcessGroupNCCL"):
            ctx.report(node, self.code, f"{qualname} is NCCL-specific (the NPU backend is HCCL)",
                       api=qualname, tips="NCCL -> HCCL")

    @staticmethod
    def _rewritten(ctx) -> bool:
        """The string is an argument of a call whose backend transfer_to_npu rewrites (init_process_group)."""
        i = _holder(ctx.stack)
        call = ctx.stack[i - 1] if isinstance(ctx.stack[i], ast.keyword) and i > 0 else ctx.stack[i]
        return isinstance(call, ast.Call) and ctx.qualname(call.func) in load_transfer_to_npu()["backend_functions"]

    @staticmethod
    def _backend_context(ctx) -> bool:
        """Is the string where a backend goes?"""
        holder = ctx.stack[_holder(ctx.stack)] if ctx.stack else None
        if isinstance(holder, ast.keyword):
            return holder.arg == "backend"
        if isinstance(holder, ast.Call):
            return _call_name(holder.func) in _GROUP_FUNCTIONS
        if isinstance(holder, ast.Compare):
            return any("backend" in _call_name(side).lower() or (isinstance(side, ast.Call) and "backend" in _call_name(side.func).lower())
                       for side in [holder.left, *holder.comparators])
        if isinstance(holder, ast.Assign):
            return any("backend" in _call_name(t).lower() for t in holder.targets)
        return False
