"""ASC203: cuDNN / CUDA backend switches."""
from __future__ import annotations

import ast

from ..registry import Rule


_STATUS_WORDS = {"partial": "supported with restrictions", "unknown": "of unknown support"}


class CudaBackendSwitch(Rule):
    code = "ASC203"
    summary = "cuDNN / CUDA backend switch (torch.backends.cudnn.*, torch.backends.cuda.*)"
    node_types = (ast.Name, ast.Attribute)
    trigger_words = ("cud",)
    why = (
        "These switches tune NVIDIA libraries. On NPU most are accepted but change nothing, some are "
        "unsupported, and TF32 has an NPU counterpart (HF32) that must be set separately."
    )
    example = "torch.backends.cudnn.benchmark = True"
    use_instead = "Drop the switch, or set the NPU counterpart (e.g. `torch.npu.matmul.allow_hf32`, `torch.npu.conv.allow_hf32`)."
    source = "Ascend/pytorch docs torch-backends.md (rules_data/sources/cuda/cuda_api_catalog.tsv)"
    fires = [
        ("import torch\ntorch.backends.cudnn.benchmark = True\n", 2),
        ("from torch.backends import cuda\ncuda.matmul.allow_tf32 = True\n", 2),
    ]
    passes = ["import torch\ntorch.backends.mkldnn.enabled = True\n", "cudnn = {}\ncudnn.benchmark = 1\n"]

    def check(self, node, ctx) -> None:
        qualname = ctx.chain(node)
        if not qualname or not qualname.startswith(("torch.backends.cudnn.", "torch.backends.cuda.")):
            return
        row = ctx.data.api_status(qualname)
        listed = (f"torch_npu {ctx.data.version} lists it as {_STATUS_WORDS.get(row[0], row[0])}" if row
                  else f"not in the torch_npu {ctx.data.version} list")
        ctx.report(node, self.code, f"{qualname} is a CUDA backend switch ({listed}; it does not tune the NPU)",
                   api=qualname, tips=listed)
