"""The runtime copies on programs shaped like real ones: packages, library internals, train and eval loops.

Issue 16: yolov5 as a package, torchvision.ops.nms inside a library, validation loops
never recorded, report rows merging train and val paths.  Each case is a small
project built here and run with torch 2.13 on CPU.
"""
import io
import runpy
import sys
import textwrap
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from flake8_ascend import cli  # noqa: E402
from flake8_ascend.runtime.inject import REPORT_NAME, instrument_tree  # noqa: E402
from runtime_support import forget_package, read_rows, run_script  # noqa: E402

MODEL = textwrap.dedent('''\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(1, 1)

        def forward(self, x):
            picked = x[x > 0]  # how many: varies per batch
            return self.head(picked.unsqueeze(1)).mean()
    ''')
PICK_LINE = 11
PACKAGE_FILES = {
    "mypkg/__init__.py": "",
    "mypkg/model.py": MODEL,
    "mypkg/data/__init__.py": "from .batches import batches  # a relative import\n",
    "mypkg/data/batches.py": textwrap.dedent('''\
        import torch


        def batches(count):
            generator = torch.Generator().manual_seed(0)
            for _ in range(count):
                yield torch.randn(4, 6, generator=generator)
        '''),
    "mypkg/train.py": textwrap.dedent('''\
        import torch

        from mypkg.model import Net  # absolute
        from .data import batches  # relative


        def main():
            torch.manual_seed(0)
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in batches(4):  # a generator: wrapped because its body runs a training step
                loss = model(x)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                print("loss %.6f" % loss.item())


        if __name__ == "__main__":
            main()
        '''),
}


def write(root: Path, files):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def analyse(mode, source: Path, out: Path, capsys, *extra):
    out.mkdir(exist_ok=True)
    assert cli.main(["-m", mode, "-i", str(source), "-o", str(out), *extra]) == 0
    return capsys.readouterr()


