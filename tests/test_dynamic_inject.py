"""The instrumented copy: which loops get wrapped, where the import goes, and that nothing else changes."""
import hashlib
import io
import json
import runpy
import sys
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from flake8_ascend.cli import main
from flake8_ascend.runtime.inject import IMPORT_LINE, PACKAGE, PACKAGE_SOURCE, instrument_source, instrument_tree


TRAINING_WHILE = "while False:\n    loss.backward()\n    optimizer.step()\n"  # a training loop start() cannot wrap


def wrap(source, depth=0):
    done = instrument_source(textwrap.dedent(source).encode(), depth)
    return done.code.decode(), done


def changed_lines(before, after):
    """(line number, new text) of every changed line; the line count must not change."""
    old, new = before.splitlines(), after.splitlines()
    assert len(old) == len(new)
    return [(i, b) for i, (a, b) in enumerate(zip(old, new), 1) if a != b]


@pytest.mark.parametrize("loop,wrapped", [
    ("for x, y in train_loader:", "for x, y in DETECTOR.start(train_loader):"),
    ("for i, b in enumerate(self.dataloader):", "for i, b in DETECTOR.start(enumerate(self.dataloader)):"),
    ("for b in tqdm(loader, desc='train'):", "for b in DETECTOR.start(tqdm(loader, desc='train')):"),
    ("for b in DataLoader(ds, batch_size=4):", "for b in DETECTOR.start(DataLoader(ds, batch_size=4)):"),
    ("for b in build_train_loader(cfg):", "for b in DETECTOR.start(build_train_loader(cfg)):"),
    ("for a, b in zip(src_dl, tgt_dl):", "for a, b in DETECTOR.start(zip(src_dl, tgt_dl)):"),
    ("for b in iter(trainloader):", "for b in DETECTOR.start(iter(trainloader)):"),
])
def test_data_loops_are_wrapped(loop, wrapped):
    source = f'import torch\n\n\ndef train():\n    {loop}\n        step(b)\n'
    after, done = wrap(source)
    assert changed_lines(source, after) == [(1, f"import torch; {IMPORT_LINE}"), (5, f"    {wrapped}")]
    assert done.loops == [(5, " ".join(loop.split()))]


def test_a_progress_bar_assigned_around_a_loader_is_followed():
    source = (
        "import torch\n"
        "pbar = tqdm(enumerate(data), total=n)\n"
        "data = DataLoader(ds, batch_size=2)\n"
        "for i, (imgs, targets) in pbar:\n"
        "    pass\n"
    )
    after, done = wrap(source)
    assert changed_lines(source, after)[1] == (4, "for i, (imgs, targets) in DETECTOR.start(pbar):")


def test_a_loader_assigned_to_an_attribute_in_another_method_is_followed():
    source = (
        "import torch\n"
        "class Runner:\n"
        "    def __init__(self, ds):\n"
        "        self.batches = DataLoader(ds, batch_size=2)\n"
        "        self.sizes = [1, 2]\n"
        "    def run(self):\n"
        "        for b in self.batches:\n"
        "            pass\n"
        "        for n in self.sizes:\n"
        "            pass\n"
    )
    after, done = wrap(source)
    assert [line for line, _ in done.loops] == [7]
    assert changed_lines(source, after)[1] == (7, "        for b in DETECTOR.start(self.batches):")


@pytest.mark.parametrize("source", [
    "for x in val_loader:\n    pass\n",  # evaluation data: a loop of its own, with its own recording window
    "for x in test_dl:\n    pass\n",
    "def evaluate(model, loader):\n    for x in loader:\n        pass\n",  # an evaluation function
])
def test_evaluation_loops_are_wrapped_too(source):
    after, done = wrap(source)
    assert len(done.loops) == 1 and "DETECTOR.start(" in after and not done.manual


@pytest.mark.parametrize("source", [
    "for step in range(100):\n    loss = model(next(it))\n    loss.backward()\n    opt.step()\n",
    "for x in batches():\n    with autocast():\n        loss = f(x)\n    scaler.scale(loss).backward()\n"
    "    scaler.step(optimizer)\n",
    "def fit(model, stream):\n    for i, x in enumerate(stream):\n        if i % 2:\n"
    "            model(x).sum().backward()\n            optimizer.step()\n",
])
def test_a_loop_running_a_training_step_is_wrapped_whatever_it_iterates(source):
    after, done = wrap(source)
    assert len(done.loops) == 1 and done.imports and not done.manual
    assert IMPORT_LINE in after


