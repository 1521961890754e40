"""-m migrate: the migrated copy, its change list and manual list, and the transfer_to_npu path."""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flake8_ascend import cli
from flake8_ascend.codes import CODES

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "cuda_fix"
CASES = ("amp", "ddp", "devices", "nccl", "near_misses")
ENTRY = ("import torch\n\n\ndef train(model, loader, opt):\n    for x in loader:\n"
         "        model(x.cuda()).sum().backward()\n        opt.step()\n\n\n"
         "if __name__ == '__main__':\n    train(None, [], None)\n")


@pytest.fixture
def package(tmp_path):
    """A package with the fixture files, a relative import, a file that does not parse, data and a link."""
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("from .. import ddp  # noqa: F401\n")
    for name in CASES:
        shutil.copy(FIXTURES / f"{name}.in.py", root / "sub" / f"{name}.py")
    shutil.copy(FIXTURES / "ddp.in.py", root / "ddp.py")
    (root / "train.py").write_text(ENTRY)
    (root / "broken.py").write_text("def f(:\n    x.cuda()\n")
    (root / "weights.yaml").write_text("device: cuda\n")
    (root / "link.py").symlink_to("ddp.py")
    out = tmp_path / "out"
    out.mkdir()
    return root, out


def rows(path: Path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def flake8(folder: Path):
    """(file, line, code) of every ASC2 finding of the flake8 plugin on ``folder`` (torch_npu 2.6.0), the advisory
    ones named in full: the migration lists them all for manual work."""
    advisory = ",".join(code for code, row in CODES.items() if code.startswith("ASC2") and row.default_off)
    result = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC2", "--extend-select", advisory,
                             "--ascend-torch-version", "2.6.0", "--exclude", "link.py", "."], cwd=folder,
                            capture_output=True, text=True, timeout=120)
    found = set()
    for line in result.stdout.splitlines():
        path, number, _, rest = line.split(":", 3)
        found.add((Path(path).as_posix().removeprefix("./"), number, rest.split()[0]))
    return found


def test_the_copy_is_the_migrated_package_and_the_lists_match_flake8(package):
    root, out = package
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}
    assert cli.main(["-i", str(root), "-o", str(out), "-q", "-m", "migrate", "-v", "2.6.0"]) == 0
    report = out / "proj_analysis"
    copy = report / "proj_msft"
    for name in CASES:
        assert (copy / "proj" / "sub" / f"{name}.py").read_text() == (FIXTURES / f"{name}.out.py").read_text(), name
    assert (copy / "proj" / "broken.py").read_bytes() == (root / "broken.py").read_bytes()
    assert (copy / "proj" / "weights.yaml").read_text() == "device: cuda\n"  # only Python is rewritten
    assert os.readlink(copy / "proj" / "link.py") == "ddp.py"  # a link stays a link (flake8 is told to skip it)
    assert {p: p.read_bytes() for p in before} == before  # the input is only read
    changes = rows(report / "change_list.csv")
    assert changes[0] == ["File", "Line", "Code", "Before", "After"]
    assert ["proj/ddp.py", "11", "ASC201", "torch.cuda.set_device", "torch_npu.npu.set_device"] in changes
    assert ["proj/sub/nccl.py", "12", "ASC204", "'nccl'", "'hccl'"] in changes
    assert ["proj/train.py", "6", "ASC202", ".cuda()", ".npu()"] in changes
    assert not [row for row in changes if row[0].endswith("near_misses.py") and row[2] != ""]
    manual = rows(report / "manual_work.csv")
    assert {(f, line, code) for f, line, code, _ in manual[1:]} == flake8(copy)
    assert ("proj/sub/near_misses.py", "25", "ASC201") in flake8(copy)  # torch.cuda.CUDAGraph: no NPU name
    log = (report / cli.LOG_NAME).read_text()
    assert "proj/broken.py: copied unchanged: syntax error at line " in log
    assert "changes per code: ASC201 " in log and "left for manual work (manual_work.csv" in log
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(copy / "proj" / "sub")], check=True,
                   timeout=300)


