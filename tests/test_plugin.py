"""The installed flake8 plugin, run as users run it: ``flake8 --select ASC``."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def flake8(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "flake8", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


def codes_in(output):
    return set(re.findall(r": (ASC\d{3}) ", output))


def test_examples_show_many_codes():
    result = flake8("--select", "ASC", EXAMPLES)
    assert result.returncode == 1, result.stderr
    assert len(codes_in(result.stdout)) >= 8, result.stdout
    assert "Traceback" not in result.stderr


def test_output_is_sorted_and_stable():
    first = flake8("--select", "ASC", "--jobs", "2", EXAMPLES).stdout
    second = flake8("--select", "ASC", "--jobs", "1", EXAMPLES).stdout
    assert first == second
    keys = []
    for line in first.splitlines():
        path, line_no, col, _ = line.split(":", 3)
        keys.append((path, int(line_no), int(col)))
    assert keys == sorted(keys)


def test_unknown_version_is_a_one_line_error():
    result = flake8("--select", "ASC", "--ascend-torch-version", "9.9", EXAMPLES)
    assert result.returncode == 2  # a configuration error, not "findings" (1)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown torch_npu version '9.9'" in lines[0] and "2.6.0" in lines[0]


def test_version_matters(tmp_path):
    script = tmp_path / "dist.py"
    script.write_text("import torch\nx = torch.ones(3, dtype=torch.int32)\ny = x.bitwise_left_shift(1)\n")
    old = flake8("--select", "ASC1", "--ascend-torch-version", "2.6.0", script, cwd=tmp_path).stdout
    new = flake8("--select", "ASC1", "--ascend-torch-version", "2.13.0", script, cwd=tmp_path).stdout
    assert "ASC101 torch.Tensor.bitwise_left_shift is not supported on NPU (torch_npu 2.6.0" in old
    assert "ASC101" not in new


def test_official_lists_switch_reports_stale_entries(tmp_path):
    """torch.cdist: unsupported in the official 2.6 list, but the 2.6.0 wheel has its kernels."""
    (tmp_path / "a.py").write_text("import torch\nd = torch.cdist(a, b)\n")
    args = ("--select", "ASC1", "--ascend-torch-version", "2.6.0", "a.py")
    assert "ASC101" not in flake8(*args, cwd=tmp_path).stdout
    parity = flake8("--ascend-official-lists", *args, cwd=tmp_path).stdout
    assert "ASC101 torch.cdist is not supported on NPU (torch_npu 2.6.0: stale: torch_npu 2.6.0's wheel" in parity


def test_version_and_parity_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.flake8-ascend]\ntorch-version = "2.6"\nofficial-lists = true\n')
    (tmp_path / "a.py").write_text("import torch\nd = torch.cdist(a, b)\n")
    result = flake8("--select", "ASC", "a.py", cwd=tmp_path)
    assert "ASC101 torch.cdist is not supported on NPU (torch_npu 2.6.0" in result.stdout


def test_asc103_is_off_unless_named(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nv, i = torch.topk(x, 2, sorted=False)\n")
    assert "ASC103" not in flake8("a.py", cwd=tmp_path).stdout
    assert "ASC103" not in flake8("--select", "ASC", "a.py", cwd=tmp_path).stdout
    assert "ASC103" in flake8("--extend-select", "ASC103", "a.py", cwd=tmp_path).stdout


def test_static_dynamic_shape_hints_are_advisory_but_the_dynamic_shape_mode_reports_them(tmp_path):
    """ASC401-403 and ASC508 are off by default (docs/accuracy.md, "The default set"); -m dynamic_shape is
    asked for the hints, so it reports them unless --select narrows the run."""
    (tmp_path / "a.py").write_text("import torch\ndef f(x):\n    return torch.nonzero(x).double()\n")
    assert "ASC401" not in flake8("--select", "ASC", "a.py", cwd=tmp_path).stdout
    assert "ASC508" not in flake8("--select", "ASC", "a.py", cwd=tmp_path).stdout
    assert "ASC401" in flake8("--extend-select", "ASC401", "a.py", cwd=tmp_path).stdout
    for extra, expected in (((), True), (("--select", "ASC2"), False)):
        out = tmp_path / f"out{len(extra)}"
        run = subprocess.run([sys.executable, "-m", "flake8_ascend.cli", "-m", "dynamic_shape", "-i", str(tmp_path / "a.py"),
                              "-o", str(out), "-q", *extra], capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr
        hints = next(out.rglob("dynamic_shape_hints.csv")).read_text(encoding="utf-8")
        assert ("ASC401" in hints) is expected


def test_noqa(tmp_path):
    (tmp_path / "a.py").write_text(
        "import torch\n"
        "torch.cuda.synchronize()  # noqa: ASC201\n"
        "torch.cuda.synchronize()  # noqa\n"
        "torch.cuda.synchronize()  # noqa: ASC202\n"
    )
    out = flake8("--select", "ASC", "a.py", cwd=tmp_path).stdout
    assert [line.split(":")[1] for line in out.splitlines()] == ["4"]


@pytest.mark.parametrize(
    "name,content",
    [
        ("syntax.py", b"import torch\ndef f(:\n    torch.cuda.synchronize()\n"),
        ("latin1.py", "import torch\nname = 'caf\u00e9'\n".encode("latin-1")),
        ("empty.py", b""),
        ("binary.py", bytes(range(256))),
    ],
)
def test_bad_files_never_crash(tmp_path, name, content):
    (tmp_path / name).write_bytes(content)
    result = flake8("--select", "ASC,E999,E902", name, cwd=tmp_path)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert "ASC" not in result.stdout


def test_api_files_option(tmp_path):
    (tmp_path / "results.csv").write_text('File,3rd-party API,Message\nops/nms.py,"mylib.ops.nms\nmylib.nms",x\n')
    (tmp_path / "train.py").write_text("from mylib.ops import nms\nkeep = nms(b, s)\n")
    result = flake8("--select", "ASC", "--ascend-api-files", "results.csv", "train.py", cwd=tmp_path)
    assert "train.py:2:8: ASC104 mylib.ops.nms" in result.stdout


def test_api_file_with_wrong_columns(tmp_path):
    (tmp_path / "results.csv").write_text("a,b\n1,2\n")
    (tmp_path / "train.py").write_text("x = 1\n")
    result = flake8("--select", "ASC", "--ascend-api-files", "results.csv", "train.py", cwd=tmp_path)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "not a third_party result file" in result.stderr


def test_the_readme_pre_commit_snippet_names_the_hook_this_repository_defines():
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = readme.split("### pre-commit", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    hook_id = re.search(r"^- id: (\S+)", hooks, re.M).group(1)
    assert re.search(rf"^\s+- id: {re.escape(hook_id)}$", snippet, re.M)
    assert "entry: flake8 --select ASC" in hooks
    # the repository has no release tags: the snippet must not name one (pre-commit fails on an unknown tag)
    assert re.search(r"^\s+rev: HEAD\b", snippet, re.M)


def test_official_lists_from_the_flake8_config(tmp_path):
    (tmp_path / "setup.cfg").write_text("[flake8]\nascend-official-lists = true\nascend-torch-version = 2.6.0\n")
    (tmp_path / "a.py").write_text("import torch\nd = torch.cdist(a, b)\n")
    assert "ASC101 torch.cdist" in flake8("--select", "ASC1", "a.py", cwd=tmp_path).stdout


def test_test_files_are_left_out_unless_asked(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_model.py").write_text("import torch\nmodel = Net().cuda()\n")
    (tmp_path / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    plain = flake8("--select", "ASC2", ".", cwd=tmp_path).stdout
    assert "train.py:2" in plain and "test_model.py" not in plain
    assert "test_model.py:2" in flake8("--select", "ASC2", "--ascend-lint-tests", ".", cwd=tmp_path).stdout
    (tmp_path / "setup.cfg").write_text("[flake8]\nascend-lint-tests = true\n")
    assert "test_model.py:2" in flake8("--select", "ASC2", ".", cwd=tmp_path).stdout


GUARDED = """\
import torch

