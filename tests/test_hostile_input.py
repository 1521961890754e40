"""Hostile input and faults (docs/security.md): one test per attack.

Each attack must end with a one-line error (exit 2, or 3 when the report cannot
be written) or a logged skip, write nothing outside ``-o``, leave no temporary
folder or process behind, and keep the previous report when the run fails.
Runs that could hang or crash go to a subprocess with a timeout.
"""
from __future__ import annotations

import ast
import csv
import errno
import io
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from flake8_ascend import cli
from flake8_ascend.modes import Job
from flake8_ascend.offline.dump_compare import CompareError, load_tensor
from flake8_ascend.plugin import AscendChecker
from flake8_ascend.runtime.inject import PACKAGE
from flake8_ascend.sources import TooComplex, check_libcst, split_lines
from flake8_ascend.runtime.msft_dynamic_analysis.cells import safe_cell
from flake8_ascend.runtime.msft_dynamic_analysis.hook import write_csv as hook_write_csv

SCRIPT = Path(sys.executable).with_name("ascend-analyse")
SECRET = "HOSTILE_TEST_SECRET_7f3a"
CUDA_LINE = "import torch\nx = torch.zeros(3).cuda()\n"
ALL_MODES = ("torch_apis", "affinity_apis", "dynamic_shape", "third_party", "overflow", "runtime_ops", "migrate")
COPY_MODES = ("dynamic_shape", "overflow", "runtime_ops", "migrate")


def mode_args(mode: str) -> list:
    """``-m MODE``, with jedi off for third_party where the test is not about jedi."""
    return ["-m", mode, *(["--jedi-seconds", "0"] if mode == "third_party" else [])]


def run_main(*argv: str):
    """(exit status, stderr) of ``ascend-analyse`` run in this process."""
    err = io.StringIO()
    status = cli.main([str(a) for a in argv], out=io.StringIO(), err=err)
    return status, err.getvalue()


def run_cli(*argv, env=None, timeout=60, **kwargs):
    return subprocess.run([str(SCRIPT), *map(str, argv)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, **kwargs)


def one_line_error(stderr: str) -> None:
    assert stderr.count("\n") == 1 and stderr.startswith("ascend-analyse: ") and "Traceback" not in stderr, stderr


def leftovers(out: Path):
    """Hidden temporary or old report folders the tool left in ``out``."""
    return sorted(p.name for p in out.iterdir() if p.name.startswith("."))


@pytest.fixture
def project(tmp_path):
    source = tmp_path / "proj"
    source.mkdir()
    (source / "a.py").write_text(CUDA_LINE)
    out = tmp_path / "out"
    out.mkdir()
    return source, out


# -- 1. the analysed project's pyproject.toml is data -------------------------------------------
MALICIOUS_PYPROJECT = {
    "environment file": '[tool.flake8-ascend]\napi-files = ["/proc/self/environ"]\n',
    "terminal": '[tool.flake8-ascend]\napi-files = ["/dev/tty"]\n',
    "file descriptor 0": "[tool.flake8-ascend]\napi-files = [0]\n",
    "number": "[tool.flake8-ascend]\napi-files = 5\n",
    "table in the list": "[tool.flake8-ascend]\napi-files = [{a=1}]\n",
    "tool not a table": "tool = 5\n",
    "array of tables": "[[tool.flake8-ascend]]\napi-files = []\n",
    "version as a number": "[tool.flake8-ascend]\ntorch-version = 2.10\n",
    "unknown key": "[tool.flake8-ascend]\napi-file = 'x.csv'\n",
    "version that is not one": f"[tool.flake8-ascend]\ntorch-version = '{SECRET}'\n",
    "official-lists as text": "[tool.flake8-ascend]\nofficial-lists = 'yes'\n",
    "FIFO": None,
}


@pytest.mark.parametrize("name", MALICIOUS_PYPROJECT)
def test_malicious_pyproject_values_give_one_line_and_exit_2(project, monkeypatch, name):
    source, out = project
    monkeypatch.setenv("CI_TOKEN", SECRET)
    if MALICIOUS_PYPROJECT[name] is None:
        os.mkfifo(source / "pyproject.toml")
    else:
        (source / "pyproject.toml").write_text(MALICIOUS_PYPROJECT[name])
    status, err = run_main("-i", source, "-o", out, "-q")
    assert status == 2
    one_line_error(err)
    assert SECRET not in err and list(out.iterdir()) == []


# flake8's configuration files, which ascend-analyse reads as flake8 does, are data of the project too
MALICIOUS_FLAKE8_CONFIG = {
    "version that is not one": ("setup.cfg", f"[flake8]\nascend-torch-version = {SECRET}\n".encode()),
    "wrong per-file-ignores": ("tox.ini", f"[flake8]\nper-file-ignores = {SECRET}\n".encode()),
    "not UTF-8": (".flake8", b"[flake8]\nselect = \xff\xfe\n"),
    "over 1 MiB": ("setup.cfg", b"[flake8]\n" + b"#" * (2**20 + 1)),
    "FIFO": ("tox.ini", None),
}


@pytest.mark.parametrize("name", MALICIOUS_FLAKE8_CONFIG)
def test_malicious_flake8_configuration_gives_one_line_and_exit_2(project, name):
    source, out = project
    file_name, content = MALICIOUS_FLAKE8_CONFIG[name]
    if content is None:
        os.mkfifo(source / file_name)
    else:
        (source / file_name).write_bytes(content)
    status, err = run_main("-i", source, "-o", out, "-q")
    assert status == 2
    one_line_error(err)
    assert SECRET not in err and list(out.iterdir()) == []


def test_api_files_from_pyproject_are_relative_to_it_and_read_with_a_bom(project, tmp_path, monkeypatch):
    source, out = project
    (source / "results.csv").write_text("\ufeffFile,3rd-party API,Message\nlib.py,lib.api.bad,x\n", encoding="utf-8")
    (source / "pyproject.toml").write_text('[tool.flake8-ascend]\napi-files = ["results.csv"]\n')
    (source / "a.py").write_text("import lib.api\nlib.api.bad()\n")
    monkeypatch.chdir(tmp_path)  # not the project: the path is resolved against the pyproject.toml
    assert run_main("-i", source, "-o", out, "-q") == (0, "")
    log = (out / "proj_analysis" / cli.LOG_NAME).read_text()
    assert "third-party APIs from -api files: 1" in log


def test_flake8_refuses_a_pyproject_pointing_at_the_environment_in_one_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.flake8-ascend]\napi-files = ["/proc/self/environ"]\n')
    (tmp_path / "a.py").write_text(CUDA_LINE)
    result = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "a.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, env={**os.environ, "CI_TOKEN": SECRET})
    assert result.returncode != 0 and SECRET not in result.stdout + result.stderr
    assert result.stderr.strip().startswith("flake8-ascend: error:") and result.stderr.count("\n") == 1