def test_a_second_migration_changes_nothing(package, tmp_path):
    root, out = package
    assert cli.main(["-i", str(root), "-o", str(out), "-q", "-m", "migrate"]) == 0
    first = out / "proj_analysis" / "proj_msft" / "proj"
    again = tmp_path / "again"
    again.mkdir()
    assert cli.main(["-i", str(first), "-o", str(again), "-q", "-m", "migrate"]) == 0
    assert rows(again / "proj_analysis" / "change_list.csv") == [["File", "Line", "Code", "Before", "After"]]
    second = again / "proj_analysis" / "proj_msft" / "proj"
    for path in first.rglob("*.py"):
        assert (second / path.relative_to(first)).read_bytes() == path.read_bytes(), path


def test_the_migrated_package_imports_its_own_modules(package, tmp_path):
    root, out = package
    (root / "broken.py").unlink()
    assert cli.main(["-i", str(root), "-o", str(out), "-q", "-m", "migrate"]) == 0
    fake = tmp_path / "site" / "torch_npu"  # the import resolution is tested, not the NPU
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    copy = out / "proj_analysis" / "proj_msft"
    code = "import proj.sub, proj.train; print(proj.sub.ddp.__file__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == copy / "proj" / "ddp.py"


def test_transfer_to_npu_only_adds_the_imports_to_the_entry_script(package):
    root, out = package
    assert cli.main(["-i", str(root), "-o", str(out), "-q", "-m", "migrate", "--transfer-to-npu"]) == 0
    report = out / "proj_analysis"
    copy = report / "proj_msft" / "proj"
    assert (copy / "train.py").read_text() == ENTRY.replace(
        "import torch\n", "import torch\nimport torch_npu\nfrom torch_npu.contrib import transfer_to_npu\n", 1)
    for name in CASES:
        assert (copy / "sub" / f"{name}.py").read_bytes() == (root / "sub" / f"{name}.py").read_bytes()
    assert [row[0] for row in rows(report / "change_list.csv")[1:]] == ["proj/train.py", "proj/train.py"]
    manual = {(row[0], row[2]) for row in rows(report / "manual_work.csv")[1:]}
    # what transfer_to_npu leaves: comparisons and names torch_npu.npu lacks, not the calls it patches
    assert ("proj/sub/nccl.py", "ASC204") in manual and ("proj/sub/near_misses.py", "ASC201") in manual
    assert ("proj/ddp.py", "ASC201") not in manual
    assert "to run proj/train.py: cd " in (report / cli.LOG_NAME).read_text()


def test_a_single_file_is_migrated_into_its_stem(tmp_path):
    script = tmp_path / "train_gpu.py"
    shutil.copy(FIXTURES / "amp.in.py", script)
    assert cli.main(["-i", str(script), "-o", str(tmp_path), "-q", "-m", "migrate"]) == 0
    assert (tmp_path / "train_gpu_analysis" / "train_gpu_msft" / "train_gpu.py").read_text() == (
        FIXTURES / "amp.out.py").read_text()


def test_transfer_to_npu_says_so_when_no_entry_script_is_found(tmp_path):
    project = tmp_path / "lib"
    project.mkdir()
    shutil.copy(FIXTURES / "ddp.in.py", project / "ddp.py")  # no main guard, no training loop
    assert cli.main(["-i", str(project), "-o", str(tmp_path), "-q", "-m", "migrate", "--transfer-to-npu"]) == 0
    report = tmp_path / "lib_analysis"
    assert rows(report / "change_list.csv") == [["File", "Line", "Code", "Before", "After"]]
    assert "no training entry script found" in (report / cli.LOG_NAME).read_text()


def test_a_file_with_npu_cases_of_its_own_is_left_and_logged(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copy(FIXTURES / "dispatch.in.py", project / "dispatch.py")
    shutil.copy(FIXTURES / "ddp.in.py", project / "ddp.py")
    assert cli.main(["-i", str(project), "-o", str(tmp_path), "-q", "-m", "migrate"]) == 0
    report = tmp_path / "proj_analysis"
    assert (report / "proj_msft" / "dispatch.py").read_bytes() == (project / "dispatch.py").read_bytes()
    log = (report / cli.LOG_NAME).read_text()
    assert "not rewritten dispatch.py: it has NPU cases of its own" in log
    assert "warning: 1 file already names the NPU (dispatch.py)" in log
    assert "not rewritten ddp.py" not in log  # its 'npu' strings come from the migration, not from the original