def setup(device, rank):
    if device.type == 'cuda':
        torch.cuda.set_device(rank)
"""


def test_a_cuda_only_branch_folds_into_its_test_only_where_flake8_shows_the_test(tmp_path):
    (tmp_path / "a.py").write_text(GUARDED)
    (tmp_path / "b.py").write_text(GUARDED)
    def found(*args):
        return sorted(f"{line.split(':')[0]} {line.split()[1]}" for line in flake8(*args, ".", cwd=tmp_path).stdout.splitlines())

    assert found("--select", "ASC2") == ["./a.py ASC202", "./b.py ASC202"]
    assert "also has: ASC201 torch.cuda.set_device on line 5" in flake8("--select", "ASC2", "a.py", cwd=tmp_path).stdout
    assert found("--select", "ASC201") == ["./a.py ASC201", "./b.py ASC201"]
    # per-file-ignores hide the test in b.py only: there the call keeps its own finding
    assert found("--select", "ASC2", "--per-file-ignores", "b.py:ASC202") == ["./a.py ASC202", "./b.py ASC201"]


def test_a_tests_folder_above_the_folder_flake8_runs_in_does_not_make_test_code(tmp_path):
    project = tmp_path / "tests" / "proj"
    project.mkdir(parents=True)
    (project / "train.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    assert "ASC201" in flake8("--select", "ASC", str(project / "train.py"), cwd=project).stdout
    (project / "tests").mkdir()
    (project / "tests" / "test_train.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    assert flake8("--select", "ASC", str(project / "tests" / "test_train.py"), cwd=project).stdout == ""
