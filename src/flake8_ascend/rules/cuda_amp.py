"""ASC207: the CUDA automatic mixed precision API (``torch.cuda.amp``)."""
from __future__ import annotations

import ast

from ..registry import Rule
from ..detect.cuda_fixes import name_fix
from ..detect.device_dispatch import cuda_branch_test, names_a_type, npu_skips
from ..detect.old_torch import old_torch_fallback
from ..detect.transfer_to_npu import quiet


class CudaAmp(Rule):
    code = "ASC207"
    summary = "CUDA AMP API (torch.cuda.amp.autocast, GradScaler, custom_fwd, custom_bwd)"
    node_types = (ast.Name, ast.Attribute)
    names = "imported"
    trigger_words = ("amp",)
    why = ("`torch.cuda.amp` drives CUDA autocast; on NPU the same API lives in `torch_npu.npu.amp` / `torch.amp` with "
           "device 'npu'. In a branch only CUDA takes (`if torch.cuda.is_available():`) the finding on the test names "
           "it (ASC201/ASC202 fold).")
    example = "scaler = torch.cuda.amp.GradScaler()"
    use_instead = ("Use `torch.amp.autocast('npu')` / `torch.amp.GradScaler('npu')` or `torch_npu.npu.amp.*`; "
                   "`ascend-analyse --fix --select ASC2` rewrites `torch.cuda.amp.X` to `torch_npu.npu.amp.X`.")
    source = "torch_npu transfer_to_npu.py (torch.cuda.amp -> torch_npu.npu.amp); rules_data/sources/cuda/cuda_api_catalog.tsv"
    fires = [
        ("import torch\nscaler = torch.cuda.amp.GradScaler()\n", 2),
        # under a CUDA test that is no finding of its own (a flag), the call keeps its finding
        ("import torch\ndef build(amp):\n    if amp:\n        return torch.cuda.amp.GradScaler()\n", 4),
        # near miss of a fallback: the try's body uses another API
        ("import torch\ndef build():\n    try:\n        return make_scaler()\n    except ImportError:\n"
         "        return torch.cuda.amp.GradScaler()\n", 6),
        ("from torch.cuda.amp import autocast\nwith autocast():\n    pass\n", 2),
        # the import of a version test whose else defines a no-op stand-in for old torch (espnet 202511
        # espnet2/train/trainer.py:44-55, 638)
        ("import torch\nif V(torch.__version__) >= V('1.6.0'):\n    from torch.cuda.amp import autocast\nelse:\n"
         "    def autocast(enabled=True):\n        yield\ndef step(model, batch):\n    with autocast(True):\n"
         "        return model(batch)\n", 8),
    ]
    passes = ["import torch\nwith torch.autocast('cpu'):\n    pass\n", "from apex import amp\nm = amp.initialize(m)\n",
              # only named as a type (espnet 202511 espnet2/train/trainer.py:555)
              "from typing import Optional\nfrom torch.cuda.amp import GradScaler\n"
              "def train_one_epoch(model, scaler: Optional[GradScaler]):\n    return model\n",
              # transfer_to_npu patches torch.cuda.amp with torch_npu.npu.amp
              "import torch\nfrom torch_npu.contrib import transfer_to_npu\nscaler = torch.cuda.amp.GradScaler()\n",
              # the fallback of a try that uses torch.amp first (timm 1.0.31 utils/cuda.py:50-53)
              "import torch\nclass NativeScaler:\n    def __init__(self, device='cuda'):\n        try:\n"
              "            self._scaler = torch.amp.GradScaler(device=device)\n        except (AttributeError, TypeError):\n"
              "            self._scaler = torch.cuda.amp.GradScaler()\n"]

    def check(self, node, ctx) -> None:
        qualname = ctx.chain(node)
        if qualname and qualname.startswith("torch.cuda.amp.") and not quiet(ctx, qualname) and not npu_skips(
                node, ctx) and not old_torch_fallback(node, qualname, ctx) and not names_a_type(node, ctx):
            name = qualname[len("torch.cuda.amp."):]
            ctx.report(node, self.code, f"{qualname} is CUDA AMP (use torch_npu.npu.amp.{name} or torch.amp with 'npu')",
                       api=qualname, tips=f"torch_npu.npu.amp.{name}", rewrite=name_fix(qualname, ctx),
                       guard=cuda_branch_test(node, ctx))
