"""The runtime shape detector with real torch on CPU: the analysed copy reports what the original does.

The scripts run in this process (``runpy``, as ``python train.py`` would run
them) so torch is imported once for the whole module.
"""
import csv
import io
import os
import runpy
import sys
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from flake8_ascend.runtime.inject import PACKAGE, REPORT_NAME, instrument_tree  # noqa: E402

TRAIN = textwrap.dedent('''\
    """A tiny training run whose number of selected elements varies per batch."""
    import sys
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    FIXED = "--fixed" in sys.argv


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(1, 8)
            self.head = nn.Linear(8, 1)

        def forward(self, x):
            picked = x[:, :3].reshape(-1) if FIXED else x[x > 0]
            hidden = torch.relu(self.layer(picked.unsqueeze(1)))
            return self.head(hidden).mean()


    def main():
        torch.manual_seed(0)
        data = TensorDataset(torch.randn(16, 6))
        train_loader = DataLoader(data, batch_size=4, shuffle=True, drop_last=True)
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step, (x,) in enumerate(train_loader):
            loss = model(x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"step {step} loss {loss.item():.6f}")


    if __name__ == "__main__":
        main()
    ''')
SELECT_LINE = 17  # picked = ... x[x > 0]
HEADER = ["Function Name", "File Path", "Line Number", "Phase", "Distinct Shapes", "Library Frame", "Call Stacks",
          "Input Shape Range", "Output Shape Range"]
LAYER_LINE = 18  # self.layer(...)


def run_script(script: Path, *argv: str) -> str:
    """Run ``script`` as ``python script argv...`` would (its folder first on sys.path); return its stdout."""
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    saved_path, saved_argv = list(sys.path), list(sys.argv)
    sys.path.insert(0, str(script.parent))
    sys.argv = [str(script), *argv]
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.path[:], sys.argv[:] = saved_path, saved_argv
    return out.getvalue()