# -- 2. a crafted dump must not run code ------------------------------------------------------------
class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_dump_does_not_run_code_even_when_torch_is_told_to_unpickle(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    marker = tmp_path / "code_ran"
    for side, value in (("a", _Payload(marker)), ("b", torch.ones(2))):
        folder = tmp_path / side / "0" / "0"
        folder.mkdir(parents=True)
        torch.save(value, folder / "0.aten.add.default.output.0.pt")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    status, err = run_main("compare", tmp_path / "a", tmp_path / "b", "-o", out, "-q")
    assert status == 2 and "cannot read" in err and "not a plain tensor file" in err
    one_line_error(err)
    assert not marker.exists() and list(out.iterdir()) == []
    assert os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1"  # put back after the load


@pytest.mark.parametrize("failure", (TypeError, RuntimeError, EOFError))
def test_a_failed_weights_only_load_is_never_retried_unsafely(tmp_path, monkeypatch, failure):
    """The hole: a pickle crafted to fail the weights-only pass (TypeError) was loaded again without it."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "0.aten.add.default.output.0.pt"
    torch.save(torch.ones(1), path)
    calls = []

    def load(f, map_location=None, weights_only=None):
        calls.append(weights_only)
        raise failure("crafted")

    monkeypatch.setattr(torch, "load", load)
    with pytest.raises(CompareError, match="not a plain tensor file"):
        load_tensor(torch, path)
    assert calls == [True]


# -- 3. a libcst crash cannot take a copy-mode run down ---------------------------------------------
@pytest.mark.parametrize("mode", COPY_MODES)
def test_a_20000_term_expression_is_copied_unchanged_with_a_logged_reason(tmp_path, mode):
    source = tmp_path / "deep"
    source.mkdir()
    (source / "train.py").write_text("x = " + "+".join(["1"] * 20000) + "\nfor b in train_loader:\n"
                                     "    loss.backward()\n")
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("-i", source, "-o", out, "-q", "-m", mode, timeout=120)
    assert result.returncode == 0, result.stderr
    report = out / "deep_analysis"
    copy = report / "deep_msft" if mode == "migrate" else report
    assert (copy / "train.py").read_bytes() == (source / "train.py").read_bytes()
    assert "train.py: copied unchanged: nested " in (report / cli.LOG_NAME).read_text()
    assert leftovers(out) == []


def test_depth_guard_also_covers_files_the_stdlib_rejects():
    with pytest.raises(TooComplex):  # libcst segfaults on this one too
        check_libcst(("x = " + "+".join(["1"] * 20000) + "+\n").encode())
    check_libcst(b"def f(:\n    pass\n")  # an ordinary syntax error is left to libcst's own message
    check_libcst(b"x = [" + b"1, " * 20000 + b"]\n")  # wide is fine: only depth crashes libcst


def test_an_input_symlink_named_like_the_dump_folder_is_not_copied(tmp_path):
    source = tmp_path / "proj"
    source.mkdir()
    (source / "train.py").write_text(CUDA_LINE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (source / "msft_overflow_dump").symlink_to(elsewhere, target_is_directory=True)
    out = tmp_path / "out"
    out.mkdir()
    assert run_main("-i", source, "-o", out, "-q", "-m", "overflow") == (0, "")
    assert not os.path.lexists(out / "proj_analysis" / "msft_overflow_dump")


# -- 4/5. FIFOs, devices, sockets, unreadable files, odd names ----------------------------------
@pytest.fixture
def special_files(project):
    source, out = project
    os.mkfifo(source / "x.py")
    os.mkfifo(source / "k.cu")
    os.mkfifo(source / "data.bin")
    (source / "zero.py").symlink_to("/dev/zero")
    (source / "zero.bin").symlink_to("/dev/zero")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(source / "sock.py"))
    return source, out


@pytest.mark.parametrize("mode", ALL_MODES)
def test_fifos_sockets_and_dev_zero_are_skipped_not_read(special_files, mode):
    source, out = special_files
    result = run_cli("-i", source, "-o", out, "-q", *mode_args(mode), timeout=60)
    assert result.returncode == 0 and result.stderr == ""
    log = (out / "proj_analysis" / cli.LOG_NAME).read_text()
    for name in ("x.py", "zero.py", "sock.py"):
        assert f"{name}: " in log and "not a regular file" in log
    if mode in COPY_MODES:
        assert "k.cu: left out: not a regular file" in log and "data.bin: left out" in log
        assert "zero.bin: symbolic link to a FIFO, socket or device left out" in log
    if mode == "third_party":
        assert "skipped k.cu: not a regular file" in log
        assert "jedi: left out (the tree holds .py files that are FIFOs, sockets or devices)" in log
    assert leftovers(out) == []


def test_flake8_refuses_an_api_file_that_is_a_fifo_or_a_device(tmp_path):
    os.mkfifo(tmp_path / "fifo.csv")
    (tmp_path / "a.py").write_text(CUDA_LINE)
    for api_file in ("fifo.csv", "/dev/zero"):
        result = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "--ascend-api-files", api_file,
                                 "a.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode != 0 and "not a regular file" in result.stderr and result.stderr.count("\n") == 1


def test_files_over_the_size_cap_are_skipped(project, monkeypatch):
    source, out = project
    monkeypatch.setattr("flake8_ascend.files.MAX_FILE_BYTES", 10)
    monkeypatch.setattr("flake8_ascend.files.read_regular.__defaults__", (10,))
    assert run_main("-i", source, "-o", out, "-q")[0] == 0
    assert "skipped a.py: larger than the size cap" in (out / "proj_analysis" / cli.LOG_NAME).read_text()


def test_odd_file_names_keep_the_log_one_line_per_entry(project):
    source, out = project
    (source / "new\nline.py").write_text(CUDA_LINE)
    (source / os.fsdecode(b"bad\xffname.py")).write_text(CUDA_LINE)
    assert run_main("-i", source, "-o", out, "-q") == (0, "")
    report = out / "proj_analysis"
    lines = (report / cli.LOG_NAME).read_text().splitlines()
    assert any(line.startswith("[") and "new\\x0aline.py" in line for line in lines)
    assert any("bad\\udcffname.py" in line for line in lines)
    with (report / "cuda_op_list.csv").open(newline="", encoding="utf-8") as handle:
        assert len(list(csv.reader(handle))) == 4  # header + one row per file


def _nobody(needed: bool = True):
    """The uid/gid of ``nobody`` when this process runs as root and can switch to it; None for a non-root run
    (where permissions already apply), or a skip when the test needs another user."""
    if os.geteuid() != 0:
        if needed:
            pytest.skip("needs root to give the previous report to another user")
        return None
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' on this machine")
    return entry.pw_uid, entry.pw_gid


@pytest.fixture
def open_project():
    """Like ``project``, in a folder every user may enter (pytest's own temporary folders are private)."""
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)
        source, out = Path(folder) / "proj", Path(folder) / "out"
        source.mkdir()
        out.mkdir()
        (source / "a.py").write_text(CUDA_LINE)
        yield source, out
        for path in (source / "locked", source / "secret.py"):
            if path.exists():
                path.chmod(0o755)


def run_as(user, *argv):
    """``run_main`` in a forked child that switched to ``user`` (modules already imported stay usable)."""
    if user is None:
        return run_main(*argv)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgid(user[1])
            os.setuid(user[0])
            status, err = run_main(*argv)
            os.write(write, f"{status}\n{err}".encode())
        except BaseException as error:
            os.write(write, f"99\n{type(error).__name__}: {error}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    status, _, err = answer.partition("\n")
    return int(status), err


@pytest.mark.parametrize("mode", ("torch_apis", "dynamic_shape", "third_party"))
def test_unreadable_folder_and_file_are_logged_skips_for_an_unprivileged_user(open_project, mode):
    user = _nobody(needed=False)
    source, out = open_project
    run_main("-i", source, "-o", out, "-q", *mode_args(mode))  # imports everything the child will need
    (source / "locked").mkdir()
    (source / "locked" / "b.py").write_text(CUDA_LINE)
    (source / "secret.py").write_text(CUDA_LINE)
    (source / "locked").chmod(0)
    (source / "secret.py").chmod(0)
    if user is not None:
        os.chown(out, *user)
    (out / "proj_analysis").rename(out / "older")
    status, err = run_as(user, "-i", source, "-o", out, "-q", *mode_args(mode))
    assert (status, err) == (0, "")
    log = (out / "proj_analysis" / cli.LOG_NAME).read_text()
    assert "locked: cannot list folder (Permission denied)" in log
    assert "secret.py: cannot read (Permission denied)" in log


def test_a_previous_report_owned_by_someone_else_is_a_one_line_error(open_project):
    user = _nobody()
    source, out = open_project
    assert run_main("-i", source, "-o", out, "-q")[0] == 0
    os.chown(out, *user)
    status, err = run_as(user, "-i", source, "-o", out, "-q")
    assert status == 2 and "cannot be replaced" in err
    one_line_error(err)
    assert (out / "proj_analysis" / "cuda_op_list.csv").is_file() and leftovers(out) == []


def test_a_full_disk_is_a_one_line_error_and_keeps_the_previous_report(project, monkeypatch):
    source, out = project
    assert run_main("-i", source, "-o", out, "-q")[0] == 0
    before = (out / "proj_analysis" / cli.LOG_NAME).read_text()

    def full(self, name, header, rows):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.output_path(name)))

    monkeypatch.setattr(Job, "write_csv", full)
    status, err = run_main("-i", source, "-o", out, "-q")
    assert status == 3 and "No space left on device" in err
    one_line_error(err)
    assert (out / "proj_analysis" / cli.LOG_NAME).read_text() == before and leftovers(out) == []