def test_only_the_loop_that_runs_the_step_itself_is_wrapped():
    source = "for epoch in range(3):\n    for x in batches():\n        f(x).backward()\n        opt.step()\n"
    after, done = wrap(source)
    assert [line for line, _ in done.loops] == [2]


@pytest.mark.parametrize("source", [
    # yolov5 utils/torch_utils.py profile(): backward in a timing loop, no optimizer: not a training script
    "def profile(ops, n=10):\n    for m in ops:\n        for _ in range(n):\n            y = m(x)\n"
    "            y.sum().backward()\n",
    "loss.backward()\noptimizer.step()\n",  # a step outside any loop
    "def step(batch):\n    loss(batch).backward()\n    optimizer.step()\n\nfor x in data:\n    step(x)\n",
    # the advice rules' step (detect.training): zero_grad and scheduler.step() update no weights
    "for x in stream:\n    model(x).sum().backward()\n    optimizer.zero_grad()\n    scheduler.step()\n",
])
def test_backward_outside_a_training_loop_makes_no_training_script(source):
    after, done = wrap(source)
    assert done.loops == [] and not done.manual and not done.imports and after == textwrap.dedent(source)


@pytest.mark.parametrize("source", [
    "for epoch in range(3):\n    pass\n",
    "for name, p in model.named_parameters():\n    pass\n",
    "async def f(loader):\n    async for x in loader:\n        pass\n",
    "for x in [loader_a, loader_b]:\n    pass\n",
])
def test_other_loops_are_left_alone(source):
    after, done = wrap(source)
    assert done.loops == [] and after == source


def test_a_function_that_trains_and_validates_is_a_training_function():
    _, done = wrap("def train_and_validate(loader):\n    for x in loader:\n        pass\n")
    assert [line for line, _ in done.loops] == [2]


def test_only_the_outer_of_nested_data_loops_is_wrapped():
    source = "for x in train_loader:\n    for y in aux_loader:\n        pass\n"
    after, done = wrap(source)
    assert [line for line, _ in done.loops] == [1]
    assert "for y in aux_loader:" in after


def test_an_already_instrumented_file_is_not_changed_again():
    source = "import torch\nfor x in train_loader:\n    x.sum().backward()\n"
    once, _ = wrap(source)
    twice, done = wrap(once)
    assert twice == once and done.loops == [] and not done.manual


@pytest.mark.parametrize("source,line,expected", [
    ('"""Doc."""\nimport torch\n', 1, f'"""Doc."""; {IMPORT_LINE}'),
    ('"""Doc."""\nfrom __future__ import annotations\nimport os\n', 2,
     f"from __future__ import annotations; {IMPORT_LINE}"),
    ("#!/usr/bin/env python\n# comment\nimport os;\n", 3, f"import os; {IMPORT_LINE}"),
    ("import torch  # noqa: F401\n", 1, f"import torch; {IMPORT_LINE}  # noqa: F401"),
])
def test_the_import_shares_an_existing_line(source, line, expected):
    after, done = wrap(source + TRAINING_WHILE)
    assert changed_lines(source + TRAINING_WHILE, after) == [(line, expected)] and not done.shifted
    compile(after, "train.py", "exec")


def test_a_file_starting_with_a_compound_statement_gets_one_new_line():
    source = "if True:\n    import torch\n" + TRAINING_WHILE
    after, done = wrap(source)
    assert after == f"{IMPORT_LINE}\n{source}" and done.shifted


def test_training_loops_that_cannot_be_wrapped_are_marked_for_manual_wrapping():
    _, done = wrap("import torch\nwhile True:\n    loss.backward()\n    optimizer.step()\n")
    assert done.manual and done.imports and done.loops == []
    after, done = wrap("import torch\nif __name__ == '__main__':\n    run()\n")  # train_net.py: no loop, no line
    assert not done.manual and not done.imports and IMPORT_LINE not in after


def test_line_endings_and_encoding_are_kept():
    source = "# -*- coding: latin-1 -*-\r\nname = '\xe9'\r\nfor b in train_loader:\r\n    b.backward()\r\n"
    done = instrument_source(source.encode("latin-1"))
    text = done.code.decode("latin-1")
    assert text.count("\r\n") == 4 and "'\xe9'" in text and "DETECTOR.start(train_loader)" in text


