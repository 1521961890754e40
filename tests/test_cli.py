"""ascend-analyse: official reports equal to flake8's findings, one-line errors, safe output folders."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from flake8_ascend import cli
from flake8_ascend.modes import _lint as lintmode
from flake8_ascend.modes import Mode, all_modes
from flake8_ascend.registry import all_rules, rule_for

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
SCRIPT = Path(sys.executable).with_name("ascend-analyse")
TORCH_APIS_FILES = {
    "unsupported_api.csv": ["File", "Start Line", "End Line", "OP", "Tips"],
    "unknown_api.csv": ["File", "Start Line", "End Line", "OP", "Tips"],
    "cuda_op_list.csv": ["File", "Api", "Start Line", "End Line", "Tips"],
    "api_precision_advice.csv": ["File", "Start Line", "End Line", "OP", "Tips"],
    "api_performance_advice.csv": ["File", "Start Line", "End Line", "OP", "Tips"],
}


def read_csv(path: Path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def run_main(*args: str):
    """(exit code, stdout, stderr) of an in-process run."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def run_script(*args: str, cwd: Path = REPO):
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def leftovers(folder: Path):
    return sorted(p.name for p in folder.iterdir())


# -- acceptance: the reports equal the plugin's findings ---------------------------------------
@pytest.fixture(scope="module")
def examples_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    result = run_script("-i", "examples", "-o", str(out), "-v", "2.6.0", "--format", "json")
    assert result.returncode == 0, result.stderr
    return out / "examples_analysis", result


def flake8_run(*options: str):
    """(path, line, col, 'ASCnnn message') of real flake8 (torch_npu 2.6.0) on examples/."""
    result = subprocess.run(
        [sys.executable, "-m", "flake8", *options, "--ascend-torch-version", "2.6.0", "."],
        cwd=EXAMPLES, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    found = []
    for line in result.stdout.splitlines():
        path, row, col, text = line.split(":", 3)
        found.append((Path(path).as_posix().removeprefix("./"), int(row), int(col), text.strip()))
    assert found, "flake8 found nothing on examples/"
    return found


@pytest.fixture(scope="module")
def flake8_findings():
    return flake8_run("--select", "ASC")


def torch_apis_findings(findings):
    """The flake8 findings whose codes feed the torch_apis reports (ASC3xx go to -m affinity_apis)."""
    return [f for f in findings if rule_for(f[3].split()[0]).report.value in TORCH_APIS_FILES]


def test_examples_report_has_official_files_and_headers(examples_report):
    folder, result = examples_report
    assert set(leftovers(folder)) == {*TORCH_APIS_FILES, "pytorch_analysis.txt", "findings.json"}
    for name, header in TORCH_APIS_FILES.items():
        assert read_csv(folder / name)[0] == header
    assert "Traceback" not in result.stderr
    for name in TORCH_APIS_FILES:  # the summary table names every report with its row count
        rows = len(read_csv(folder / name)) - 1
        assert f"| {name}" in result.stdout and f" {rows} |" in result.stdout


def test_examples_rows_equal_flake8_findings(examples_report, flake8_findings):
    folder, _ = examples_report
    # the same codes (ASC103 stays off in both unless named); ASC3xx go to -m affinity_apis
    expected = torch_apis_findings(flake8_findings)
    for name in TORCH_APIS_FILES:
        rows = read_csv(folder / name)[1:]
        mine = [(p, line, rule_for(text.split()[0])) for p, line, _, text in expected
                if rule_for(text.split()[0]).report.value == name]
        wanted = sorted((p, line) for p, line, rule in mine if not rule.no_line)
        if name == "cuda_op_list.csv":
            assert sorted((r[0], int(r[2])) for r in rows) == wanted
            tips = sorted(text for p, _, _, text in expected if rule_for(text.split()[0]).report.value == name)
            assert sorted(r[4] for r in rows) == tips
        else:  # launch advice (Rule.no_line): one row per script and advice, lines NA, after the located rows
            unlocated = [r for r in rows if r[1] == "NA"]
            rows = rows[: len(rows) - len(unlocated)]
            assert all(r[2] == "NA" for r in unlocated)
            assert sorted(r[0] for r in unlocated) == sorted(p for p, _, rule in mine if rule.no_line)
            assert sorted((r[0], int(r[1])) for r in rows) == wanted
        assert rows == sorted(rows, key=lambda r: (r[0], int(r[2] if name == "cuda_op_list.csv" else r[1])))
    items = json.loads((folder / "findings.json").read_text(encoding="utf-8"))
    # JSON paths, like SARIF URIs, are relative to the working directory (the run's: REPO) holding the input
    assert all(i["path"].startswith("examples/") for i in items)
    got = sorted((i["path"][len("examples/"):], i["line"], i["column"], f"{i['code']} {i['message']}") for i in items)
    assert got == sorted(expected)


def test_naming_a_default_off_code_enables_it_like_flake8(tmp_path, monkeypatch):
    monkeypatch.chdir(EXAMPLES)  # JSON paths are relative to the working directory, as flake8's
    selection = "ASC1,ASC2,ASC103"
    code, _, _ = run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "-v", "2.6.0", "--select", selection,
                          "--format", "json", "-q")
    assert code == 0
    items = json.loads((tmp_path / "examples_analysis" / "findings.json").read_text(encoding="utf-8"))
    got = sorted((i["path"], i["line"], i["column"], f"{i['code']} {i['message']}") for i in items)
    expected = sorted(flake8_run("--select", selection))
    assert got == expected and any(text.startswith("ASC103") for *_, text in expected)


