"""ASC206: imports of CUDA-only third-party packages."""
from __future__ import annotations

import ast

from ..registry import Rule

# package (or dotted prefix) -> what to use on NPU; facts from rules_data/sources/cuda/cuda_api_catalog.tsv
CUDA_ONLY_PACKAGES = {
    "apex": "torch.amp / torch_npu.optim.NpuFused* (Ascend ships its own apex fork)",
    "amp_C": "remove it (apex CUDA extension)",
    "flash_attn": "torch_npu.npu_fusion_attention or F.scaled_dot_product_attention",
    "xformers": "torch_npu.npu_fusion_attention or F.scaled_dot_product_attention",
    "bitsandbytes": "an NPU quantisation path (torch_npu quant ops)",
    "triton": "triton-ascend, or eager torch ops",
    "mmcv.ops": "mmcv built with NPU ops (mmcv/ops/csrc/pytorch/npu), or torch_npu ops",
    "pycuda": "torch_npu device APIs",
    "cupy": "torch tensors on the NPU",
    "numba.cuda": "torch ops on the NPU",
}


def _cuda_only(module: str):
    for package, instead in CUDA_ONLY_PACKAGES.items():
        if module == package or module.startswith(package + "."):
            return package, instead
    return None


class CudaOnlyPackage(Rule):
    code = "ASC206"
    summary = "import of a CUDA-only third-party package (apex, flash_attn, xformers, bitsandbytes, triton, mmcv.ops...)"
    node_types = (ast.Import, ast.ImportFrom)
    trigger_words = tuple(sorted({p.split(".")[0] for p in CUDA_ONLY_PACKAGES}))
    csv = "cuda_op_list.csv"
    why = "These packages ship CUDA kernels; they do not install or do not run on an Ascend NPU."
    example = "from flash_attn import flash_attn_func"
    fix = "Replace the package with its NPU counterpart named in the message."
    source = "rules_data/sources/cuda/cuda_api_catalog.tsv; torch_npu transfer_to_npu.py (triton disabled)"
    fires = [
        ("import apex\n", 1),
        ("from flash_attn import flash_attn_func\n", 1),
        ("from mmcv.ops import nms\n", 1),
        ("from mmcv import ops\n", 1),
        ("import triton.language as tl\n", 1),
    ]
    passes = ["import mmcv\n", "from mmcv.cnn import ConvModule\n", "import apexlib\n", "from . import triton\n"]

    def check(self, node, ctx) -> None:
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif node.level:
            return
        else:
            modules = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        for module in modules:
            found = _cuda_only(module)
            if found:
                package, instead = found
                ctx.report(node, self.code, f"{package} is a CUDA-only package (on NPU use {instead})",
                           api=package, tips=instead)
                return
