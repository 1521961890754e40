"""The overflow detector and dump comparison with real torch on CPU (scripts run in this process)."""
import json
import math
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from flake8_ascend import cli  # noqa: E402
from flake8_ascend.offline import dump_compare as dumps  # noqa: E402
from runtime_support import PACKAGE_SOURCE, header, read_rows, run_script  # noqa: E402

REPORT = "msft_overflow_report.csv"
HEADER = ["Iteration", "Phase", "Op", "Dtypes", "Input Shapes", "Output Shapes", "Non-finite", "File Path",
          "Line Number", "Library Frame", "Call Stack", "Dump"]
# fc2 overflows in iteration 2 only: fc1 gives 8 * scale (finite), fc2 16 * 8 * scale (beyond the dtype's range)
TRAIN = textwrap.dedent('''\
    import sys
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            x = torch.relu(self.fc1(x))
            return self.fc2(x)


    def main():
        dtype = getattr(torch, sys.argv[1])
        big = {"float16": 1000.0, "bfloat16": 3e37}[sys.argv[1]] if sys.argv[2] == "big" else 2.0
        model = Net().to(dtype)
        with torch.no_grad():
            for weight in model.parameters():
                weight.fill_(1.0)
        train_loader = [torch.ones(2, 8, dtype=dtype) * scale for scale in (1.0, 2.0, big, 1.0)]
        for x in train_loader:
            loss = model(x).float().mean()
            loss.backward()
            with torch.no_grad():  # plain SGD: torch.optim would import torch._dynamo (seconds)
                for weight in model.parameters():
                    weight -= 1e-9 * weight.grad
                    weight.grad = None


    if __name__ == "__main__":
        main()
    ''')
FC2_LINE = 14  # return self.fc2(x)


def analyse(tmp_path: Path, *flags: str) -> Path:
    source = tmp_path / "proj"
    source.mkdir()
    (source / "train.py").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "out").mkdir()
    assert cli.main(["-m", "overflow", "-i", str(source), "-o", str(tmp_path / "out"), "-q", *flags]) == 0
    return tmp_path / "out" / "proj_analysis"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_overflow_is_reported_at_its_layer_and_iteration_and_dumped(tmp_path, dtype):
    copy = analyse(tmp_path, "--dump", "1")
    first = (copy / "train.py").read_text(encoding="utf-8").splitlines()[0]
    assert first == "import sys; from msft_dynamic_analysis.overflow import OVERFLOW as DETECTOR"
    log = run_script(copy / "train.py", dtype, "big")
    assert "iteration 2: aten::addmm made inf/nan from finite inputs (forward)" in log
    (row,) = read_rows(copy / REPORT)
    assert (row["Iteration"], row["Phase"], row["Op"], row["File Path"], row["Line Number"]) == \
        ("2", "forward", "aten::addmm", "train.py", str(FC2_LINE))
    assert row["Dtypes"] == f"{dtype} -> {dtype}" and row["Output Shapes"] == "[2,4]"
    assert row["Non-finite"] == "output 0: 8 inf, 0 nan of 8"
    assert row["Call Stack"] == f"train.py:35 in <module> -> train.py:26 in main -> train.py:{FC2_LINE} in forward"
    assert row["Dump"] == "2/0/5.aten.addmm.default"
    folder = copy / "msft_overflow_dump" / "2" / "0"
    names = sorted(p.name for p in folder.iterdir())
    tensors = ("input.0", "input.1", "input.2", "output.0")
    assert names == [f"5.aten.addmm.default.{name}.pt" for name in tensors] + ["ops.csv"]
    output = torch.load(folder / "5.aten.addmm.default.output.0.pt")
    assert output.dtype == getattr(torch, dtype) and bool(torch.isinf(output).all())
    assert bool(torch.isfinite(torch.load(folder / "5.aten.addmm.default.input.1.pt")).all())
    (manifest,) = read_rows(folder / "ops.csv")
    assert (manifest["Index"], manifest["Op"], manifest["Why"], manifest["Line Number"]) == \
        ("5", "aten::addmm", "overflow", str(FC2_LINE))


