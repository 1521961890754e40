"""transfer_to_npu awareness: a migrated file is quiet about what it maps and still told what it does not."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_tool

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "transfer_to_npu"


def _builder():
    return load_tool("build_transfer_to_npu")


def test_packaged_data_matches_a_rebuild():
    assert _builder().main(["--check"]) == 0, "run tools/build_transfer_to_npu.py"


def test_expand_spells_the_facts_keys():
    module = _builder()
    assert module.expand("torch.cuda.amp / amp.common / torch.cuda.random") == [
        "torch.cuda.amp", "torch.cuda.amp.common", "torch.cuda.random"]
    assert module.expand("torch.cuda.memory._a/_b") == ["torch.cuda.memory._a", "torch.cuda.memory._b"]


def flake8(*args):
    return subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_the_migrated_example_passes_and_the_original_reports_every_cuda_use():
    migrated = flake8(EXAMPLE / "train_npu.py")
    assert migrated.returncode == 0 and migrated.stdout == "", migrated.stdout + migrated.stderr
    original = flake8(EXAMPLE / "train_gpu.py")
    assert original.returncode == 1
    lines = {(int(line.split(":")[1]), line.split(": ")[1].split()[0]) for line in original.stdout.splitlines()}
    source = (EXAMPLE / "train_gpu.py").read_text(encoding="utf-8").splitlines()
    # every line marked "# CUDA: ASCnnn" in the original reports that code, and nothing else reports
    marked = {(number, line.split("# CUDA: ")[1].strip())
              for number, line in enumerate(source, 1) if "# CUDA: " in line}
    cuda = {(n, code) for n, code in lines if code.startswith("ASC2")}
    assert marked and marked <= lines and cuda <= marked, (sorted(marked), sorted(lines))


@pytest.mark.parametrize("form", [
    "import torch_npu.contrib.transfer_to_npu",
    "import torch_npu.contrib.transfer_to_npu as t2n",
    "from torch_npu.contrib import transfer_to_npu",
    "from torch_npu.contrib import transfer_to_npu as _",
    "from torch_npu.contrib.transfer_to_npu import *",
    "import importlib\nimportlib.import_module('torch_npu.contrib.transfer_to_npu')",
    "try:\n    import torch_npu\n    from torch_npu.contrib import transfer_to_npu\nexcept ImportError:\n    pass",
])
def test_every_import_form_counts(lint, form):
    source = f"import torch\n{form}\ntorch.cuda.synchronize()\nm = m.cuda()\n"
    assert lint(source, codes=["ASC2"]) == []


@pytest.mark.parametrize("source,code", [
    ("import torch\nfrom torch_npu import contrib\ntorch.cuda.synchronize()\n", "ASC201"),  # not the module
    ("import torch\nimport transfer_to_npu\ntorch.cuda.synchronize()\n", "ASC201"),  # someone else's module
    ("import torch\nfrom torch_npu.contrib import transfer_to_npu\ntorch.cuda.nvtx.range_push('x')\n", "ASC201"),
    ("import torch\nfrom torch_npu.contrib import transfer_to_npu\ns = torch.cuda.jiterator._create_jit_fn(c)\n",
     "ASC201"),
    ("import torch.distributed as dist\nfrom torch_npu.contrib import transfer_to_npu\n"
     "assert dist.get_backend() == 'nccl'\n", "ASC204"),
    ("import torch.distributed as dist\nfrom torch_npu.contrib import transfer_to_npu\n"
     "g = dist.new_group(ranks, backend='nccl')\n", "ASC204"),
    ("import torch\nfrom torch_npu.contrib import transfer_to_npu\nuse = x.device.type == 'cuda'\n", "ASC202"),
    ("import torch\nfrom torch_npu.contrib import transfer_to_npu\ntorch.backends.cudnn.deterministic = True\n",
     "ASC203"),
    ("from torch_npu.contrib import transfer_to_npu\nfrom flash_attn import flash_attn_func\n", "ASC206"),
])
def test_what_transfer_to_npu_does_not_map_is_still_reported(lint, source, code):
    assert code in {f.code for f in lint(source, codes=["ASC2"])}
