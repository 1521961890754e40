"""The runtime operator detector with real torch on CPU, through ``ascend-analyse -m runtime_ops``."""
import json
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from flake8_ascend import cli  # noqa: E402
from runtime_support import PACKAGE_SOURCE, header, read_rows, run_script  # noqa: E402

REPORT = "msft_runtime_ops_report.csv"
HEADER = ["Op", "NPU Status", "Count", "Dtypes", "Phase", "Loop", "File Path", "Line Number", "Library Frame",
          "Call Stack", "Tips"]
TRAIN = textwrap.dedent('''\
    import os
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn

    sys.path.insert(0, os.environ["FAKELIB_PATH"])
    import fakelib.ops


    def main():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        train_loader = [(torch.randn(4, 8), torch.randn(4, 4)) for _ in range(4)]
        for x, y in train_loader:
            out = model(x)
            if sys.argv[1] == "fallback":
                loss = F.huber_loss(out, y)
                values, _ = torch.mode(out, 1)
                vals = torch.linalg.eigvals(out[:, :4].detach())
                top = fakelib.ops.most_common(out.detach())
            else:
                loss = F.mse_loss(out, y)
            loss.backward()
            with torch.no_grad():  # plain SGD: torch.optim would import torch._dynamo (seconds)
                for weight in model.parameters():
                    weight -= 0.1 * weight.grad
                    weight.grad = None


    if __name__ == "__main__":
        main()
    ''')
FAKELIB = textwrap.dedent('''\
    import torch


    def most_common(values):
        return torch.mode(values, 0)
    ''')


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """The project analysed with -m runtime_ops -v 2.13; a stand-in library lies outside it."""
    source = tmp_path / "proj"
    source.mkdir()
    (source / "train.py").write_text(TRAIN, encoding="utf-8")
    library = tmp_path / "site" / "fakelib"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text("", encoding="utf-8")
    (library / "ops.py").write_text(FAKELIB, encoding="utf-8")
    monkeypatch.setenv("FAKELIB_PATH", str(tmp_path / "site"))
    monkeypatch.delitem(__import__("sys").modules, "fakelib", raising=False)
    monkeypatch.delitem(__import__("sys").modules, "fakelib.ops", raising=False)
    (tmp_path / "out").mkdir()
    assert cli.main(["-m", "runtime_ops", "-v", "2.13", "-i", str(source), "-o", str(tmp_path / "out"), "-q"]) == 0
    return tmp_path / "out" / "proj_analysis"


def test_ops_without_an_npu_kernel_are_reported_at_their_lines(copy):
    package = copy / "msft_dynamic_analysis"
    assert (package / "aten_ops_2.13.0.json").is_file()
    assert json.loads((package / "settings.json").read_text(encoding="utf-8")) == \
        {"runtime_ops": {"all_ops": False, "iterations": 2, "version": "2.13.0"}}
    log = run_script(copy / "train.py", "fallback")
    assert "NPU status of torch_npu 2.13.0" in log
    assert header(copy / REPORT) == HEADER
    rows = read_rows(copy / REPORT)
    found = {(r["Op"], r["Phase"], r["File Path"], r["Line Number"]): r for r in rows}
    assert set(found) == {
        ("aten::huber_loss", "forward", "train.py", "18"),
        ("aten::huber_loss_backward.out", "backward (HuberLossBackward0)", "train.py", "18"),
        ("aten::mode", "forward", "train.py", "19"),
        ("aten::linalg_eig", "forward", "train.py", "20"),
        ("aten::mode", "forward", "train.py", "21"),  # issued inside a library: the project line calling into it
    }
    assert {r["NPU Status"] for r in rows} == {"fallback"}
    mode = found[("aten::mode", "forward", "train.py", "19")]
    assert (mode["Count"], mode["Dtypes"]) == ("2", "float32")  # the first 2 of 4 iterations
    assert mode["Call Stack"] == "train.py:32 in <module> -> train.py:19 in main"
    assert mode["Library Frame"] == "" and {r["Loop"] for r in rows} == {"train (train.py:15)"}
    library = found[("aten::mode", "forward", "train.py", "21")]
    assert library["Library Frame"] == "fakelib/ops.py:5 in most_common"
    assert library["Call Stack"] == "train.py:32 in <module> -> train.py:21 in main"
    assert "no NPU kernel in torch_npu 2.13.0" in mode["Tips"] and "called by" not in mode["Tips"]
    inner = found[("aten::huber_loss_backward.out", "backward (HuberLossBackward0)", "train.py", "18")]
    assert inner["Tips"].endswith("called by aten::huber_loss_backward, which has no NPU kernel of its own (composite)")