def test_mode_flags_reach_the_copy(tmp_path, capsys):
    copy = analyse(tmp_path, "--dump-all", "3", "--overflow-iterations", "2-5", "--overflow-every", "2")
    settings = json.loads((copy / "msft_dynamic_analysis" / "settings.json").read_text(encoding="utf-8"))
    assert settings == {"overflow": {"dump": 0, "dump_all": 3, "every": 2, "iterations": "2-5"}}
    log = (copy / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert "wrapped data loop: train.py:25: for x in train_loader:" in log
    assert "detector: msft_dynamic_analysis.overflow.OVERFLOW" in log
    assert cli.main(["-m", "overflow", "-i", str(tmp_path / "proj"), "-o", str(tmp_path / "out"), "--dump", "x"]) == 2
    assert "argument --dump: expected a number (0 or more), got 'x'" in capsys.readouterr().err
    assert cli.main(["-m", "overflow", "-i", str(tmp_path / "proj"), "-o", str(tmp_path / "out"),
                     "--overflow-iterations", "5-2"]) == 2
    assert "argument --overflow-iterations: expected all, N or A-B" in capsys.readouterr().err
    assert cli.main(["-m", "overflow", "-i", str(tmp_path / "proj"), "-o", str(tmp_path / "out"),
                     "--overflow-every", "0"]) == 2
    assert "argument --overflow-every: expected a positive number, got '0'" in capsys.readouterr().err


def test_a_stable_model_reports_nothing(tmp_path):
    copy = analyse(tmp_path, "--dump", "3")
    log = run_script(copy / "train.py", "float16", "small")
    assert header(copy / REPORT) == HEADER and read_rows(copy / REPORT) == []
    assert "no operator overflowed over 4 iterations" in log
    assert not (copy / "msft_overflow_dump").exists()


def project_with(tmp_path: Path, script: str) -> Path:
    """A project folder holding the hook package and ``train.py``."""
    import shutil

    shutil.copytree(PACKAGE_SOURCE, tmp_path / "msft_dynamic_analysis")
    (tmp_path / "train.py").write_text(textwrap.dedent(script), encoding="utf-8")
    return tmp_path / "train.py"


def test_backward_overflow_names_the_forward_line(tmp_path):
    script = project_with(tmp_path, '''\
        import torch
        from torch import nn
        from msft_dynamic_analysis.overflow import OVERFLOW

        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).half()
        with torch.no_grad():
            for weight in model.parameters():
                weight.fill_(1.0)
        for scale in OVERFLOW.start([1.0, 30000.0]):
            out = model(torch.ones(2, 8, dtype=torch.float16))
            out.backward(torch.full_like(out, scale))
        ''')
    run_script(script)
    rows = read_rows(tmp_path / REPORT)
    assert [(r["Iteration"], r["Phase"], r["Op"], r["Line Number"]) for r in rows] == \
        [("1", "backward (AddmmBackward0)", "aten::mm", "10")] * 2  # grad input and grad weight of the 2nd Linear


def test_in_place_overflow_is_seen_and_deliberate_infinities_are_not(tmp_path):
    script = project_with(tmp_path, '''\
        import torch
        from msft_dynamic_analysis.overflow import OVERFLOW

        for x in OVERFLOW.start([torch.full((4,), 100.0, dtype=torch.float16)]):
            mask = torch.tensor([True, False, True, False])
            scores = x.masked_fill(mask, float("-inf"))  # an attention mask: -inf on purpose
            probs = torch.softmax(scores, 0)  # from -inf inputs: not the first overflow
            padding = torch.full((3,), float("inf"))
            scratch = torch.empty(10000)  # uninitialised memory may read as nan
            x.mul_(1000.0)  # 100000 does not fit in float16
        ''')
    run_script(script)
    rows = read_rows(tmp_path / REPORT)
    assert [(r["Op"], r["Line Number"], r["Input Shapes"]) for r in rows] == [("aten::mul_.Tensor", "10", "[4]")]


def test_iterations_outside_the_window_are_not_checked(tmp_path, monkeypatch):
    copy = analyse(tmp_path, "--overflow-iterations", "2")
    monkeypatch.setenv("MSFT_OVERFLOW_ITERATIONS", "0-1")  # the environment wins over the copy's settings
    run_script(copy / "train.py", "float16", "big")
    assert read_rows(copy / REPORT) == []
    monkeypatch.setenv("MSFT_OVERFLOW_ITERATIONS", "")  # empty: not set
    run_script(copy / "train.py", "float16", "big")
    assert [r["Iteration"] for r in read_rows(copy / REPORT)] == ["2"]


def test_without_dispatch_mode_nothing_is_claimed(tmp_path, monkeypatch):
    copy = analyse(tmp_path)
    monkeypatch.delattr(torch.utils._python_dispatch.TorchDispatchMode, "__enter__")  # as on torch < 1.13
    log = run_script(copy / "train.py", "float16", "big")
    assert "has no TorchDispatchMode" in log and "no msft_overflow_report.csv written" in log
    assert not (copy / REPORT).exists()


# -- dumps of whole iterations, compared -------------------------------------------------------
DUMP_ALL = '''\
    import sys
    import torch
    import torch.nn.functional as F
    from torch import nn
    from msft_dynamic_analysis.overflow import OVERFLOW

    dtype = getattr(torch, sys.argv[1])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).to(dtype)
    generator = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 16, generator=generator), torch.randn(8, 4, generator=generator)) for _ in range(3)]
    for x, y in OVERFLOW.start(batches, dump_all=1, dump_path=sys.argv[2]):
        loss = F.mse_loss(model(x.to(dtype)), y.to(dtype))
        loss.backward()
        with torch.no_grad():
            for weight in model.parameters():
                weight -= 0.01 * weight.grad
                weight.grad = None
    '''


@pytest.fixture(scope="module")
def three_dumps(tmp_path_factory):
    """Iteration 1 dumped from a float32 run, a bfloat16 run and a second float32 run."""
    root = tmp_path_factory.mktemp("dumps")
    script = project_with(root, DUMP_ALL)
    for name, dtype in (("fp32", "float32"), ("bf16", "bfloat16"), ("fp32_again", "float32")):
        run_script(script, dtype, str(root / name))
    return root


def compare_rows(tmp_path, a: Path, b: Path):
    (tmp_path / "out").mkdir(exist_ok=True)
    assert cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "out"), "-q"]) == 0
    return read_rows(tmp_path / "out" / f"compare_{a.name}_vs_{b.name}_analysis" / "compare_result.csv")


