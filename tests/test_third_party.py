"""``ascend-analyse -m third_party``: the fixture library's reports, and the ``-api`` round trip.

The fixture (tests/fixtures/third_party/fixlib) has several modules, a C++ file
with ``PYBIND11_MODULE`` (one operator with a CUDA kernel only, one with an NPU
kernel under ``csrc/npu``), a chain three calls deep through a method and a
relative import (``Net.forward -> Net.prepare -> helpers.reduce_mode ->
torch.Tensor.mode``), a cycle (``ping <-> pong``), package ``__init__``
re-exports (explicit and ``import *``) and near misses (a local ``mode``
function, ``torch.cuda.synchronize`` which transfer_to_npu maps).  The
expected files were produced by the tool and checked row by row.
"""
from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flake8_ascend import cli
from flake8_ascend.config import Config, load_third_party_apis
from flake8_ascend.library_analysis import OUTPUTS, analyse, analysis, tables, write_reports

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "third_party"
LIBRARY = FIXTURES / "fixlib"
EXPECTED = FIXTURES / "expected"
SCRIPT = FIXTURES / "train.py"
VERSION = "2.6.0"


def run_main(*args: str):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    code, stdout, err = run_main("-m", "third_party", "-i", str(LIBRARY), "-o", str(out), "-v", VERSION)
    assert code == 0, err
    return out / "fixlib_analysis", stdout


@pytest.mark.parametrize("name", OUTPUTS)
def test_fixture_library_gives_exactly_the_expected_rows(report, name):
    folder, _ = report
    assert (folder / name).read_text(encoding="utf-8") == (EXPECTED / name).read_text(encoding="utf-8")


def test_report_folder_holds_the_official_files_and_the_log(report):
    folder, stdout = report
    assert sorted(p.name for p in folder.iterdir()) == sorted([*OUTPUTS, "pytorch_analysis.txt"])
    log = (folder / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert "2 pybind operators, 0 TORCH_LIBRARY operators, 1 with an NPU implementation" in log
    assert "call graph:" in log and "wrote full_unsupported_results.csv: 4 rows" in log
    assert "| full_unsupported_results.csv |          4 |" in stdout


def test_expected_rows_say_what_the_acceptance_asks(report):
    """Spelled out, so the golden files cannot drift into something else unnoticed."""
    folder, _ = report

    def rows(name):
        with (folder / name).open(newline="", encoding="utf-8") as handle:
            return {row[0]: row for row in list(csv.reader(handle))[1:]}

    unsupported = rows("framework_unsupported_op.csv")["torch.Tensor.mode"]
    names = unsupported[1].splitlines()
    assert {"fixlib.Net.forward", "fixlib.models.Net.forward", "fixlib.models.net.Net.forward"} <= set(names)
    chain = unsupported[3].splitlines()[names.index("fixlib.models.net.Net.forward")]
    assert chain == ("fixlib.models.net.Net.forward -> fixlib.models.net.Net.prepare -> "
                     "fixlib.utils.helpers.reduce_mode -> torch.Tensor.mode (fixlib/utils/helpers.py:7)")
    assert "fixlib.utils.helpers.mode" not in names
    cycle = rows("unknown_op.csv")["torch.hspmm"][1].splitlines()
    assert {"fixlib.utils.helpers.ping", "fixlib.utils.helpers.pong", "fixlib.utils.ping"} <= set(cycle)
    ops = rows("cuda_op.csv")
    assert "no NPU implementation" in ops["fused_add_forward"][2]
    assert ops["fused_mul_forward"][2].startswith("has an NPU implementation (csrc/npu/fused_mul_npu.cpp:5)")
    full = rows("full_unsupported_results.csv")
    listed = {name for row in full.values() for name in row[1].splitlines()}
    assert "fixlib.fused_add" in listed and "fixlib.fused_mul" not in listed
    assert "fixlib.utils.ping" not in listed  # unknown only
    assert "fixlib.parallel.capture" in listed and "fixlib.parallel.sync" not in listed
    assert list(rows("migration_needed_op.csv")) == ["torch.cuda.CUDAGraph"]


def test_round_trip_torch_apis_reports_asc104_on_the_right_lines(report, tmp_path):
    folder, _ = report
    results = folder / "full_unsupported_results.csv"
    code, _, err = run_main("-i", str(SCRIPT), "-o", str(tmp_path), "-v", VERSION, "-api", str(results))
    assert code == 0, err
    with (tmp_path / "train_analysis" / "unsupported_api.csv").open(newline="", encoding="utf-8") as handle:
        found = [(int(row[1]), row[3]) for row in list(csv.reader(handle))[1:]]
    marked = [n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if line.endswith("# ASC104")]
    assert [line for line, _ in found] == marked
    assert "fixlib.models.net.Net" in {api for _, api in found}


def test_round_trip_through_the_flake8_plugin(report):
    folder, _ = report
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "ASC104", "--ascend-torch-version", VERSION,
         "--ascend-api-files", str(folder / "full_unsupported_results.csv"), str(SCRIPT)],
        capture_output=True, text=True, cwd=FIXTURES, timeout=300)
    lines = sorted(int(m) for m in re.findall(r"train\.py:(\d+):\d+: ASC104 ", result.stdout))
    marked = [n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if line.endswith("# ASC104")]
    assert lines == marked, result.stdout + result.stderr