def python(first: Path, target: str, installed: Path):
    """Run ``python -m target`` (or ``python target`` for a file) in this process as from ``first`` with the
    original project installed (last on sys.path); returns (stdout, stderr)."""
    saved_path, saved_argv = list(sys.path), list(sys.argv)
    forget_package()
    for name in [m for m in sys.modules if m.partition(".")[0] == "mypkg"]:
        del sys.modules[name]
    sys.path[:] = [str(first)] + [p for p in saved_path if p not in ("", ".")] + [str(installed)]
    sys.argv = [target]
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            if target.endswith(".py"):
                runpy.run_path(target, run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
    finally:
        sys.path[:], sys.argv[:] = saved_path, saved_argv
        for name in [m for m in sys.modules if m.partition(".")[0] == "mypkg"]:
            del sys.modules[name]
    return out.getvalue(), err.getvalue()


@pytest.mark.parametrize("at_package", [True, False], ids=["-i package", "-i its parent"])
def test_a_packaged_project_runs_instrumented_from_its_copy(tmp_path, capsys, at_package):
    project = tmp_path / "proj"
    write(project, PACKAGE_FILES)
    source = project / "mypkg" if at_package else project
    analyse("dynamic_shape", source, tmp_path / "out", capsys)
    copy = tmp_path / "out" / f"{source.name}_analysis"
    log = (copy / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert (copy / "mypkg" / "train.py").is_file() and (copy / "msft_dynamic_analysis" / "hook.py").is_file()
    assert f"to run mypkg/train.py instrumented: cd {copy} && python -m mypkg.train" in log
    assert ("is a package: the copy keeps it as mypkg/" in log) == at_package
    original, _ = python(project, "mypkg.train", project)
    # the original importable too (an installed package): the copy's modules must still be the ones run
    instrumented, log = python(copy, "mypkg.train", project)
    assert instrumented == original and original.count("loss") == 4
    assert "imported from elsewhere" not in log
    rows = read_rows(copy / REPORT_NAME)
    assert ("torch.Tensor.__getitem__", "mypkg/model.py", str(PICK_LINE)) in {
        (r["Function Name"], r["File Path"], r["Line Number"]) for r in rows}


def test_a_copy_run_against_an_installed_original_says_so(tmp_path, capsys):
    project = tmp_path / "proj"
    write(project, PACKAGE_FILES)
    analyse("dynamic_shape", project, tmp_path / "out", capsys)
    copy = tmp_path / "out" / "proj_analysis"
    script = copy / "mypkg" / "train.py"
    text = script.read_text(encoding="utf-8").replace("from .data import", "from mypkg.data import")
    script.write_text(text, encoding="utf-8")  # runnable as a file, so that `mypkg` comes from PYTHONPATH
    _, log = python(script.parent, str(script), project)
    assert "modules named like this copy's were imported from elsewhere (mypkg from " in log


LIBRARY = textwrap.dedent('''\
    import torch


    def positives(scores):
        return torch.nonzero(scores > 0)


    def positives_op(scores):  # a compiled operator, as torchvision.ops.nms calls torch.ops.torchvision.nms
        return torch.ops.fakelib.positives(scores)


    def both_signs(scores):
        up = torch.nonzero(scores > 0)
        return up, torch.nonzero(scores < 0)


    try:
        torch.library.define("fakelib::positives", "(Tensor scores) -> Tensor")
        torch.library.impl("fakelib::positives", "CPU", lambda scores: torch.nonzero(scores > 0))
    except RuntimeError:
        pass  # defined by an earlier import in this process
    ''')
LIBRARY_USER = textwrap.dedent('''\
    import os
    import sys
    import torch

    sys.path.insert(0, os.environ["FAKELIB_PATH"])
    import fakelib.select


    def main():
        torch.manual_seed(0)
        weight = torch.nn.Parameter(torch.ones(6))
        optimizer = torch.optim.SGD([weight], lr=0.1)
        train_loader = [torch.randn(6) for _ in range(4)]
        for scores in train_loader:
            keep = fakelib.select.positives(scores * weight)
            kept = fakelib.select.positives_op(scores)
            up, down = fakelib.select.both_signs(scores)
            loss = (weight * scores).sum() + 0 * keep.numel() * kept.numel() * up.numel() * down.numel()
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        main()
    ''')
CALL_LINE = 15


def test_a_call_made_inside_a_library_is_reported_at_the_project_line_with_the_library_frame(tmp_path, monkeypatch):
    library = tmp_path / "site" / "fakelib"
    write(library, {"__init__.py": "", "select.py": LIBRARY})
    monkeypatch.setenv("FAKELIB_PATH", str(tmp_path / "site"))
    for name in ("fakelib", "fakelib.select"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    write(tmp_path / "proj", {"train.py": LIBRARY_USER})
    instrument_tree(tmp_path / "proj", tmp_path / "copy")
    run_script(tmp_path / "copy" / "train.py")
    rows = read_rows(tmp_path / "copy" / REPORT_NAME)
    found = {(r["Function Name"], r["File Path"], r["Line Number"]): r for r in rows}
    nonzero = found[("torch.nonzero", "train.py", str(CALL_LINE))]
    assert nonzero["Library Frame"] == "fakelib/select.py:5 in positives"
    assert nonzero["Call Stacks"] == f"train.py:24 in <module> -> train.py:{CALL_LINE} in main"
    assert nonzero["Phase"] == "train" and nonzero["Output Shape Range"].startswith("[(")
    operator = found[("fakelib.positives", "train.py", str(CALL_LINE + 1))]
    assert operator["Library Frame"] == "fakelib/select.py:9 in positives_op"
    signs = [r["Library Frame"] for r in rows if r["Line Number"] == str(CALL_LINE + 2)]
    assert sorted(signs) == ["fakelib/select.py:13 in both_signs", "fakelib/select.py:14 in both_signs"]

    assert all(r["File Path"] == "train.py" for r in rows)  # nothing reported at a library's own line


TRAIN_AND_VALIDATE = textwrap.dedent('''\
    import torch
    from torch import nn


    def deep(layer, x, depth):  # more nested frames than a call stack keeps
        return layer(x) if depth == 0 else deep(layer, x, depth - 1)


    def main():
        torch.manual_seed(0)
        model = nn.Linear(6, 6)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        train_loader = [torch.randn(4, 6) for _ in range(3)]
        val_loader = [torch.randn(8, 6) for _ in range(3)]  # another batch size
        for epoch in range(2):
            for x in train_loader:
                out = deep(model, x, 6)
                out.sum().backward()
                optimizer.step()
                optimizer.zero_grad()
            with torch.no_grad():
                for x in val_loader:
                    out = deep(model, x, 6)
                    values, _ = torch.mode(out, 1)  # only in validation; no NPU kernel (fallback)
                    kept = out[out > 0]


    if __name__ == "__main__":
        main()
    ''')
TRAIN_LOOP, VAL_LOOP, MODE_LINE, KEPT_LINE = 16, 22, 24, 25


def test_each_loop_has_its_own_recording_window(tmp_path, capsys):
    write(tmp_path / "proj", {"train.py": TRAIN_AND_VALIDATE})
    analyse("runtime_ops", tmp_path / "proj", tmp_path / "out", capsys, "-v", "2.13")
    copy = tmp_path / "out" / "proj_analysis"
    log = (copy / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert f"wrapped data loop: train.py:{TRAIN_LOOP}" in log and f"wrapped data loop: train.py:{VAL_LOOP}" in log
    stderr = run_script(copy / "train.py")
    assert stderr.count("recording the ATen operators of the first 2 iterations") == 2  # once per loop
    assert f"of the loop at train.py:{VAL_LOOP}" in stderr
    rows = read_rows(copy / "msft_runtime_ops_report.csv")
    mode = [r for r in rows if r["Op"] == "aten::mode"]
    assert [(r["Line Number"], r["Loop"], r["Count"]) for r in mode] == \
        [(str(MODE_LINE), f"eval (train.py:{VAL_LOOP})", "2")]


def test_one_row_per_site_with_its_phase_and_no_row_from_merged_train_and_val_paths(tmp_path):
    write(tmp_path / "proj", {"train.py": TRAIN_AND_VALIDATE})
    instrument_tree(tmp_path / "proj", tmp_path / "copy")
    run_script(tmp_path / "copy" / "train.py")
    rows = read_rows(tmp_path / "copy" / REPORT_NAME)
    sites = [(r["Function Name"], r["File Path"], r["Line Number"]) for r in rows]
    assert len(sites) == len(set(sites))
    # nn.Linear sees batch 4 in training and 8 in validation, always: a static shape in each loop
    assert not [r for r in rows if r["Function Name"] == "torch.nn.Linear"]
    kept = [r for r in rows if r["Line Number"] == str(KEPT_LINE)]
    assert {r["Phase"] for r in kept} == {"eval"} and kept
    distinct = [int(r["Distinct Shapes"]) for r in rows]
    assert distinct == sorted(distinct, reverse=True)


def test_the_phase_cell_joins_the_loops_a_site_varies_in(tmp_path):
    script = TRAIN_AND_VALIDATE.replace("out = deep(model, x, 6)\n", "out = deep(model, x, 6)[x[:, 0] > 0]\n")
    assert script.count("[x[:, 0] > 0]") == 2
    write(tmp_path / "proj", {"train.py": script})
    instrument_tree(tmp_path / "proj", tmp_path / "copy")
    run_script(tmp_path / "copy" / "train.py")
    rows = read_rows(tmp_path / "copy" / REPORT_NAME)
    masks = [r for r in rows if r["Function Name"] == "torch.Tensor.__getitem__" and r["Line Number"] in
             (str(TRAIN_LOOP + 1), str(VAL_LOOP + 1))]
    expected = {(str(TRAIN_LOOP + 1), "train"), (str(VAL_LOOP + 1), "eval")}
    assert {(r["Line Number"], r["Phase"]) for r in masks} == expected


def test_recording_windows_and_sampling(tmp_path):
    from flake8_ascend.runtime.msft_dynamic_analysis import hook, overflow
    shapes = hook.DynamicShapeDetector()
    shapes.first, shapes.every = 2, 3
    assert [i for i in range(12) if shapes.records(i)] == [0, 1, 2, 5, 8, 11]
    shapes.every = 0
    assert [i for i in range(12) if shapes.records(i)] == [0, 1]
    checker = overflow.OverflowDetector()
    checker.window, checker.every = (4, 20), 5
    assert [i for i in range(30) if checker.checks(i)] == [4, 9, 14, 19]


def test_loops_iterated_through_a_library_are_told_apart_by_their_own_lines(tmp_path, monkeypatch):
    write(tmp_path / "site", {"passlib.py": "def passthrough(items):\n    for item in items:\n        yield item\n"})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "passlib", raising=False)
    script = textwrap.dedent('''\
        import sys
        import torch
        from passlib import passthrough
        from msft_dynamic_analysis.hook import DETECTOR

        for x in passthrough(DETECTOR.start([torch.ones(2)] * 3)):  # a progress bar around the wrapped loader
            x.sum()
        for x in passthrough(DETECTOR.start([torch.ones(3)] * 2)):
            x.sum()
        print(sorted((loop.where, loop.iterations) for loop in DETECTOR.loops.values()), file=sys.stderr)
        ''')
    write(tmp_path / "proj", {"run.py": script})
    instrument_tree(tmp_path / "proj", tmp_path / "copy")
    assert "[('run.py:6', 3), ('run.py:8', 2)]" in run_script(tmp_path / "copy" / "run.py")


# -- issue 24: the copies under real programs, each run exactly like the original ----------------------
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402

STEP_LOOP = textwrap.dedent('''\
    import torch


    def main():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            x = torch.randn(2 + step, 3)
            loss = model(x).mean()
            loss.backward()
            optimizer.step()
            print("loss %.6f" % loss.item())


    if __name__ == "__main__":
        main()
    ''')


def test_run_hints_are_shell_quoted(tmp_path, capsys):
    name = "train$(touch PWNED) x.py"
    write(tmp_path / "proj", {name: STEP_LOOP, "-dash.py": STEP_LOOP})
    out = tmp_path / "o u t"
    analyse("dynamic_shape", tmp_path / "proj", out, capsys)
    copy = out / "proj_analysis"
    log = (copy / "pytorch_analysis.txt").read_text(encoding="utf-8")
    hints = [line.split(" instrumented: ", 1)[1] for line in log.splitlines() if line.startswith("to run ")]
    assert len(hints) == 2
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text('#!/bin/sh\npwd\nprintf "%s\\n" "$@"\n')
    (fake / "python").chmod(0o755)
    ran = [subprocess.run(["bash", "-c", hint], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}, timeout=60).stdout.splitlines()
           for hint in hints]
    assert sorted(ran) == sorted([[str(copy), "./-dash.py"], [str(copy), name]])
    assert not list(tmp_path.rglob("PWNED"))


def run_program(script: Path, *argv: str):
    """(stdout, stderr) of ``python script`` run in this process, with fresh detectors."""
    forget_package()
    saved_path, saved_argv, saved_modules = list(sys.path), list(sys.argv), set(sys.modules)
    sys.path.insert(0, str(script.parent))
    sys.argv = [str(script), *argv]
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.path[:], sys.argv[:] = saved_path, saved_argv
        for name in set(sys.modules) - saved_modules:  # the project's own modules: the next run imports its copy
            if not name.startswith("torch"):
                del sys.modules[name]
    return out.getvalue(), err.getvalue()


def copy_and_run(tmp_path, capsys, mode, files, *extra, script="train.py"):
    """Copy the project ``files`` with ``mode``, run the original and the copy; returns (copy, copy's stderr)
    after checking that both printed the same."""
    write(tmp_path / "proj", files)
    analyse(mode, tmp_path / "proj", tmp_path / "out", capsys, *extra)
    copy = tmp_path / "out" / "proj_analysis"
    original, _ = run_program(tmp_path / "proj" / script)
    printed, log = run_program(copy / script)
    assert printed == original and original
    assert "Traceback" not in log
    return copy, log


SPARSE = textwrap.dedent('''\
    import torch

    torch.manual_seed(0)
    embedding = torch.nn.Embedding(10, 4, sparse=True)
    optimizer = torch.optim.SparseAdam(embedding.parameters())
    for step in range(3):
        loss = embedding(torch.tensor([1, 2, step])).pow(2).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print("loss %.6f" % loss.item())
    ''')


def test_sparse_gradients_run_in_the_operator_copy(tmp_path, capsys):
    copy, log = copy_and_run(tmp_path, capsys, "runtime_ops", {"train.py": SPARSE}, "-v", "2.13")
    rows = read_rows(copy / "msft_runtime_ops_report.csv")
    assert ("aten::sparse_mask", "unsupported", "9") in {(r["Op"], r["NPU Status"], r["Line Number"]) for r in rows}
    assert "operators without an NPU kernel (call sites)" in log


NESTED = textwrap.dedent('''\
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2).eval()
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    val_loader = [torch.randn(2, 5, 8) for _ in range(2)]
    with torch.inference_mode():
        for x in val_loader:
            out = encoder(x, src_key_padding_mask=padding)  # nested tensors inside (the fast path)
            print("out %.6f, padding %.6f" % (out.abs().sum().item(), out[1, 3:].abs().sum().item()))
    ''')


@pytest.mark.parametrize("mode", ["overflow", "runtime_ops", "dynamic_shape"])
def test_nested_tensors_of_the_transformer_fast_path_run_in_every_copy(tmp_path, capsys, mode):
    copy, log = copy_and_run(tmp_path, capsys, mode, {"train.py": NESTED}, *(["-v", "2.13"] * (mode == "runtime_ops")))
    report = {"overflow": "msft_overflow_report.csv", "runtime_ops": "msft_runtime_ops_report.csv"}.get(
        mode, REPORT_NAME)
    assert (copy / report).is_file()
    if mode == "overflow":
        assert read_rows(copy / report) == [] and "no operator overflowed over 2 iterations" in log


def test_nested_tensors_are_checked_for_overflow_through_their_parts():
    from flake8_ascend.runtime.msft_dynamic_analysis import overflow
    checker = overflow.OverflowDetector()
    checker.torch = torch
    parts = [torch.ones(2, 3), torch.tensor([[1.0, float("inf"), 0.0]])]
    nested = torch.nested.nested_tensor(parts)
    assert checker._nonfinite(nested) and not checker._nonfinite(torch.nested.nested_tensor([parts[0]]))
    assert overflow._describe_nonfinite(torch, [nested]) == "output 0: 1 inf, 0 nan of 9"
    assert overflow.shape_text([nested]) == "nested[2,3|1,3]"


def run_python(script: Path, *argv: str, env=None, timeout=120):
    """``python script`` in a fresh process started in the script's folder."""
    return subprocess.run([sys.executable, script.name, *argv], cwd=script.parent, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": "", **(env or {})})


@pytest.mark.parametrize("mode", ["dynamic_shape", "overflow"])
def test_a_comment_naming_the_detector_import_is_not_an_import(tmp_path, capsys, mode):
    comment = "# from msft_dynamic_analysis.hook import DETECTOR  (how to wrap a loop by hand)\n"
    copy, log = copy_and_run(tmp_path, capsys, mode, {"train.py": comment + STEP_LOOP})
    lines = (copy / "train.py").read_text(encoding="utf-8").splitlines()
    assert lines[0] == comment.rstrip("\n")  # the comment's text is kept
    imported = {"dynamic_shape": "from msft_dynamic_analysis.hook import DETECTOR",
                "overflow": "from msft_dynamic_analysis.overflow import OVERFLOW as DETECTOR"}[mode]
    assert lines[1] == f"import torch; {imported}"
    report = {"dynamic_shape": REPORT_NAME, "overflow": "msft_overflow_report.csv"}[mode]
    assert (copy / report).is_file() and "3 iterations" in log


def test_a_users_own_detector_import_is_pointed_at_the_chosen_detector(tmp_path, capsys):
    script = "from msft_dynamic_analysis.hook import DETECTOR; import torch\n" + STEP_LOOP.replace(
        "for step in range(3):", "for step in DETECTOR.start(range(3)):")
    write(tmp_path / "proj", {"train.py": script})
    analyse("runtime_ops", tmp_path / "proj", tmp_path / "out", capsys, "-v", "2.13")
    copied = (tmp_path / "out" / "proj_analysis" / "train.py").read_text(encoding="utf-8")
    assert copied.splitlines()[0] == "from msft_dynamic_analysis.ops import OPS as DETECTOR; import torch"
    assert copied.count("DETECTOR.start(") == 1


SHADOWED = {
    "sub/train.py": "import csv\n" + STEP_LOOP.replace('print("loss', 'print(csv.GREETING, "loss'),
    "sub/csv.py": 'GREETING = "a project module named csv"\n',
    "sub/msft_dynamic_analysis/__init__.py": "",
    "sub/msft_dynamic_analysis/hook.py": "class _Passthrough:\n    def start(self, items):\n        return items\n\n\n"
                                         "DETECTOR = _Passthrough()  # the project's own package of that name\n",
}


def test_neither_a_project_package_nor_a_csv_module_beside_the_script_stands_in_for_the_hook(tmp_path, capsys):
    write(tmp_path / "proj", SHADOWED)
    analyse("dynamic_shape", tmp_path / "proj", tmp_path / "out", capsys)
    copy = tmp_path / "out" / "proj_analysis"
    original = run_python(tmp_path / "proj" / "sub" / "train.py")
    instrumented = run_python(copy / "sub" / "train.py")
    assert original.returncode == instrumented.returncode == 0, instrumented.stderr
    assert instrumented.stdout == original.stdout and "a project module named csv" in original.stdout
    assert "Traceback" not in instrumented.stderr
    assert instrumented.stderr.count("\n") == 2 and "call sites changed shape over 3 iterations" in instrumented.stderr
    rows = read_rows(copy / REPORT_NAME)
    assert {(r["Function Name"], r["File Path"], r["Line Number"]) for r in rows} == {
        ("torch.randn", "sub/train.py", "10"), ("torch.nn.Linear", "sub/train.py", "11"),
        ("torch.Tensor.mean", "sub/train.py", "11")}


TWO_SCRIPTS = {
    "train.py": STEP_LOOP,
    "evaluate.py": textwrap.dedent('''\
        import torch

        torch.manual_seed(1)
        model = torch.nn.Linear(3, 1)
        val_loader = [torch.randn(n, 3) for n in (4, 5)]
        for x in val_loader:
            print("eval %.4f" % model(x).sum().item())
        '''),
}


def test_each_script_of_a_copy_writes_its_own_report(tmp_path, capsys):
    copy, _ = copy_and_run(tmp_path, capsys, "dynamic_shape", TWO_SCRIPTS)
    log = (copy / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert "msft_dynamic_shape_analysis_report_<script>.csv" in log
    run_program(copy / "evaluate.py")
    train = read_rows(copy / "msft_dynamic_shape_analysis_report_train.csv")
    evaluate = read_rows(copy / "msft_dynamic_shape_analysis_report_evaluate.csv")
    assert {r["File Path"] for r in train} == {"train.py"} and {r["File Path"] for r in evaluate} == {"evaluate.py"}
    assert {r["Phase"] for r in train} == {"train"} and {r["Phase"] for r in evaluate} == {"eval"}
    assert not (copy / REPORT_NAME).exists()


KILLED = textwrap.dedent('''\
    import os
    import signal
    import sys

    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if os.environ.get("OWN_HANDLER"):
        def stop(signum, frame):
            print("stopping on signal %d" % signum, flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, stop)
    for step in range(6):
        x = torch.randn(2 + step, 3)
        huge = (x.abs() + 1) * 3e38  # inf from finite inputs: a row of the overflow report
        loss = torch.mode(model(x).squeeze(1)).values  # no NPU kernel: a row of the operator report
        loss.backward()
        optimizer.step()
        print("step %d loss %.6f" % (step, loss.item()), flush=True)
        if step == 3:
            os.kill(os.getpid(), getattr(signal, os.environ["SIGNAL"]))
    ''')
KILLED_REPORTS = {  # mode -> (report, a row it must hold, settings closing the recording window after 2 iterations)
    "dynamic_shape": (REPORT_NAME, ("Function Name", "torch.randn", 16), {}),
    "overflow": ("msft_overflow_report.csv", ("Op", "aten::mul.Tensor", 17), {"MSFT_OVERFLOW_ITERATIONS": "0-1"}),
    "runtime_ops": ("msft_runtime_ops_report.csv", ("Op", "aten::mode", 18), {}),
}


@pytest.fixture(scope="module")
def killed_originals(tmp_path_factory):
    """The original program's (exit status, stdout) for each way of ending it."""
    folder = tmp_path_factory.mktemp("killed")
    write(folder, {"train.py": KILLED})
    cases = {"SIGTERM": {}, "own handler": {"OWN_HANDLER": "1"}, "SIGKILL": {}}
    found = {}
    for case, env in cases.items():
        done = run_python(folder / "train.py", env={"SIGNAL": case.replace("own handler", "SIGTERM"), **env})
        found[case] = done.returncode, done.stdout
    assert found["SIGTERM"][0] == -signal.SIGTERM and found["own handler"][0] == 3
    assert found["SIGKILL"][0] == -signal.SIGKILL and found["SIGTERM"][1].count("loss") == 4
    return found


@pytest.mark.parametrize("mode", list(KILLED_REPORTS))
def test_reports_survive_sigterm_and_sigkill_and_the_exit_status_is_the_originals(
        tmp_path, capsys, mode, killed_originals):
    write(tmp_path / "proj", {"train.py": KILLED})
    analyse(mode, tmp_path / "proj", tmp_path / "out", capsys, *(["-v", "2.13"] * (mode == "runtime_ops")))
    copy = tmp_path / "out" / "proj_analysis"
    report, (column, value, line), window = KILLED_REPORTS[mode]
    last = {"own handler": {"OWN_HANDLER": "1"}} if mode == "dynamic_shape" else {"SIGKILL": window}
    cases = {"SIGTERM": {}, **last}
    for case, env in cases.items():
        (copy / report).unlink(missing_ok=True)
        done = run_python(copy / "train.py", env={"SIGNAL": case.replace("own handler", "SIGTERM"), **env})
        assert (done.returncode, done.stdout) == killed_originals[case], (case, done.stderr)
        assert "Traceback" not in done.stderr
        rows = read_rows(copy / report)
        assert (value, str(line)) in {(r[column], r["Line Number"]) for r in rows}, (case, rows)
        assert not [p.name for p in copy.iterdir() if p.name.endswith(".tmp")]


DDP = textwrap.dedent('''\
    import datetime
    import os
    import sys

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        out = model(torch.randn(4, 3))
        loss = torch.mode(out.squeeze(1)).values
        loss.backward()
        optimizer.step()
        print("loss %.6f" % loss.item())
    dist.destroy_process_group()
    ''')


def test_collectives_of_a_ddp_program_are_not_problem_operators(tmp_path, capsys):
    # fresh processes, each with a time limit: a process group that never forms must fail this test, not hang the suite
    loopback = {"GLOO_SOCKET_IFNAME": "lo"}  # one process: loopback, never the host name's interface
    write(tmp_path / "proj", {"train.py": DDP})
    analyse("runtime_ops", tmp_path / "proj", tmp_path / "out", capsys, "-v", "2.13")
    copy = tmp_path / "out" / "proj_analysis"
    original = run_python(tmp_path / "proj" / "train.py", str(tmp_path / "store1"), env=loopback)
    instrumented = run_python(copy / "train.py", str(tmp_path / "store2"), env=loopback)
    assert original.returncode == instrumented.returncode == 0, instrumented.stderr
    assert instrumented.stdout == original.stdout and original.stdout.count("loss") == 3
    report = copy / "msft_runtime_ops_report.csv"
    assert [(r["Op"], r["Line Number"]) for r in read_rows(report)] == [("aten::mode", "15")]
    run_python(copy / "train.py", str(tmp_path / "store3"), env={**loopback, "MSFT_OPS_ALL": "1"})
    collectives = {(r["Op"], r["NPU Status"], r["Line Number"]) for r in read_rows(report) if "c10d" in r["Op"]}
    assert collectives == {("c10d::broadcast_", "kernel", "14"), ("c10d::allreduce_", "kernel", "16")}


COMPILED = textwrap.dedent('''\
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for n in range(2, 5):
        out = compiled(torch.randn(n, 3))
        loss = torch.nn.functional.mse_loss(out, torch.zeros_like(out))
        loss.backward()
        optimizer.step()
        print("loss %.6f" % loss.item())
    ''')


@pytest.mark.parametrize("mode", ["dynamic_shape", "overflow"])
def test_a_compiled_model_is_recorded_at_its_boundary_without_graph_breaks(tmp_path, capsys, mode):
    write(tmp_path / "proj", {"train.py": COMPILED})
    analyse(mode, tmp_path / "proj", tmp_path / "out", capsys)
    copy = tmp_path / "out" / "proj_analysis"
    # fresh processes: torch.compile leaves state behind that later tests would see
    original = run_python(tmp_path / "proj" / "train.py", env={"TORCH_LOGS": "graph_breaks"})
    instrumented = run_python(copy / "train.py", env={"TORCH_LOGS": "graph_breaks"})
    assert original.returncode == instrumented.returncode == 0, instrumented.stderr
    assert instrumented.stdout == original.stdout and original.stdout.count("loss") == 3
    for unwanted in ("Graph break", "Traceback", "global hooks"):
        assert unwanted not in instrumented.stderr, instrumented.stderr
    if mode == "dynamic_shape":
        rows = {r["Function Name"]: r for r in read_rows(copy / REPORT_NAME)}
        model = rows["torch.nn.Sequential"]
        assert (model["Line Number"], model["Distinct Shapes"]) == ("8", "3")
    else:
        assert read_rows(copy / "msft_overflow_report.csv") == []


def test_a_torch_warning_inside_a_recorded_iteration_names_the_users_line(tmp_path, capsys):
    import warnings
    script = STEP_LOOP.replace("x = torch.randn(2 + step, 3)",
                               "x = torch.nn.functional.softmax(torch.randn(2 + step, 3))")
    write(tmp_path / "proj", {"train.py": script})
    analyse("dynamic_shape", tmp_path / "proj", tmp_path / "out", capsys)
    seen = []
    for folder in (tmp_path / "proj", tmp_path / "out" / "proj_analysis"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_program(folder / "train.py")
        seen.append({(Path(w.filename).name, w.lineno, str(w.message)[:40]) for w in caught})
    assert seen[0] == seen[1] == {("train.py", 9, "Implicit dimension choice for softmax ha")}


SUSPENDED = textwrap.dedent('''\
    import torch


    def steps(train_loader):
        for x in train_loader:
            yield torch.nn.functional.softmax(x).sum()


    train_loader = [torch.ones(n, 3) for n in (2, 3, 4)]
    running = steps(train_loader)
    for label in ("first", "second"):  # the generator stays suspended in its second iteration
        print("%s %.3f" % (label, next(running).item()))
    ''')


def test_a_loop_still_suspended_at_exit_is_counted_and_closed_quietly(tmp_path, capsys):
    write(tmp_path / "proj", {"train.py": SUSPENDED})
    analyse("dynamic_shape", tmp_path / "proj", tmp_path / "out", capsys)
    copy = tmp_path / "out" / "proj_analysis"
    original = run_python(tmp_path / "proj" / "train.py")
    instrumented = run_python(copy / "train.py")
    assert (instrumented.returncode, instrumented.stdout) == (original.returncode, original.stdout) == (
        0, "first 2.000\nsecond 3.000\n")
    warning = "train.py:6: UserWarning: Implicit dimension choice for softmax"
    assert warning in original.stderr and warning in instrumented.stderr
    assert "hook.py" not in instrumented.stderr and "Exception ignored" not in instrumented.stderr
    assert "call sites changed shape over 2 iterations" in instrumented.stderr
    rows = read_rows(copy / REPORT_NAME)
    assert ("torch.nn.functional.softmax", "6", "2") in {
        (r["Function Name"], r["Line Number"], r["Distinct Shapes"]) for r in rows}