def test_a_run_compared_with_itself_is_identical(three_dumps, tmp_path):
    rows = compare_rows(tmp_path, three_dumps / "fp32", three_dumps / "fp32_again")
    operators = {r["Index A"] for r in rows}
    assert len(operators) > 20 and len(rows) > 60
    assert {(r["Cosine"], r["Max Abs Error"], r["Max Relative Error"], r["Result"]) for r in rows} == \
        {("1", "0", "0", "pass")}
    assert all(r["Index A"] == r["Index B"] for r in rows)


def test_float32_against_bfloat16_gives_plausible_metrics(three_dumps, tmp_path):
    rows = compare_rows(tmp_path, three_dumps / "bf16", three_dumps / "fp32")
    matched = [r for r in rows if r["Result"] != "unmatched"]
    unmatched = [r for r in rows if r["Result"] == "unmatched"]
    # the bfloat16 run casts its two inputs (x.to, y.to): those copies exist in dump A only
    assert [(r["Op"], r["Message"]) for r in unmatched] == [("aten::_to_copy", "operator only in dump A")] * 2
    reference_ops = {r["Index B"] for r in matched}
    fp32_ops = {row["Index"] for row in read_rows(three_dumps / "fp32" / "1" / "0" / "ops.csv")}
    assert reference_ops == fp32_ops  # every float32 operator has its rows
    assert {(r["Dtype A"], r["Dtype B"]) for r in matched if r["Op"] == "aten::addmm"} == {("bfloat16", "float32")}
    cosines = [float(r["Cosine"]) for r in matched]
    assert min(cosines) > 0.999 and max(cosines) <= 1.0
    errors = [float(r["Max Abs Error"]) for r in matched]
    assert max(errors) > 1e-4 and max(errors) < 0.1  # bfloat16 keeps about 3 significant digits
    assert {r["Result"] for r in matched} <= {"pass", "warn"} and "warn" in {r["Result"] for r in matched}
    addmm = next(r for r in matched if r["Op"] == "aten::addmm" and r["Tensor"] == "output.0")
    assert addmm["File Path"] == "train.py" and addmm["Line Number"] == "13"