def read_report(root: Path, name: str = REPORT_NAME):
    with open(root / name, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


@pytest.fixture
def project(tmp_path):
    source = tmp_path / "proj"
    source.mkdir()
    (source / "train.py").write_text(TRAIN, encoding="utf-8")
    copy = tmp_path / "proj_analysis"
    result = instrument_tree(source, copy)
    assert [(w.path, w.line) for w in result.wrapped] == [("train.py", 28)]
    return source, copy


def test_varying_selection_is_reported_and_losses_match_the_original(project):
    source, copy = project
    original = run_script(source / "train.py")
    instrumented = run_script(copy / "train.py")
    assert original.count("loss") == 4
    assert instrumented == original  # same loss values, bit for bit
    header, *rows = read_report(copy)
    assert header == HEADER
    by_site = {(r[0], r[1], int(r[2])): r for r in rows}
    assert len(by_site) == len(rows)  # one row per function and line
    select = by_site[("torch.Tensor.__getitem__", "train.py", SELECT_LINE)]
    low, high = select[8].strip("[]").split("-")
    assert low != high and low.startswith("(") and low.endswith(",)")  # a 1-d result of varying length
    assert select[7] == "[(4, 6)-(4, 6)], [(4, 6)-(4, 6)]"  # the batch and its mask never change
    assert "train.py:17 in forward" in select[6] and "in main" in select[6]
    assert select[3] == "train" and select[5] == "" and int(select[4]) > 1
    assert ("torch.nn.Linear", "train.py", LAYER_LINE) in by_site
    assert all(row[1] == "train.py" for row in rows)  # nothing from torch's own code (optimizer, loader)
    assert not (source / REPORT_NAME).exists()  # the original tree is untouched


def test_fixed_shapes_give_an_empty_report(project):
    _, copy = project
    run_script(copy / "train.py", "--fixed")
    assert read_report(copy) == [HEADER]


def test_iterations_outside_the_recording_window_are_not_recorded(project, monkeypatch):
    _, copy = project
    monkeypatch.setenv("MSFT_SHAPES_ITERATIONS", "1")  # the first iteration only: nothing to compare it with
    monkeypatch.setenv("MSFT_SHAPES_EVERY", "0")
    run_script(copy / "train.py")
    assert read_report(copy) == [HEADER]
    monkeypatch.setenv("MSFT_SHAPES_EVERY", "2")  # then one in 2: iterations 0, 1 and 3 of 4
    run_script(copy / "train.py")
    select = [row for row in read_report(copy)[1:] if row[0] == "torch.Tensor.__getitem__"]
    assert [(row[2], row[4]) for row in select] == [(str(SELECT_LINE), "3")]  # three selection sizes seen


def test_each_rank_writes_its_own_report(project, monkeypatch):
    _, copy = project
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    run_script(copy / "train.py")
    assert not (copy / REPORT_NAME).exists()
    rows = read_report(copy, REPORT_NAME.replace(".csv", "_rank1.csv"))
    assert any(row[0] == "torch.Tensor.__getitem__" for row in rows[1:])


def test_without_torch_function_mode_module_calls_are_still_recorded(project, monkeypatch):
    _, copy = project
    monkeypatch.delattr(torch.overrides, "TorchFunctionMode")
    run_script(copy / "train.py")
    names = {row[0] for row in read_report(copy)[1:]}
    assert names == {"torch.nn.Linear"}


def test_a_copy_whose_detector_is_not_started_runs_like_the_original(project):
    source, copy = project
    script = copy / "train.py"
    text = script.read_text(encoding="utf-8")
    script.write_text(text.replace("DETECTOR.start(enumerate(train_loader))", "enumerate(train_loader)"),
                      encoding="utf-8")  # imported, never started
    assert "import DETECTOR" in script.read_text(encoding="utf-8")
    assert run_script(script) == run_script(source / "train.py")
    assert not (copy / REPORT_NAME).exists()


def load_hook(copy: Path):
    """A fresh ``msft_dynamic_analysis.hook`` module from the analysis folder ``copy``."""
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    sys.path.insert(0, str(copy))
    try:
        from msft_dynamic_analysis import hook
    finally:
        sys.path.remove(str(copy))
    return hook


def test_leaving_the_loop_early_still_writes_the_report(project):
    _, copy = project
    hook = load_hook(copy)
    loop = hook.DETECTOR.start([torch.ones(2), torch.ones(3)])
    for _ in loop:
        break  # the generator stays referenced: the exit hook must write the report
    assert not (copy / REPORT_NAME).exists()
    hook.DETECTOR._at_exit()
    assert (copy / REPORT_NAME).exists()
    loop.close()
    assert torch._C._len_torch_function_stack() == 0  # no mode left behind


def test_torch_optimizer_steps_are_not_intercepted(project):
    hook = load_hook(project[1])
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    seen = []
    spy = hook.DETECTOR._on_function
    hook.DETECTOR._on_function = lambda func, args, kwargs: seen.append(func.__name__) or spy(func, args, kwargs)
    try:
        for _ in hook.DETECTOR.start([0]):
            weight.sum().backward()
            optimizer.step()
            assert torch.overrides._get_current_function_mode() is hook.DETECTOR._mode  # back after the step
    finally:
        del hook.DETECTOR._on_function
    assert "sum" in seen and "add_" not in seen  # SGD's update ran with the mode set aside
    assert torch.equal(weight.detach(), torch.full((3,), 0.9))


def test_a_failing_optimizer_step_leaves_no_mode_behind(project):
    hook = load_hook(project[1])
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    for _ in hook.DETECTOR.start([0]):
        hook.DETECTOR._before_step(optimizer, (), {})  # a step that raised: its post-hook never ran
    assert torch._C._len_torch_function_stack() == 0


def test_a_nested_start_passes_items_through(project):
    _, copy = project
    hook = load_hook(copy)
    seen = [(a, b) for a in hook.DETECTOR.start([1, 2]) for b in hook.DETECTOR.start("xy")]
    assert seen == [(1, "x"), (1, "y"), (2, "x"), (2, "y")]
    assert hook.DETECTOR.iteration == 2


def test_shape_range_text_matches_the_official_layout(project):
    hook = load_hook(project[1])
    shapes = hook.ShapeRange()
    for shape in [(1, 2, 3), (1, 2, 4), (1, 3, 5), (1, 3, 4), (7,)]:
        shapes.add(shape)
    assert str(shapes) == "[(7,)-(7,) | (1, 2, 3)-(1, 3, 5)]"


def test_rank_names():
    from flake8_ascend.runtime.msft_dynamic_analysis.hook import ranked_name
    assert ranked_name("report.csv", None) == "report.csv"
    assert ranked_name("report.csv", 3) == "report_rank3.csv"


def test_the_detector_adds_no_overhead_until_started(project):
    hook = load_hook(project[1])
    assert torch._C._len_torch_function_stack() == 0
    assert not torch.nn.modules.module._global_forward_hooks
    assert hook.DETECTOR.iteration == 0 and "torch" in sys.modules  # torch came from this test, not the hook
    assert os.path.samefile(hook.ROOT, project[1])
