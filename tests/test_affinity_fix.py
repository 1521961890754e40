"""--fix / --diff: exactly the expected rewrite, code that parses, nothing left to do on a second run."""
from __future__ import annotations

import ast
import csv
import shutil
from pathlib import Path

import pytest

from flake8_ascend import cli, fix
from flake8_ascend.config import Config
from flake8_ascend.data import default_version

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "affinity_fix"
CASES = sorted(p.name[: -len(".in.py")] for p in FIXTURES.glob("*.in.py"))
CONFIG = Config(default_version())


def expected(name: str) -> str:
    return (FIXTURES / f"{name}.out.py").read_text(encoding="utf-8")


def fixed(source: str, path: str = "case.py"):
    return fix.fix_source(source, fix.fixable_findings(source, path, CONFIG))


@pytest.mark.parametrize("name", CASES)
def test_fix_gives_exactly_the_expected_file_and_is_idempotent(name):
    source = (FIXTURES / f"{name}.in.py").read_text(encoding="utf-8")
    new, _, _, _ = fixed(source)
    assert new == expected(name)
    ast.parse(new)
    assert fixed(new)[:2] == (new, 0)


def test_fix_counts_and_reasons():
    _, applied, left, changes = fixed((FIXTURES / "optimizers.in.py").read_text(encoding="utf-8"))
    assert applied == 3 and left == []
    assert str(changes[0]).startswith("line ") and " -> torch_npu.optim.NpuFused" in str(changes[0])
    assert (changes[0].code, changes[0].before) == ("ASC303", "torch.optim.AdamW")
    _, applied, left, _ = fixed((FIXTURES / "clash.in.py").read_text(encoding="utf-8"))
    assert applied == 0 and left == ["line 8: NpuFusedAdam already names something else in this file"]


def test_a_name_bound_by_an_except_clause_is_a_clash():
    # every binding the semantic model knows counts, ``except ... as <name>`` included
    source = ("import torch\ntry:\n    pass\nexcept ImportError as NpuFusedAdamW:\n    pass\n"
              "opt = torch.optim.AdamW(p)\n")
    _, applied, left, _ = fixed(source)
    assert applied == 0 and left == ["line 6: NpuFusedAdamW already names something else in this file"]
    aliased = "import torch\nfrom torch_npu.optim import NpuFusedAdamW as NpuFusedAdamW\nopt = torch.optim.AdamW(p)\n"
    new, applied, left, _ = fixed(aliased)  # ``as`` the same name: the plain import, nothing added
    assert applied == 1 and left == [] and new.count("import NpuFusedAdamW") == 1


def test_files_without_fixable_findings_are_not_parsed_by_libcst(monkeypatch, tmp_path):
    (tmp_path / "plain.py").write_text("import torch\nx = torch.zeros(3)\n", encoding="utf-8")
    monkeypatch.setattr(fix.cst, "parse_module", lambda *a, **k: pytest.fail("libcst ran"))
    results, problems = fix.fix_paths([tmp_path / "plain.py"], tmp_path, CONFIG, write=True)
    assert results == [] and problems == []


def test_a_write_that_fails_names_the_file_and_what_was_rewritten(monkeypatch, tmp_path):
    for name in ("a.py", "opt.py"):
        (tmp_path / name).write_text("import torch\nopt = torch.optim.AdamW(p, lr=1e-3)\n", encoding="utf-8")
    written = []

    def refuse_opt(target, text):
        if target.name == "opt.py":
            raise PermissionError(13, "Permission denied")
        written.append(target.name)

    monkeypatch.setattr(fix, "write_file", refuse_opt)
    with pytest.raises(fix.UnwritableInput, match="^--fix could not write opt.py: Permission denied; 1 other files"):
        fix.fix_paths([tmp_path / "a.py", tmp_path / "opt.py"], tmp_path, CONFIG, write=True)
    assert written == ["a.py"]


def test_crlf_and_bom_survive(tmp_path):
    path = tmp_path / "w.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\r\nopt = torch.optim.AdamW(p, lr=1e-3)\r\n")
    fix.fix_paths([path], tmp_path, CONFIG, write=True)
    # import torch is left unused by the rewrite: removed
    assert path.read_bytes() == b"\xef\xbb\xbffrom torch_npu.optim import NpuFusedAdamW\r\nopt = NpuFusedAdamW(p, lr=1e-3)\r\n"