def test_concurrent_runs_into_one_output_all_succeed(project):
    source, out = project
    results = []

    def one():
        results.append(run_main("-i", source, "-o", out, "-q"))

    for _ in range(6):
        threads = [threading.Thread(target=one) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert set(results) == {(0, "")}
    assert [p.name for p in out.iterdir()] == ["proj_analysis"]


# -- 6. signals during each long phase ----------------------------------------------------------------
def _pool_input(root: Path) -> list:
    for index in range(600):
        (root / f"m{index}.py").write_text(CUDA_LINE * 40)
    return ["-m", "torch_apis", "-j", "2"], "rules:"


def _jedi_input(root: Path) -> list:
    lib = root / "lib"
    lib.mkdir()
    (lib / "__init__.py").write_text("")
    (lib / "core.py").write_text("import torch\n\ndef reduce_mode(x: torch.Tensor):\n    return x.mode()\n\n"
                                 "class Runner:\n    def step(self, x):\n        return reduce_mode(x)\n")
    for index in range(300):
        (lib / f"use{index}.py").write_text("from lib.core import Runner\n\n"
                                            + "".join(f"def go{k}(r, x):\n    return r.step(x)\n\n" for k in range(3)))
    return ["-m", "third_party", "-j", "1", "--jedi-seconds", "60"], "call graph:"


def _copy_input(root: Path) -> list:
    body = "".join(f"    y{k} = model(batch) + {k}\n" for k in range(60))
    for index in range(300):
        (root / f"train{index}.py").write_text(f"for batch in train_loader:\n{body}    loss.backward()\n")
    return ["-m", "dynamic_shape", "-j", "1"], "analysed "


PHASES = {"process pool": _pool_input, "jedi": _jedi_input, "libcst copy": _copy_input}


def _session_processes(sid: int):
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.getsid(int(entry.name)) == sid:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_cleanup_an_interrupt_cuts_short_prints_nothing(monkeypatch):
    """A generator suspended in the interrupted frames whose cleanup fails on half-done state (libcst's position
    recorder, seen as "Exception ignored in ..." under the one-line message of a Ctrl-C during the migrated copy)
    is collected quietly before the message is written."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)

    def recorder():
        try:
            yield
        finally:
            raise KeyError("the end position the signal cut short")

    def run():
        position = recorder()
        next(position)
        raise cli.Interrupted(signal.SIGINT)

    try:
        run()
    except cli.Interrupted as error:
        cli._finalise_quietly(error)
    assert seen == []
    assert sys.unraisablehook == seen.append  # the caller's hook is back


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find left-over processes")
@pytest.mark.parametrize("signum, group", [(signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGINT, True)],
                         ids=("SIGTERM to the tool", "SIGTERM to its group", "SIGINT to its group (Ctrl-C)"))
@pytest.mark.parametrize("phase", PHASES)
def test_a_signal_during_a_long_phase_leaves_nothing_behind(tmp_path, phase, signum, group):
    source = tmp_path / "src"
    source.mkdir()
    options, started = PHASES[phase](source)
    out = tmp_path / "out"
    (out / "src_analysis").mkdir(parents=True)
    (out / "src_analysis" / "previous.txt").write_text("the previous report")
    process = subprocess.Popen([str(SCRIPT), "-i", str(source), "-o", str(out), "-q", *options],
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        logs = list(out.glob(".src_analysis.*.tmp/" + cli.LOG_NAME))
        if logs and started in logs[0].read_text(errors="replace"):
            break
        time.sleep(0.02)
    time.sleep(0.2)
    if group:  # as a terminal's Ctrl-C or a job runner does
        os.killpg(process.pid, signum)
    else:  # as `timeout` or `kill PID` does: the workers must not outlive the tool
        os.kill(process.pid, signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    assert stderr == f"ascend-analyse: interrupted by {signal.Signals(signum).name}; no report written " \
                     "(a previous report is kept)\n"
    assert sorted(p.name for p in out.iterdir()) == ["src_analysis"]
    assert [p.name for p in (out / "src_analysis").iterdir()] == ["previous.txt"]
    for _ in range(50):
        if not _session_processes(process.pid):
            break
        time.sleep(0.1)
    assert _session_processes(process.pid) == []


@pytest.mark.parametrize("signum", (signal.SIGINT, signal.SIGTERM), ids=("SIGINT", "SIGTERM"))
def test_a_signal_that_a_library_swallows_still_fails_the_run(project, monkeypatch, signum):
    """jedi catches exceptions: a run whose interruption was swallowed must not replace the previous report."""
    source, out = project
    assert run_main("-i", source, "-o", out, "-q")[0] == 0
    before = (out / "proj_analysis" / cli.LOG_NAME).read_text()
    mode = cli.all_modes()["torch_apis"]
    original = mode.run

    def run(self, job):
        try:
            os.kill(os.getpid(), signum)
            time.sleep(1)  # the handler runs here
        except BaseException:  # what a careless library does
            pass
        return original(self, job)

    monkeypatch.setattr(mode, "run", run)
    status, err = run_main("-i", source, "-o", out, "-q")
    assert status == 128 + signum and "no report written" in err
    assert (out / "proj_analysis" / cli.LOG_NAME).read_text() == before and leftovers(out) == []


# -- 7. spreadsheet formula injection -------------------------------------------------------------
FORMULA_NAMES = ("=cmd|' /C calc'!A0", "+1+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx")


@pytest.mark.parametrize("name", FORMULA_NAMES)
def test_formula_cells_are_neutralised(name):
    assert safe_cell(name) == "'" + name
    assert safe_cell(name + ".py") == "'" + name + ".py"


@pytest.mark.parametrize("value", ("-1", "-0.25", "+3e-5", "plain.py", "a=b", 3, -1.5, None))
def test_numbers_and_ordinary_cells_are_left_alone(value):
    assert safe_cell(value) == value


def test_file_names_starting_with_a_formula_are_neutralised_in_lint_and_third_party_reports(tmp_path):
    source = tmp_path / "proj"
    source.mkdir()
    (source / "=cmd|' -C calc'!A0.py").write_text("import torch\n\ndef f(x: torch.Tensor):\n    return x.mode()\n"
                                                  "\ny = torch.zeros(3).cuda()\n")
    out = tmp_path / "out"
    out.mkdir()
    for mode, report in (("torch_apis", "cuda_op_list.csv"), ("third_party", "full_unsupported_results.csv")):
        assert run_main("-i", source, "-o", out, "-q", *mode_args(mode)) == (0, "")
        with (out / "proj_analysis" / report).open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))[1:]
        assert rows and all(row[0] == "'=cmd|' -C calc'!A0.py" for row in rows)


def test_dump_names_starting_with_a_formula_are_neutralised_in_compare_result(tmp_path):
    torch = pytest.importorskip("torch")
    for side in ("a", "b"):
        folder = tmp_path / side / "0" / "0"
        folder.mkdir(parents=True)
        torch.save(torch.ones(2), folder / "0.=HYPERLINK(1).output.0.pt")
    out = tmp_path / "out"
    out.mkdir()
    assert run_main("compare", tmp_path / "a", tmp_path / "b", "-o", out, "-q") == (0, "")
    with (out / "compare_a_vs_b_analysis" / "compare_result.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["Op"] for row in rows] == ["'=HYPERLINK(1)::"]


def test_runtime_reports_of_the_copies_are_neutralised(tmp_path):
    path = tmp_path / "report.csv"
    hook_write_csv(str(path), ("File Path", "Line Number"), [("@evil.py", 3), ("-1", -1)])
    assert path.read_text().splitlines()[1:] == ["'@evil.py,3", "-1,-1"]


# -- 8. nothing is written outside -o (jedi's cache) -------------------------------------------------
def test_third_party_writes_no_jedi_cache_into_home(tmp_path):
    source = tmp_path / "lib"
    source.mkdir()
    _jedi_input(source)
    home = tmp_path / "home"
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("-i", source / "lib", "-o", out, "-q", "-m", "third_party", "-j", "1", "--jedi-seconds", "2",
                     env={"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "jedi: " in (out / "lib_analysis" / cli.LOG_NAME).read_text()
    assert not home.exists() and leftovers(out) == []
    assert not any(p.name.startswith(".jedi-cache") for p in (out / "lib_analysis").iterdir())


# -- 9. what the instrumented copy contains -----------------------------------------------------------
def test_output_inside_the_input_is_treated_alike_by_the_lint_part_and_the_copy(tmp_path):
    source = tmp_path / "proj"
    (source / "out").mkdir(parents=True)
    (source / "train.py").write_text(CUDA_LINE)
    (source / "out" / "kept.py").write_text(CUDA_LINE)
    assert run_main("-i", source, "-o", source / "out", "-q", "-m", "dynamic_shape") == (0, "")
    copy = source / "out" / "proj_analysis"
    assert (copy / "out" / "kept.py").is_file() and not (copy / "out" / "proj_analysis").exists()
    assert "files: 2 Python files" in (copy / cli.LOG_NAME).read_text()


def test_output_equal_to_input_leaves_every_report_folder_out_of_the_copy(tmp_path):
    source = tmp_path / "proj"
    (source / "other_analysis").mkdir(parents=True)
    (source / "other_analysis" / "x.py").write_text(CUDA_LINE)
    (source / "train.py").write_text(CUDA_LINE)
    assert run_main("-i", source, "-o", source, "-q", "-m", "overflow") == (0, "")
    assert run_main("-i", source, "-o", source, "-q", "-m", "overflow") == (0, "")
    copy = source / "proj_analysis"
    assert sorted(p.name for p in copy.iterdir()) == [PACKAGE, cli.LOG_NAME, "train.py"]


def test_symlinks_in_the_copy_point_where_the_originals_do(tmp_path):
    source = tmp_path / "proj"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "m.py").write_text("x = 1\n")
    (tmp_path / "data").mkdir()
    (source / "data").symlink_to("../data", target_is_directory=True)
    (source / "alias.py").symlink_to("pkg/m.py")
    (source / "absolute").symlink_to(source / "pkg", target_is_directory=True)
    (source / "dangling").symlink_to(tmp_path / "missing")
    out = tmp_path / "out"
    out.mkdir()
    assert run_main("-i", source, "-o", out, "-q", "-m", "overflow") == (0, "")
    copy = out / "proj_analysis"
    assert (copy / "data").resolve() == (tmp_path / "data").resolve()
    assert os.readlink(copy / "alias.py") == "pkg/m.py" and os.readlink(copy / "absolute") == "pkg"
    assert not os.path.lexists(copy / "dangling")
    assert "dangling: dangling symbolic link left out" in (copy / cli.LOG_NAME).read_text()


# -- 10. minor ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["-v", ""], "the torch_npu version is empty"),
    (["-m", "overflow", "--overflow-iterations", "5-2"], "argument --overflow-iterations: expected all, N or A-B"),
    (["-m", "runtime_ops", "--ops-iterations", "0"], "argument --ops-iterations: expected a positive number"),
])
def test_bad_option_values_are_named_in_the_error(project, argv, message):
    source, out = project
    status, err = run_main("-i", source, "-o", out, *argv)
    assert status == 2 and message in err
    one_line_error(err)


# -- 11. reading, decoding, line splitting and parsing: one ladder for every front end (issue 24) -----
def report_rows(report: Path, name: str) -> list:
    with (report / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))[1:]


def cuda_lines(report: Path) -> list:
    """(file, start line) of every row of cuda_op_list.csv."""
    return sorted((row[0], int(row[2])) for row in report_rows(report, "cuda_op_list.csv"))


def flake8_lines(root: Path, *args: str) -> list:
    """(file, line) of every ASC finding flake8 reports under ``root``."""
    result = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", *args, "."], capture_output=True,
                            text=True, cwd=root, timeout=300)
    assert "Traceback" not in result.stderr, result.stderr
    return sorted((line.split(":")[0][2:], int(line.split(":")[1])) for line in result.stdout.splitlines())


def new_project(tmp_path: Path, files: dict) -> tuple:
    source, out = tmp_path / "proj", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    for name, content in files.items():
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return source, out


@pytest.mark.parametrize("mode", ("dynamic_shape", "overflow", "runtime_ops"))
@pytest.mark.parametrize("codec", ("rot13", "base64", "hex", "uu_codec"))
def test_a_coding_cookie_that_is_no_text_encoding_is_copied_unchanged_and_logged(tmp_path, mode, codec):
    script = f"# coding: {codec}\nfor batch in train_loader:\n    loss.backward()\n    opt.step()\n".encode()
    source, out = new_project(tmp_path, {"train.py": script})
    assert run_main("-i", source, "-o", out, "-q", "-m", mode) == (0, "")
    report = out / "proj_analysis"
    assert (report / "train.py").read_bytes() == script
    assert "train.py: copied unchanged: not decodable as UTF-8 or its declared encoding (" in \
        (report / cli.LOG_NAME).read_text()
    assert leftovers(out) == []


@pytest.mark.parametrize("flag", ("--fix", "--diff"))
def test_a_chain_too_deep_for_pythons_parser_is_a_logged_skip_for_fix_and_diff(tmp_path, flag):
    deep = "x = " + "-" * 6000 + "1\n"
    source, out = new_project(tmp_path, {"deep.py": deep, "gpu.py": CUDA_LINE})
    result = run_cli("-i", source, "-o", out, "-q", "--select", "ASC2", flag)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    report = out / "proj_analysis"
    log = (report / cli.LOG_NAME).read_text()
    assert "skipped deep.py: nested too deeply for Python's parser (MemoryError)" in log
    assert "fix: skipped deep.py: nested too deeply for Python's parser (MemoryError)" in log
    # the reports show the state after the fix: --fix rewrote gpu.py's line, --diff only showed the rewrite
    assert cuda_lines(report) == ([] if flag == "--fix" else [("gpu.py", 2)])
    assert (source / "deep.py").read_text() == deep
    assert (source / "gpu.py").read_text() == (CUDA_LINE.replace(".cuda()", ".npu()") if flag == "--fix" else CUDA_LINE)


def test_a_form_feed_libcst_rejects_leaves_the_file_unrewritten_with_a_logged_reason(tmp_path):
    text = "import torch\nif a:\n    if b:\n\x0c        raise X\n    c = 1\nx = torch.zeros(1).cuda()\n"
    source, out = new_project(tmp_path, {"a.py": text})
    result = run_cli("-i", source, "-o", out, "-q", "--select", "ASC2", "--diff")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    report = out / "proj_analysis"
    assert cuda_lines(report) == [("a.py", 6)]
    assert "fix: skipped a.py: libcst cannot parse it (tokenizer error: no matching outer block for dedent)" in \
        (report / cli.LOG_NAME).read_text()


def test_a_form_feed_in_a_function_body_survives_the_fix(tmp_path):
    text = "import torch\ndef f():\n    a = 1\n\x0c\n    b = 2\n    x = torch.zeros(1).cuda()\n    return x\n"
    source, out = new_project(tmp_path, {"a.py": text})
    assert run_main("-i", source, "-o", out, "-q", "--select", "ASC2", "--fix") == (0, "")
    assert (source / "a.py").read_text() == text.replace(".cuda()", ".npu()")


# characters str.splitlines breaks at and Python (and flake8) do not
LINE_BREAKS_PYTHON_IGNORES = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def test_line_numbers_noqa_and_migrate_count_lines_as_python_and_flake8_do(tmp_path):
    files = {f"f{n}.py": f"import torch\n# a{char}b\nx = torch.zeros(3).cuda()  # noqa: ASC202\n"
                         "y = torch.zeros(3).cuda()\n" for n, char in enumerate(LINE_BREAKS_PYTHON_IGNORES)}
    source, out = new_project(tmp_path, files)
    expected = [(name, 4) for name in sorted(files)]
    assert flake8_lines(source) == expected
    assert run_main("-i", source, "-o", out, "-q") == (0, "")
    assert cuda_lines(out / "proj_analysis") == expected
    assert run_main("-i", source, "-o", out, "-q", "-m", "migrate") == (0, "")
    report = out / "proj_analysis"
    assert sorted((row[0], row[1], row[4]) for row in report_rows(report, "change_list.csv")) == \
        [(name, "4", ".npu()") for name in sorted(files)]
    assert report_rows(report, "manual_work.csv") == []  # the noqa'd line 3 stays, as flake8 says
    for name, text in files.items():
        assert (report / "proj_msft" / name).read_text(encoding="utf-8") == \
            text.replace("y = torch.zeros(3).cuda()", "y = torch.zeros(3).npu()")


@pytest.fixture
def long_path_project(tmp_path):
    """A project whose folders nest deeper than PATH_MAX: ``a.py`` at the top, ``deep.py`` on every level."""
    source, out = new_project(tmp_path, {"a.py": CUDA_LINE})
    folder = os.open(source, os.O_RDONLY)
    for level in range(20):  # 20 names of 252 characters: more than 4,096 in all
        name = f"{level:02d}" + "d" * 250
        os.mkdir(name, dir_fd=folder)
        inner = os.open(name, os.O_RDONLY, dir_fd=folder)
        os.close(folder)
        folder = inner
        os.close(os.open("deep.py", os.O_CREAT | os.O_WRONLY, dir_fd=folder))
    os.close(folder)
    yield source, out
    shutil.rmtree(source, ignore_errors=True)  # rmtree walks by descriptor: it can remove what is too long to name


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_path_longer_than_the_system_allows_is_a_logged_skip(long_path_project, mode):
    source, out = long_path_project
    assert run_main("-i", source, "-o", out, "-q", *mode_args(mode)) == (0, "")
    report = out / "proj_analysis"
    log = (report / cli.LOG_NAME).read_text()
    assert "(File name too long)" in log
    if mode == "torch_apis":
        assert cuda_lines(report) == [("a.py", 2)]
    if mode in ("dynamic_shape", "overflow", "runtime_ops"):
        assert (report / "a.py").read_text() == CUDA_LINE
    assert leftovers(out) == []


def test_libcst_gets_no_file_over_its_node_budget(tmp_path):
    wide = "import torch\nx = torch.zeros(3).cuda()\ny = f(" + ", ".join(["1"] * 60000) + ")\n"
    loop = "for batch in train_loader:\n    loss.backward()\n    opt.step()\n"
    source, out = new_project(tmp_path, {"a.py": wide, "train.py": wide + loop})
    started = time.monotonic()
    result = run_cli("-i", source, "-o", out, "-q", "--select", "ASC2", "--diff", timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    log = (out / "proj_analysis" / cli.LOG_NAME).read_text()
    assert "fix: skipped a.py: 60021 syntax-tree nodes, more than the 50000 libcst is given" in log
    assert run_main("-i", source, "-o", out, "-q", "-m", "dynamic_shape") == (0, "")
    report = out / "proj_analysis"
    assert "train.py: copied unchanged: 60038 syntax-tree nodes, more than the 50000" in (report / cli.LOG_NAME).read_text()
    assert (report / "train.py").read_text() == wide + loop
    assert run_main("-i", source, "-o", out, "-q", "-m", "migrate") == (0, "")
    assert [(row[0], row[1]) for row in report_rows(out / "proj_analysis", "manual_work.csv")] == \
        [("a.py", "2"), ("train.py", "2")]  # left as it was: manual work
    assert time.monotonic() - started < 90  # libcst alone would take minutes on these two files
    assert leftovers(out) == []


def test_a_run_killed_outright_leaves_nothing_after_the_next_run(project):
    source, out = project
    ended = subprocess.Popen(["true"])
    ended.wait(timeout=60)
    abandoned = [out / f".proj_analysis.{ended.pid}.k2j4x.tmp", out / f".proj_analysis.{ended.pid}.a8b1.old"]
    running = out / f".proj_analysis.{os.getpid()}.zz9.tmp"  # a concurrent run's: its process still runs
    for folder in (*abandoned, running):
        (folder / "sub").mkdir(parents=True)
    assert run_main("-i", source, "-o", out, "-q") == (0, "")
    assert leftovers(out) == [running.name]
    killed = subprocess.Popen([str(SCRIPT), "-i", source, "-o", out, "-q", "-m", "third_party"])
    deadline = time.monotonic() + 30
    while not [p for p in out.iterdir() if p.name.startswith(f".proj_analysis.{killed.pid}.")]:
        assert time.monotonic() < deadline and killed.poll() is None
        time.sleep(0.01)
    killed.kill()  # SIGKILL: nothing in the process can clean up
    killed.wait(timeout=60)
    assert any(str(killed.pid) in name for name in leftovers(out))
    assert run_main("-i", source, "-o", out, "-q") == (0, "")
    assert leftovers(out) == [running.name]


@pytest.mark.parametrize("tail", ("y = " + " + ".join(["a"] * 500), "y = a" + ".f()" * 300))
def test_a_long_chain_costs_no_finding_elsewhere_in_the_file(tmp_path, tail):
    source, out = new_project(tmp_path, {"a.py": CUDA_LINE + tail + "\n"})
    assert run_main("-i", source, "-o", out, "-q") == (0, "")
    assert cuda_lines(out / "proj_analysis") == [("a.py", 2)]
    assert run_main("-i", source, "-o", out, "-q", "-m", "migrate") == (0, "")
    assert [row[:3] for row in report_rows(out / "proj_analysis", "change_list.csv")] == [["a.py", "2", "ASC202"]]
    assert run_main("-i", source, "-o", out, "-q", *mode_args("third_party")) == (0, "")
    assert "skipped" not in (out / "proj_analysis" / cli.LOG_NAME).read_text().replace("skipped: 0", "")
    text = (source / "a.py").read_text()
    found = AscendChecker(ast.parse(text), split_lines(text), "a.py").run()
    assert [line for line, _, message, _ in found if message.startswith("ASC202")] == [2]


def test_files_that_never_import_torch_have_no_tensors(tmp_path):
    sympy = "import sympy\ndef f(p16):\n    return p16.double()\n"
    numpy = "import numpy as np\ndef f(a):\n    return np.asarray(a)\ndef g(x):\n    return x.unique()\n"
    source, out = new_project(tmp_path, {"sym.py": sympy, "num.py": numpy,
                                         "t_sym.py": "import torch\n" + sympy, "t_num.py": "import torch\n" + numpy})
    assert run_main("-i", source, "-o", out, "-q", "--extend-select", "ASC508") == (0, "")  # advisory
    report = out / "proj_analysis"
    assert [row[:2] for row in report_rows(report, "api_performance_advice.csv")] == [["t_sym.py", "4"]]
    assert run_main("-i", source, "-o", out, "-q", "-m", "dynamic_shape") == (0, "")
    assert [row[:2] for row in report_rows(out / "proj_analysis", "dynamic_shape_hints.csv")] == [["t_num.py", "6"]]


def test_both_front_ends_read_an_undecodable_file_as_flake8_does(tmp_path):
    files = {"bogus.py": b"# coding: bogus\nimport torch\nx = torch.zeros(3).cuda()\n",
             "latin.py": b"import torch\n# \xff\xfe\nx = torch.zeros(3).cuda()\n"}
    source, out = new_project(tmp_path, files)
    expected = [("bogus.py", 3), ("latin.py", 3)]
    assert flake8_lines(source) == expected
    assert run_main("-i", source, "-o", out, "-q", "--select", "ASC2", "--fix") == (0, "")
    report = out / "proj_analysis"
    assert cuda_lines(report) == expected
    log = (report / cli.LOG_NAME).read_text()
    for name in files:
        assert f"{name}: not decodable as UTF-8 or its declared encoding (" in log
        assert f"fix: skipped {name}: not decodable as UTF-8" in log
        assert (source / name).read_bytes() == files[name]  # never rewritten in an encoding it does not have
    assert run_main("-i", source, "-o", out, "-q", "-m", "migrate") == (0, "")
    report = out / "proj_analysis"
    assert [(row[0], int(row[1])) for row in report_rows(report, "manual_work.csv")] == expected
    for name in files:
        assert (report / "proj_msft" / name).read_bytes() == files[name]


def test_fix_on_a_read_only_input_is_a_one_line_error(open_project):
    user = _nobody(needed=False)
    source, out = open_project
    run_main("-i", source, "-o", out, "-q", "--select", "ASC2", "--diff")  # imports what the child needs
    shutil.rmtree(out / "proj_analysis")
    os.chmod(out, 0o777)
    source.chmod(0o555)
    try:
        status, err = run_as(user, "-i", source, "-o", out, "-q", "--select", "ASC2", "--fix")
    finally:
        source.chmod(0o755)
    assert status == 2 and err == ("ascend-analyse: error: --fix cannot write a.py: its folder is not writable; "
                                   "no file was rewritten\n")
    one_line_error(err)
    assert (source / "a.py").read_text() == CUDA_LINE and list(out.iterdir()) == []


@pytest.mark.parametrize("mode", ("torch_apis", "third_party"))
def test_a_null_byte_is_logged_with_its_line(tmp_path, mode):
    source, out = new_project(tmp_path, {"a.py": b"import torch\nx = 1\x00\n"})
    assert run_main("-i", source, "-o", out, "-q", *mode_args(mode)) == (0, "")
    log = (out / "proj_analysis" / cli.LOG_NAME).read_text()
    assert "skipped a.py: a null byte at line 2: not Python source" in log and "line None" not in log