# -- bad input: one line, exit 2, nothing written -----------------------------------------------
def _api_file_with_wrong_columns(folder: Path) -> str:
    path = folder / "wrong.csv"
    path.write_text("File,Start Line,End Line,OP,Tips\n", encoding="utf-8")
    return str(path)


def _unbuilt_mode() -> str:
    missing = [m for m in cli.OFFICIAL_MODES if m not in all_modes()]
    return missing[0] if missing else "bogus_mode"


BAD_INPUTS = {
    "missing -i": lambda tmp, out: ["-o", str(out)],
    "nonexistent input": lambda tmp, out: ["-i", str(tmp / "nope"), "-o", str(out)],
    "output is a file": lambda tmp, out: ["-i", "examples", "-o", "README.md"],
    "input not Python": lambda tmp, out: ["-i", "README.md", "-o", str(out / "new")],
    "bad input, -o missing": lambda tmp, out: ["-i", "examples", "-o", str(out / "new"), "-v", "9.9.9"],
    "unknown version": lambda tmp, out: ["-i", "examples", "-o", str(out), "-v", "9.9.9"],
    "unknown mode": lambda tmp, out: ["-i", "examples", "-o", str(out), "-m", "everything"],
    "mode not built": lambda tmp, out: ["-i", "examples", "-o", str(out), "-m", _unbuilt_mode()],
    "-api wrong columns": lambda tmp, out: ["-i", "examples", "-o", str(out),
                                            "-api", _api_file_with_wrong_columns(tmp)],
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(case, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result = run_script(*BAD_INPUTS[case](tmp_path, out))
    assert result.returncode == 2, (case, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ascend-analyse: error: "), result.stderr
    assert leftovers(out) == []


def test_mode_not_built_says_so(monkeypatch):
    """An official mode whose module is missing (a partial install) is named as such, not as unknown."""
    provided = {name: mode for name, mode in all_modes().items() if name != "third_party"}
    monkeypatch.setattr(cli, "all_modes", lambda: provided)
    code, out, err = run_main("-i", str(EXAMPLES), "-o", str(REPO), "-m", "third_party")
    assert code == 2 and "mode third_party is not available yet" in err and out == ""


def test_flags_a_mode_does_not_support_are_usage_errors(tmp_path, monkeypatch):
    class Copier(Mode):  # no name at definition: not registered for other tests
        outputs = ("copy.csv",)

    Copier.name = "copier"
    monkeypatch.setattr(cli, "all_modes", lambda: {**all_modes(), "copier": Copier})
    code, _, err = run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "-m", "copier", "--format", "sarif")
    assert code == 2 and "writes no sarif output" in err
    code, _, err = run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "-m", "copier", "--select", "ASC2")
    assert code == 2 and "--per-file-ignores do not apply" in err
    assert leftovers(tmp_path) == []


def test_input_inside_the_report_folder_is_refused(tmp_path):
    inner = tmp_path / "proj_analysis" / "proj"
    inner.mkdir(parents=True)
    (inner / "a.py").write_text("import torch\n", encoding="utf-8")
    code, _, err = run_main("-i", str(inner), "-o", str(tmp_path))
    assert code == 2 and "inside the report folder" in err
    assert (inner / "a.py").exists()


# -- exit codes and formats ------------------------------------------------------------------------
def test_fail_on_findings(tmp_path):
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "ok.py").write_text("import torch\nx = torch.zeros(3)\n", encoding="utf-8")
    assert run_main("-i", str(clean), "-o", str(tmp_path), "--fail-on-findings", "-q")[0] == 0
    assert run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "--fail-on-findings", "-q")[0] == 1
    assert run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "-q")[0] == 0