# -- through ascend-analyse ----------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    for name in CASES:
        shutil.copy(FIXTURES / f"{name}.in.py", project / f"{name}.py")
    (project / "broken.py").write_text("def f(:\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    return project, out


def run(*args):
    code = cli.main([str(a) for a in args])
    return code


def test_cli_fix_rewrites_the_tree_and_a_second_run_changes_nothing(tree, capsys):
    project, out = tree
    assert run("-i", project, "-o", out, "-q", "--fix") == 0  # --fix alone selects -m affinity_apis
    for name in CASES:
        assert (project / f"{name}.py").read_text(encoding="utf-8") == expected(name), name
    report = out / "proj_analysis"
    assert (report / "affinity_fix.diff").read_text(encoding="utf-8").count("+++ b/") == 3
    with (report / "affinity_api_call.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["File", "Start Line", "End Line", "Api Type", "Api Call Name", "Affinity Api Name"]
    # the reports show the state after the fix: the rewritten call is no longer a row
    assert ["optimizers.py", "8", "12", "torch", "torch.optim.AdamW", "torch_npu.optim.NpuFusedAdamW"] not in rows
    assert {row[3] for row in rows[1:]} <= {"class", "function", "torch", "special"}
    log = (report / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert "skipped broken.py" in log and "NpuFusedAdam already names something else" in log
    assert "fix: optimizers.py: line 8: torch.optim.AdamW -> torch_npu.optim.NpuFusedAdamW" in log
    assert "fix: optimizers.py: removed the unused import of optim" in log
    assert run("-i", project, "-o", out, "-q", "-m", "affinity_apis", "--fix") == 0
    assert (report / "affinity_fix.diff").read_text(encoding="utf-8") == ""
    assert capsys.readouterr().out == ""


def test_cli_diff_prints_and_writes_nothing(tree, capsys):
    project, out = tree
    before = {p.name: p.read_bytes() for p in project.iterdir()}
    assert run("-i", project, "-o", out, "-q", "-m", "affinity_apis", "--diff") == 0
    shown = capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in project.iterdir()} == before
    assert shown == (out / "proj_analysis" / "affinity_fix.diff").read_text(encoding="utf-8")
    assert "-    boxes[boxes < 0] = 0  # negative coordinates\n" in shown
    assert "+    boxes = npu_fast_condition_index_put(boxes, boxes < 0, 0)  # negative coordinates\n" in shown


def test_fix_with_another_mode_is_a_usage_error(tree, capsys):
    project, out = tree
    assert run("-i", project, "-o", out, "-m", "dynamic_shape", "--fix") == 2
    assert "--fix/--diff do not apply to mode dynamic_shape" in capsys.readouterr().err
    assert list(out.iterdir()) == []


def test_ignore_leaves_that_code_unfixed(tree):
    project, out = tree
    assert run("-i", project, "-o", out, "-q", "--fix", "--ignore", "ASC304") == 0
    assert (project / "index_put.py").read_text(encoding="utf-8") == (FIXTURES / "index_put.in.py").read_text(
        encoding="utf-8")
    assert (project / "optimizers.py").read_text(encoding="utf-8") == expected("optimizers")


def test_imports_the_rewrite_left_unused_are_removed_and_every_change_is_listed():
    source = ("import torch\nfrom torch.optim import AdamW, SGD\n\n\ndef build(p):\n"
              "    return AdamW(p, lr=1e-3), SGD(p, lr=0.1), torch.zeros(1)\n\n\ndef other(p):\n"
              "    from torch.optim import Adam\n    return Adam(p, lr=1e-3)\n")
    new, applied, _, changes = fixed(source)
    assert applied == 3
    assert "from torch.optim import" not in new.split("def build")[0]  # both names now unused: the line goes
    assert "import torch\n" in new  # still used by torch.zeros
    assert "    from torch.optim import Adam\n" in new  # a nested import is left alone
    assert list(map(str, changes)) == [
        "line 6: torch.optim.AdamW -> torch_npu.optim.NpuFusedAdamW",
        "line 6: torch.optim.SGD -> torch_npu.optim.NpuFusedSGD",
        "line 11: torch.optim.Adam -> torch_npu.optim.NpuFusedAdam",
        "added from torch_npu.optim import NpuFusedAdam, NpuFusedAdamW, NpuFusedSGD",
        "removed the unused import of AdamW", "removed the unused import of SGD"]


def test_cli_fix_lists_what_it_changed(tree, capsys):
    project, out = tree
    assert run("-i", project, "-o", out, "--fix") == 0
    printed = capsys.readouterr().out
    assert "fixed optimizers.py: line 8: torch.optim.AdamW -> torch_npu.optim.NpuFusedAdamW\n" in printed
    assert "fixed optimizers.py: removed the unused import of optim\n" in printed