def test_results_are_stable_across_runs(copy):
    run_script(copy / "train.py", "fallback")
    first = (copy / REPORT).read_bytes()
    run_script(copy / "train.py", "fallback")
    assert (copy / REPORT).read_bytes() == first


def test_supported_ops_only_give_an_empty_report(copy):
    log = run_script(copy / "train.py", "supported")
    assert header(copy / REPORT) == HEADER and read_rows(copy / REPORT) == []
    assert "no operators without an NPU kernel in the recorded iterations (train.py:15: 2)" in log


def test_all_ops_and_iterations_from_the_environment(copy, monkeypatch):
    monkeypatch.setenv("MSFT_OPS_ALL", "1")
    monkeypatch.setenv("MSFT_OPS_ITERATIONS", "1")
    run_script(copy / "train.py", "supported")
    rows = read_rows(copy / REPORT)
    statuses = {(r["Op"], r["NPU Status"]) for r in rows}
    assert {("aten::addmm", "kernel"), ("aten::t", "composite"), ("aten::mse_loss", "kernel")} <= statuses
    assert {r["Count"] for r in rows if r["Op"] == "aten::addmm"} == {"2"}  # two Linear layers, one iteration


def test_a_version_without_wheel_data_is_refused(tmp_path, capsys):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text("import torch\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    assert cli.main(["-m", "runtime_ops", "-v", "1.11", "-i", str(tmp_path / "proj"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no ATen kernel data for torch_npu 1.11.0" in err and "2.13.0" in err and err.count("\n") == 1
    assert list((tmp_path / "out").iterdir()) == []


def load_ops(folder: Path):
    import shutil
    import sys

    from runtime_support import forget_package

    shutil.copytree(PACKAGE_SOURCE, folder / "msft_dynamic_analysis")
    forget_package()
    sys.path.insert(0, str(folder))
    try:
        from msft_dynamic_analysis import ops
    finally:
        sys.path.remove(str(folder))
    return ops


def test_table_lookup(tmp_path):
    from flake8_ascend.runtime.msft_dynamic_analysis import ops as in_source_tree

    assert in_source_tree.find_table(None)[0] == "2.13.0"  # the source tree's tables: the newest
    assert in_source_tree.find_table("2.6")[0] == "2.6.0"
    version, message = in_source_tree.find_table("1.11")
    assert version is None and message.startswith("no table for torch_npu 1.11 (have: 2.1.0, 2.3.1,")
    ops = load_ops(tmp_path)  # a copy without a table
    version, message = ops.find_table(None)
    assert version is None and message.startswith("no aten_ops_<version>.json beside ")
    beside = tmp_path / "msft_dynamic_analysis" / "aten_ops_2.7.1.json"
    beside.write_text(json.dumps({"kernel": ["add.Tensor"], "composite": [], "fallback": ["mode"],
                                  "unsupported": []}), encoding="utf-8")
    assert ops.find_table(None) == ("2.7.1", str(beside))
    status, _ = ops.load_table(beside)
    assert status == {"add.Tensor": "kernel", "mode": "fallback"}
    assert ops.op_key("aten::sum.dim_IntList") == "sum.dim_IntList"
    assert ops.op_key("torchvision::nms") == "torchvision::nms"


def test_a_copy_without_its_table_writes_no_report(copy):
    (copy / "msft_dynamic_analysis" / "aten_ops_2.13.0.json").unlink()
    log = run_script(copy / "train.py", "fallback")
    assert "cannot check operators: no aten_ops_<version>.json beside" in log
    assert not (copy / REPORT).exists()