def tree_digest(root: Path):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / "tools").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "train.py").write_text("import torch\nfor x in train_loader:\n    x.backward()\n", encoding="utf-8")
    (root / "tools" / "train_net.py").write_text(
        "import sys\nif __name__ == '__main__':\n    print(type(DETECTOR).__name__)\n" + TRAINING_WHILE,
        encoding="utf-8")
    (root / "tools" / "broken.py").write_text("def f(:\n    loss.backward()\n", encoding="utf-8")
    (root / "data" / "labels.txt").write_text("cat\n", encoding="utf-8")
    (root / "pytorch_analysis.txt").write_text("an old log\n", encoding="utf-8")
    return root


def test_instrument_tree_copies_everything_and_never_touches_the_source(project, tmp_path):
    before = tree_digest(project)
    result = instrument_tree(project, tmp_path / "out")
    assert tree_digest(project) == before
    copy = tree_digest(tmp_path / "out")
    package = {f"{PACKAGE}/{p.name}" for p in PACKAGE_SOURCE.glob("*.py")}
    assert f"{PACKAGE}/hook.py" in package
    assert set(copy) == {"train.py", "tools/train_net.py", "tools/broken.py", "data/labels.txt", *package}
    for unchanged in ("tools/broken.py", "data/labels.txt"):
        assert copy[unchanged] == before[unchanged]
    assert [(w.path, w.line) for w in result.wrapped] == [("train.py", 2)]
    assert result.manual == ["tools/train_net.py"]
    assert ("pytorch_analysis.txt", "name reserved for the analysis output") in result.skipped
    assert [rel for rel, _ in result.skipped if "libcst cannot parse" in _] == ["tools/broken.py"]
    hook = Path(__file__).parents[1] / "src" / "flake8_ascend" / "runtime" / PACKAGE / "hook.py"
    assert (tmp_path / "out" / PACKAGE / "hook.py").read_bytes() == hook.read_bytes()  # verbatim


def test_a_script_in_a_subfolder_finds_the_detector(project, tmp_path):
    instrument_tree(project, tmp_path / "out")
    script = tmp_path / "out" / "tools" / "train_net.py"
    assert script.read_text(encoding="utf-8").startswith('import sys; __import__("sys").path.insert(0, ')
    for name in [m for m in sys.modules if m.startswith(PACKAGE)]:
        del sys.modules[name]
    saved = list(sys.path)
    sys.path[:] = [str(script.parent)] + [p for p in saved if p not in ("", ".")]  # as `python tools/train_net.py`
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.path[:] = saved
    assert out.getvalue() == "DynamicShapeDetector\n"


def test_hook_needs_only_the_standard_library_torch_and_python_3_7():
    import ast
    root = Path(__file__).parents[1] / "src" / "flake8_ascend" / "runtime" / PACKAGE
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 7))
        modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
        assert modules <= set(sys.stdlib_module_names) | {"torch"}, (path.name, modules)


def test_dynamic_shape_mode_writes_hints_copy_and_log(project, tmp_path, capsys):
    out = tmp_path / "reports"
    out.mkdir()
    (project / "model.py").write_text("import torch\ny = torch.nonzero(x)\n", encoding="utf-8")
    assert main(["-m", "dynamic_shape", "-i", str(project), "-o", str(out), "-q"]) == 0
    folder = out / "proj_analysis"
    hints = (folder / "dynamic_shape_hints.csv").read_text(encoding="utf-8").splitlines()
    assert hints[0] == "File,Start Line,End Line,OP,Tips" and hints[1].startswith("model.py,2,2,torch.nonzero,ASC401")
    assert (folder / PACKAGE / "hook.py").is_file() and (folder / "train.py").is_file()
    log = (folder / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert "wrapped data loop: train.py:2: for x in train_loader:" in log
    assert "no data loop could be wrapped in tools/train_net.py" in log
    assert (project / "pytorch_analysis.txt").read_text(encoding="utf-8") == "an old log\n"
    settings = (folder / PACKAGE / "settings.json").read_text(encoding="utf-8")
    assert json.loads(settings) == {"dynamic_shape": {"every": 10, "iterations": 10, "per_script": True}}  # 2 scripts


def test_dynamic_shape_mode_with_the_output_inside_the_input(project, capsys):
    assert main(["-m", "dynamic_shape", "-i", str(project), "-o", str(project), "-q"]) == 0
    assert main(["-m", "dynamic_shape", "-i", str(project), "-o", str(project), "-q"]) == 0  # again, replacing it
    copy = project / "proj_analysis"
    assert (copy / "train.py").is_file() and not (copy / "proj_analysis").exists()