def test_result_file_is_what_load_third_party_apis_reads(report):
    folder, _ = report
    apis = load_third_party_apis([str(folder / "full_unsupported_results.csv")])
    assert {"fixlib.Net", "fixlib.models.net.build", "fixlib.parallel.wrap"} <= apis
    assert not any(name.startswith("file_path:") for name in apis)


def test_library_entry_point_without_the_cli(tmp_path):
    result = analyse(LIBRARY, Config(VERSION))
    counts = write_reports(result, tmp_path)
    assert counts == {"cuda_op.csv": 2, "framework_unsupported_op.csv": 2, "full_unsupported_results.csv": 4,
                      "migration_needed_op.csv": 1, "unknown_op.csv": 1}
    for name in OUTPUTS:
        assert (tmp_path / name).read_text(encoding="utf-8") == (EXPECTED / name).read_text(encoding="utf-8")


def test_parallel_run_equals_serial_run(monkeypatch):
    serial = tables(analyse(LIBRARY, Config(VERSION), jobs=1, jedi_seconds=0))
    monkeypatch.setattr(analysis, "PARALLEL_MIN_FILES", 1)
    parallel = tables(analyse(LIBRARY, Config(VERSION), jobs=2, jedi_seconds=0))
    assert parallel == serial


def test_unparsable_files_are_skipped_and_logged(tmp_path):
    library = tmp_path / "lib"
    (library / "pkg").mkdir(parents=True)
    (library / "pkg" / "__init__.py").write_text("")
    (library / "pkg" / "broken.py").write_text("def f(:\n")
    (library / "pkg" / "ok.py").write_text("import torch\n\ndef f(m):\n    return torch.nn.DataParallel(m)\n")
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run_main("-m", "third_party", "-i", str(library), "-o", str(out), "-v", VERSION, "-q")
    assert code == 0, err
    log = (out / "lib_analysis" / "pytorch_analysis.txt").read_text()
    assert "skipped pkg/broken.py: syntax error at line 1" in log
    assert "pkg.ok.f" in (out / "lib_analysis" / "full_unsupported_results.csv").read_text()


@pytest.mark.parametrize("args, message", [
    (["-i", "/no/such/library"], "input not found"),
    (["--jedi-seconds", "-1"], "expected a number of seconds"),
    (["-env", "/no/such/site-packages"], "-env folder not found"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    argv = ["-m", "third_party", "-i", str(LIBRARY), "-o", str(tmp_path), *args]
    code, out, err = run_main(*argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_api_files_with_cells_beyond_the_csv_default_limit_are_read(tmp_path):
    names = [f"biglib.module_{i}.function_{i}" for i in range(8000)]
    path = tmp_path / "full_unsupported_results.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["File", "3rd-party API", "Message", "Call Chain"])
        writer.writerow(["biglib/module.py", "\n".join(names), "file_path:biglib/module.py, start_line:1, api_name:x",
                         "\n".join(f"{n} -> x (biglib/module.py:1)" for n in names)])
    assert len(path.read_text()) > 2 * 131072
    previous = csv.field_size_limit(131072)  # csv's default, whatever ran before
    try:
        assert load_third_party_apis([str(path)]) == frozenset(names)
    finally:
        csv.field_size_limit(previous)
