"""What a new user meets in the first hour (issue 25): output folders, shared report folders, messages."""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import run_rules
from flake8_ascend import cli
from flake8_ascend.data import known_versions
from flake8_ascend.codes import FIXABLE_CODES
from flake8_ascend.registry import all_rules

REPO = Path(__file__).resolve().parents[1]
YOLO = REPO / "examples" / "yolo_mini"
TORCH_APIS = {"unsupported_api.csv", "unknown_api.csv", "cuda_op_list.csv", "api_precision_advice.csv",
              "api_performance_advice.csv"}


def run_main(*args: object):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(arg) for arg in args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def project(tmp_path: Path, text: str = "import torch\ntorch.cuda.synchronize()\n") -> Path:
    folder = tmp_path / "proj"
    folder.mkdir(parents=True)
    (folder / "train.py").write_text(text, encoding="utf-8")
    return folder


# -- -o ------------------------------------------------------------------------------------------------
def test_a_missing_output_folder_is_created_and_logged(tmp_path):
    out = tmp_path / "reports" / "nested"
    code, _, err = run_main("-i", project(tmp_path), "-o", out, "-q")
    assert code == 0, err
    log = (out / "proj_analysis" / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert f"output folder created: {out}" in log


def test_a_failed_run_removes_the_output_folder_it_created(tmp_path):
    out = tmp_path / "reports" / "nested"
    code, _, err = run_main("-i", project(tmp_path), "-o", out, "-m", "recompile_log")  # needs a log file
    assert code == 2 and err.count("\n") == 1
    assert not (tmp_path / "reports").exists()


# -- several modes into one -o ------------------------------------------------------------------------
def test_each_mode_replaces_only_its_own_reports(tmp_path):
    out = tmp_path / "out"
    folder = out / "yolo_mini_analysis"
    assert run_main("-i", YOLO, "-o", out, "-q", "--format", "json")[0] == 0
    assert run_main("-i", YOLO, "-o", out, "-q", "-m", "affinity_apis")[0] == 0
    assert {p.name for p in folder.iterdir()} == {*TORCH_APIS, "findings.json", "affinity_api_call.csv",
                                                  "pytorch_analysis.txt"}
    log = (folder / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert log.index("mode: torch_apis") < log.index("mode: affinity_apis")  # one section per mode, newest last
    # torch_apis again, without json: its own findings.json goes, the affinity report stays
    assert run_main("-i", YOLO, "-o", out, "-q")[0] == 0
    assert {p.name for p in folder.iterdir()} == {*TORCH_APIS, "affinity_api_call.csv", "pytorch_analysis.txt"}
    log = (folder / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert log.count("mode: torch_apis") == 1 and log.index("mode: affinity_apis") < log.index("mode: torch_apis")


def test_a_file_two_modes_write_belongs_to_the_newest_run(tmp_path):
    out = tmp_path / "out"
    folder = out / "yolo_mini_analysis"
    assert run_main("-i", YOLO, "-o", out, "-q", "--format", "json")[0] == 0
    assert run_main("-i", YOLO, "-o", out, "-q", "-m", "affinity_apis", "--format", "json")[0] == 0
    assert '"report": "affinity_api_call.csv"' in (folder / "findings.json").read_text(encoding="utf-8")
    assert run_main("-i", YOLO, "-o", out, "-q", "-m", "affinity_apis")[0] == 0  # drops its findings.json
    assert not (folder / "findings.json").exists() and TORCH_APIS <= {p.name for p in folder.iterdir()}


# -- exit status and what reaches the screen ---------------------------------------------------------
def test_migrate_with_nothing_to_migrate_passes_the_gate(tmp_path):
    clean = project(tmp_path, "import torch\nx = torch.zeros(3)\n")
    code, _, err = run_main("-i", clean, "-o", tmp_path / "out", "-m", "migrate", "--fail-on-findings", "-q")
    assert code == 0, err
    code, _, _ = run_main("-i", project(tmp_path / "b"), "-o", tmp_path / "out", "-m", "migrate",
                          "--fail-on-findings", "-q")
    assert code == 1


def test_next_steps_are_printed_after_the_summary(tmp_path):
    code, out, _ = run_main("-i", project(tmp_path), "-o", tmp_path / "out", "-m", "overflow")
    assert code == 0
    assert "no training script found" in out.split("report: ", 1)[1]


def test_quiet_statistics_prints_the_statistics(tmp_path):
    code, out, _ = run_main("-i", project(tmp_path), "-o", tmp_path / "out", "-q", "--statistics")
    assert code == 0 and out == "1     ASC201 torch.cuda API use; says whether transfer_to_npu maps it or it " \
        "needs a manual rewrite\n"


# -- one-line messages -------------------------------------------------------------------------------
def test_a_file_that_is_not_python_is_refused(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("todo\n", encoding="utf-8")
    code, out, err = run_main("-i", notes, "-o", tmp_path / "out")
    assert code == 2 and out == "" and err == f"ascend-analyse: error: input is not a Python file (.py): {notes}; " \
        "give a .py file or a folder\n"
    assert not (tmp_path / "out").exists()


def test_an_empty_folder_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = run_main("-i", tmp_path / "empty", "-o", tmp_path / "out", "-q")
    assert code == 0 and err == f"ascend-analyse: warning: no Python file to analyse in {tmp_path / 'empty'}; " \
        "the report is empty\n"


def test_version_flags_point_the_way(tmp_path):
    code, _, err = run_main("--version")
    assert code == 2 and "--tool-version" in err and err.count("\n") == 1
    code, _, err = run_main("-i", project(tmp_path), "-o", tmp_path / "out", "-v", "latest")
    assert code == 2 and "unknown torch_npu version 'latest'; known versions: " in err


def test_a_bad_torch_version_in_a_configuration_names_the_file(tmp_path):
    folder = project(tmp_path)
    pyproject = folder / "pyproject.toml"
    pyproject.write_text('[tool.flake8-ascend]\ntorch-version = "3.1"\n', encoding="utf-8")
    code, _, err = run_main("-i", folder, "-o", tmp_path / "out")
    assert code == 2 and err.startswith(f"ascend-analyse: error: {pyproject}: torch-version: unknown torch_npu "
                                        "version '3.1'")
    pyproject.unlink()
    (folder / "setup.cfg").write_text("[flake8]\nascend-torch-version = 3.1\n", encoding="utf-8")
    code, _, err = run_main("-i", folder, "-o", tmp_path / "out")
    assert code == 2 and f"{folder / 'setup.cfg'}: ascend-torch-version: unknown torch_npu version" in err


def test_a_wrong_flake8_setting_names_its_key(tmp_path):
    folder = project(tmp_path)
    (folder / "setup.cfg").write_text("[flake8]\nmax-line-length = 100\nextend-ignore = 1ASC\n", encoding="utf-8")
    code, _, err = run_main("-i", folder, "-o", tmp_path / "out")
    assert code == 2 and f"{folder / 'setup.cfg'}: [flake8] extend-ignore has a wrong value" in err


LOOP = """import torch


def fit(model, loader, optimizer):
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
"""


def test_run_commands_name_the_entry_script(tmp_path):
    folder = tmp_path / "proj"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "pkg" / "loop.py").write_text(LOOP, encoding="utf-8")  # the loop, in a module without a main block
    (folder / "main.py").write_text("from pkg.loop import fit\n\nif __name__ == '__main__':\n    fit(None, [], None)\n",
                                    encoding="utf-8")
    code, out, _ = run_main("-i", folder, "-o", tmp_path / "out", "-m", "dynamic_shape")
    assert code == 0
    assert "to run main.py instrumented: cd " in out and "python -m pkg.loop" not in out
    (folder / "main.py").write_text("print('no loop imported')\n", encoding="utf-8")
    code, out, _ = run_main("-i", folder, "-o", tmp_path / "out", "-m", "dynamic_shape")
    assert "pkg/loop.py has wrapped loops but no `if __name__ == '__main__':` block" in out and "to run" not in out


def test_after_fix_the_reports_show_what_is_left(tmp_path):
    source = tmp_path / "yolo_mini"
    shutil.copytree(YOLO, source)
    code, before, _ = run_main("-i", source, "-o", tmp_path / "out", "--select", "ASC2")
    rows_before = int(re.search(r"\| cuda_op_list.csv +\| +(\d+) \|", before).group(1))
    code, after, _ = run_main("-i", source, "-o", tmp_path / "out", "--select", "ASC2", "--fix")
    assert code == 0
    rows_after = int(re.search(r"\| cuda_op_list.csv +\| +(\d+) \|", after).group(1))
    fixed = int(re.search(r"^fixed (\d+) findings in \d+ files; the reports show what is left$", after, re.M).group(1))
    assert fixed > 0 and rows_after == rows_before - fixed
    with open(tmp_path / "out" / "yolo_mini_analysis" / "cuda_op_list.csv", encoding="utf-8") as handle:
        assert sum(1 for _ in handle) - 1 == rows_after


def test_flake8_messages_are_english_in_every_version():
    """The official lists' notes are mostly Chinese: they reach the CSV Tips, never a flake8 message."""
    sources = [path.read_text(encoding="utf-8") for path in sorted((REPO / "examples").rglob("*.py"))]
    notes = 0
    for version in known_versions():
        for source in sources:
            for finding in run_rules(source, version, ["ASC1"], official_lists=True):
                assert finding.text.isascii(), (version, finding.text)
                notes += not finding.tips.isascii()
    assert notes  # the Chinese notes are still there, in the Tips


def test_an_editor_linting_stdin_sees_a_configuration_error_at_line_1(tmp_path):
    (tmp_path / "setup.cfg").write_text("[flake8]\nascend-torch-version = 9.9\n", encoding="utf-8")
    (tmp_path / "a.py").write_text("import torch\n", encoding="utf-8")

    def flake8(*args, stdin=""):
        return subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", *args], cwd=tmp_path, input=stdin,
                              capture_output=True, text=True, timeout=60)

    edited = flake8("--stdin-display-name", "a.py", "-", stdin="import torch\n")  # as pylsp calls it
    assert edited.returncode == 1 and edited.stdout == (
        "a.py:1:1: ASC000 configuration error: ascend-torch-version: unknown torch_npu version '9.9'; known versions: "
        + ", ".join(known_versions()) + "\n")
    checked = flake8("a.py")  # a terminal, CI or pre-commit: one line on stderr, exit 2
    assert checked.returncode == 2 and checked.stdout == "" and checked.stderr.count("\n") == 1


def test_fix_is_told_the_same_way_in_help_explain_and_messages():
    help_text = " ".join(cli.build_parser(cli.all_modes()).format_help().split())
    assert "plain --fix the affinity ones (ASC303/ASC304, -m affinity_apis), --fix --select ASC2 the CUDA ones" \
        in help_text
    for fixable in FIXABLE_CODES:
        code, explained, _ = run_main("--explain", fixable)
        assert code == 0 and f"ascend-analyse --fix --select {fixable}` rewrites" in explained
        assert "plain `--fix` is `-m affinity_apis --fix`" in explained
    cuda = run_rules("import torch\nx = torch.zeros(2).cuda()\ntorch.distributed.init_process_group('nccl')\n",
                     codes=["ASC2"])
    assert {f.code for f in cuda} == {"ASC202", "ASC204"}
    for finding in cuda:  # each names a command that does rewrite it
        assert finding.text.endswith(f"; ascend-analyse --fix --select {finding.code} rewrites it")


def test_explain_cites_no_file_missing_from_the_repository():
    for rule in all_rules():
        text = "\n".join((rule.why, rule.use_instead, rule.source))
        assert "codes.md" not in text, rule.code
        for path in re.findall(r"(?<![\w/])((?:docs|rules_data|tools|src)/[\w./-]+\.\w+)", text):
            if not path.startswith("docs/zh/"):  # Ascend/pytorch's documentation, cited by its own path
                assert (REPO / path).exists(), (rule.code, path)


def test_json_paths_and_sarif_uris_share_one_base_and_rules_link_their_page(tmp_path, monkeypatch):
    folder = project(tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    for fmt in ("json", "sarif"):
        assert run_main("-i", folder, "-o", tmp_path / fmt, "-q", "--format", fmt)[0] == 0
    found = json.loads((tmp_path / "json" / "proj_analysis" / "findings.json").read_text(encoding="utf-8"))
    paths = [item["path"] for item in found]
    run = json.loads((tmp_path / "sarif" / "proj_analysis" / "findings.sarif").read_text(encoding="utf-8"))["runs"][0]
    uris = [unquote(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in run["results"]]
    assert paths == uris == ["repo/proj/train.py"]
    (rule,) = run["tool"]["driver"]["rules"]
    page, anchor = rule["helpUri"].split("#")
    assert anchor == "asc201" and Path(urlparse(page).path) == REPO / "docs" / "rules.md"
    assert "\n## ASC201\n" in (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    assert Path(urlparse(run["tool"]["driver"]["informationUri"]).path) == REPO / "README.md"


def test_every_tips_cell_starts_with_its_code(tmp_path):
    out = tmp_path / "out"
    assert run_main("-i", YOLO, "-o", out, "-q", "--extend-select", "ASC509,ASC510")[0] == 0
    for name in TORCH_APIS:
        with open(out / "yolo_mini_analysis" / name, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        assert all(re.match(r"ASC\d{3}( |$)", row["Tips"]) for row in rows), name


def test_compare_prints_its_verdicts_not_a_file_count(tmp_path):
    torch = pytest.importorskip("torch")
    for side in "ab":
        folder = tmp_path / side / "0" / "0"
        folder.mkdir(parents=True)
        torch.save(torch.ones(2), folder / "0.aten.relu.default.output.0.pt")
    code, out, _ = run_main("compare", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "out")
    assert code == 0 and "Analysed" not in out and re.search(r"^Done in .* s; report: ", out, re.M)
    assert re.search(r"^compared .*: 1 row; pass 1, ", out, re.M)


def test_a_run_that_fails_while_keeping_other_reports_leaves_the_previous_folder_whole(tmp_path, monkeypatch):
    out = tmp_path / "out"
    folder = out / "yolo_mini_analysis"
    assert run_main("-i", YOLO, "-o", out, "-q")[0] == 0
    assert run_main("-i", YOLO, "-o", out, "-q", "-m", "affinity_apis")[0] == 0
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def full_disk(source, destination):
        raise OSError(28, "No space left on device", str(destination))

    monkeypatch.setattr(cli, "_link_or_copy", full_disk)
    code, _, err = run_main("-i", YOLO, "-o", out, "-q", "--format", "json")
    assert code == 3 and "No space left on device" in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in out.iterdir()] == ["yolo_mini_analysis"]  # no temporary folder left