def test_sarif_validates_against_the_official_schema(tmp_path):
    code, _, _ = run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "--format", "sarif", "--select", "ASC", "-q")
    assert code == 0
    document = json.loads((tmp_path / "examples_analysis" / "findings.sarif").read_text(encoding="utf-8"))
    schema = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(document)
    run = document["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    used = {result["ruleId"] for result in run["results"]}
    assert used and {rule["id"] for rule in rules} == used
    for descriptor in rules:
        assert descriptor["shortDescription"]["text"] == rule_for(descriptor["id"]).summary
        assert descriptor["fullDescription"]["text"] and descriptor["help"]["text"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert not location["artifactLocation"]["uri"].startswith("/")
        assert location["region"]["startLine"] >= 1 and location["region"]["startColumn"] >= 1
        assert result["level"] == ("note" if result["ruleId"] == "ASC103" or result["ruleId"][3] in "56" else "warning")


def test_sarif_uris_are_relative_to_the_working_directory_or_the_input(tmp_path, monkeypatch):
    tree = tmp_path / "my proj"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "tr\u00e4in.py").write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert run_main("-i", "my proj", "-o", str(tmp_path), "--format", "sarif", "-q")[0] == 0
    run = json.loads((tmp_path / "my proj_analysis" / "findings.sarif").read_text(encoding="utf-8"))["runs"][0]
    assert run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "my%20proj/sub/tr%C3%A4in.py"}
    monkeypatch.chdir(tree / "sub")  # the input lies above the working directory
    assert run_main("-i", str(tree), "-o", str(tmp_path), "--format", "sarif", "-q")[0] == 0
    run = json.loads((tmp_path / "my proj_analysis" / "findings.sarif").read_text(encoding="utf-8"))["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "sub/tr%C3%A4in.py", "uriBaseId": "INPUTROOT"}
    assert run["originalUriBaseIds"]["INPUTROOT"]["uri"] == tree.as_uri() + "/"


def test_explain_and_list_codes():
    code, out, _ = run_main("--explain", "asc201")
    rule = rule_for("ASC201")
    assert code == 0 and out.startswith("ASC201: ") and rule.why in out and rule.use_instead in out and rule.source in out
    code, _, err = run_main("--explain", "ASC999")
    assert code == 2 and "unknown code" in err
    code, out, _ = run_main("--list-codes")
    assert code == 0 and all(rule.code in out for rule in all_rules())


# -- files: skipped with a reason, never fatal ---------------------------------------------------
def test_unreadable_and_odd_files_are_logged_and_skipped(tmp_path):
    tree = tmp_path / "proj"
    (tree / "pkg dir").mkdir(parents=True)
    (tree / "pkg dir" / "m\u00f6del.py").write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    (tree / "bom.py").write_bytes(b"\xef\xbb\xbfimport torch\nx = torch.zeros(1).cuda()\n")
    (tree / "cookie.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\ns = '\xe9'\ntorch.cuda.synchronize()\n")
    (tree / "latin.py").write_bytes(b"import torch\ns = '\xe9'\n")
    (tree / "broken.py").write_text("def f(:\n", encoding="utf-8")
    (tree / "nul.py").write_bytes(b"import torch\x00\n")
    (tree / "noqa.py").write_text("import torch\ntorch.cuda.synchronize()  # noqa: ASC201\n", encoding="utf-8")
    (tree / "loop").symlink_to(tree, target_is_directory=True)
    (tree / "dangling.py").symlink_to(tree / "missing.py")
    for skipped in (".git", "__pycache__", "env"):
        (tree / skipped).mkdir()
        (tree / skipped / "x.py").write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    (tree / "env" / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")

    code, out, _ = run_main("-i", str(tree), "-o", str(tmp_path), "-q")
    assert code == 0 and out == ""
    folder = tmp_path / "proj_analysis"
    rows = read_csv(folder / "cuda_op_list.csv")[1:]
    assert sorted((r[0], r[2]) for r in rows) == [("bom.py", "2"), ("cookie.py", "4"), ("pkg dir/m\u00f6del.py", "2")]
    log = (folder / "pytorch_analysis.txt").read_text(encoding="utf-8")
    for rel, reason in [("broken.py", "syntax error at line 1"),
                        ("nul.py", "a null byte at line 1"), ("loop", "symbolic link to a folder"),
                        ("dangling.py", "cannot read"), ("env", "virtual environment")]:
        assert any(line.startswith(f"skipped {rel}: ") and reason in line for line in log.splitlines()), (rel, log)
    assert "latin.py: not decodable as UTF-8 or its declared encoding (" in log  # read as flake8 reads it
    assert ".git" not in log and "__pycache__" not in log
    assert "started" in log.splitlines()[0] and "skipped: 5" in log and "finished in" in log


def test_an_engine_error_skips_only_that_file(tmp_path, monkeypatch):
    def broken(tree, lines, path, config, rules, visitors, shown):
        if path == "dist.py":
            raise KeyError("boom")
        return real(tree, lines, path, config, rules, visitors, shown)

    real = lintmode.lint
    monkeypatch.setattr(lintmode, "lint", broken)
    code, _, _ = run_main("-i", str(EXAMPLES / "yolo_mini" / "utils"), "-o", str(tmp_path), "-q")
    assert code == 0
    log = (tmp_path / "utils_analysis" / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert "skipped dist.py: internal error in the rule engine, please report it (KeyError: 'boom')" in log


def test_single_file_input(tmp_path):
    code, _, _ = run_main("-i", str(EXAMPLES / "yolo_mini" / "utils" / "dist.py"), "-o", str(tmp_path), "-q")
    assert code == 0
    rows = read_csv(tmp_path / "dist_analysis" / "cuda_op_list.csv")[1:]
    assert rows and {r[0] for r in rows} == {"dist.py"}


@pytest.mark.parametrize("output", [".", "reports"])
def test_report_folders_inside_the_input_are_not_analysed(tmp_path, monkeypatch, output):
    tree = tmp_path / "proj"
    (tree / output / "old_analysis").mkdir(parents=True)
    cuda = "import torch\ntorch.cuda.synchronize()\n"
    (tree / "a.py").write_text(cuda, encoding="utf-8")
    (tree / output / "old_analysis" / "copy.py").write_text(cuda, encoding="utf-8")
    monkeypatch.chdir(tree)
    for _ in range(2):
        assert run_main("-i", ".", "-o", output, "-q")[0] == 0
        (tree / output / "proj_analysis" / "copy.py").write_text(cuda, encoding="utf-8")
    assert [r[0] for r in read_csv(tree / output / "proj_analysis" / "cuda_op_list.csv")[1:]] == ["a.py"]


# -- the report folder is replaced whole, or not at all --------------------------------------------
def test_rerun_replaces_the_folder_and_interruption_keeps_the_old_one(tmp_path, monkeypatch):
    assert run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "-q")[0] == 0
    folder = tmp_path / "examples_analysis"
    (folder / "stale.csv").write_text("old\n", encoding="utf-8")
    assert run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "-q")[0] == 0
    assert "stale.csv" not in leftovers(folder) and leftovers(tmp_path) == ["examples_analysis"]

    (folder / "marker.txt").write_text("previous run\n", encoding="utf-8")

    def interrupted(self, job):
        job.write_csv("unsupported_api.csv", ["File"], [["half"]])
        raise KeyboardInterrupt

    monkeypatch.setattr(lintmode.LintMode, "run", interrupted)
    code, _, err = run_main("-i", str(EXAMPLES), "-o", str(tmp_path), "-q")
    assert code == 130 and "no report written" in err
    assert leftovers(tmp_path) == ["examples_analysis"] and (folder / "marker.txt").exists()


def test_parallel_run_equals_serial_run(tmp_path, monkeypatch):
    tree = tmp_path / "many"
    for index in range(12):
        (tree / f"p{index}").mkdir(parents=True)
        for source in (EXAMPLES / "yolo_mini").rglob("*.py"):
            (tree / f"p{index}" / source.name).write_bytes(source.read_bytes())
    (tree / "p3" / "bad.py").write_text("class (\n", encoding="utf-8")
    monkeypatch.setattr(lintmode, "PARALLEL_MIN_FILES", 10)
    reports = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        out.mkdir()
        assert run_main("-i", str(tree), "-o", str(out), "-j", jobs, "-q", "--format", "json")[0] == 0
        folder = out / "many_analysis"
        names = [*TORCH_APIS_FILES, "findings.json"]
        reports[jobs] = {name: (folder / name).read_text(encoding="utf-8") for name in names}
    assert reports["1"] == reports["2"]
    assert len(read_csv(out / "many_analysis" / "cuda_op_list.csv")) > 12


# -- writers and terminal output -------------------------------------------------------------------
def test_csv_writer_quotes_and_stays_inside_the_folder(tmp_path):
    from flake8_ascend.modes import Job, JobError
    from flake8_ascend.progress import Progress

    job = Job(tmp_path, tmp_path, [], tmp_path, None, None, lambda line: None, Progress(None))
    count = job.write_csv("a.csv", ["File", "Tips"], [["x, y.py", "line one\nline two"], ["z.py", '"q"']])
    assert count == 2
    assert read_csv(tmp_path / "a.csv") == [["File", "Tips"], ["x, y.py", "line one\nline two"], ["z.py", '"q"']]
    with pytest.raises(JobError):
        job.output_path("../escape.csv")


def test_summary_table_and_progress():
    table = cli.summary_table({"unsupported_api.csv": 3, "cuda_op_list.csv": 120})
    lines = table.splitlines()
    assert lines[1] == "| files               | statistics |"
    assert "| cuda_op_list.csv    |        120 |" in lines
    from flake8_ascend.progress import Progress

    stream = io.StringIO()
    progress = Progress(stream, tty=False)
    progress.start(20)
    for _ in range(20):
        progress.advance()
    progress.finish()
    assert stream.getvalue().splitlines() == [f"analysed {n}/20 files ({n * 5}%)" for n in range(2, 21, 2)]
    stream = io.StringIO()
    progress = Progress(stream, tty=True, columns=80)
    progress.start(4)
    for _ in range(4):
        progress.advance()
    progress.finish()
    assert stream.getvalue().endswith(f"\r[{'#' * 30}] 4/4 files (100%)\n")
    for columns, last in ((40, f"[{'#' * 20}] 4/4 files (100%)"), (24, "4/4 files (100%)"), (10, "4/4 files")):
        stream = io.StringIO()
        progress = Progress(stream, tty=True, columns=columns)
        progress.start(4)
        for _ in range(4):
            progress.advance()
        assert all(len(draw) < columns for draw in stream.getvalue().split("\r")), columns
        assert stream.getvalue().endswith("\r" + last), columns


def test_tool_version_statistics_plural_and_fix_marks(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--tool-version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out == f"ascend-analyse {cli.__version__}\n"
    script = tmp_path / "train.py"
    script.write_text("import torch\ntorch.cuda.synchronize()\ntorch.cuda.synchronize()\nm = m.cuda()\n")
    code, out, _ = run_main("-i", str(script), "-o", str(tmp_path), "--statistics")
    assert code == 0
    assert "2     ASC201 torch.cuda API use" in out and "1     ASC202 hard-coded CUDA device" in out
    assert "Analysed 1 file (0 skipped)" in out
    log = (tmp_path / "train_analysis" / cli.LOG_NAME).read_text(encoding="utf-8")
    assert log.startswith(f"ascend-analyse {cli.__version__} started") and "findings per code: ASC201 2, ASC202 1" in log
    marked = [line.split()[0] for line in cli.list_codes().splitlines() if "(has a fix: --fix --select" in line]
    assert marked == ["ASC201", "ASC202", "ASC204", "ASC207", "ASC303", "ASC304"]
    code, _, err = run_main("-i", str(script), "-o", str(tmp_path), "-m", "third_party", "--statistics")
    assert code == 2 and "--statistics does not apply" in err


def test_lint_tests_switch(tmp_path):
    tree = tmp_path / "proj"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_model.py").write_text("import torch\nmodel = Net().cuda()\n", encoding="utf-8")
    (tree / "train.py").write_text("import torch\nmodel = Net().cuda()\n", encoding="utf-8")
    found = {}
    for name, extra in (("plain", ()), ("tests", ("--lint-tests",))):
        out = tmp_path / name
        out.mkdir()
        assert run_main("-i", str(tree), "-o", str(out), "-q", "--format", "json", *extra)[0] == 0
        items = json.loads((out / "proj_analysis" / "findings.json").read_text(encoding="utf-8"))
        found[name] = {Path(i["path"]).name for i in items if i["code"] == "ASC202"}
    assert found == {"plain": {"train.py"}, "tests": {"train.py", "test_model.py"}}
