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
    # a library module that imports it (data/frameworks.json): verl 0.7 model_merger/megatron_model_merger.py:28
    # (under try), ms-swift npu_patch/mindspeed.py:529 (``repatch``)
    "try:\n    import mindspeed.megatron_adaptor\nexcept ImportError:\n    pass",
    "from mindspeed import megatron_adaptor",
    "from mindspeed.megatron_adaptor import repatch",
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


# ms-swift 4.x swift/megatron/__init__.py: the package imports MindSpeed's adaptor, which imports transfer_to_npu
# (data/frameworks.json, transfer_to_npu_importers), before any of its modules runs
ADAPTOR_INIT = ("try:\n    from transformers.utils import is_torch_npu_available\n    if is_torch_npu_available():\n"
                "        import mindspeed.megatron_adaptor  # F401\nexcept Exception:\n    raise\n")
CUDA_USER = "import torch\n\n\ndef sync(x):\n    torch.cuda.synchronize()\n    return x.cuda()\n"


def _project(tmp_path: Path, init: str, sub_init: str = "") -> Path:
    for folder, text in (("pkg", init), ("pkg/megatron", sub_init), ("other", "")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text(text)
        (tmp_path / folder / "utils.py").write_text(CUDA_USER)
    return tmp_path


def _codes(root: Path, rel: str):
    import ast
    from flake8_ascend import engine
    from flake8_ascend.config import Config
    from flake8_ascend.data import default_version
    source = (root / rel).read_text()
    config = Config(default_version(), root=str(root))
    return [(f.line, f.code) for f in engine.lint(ast.parse(source), source.splitlines(keepends=True), rel, config)
            if f.code.startswith("ASC2")]


@pytest.mark.parametrize("source", [
    "import torch\nimport mindspeed\ntorch.cuda.synchronize()\n",  # the package, not the adaptor
    "import torch\nfrom mindspeed.utils import set_position_ids\ntorch.cuda.synchronize()\n",  # another module
    "import torch\nimport megatron_adaptor\ntorch.cuda.synchronize()\n",  # someone else's module of that name
])
def test_near_miss_other_modules_of_the_library_do_not_count(lint, source):
    assert [f.code for f in lint(source, codes=["ASC2"])] == ["ASC201"]


@pytest.mark.parametrize("init,sub_init", [(ADAPTOR_INIT, ""), ("", ADAPTOR_INIT),
                                           ("", "from torch_npu.contrib import transfer_to_npu\n")])
def test_a_package_init_above_the_module_that_imports_it_migrates_the_module(tmp_path, init, sub_init):
    root = _project(tmp_path, init, sub_init)
    assert _codes(root, "pkg/megatron/utils.py") == []
    assert _codes(root, "other/utils.py") == [(5, "ASC201"), (6, "ASC202")]


def test_near_miss_an_init_below_or_beside_the_module_does_not(tmp_path):
    # the subpackage's __init__ runs only when the subpackage is imported: pkg/utils.py may run without it
    root = _project(tmp_path, "", ADAPTOR_INIT)
    assert _codes(root, "pkg/utils.py") == [(5, "ASC201"), (6, "ASC202")]


def test_both_front_ends_read_the_package_init(tmp_path):
    from flake8_ascend import cli
    root = _project(tmp_path, ADAPTOR_INIT)
    shown = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC2", "pkg", "other"], cwd=root,
                           capture_output=True, text=True, timeout=300)
    assert sorted(line.split(":")[0] for line in shown.stdout.splitlines()) == ["other/utils.py"] * 2, shown.stdout
    out = tmp_path / "out"
    assert cli.main(["-i", str(root / "pkg"), "-o", str(out), "-m", "torch_apis"]) == 0
    assert (out / "pkg_analysis" / "cuda_op_list.csv").read_text().splitlines() == ["File,Api,Start Line,End Line,Tips"]