# -- the comparison itself -------------------------------------------------------------------
def test_metrics_verdicts():
    same = torch.arange(6.0).reshape(2, 3)
    assert dumps.metrics(torch, same, same.clone()) == ("1", "0", "0", "pass", "")
    close = dumps.metrics(torch, same + 1e-4, same)
    assert close[3] == "pass" and float(close[1]) == pytest.approx(1e-4, rel=0.01)
    off = dumps.metrics(torch, same * 1.05, same)
    assert off[3] == "warn" and float(off[0]) == pytest.approx(1.0) and float(off[2]) == pytest.approx(0.05)
    assert dumps.metrics(torch, -same, same)[3] == "fail"
    assert dumps.metrics(torch, same, same.reshape(3, 2))[3:] == ("fail", "shapes differ: [2,3] vs [3,2]")
    holes = same.clone()
    holes[0, 0] = math.nan
    assert dumps.metrics(torch, holes, same)[3:] == ("fail", "inf/nan at different places")
    assert dumps.metrics(torch, holes, holes.clone())[3] == "pass"
    assert dumps.metrics(torch, torch.zeros(3), torch.ones(3))[0] == "0"


def write_dump(folder: Path, ops):
    folder.mkdir(parents=True)
    for index, (op, value) in enumerate(ops):
        torch.save(value, folder / f"{index}.{op}.output.0.pt")


def test_operators_are_aligned_by_order_and_name(tmp_path):
    one = torch.ones(2)
    write_dump(tmp_path / "a" / "0" / "0", [("aten.t.default", one), ("aten.relu.default", one),
                                            ("aten.mm.default", one)])
    write_dump(tmp_path / "b" / "0" / "0", [("aten.t.default", one), ("aten._to_copy.default", one),
                                            ("aten.relu.default", one), ("aten.mm.default", one * 2)])
    rows = dumps.compare(tmp_path / "a", tmp_path / "b")
    result = [(r[2], r[4], r[5], r[13]) for r in rows]
    assert result == [("aten::t", 0, 0, "pass"), ("aten::_to_copy", "", 1, "unmatched"),
                      ("aten::relu", 1, 2, "pass"), ("aten::mm", 2, 3, "warn")]


def test_a_step_folder_or_a_rank_folder_can_be_given(tmp_path):
    write_dump(tmp_path / "a" / "3" / "0", [("aten.relu.default", torch.ones(2))])
    write_dump(tmp_path / "b" / "5" / "0", [("aten.relu.default", torch.ones(2))])
    assert [r[13] for r in dumps.compare(tmp_path / "a", tmp_path / "b")] == ["pass"]
    assert [r[13] for r in dumps.compare(tmp_path / "a" / "3", tmp_path / "b" / "5" / "0")] == ["pass"]


@pytest.mark.parametrize("argv,message", [
    (["compare", "only_one"], "compare needs two dump folders"),
    (["compare", "missing", "good"], "input not found: missing"),
    (["compare", "good", "missing"], "dump folder not found"),
    (["compare", "empty", "good"], "no dump files in"),
    (["compare", "good", "good", "--format", "sarif"], "writes no sarif output"),
    (["compare", "broken", "good"], "cannot read"),
])
def test_bad_compare_input_is_one_line(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    write_dump(tmp_path / "good" / "0" / "0", [("aten.relu.default", torch.ones(2))])
    (tmp_path / "broken" / "0" / "0").mkdir(parents=True)
    (tmp_path / "broken" / "0" / "0" / "0.aten.relu.default.output.0.pt").write_bytes(b"not a tensor file")
    (tmp_path / "out").mkdir()
    assert cli.main([*argv, "-o", "out"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list((tmp_path / "out").iterdir()) == []


def test_compare_without_torch_says_so(tmp_path, monkeypatch):
    write_dump(tmp_path / "a" / "0" / "0", [("aten.relu.default", torch.ones(2))])
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    with pytest.raises(dumps.CompareError, match="comparing dumps needs torch"):
        dumps.compare(tmp_path / "a", tmp_path / "a")


def test_compare_names_its_folder_after_both_dumps_and_their_rank_folders(tmp_path):
    from flake8_ascend.modes.compare import Compare

    (tmp_path / "gpu_dump" / "0").mkdir(parents=True)
    (tmp_path / "npu_dump" / "0").mkdir(parents=True)
    args = type("Args", (), {"against": str(tmp_path / "gpu_dump" / "0")})()
    assert Compare.report_name(tmp_path / "npu_dump" / "0", args) == "compare_npu_dump-0_vs_gpu_dump-0_analysis"
