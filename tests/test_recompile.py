"""Recompile-log analysis: iterations split at marker lines, ops still compiled after the warm-up."""
import csv

import pytest

from flake8_ascend.cli import main
from flake8_ascend.offline.recompile import LogError, op_list_text, parse_log, suspect_rows

# CANN's op compiler logs "To compile op: %s, compileFlag is %d" (INFO), prefixed by the log header.
PREFIX = "[INFO] ASCENDCL(4321,python):2024-05-01-10:00:00.000.000 [op_compiler.cpp:121]4321 CompileOp: "


def compile_line(op, flag=0):
    return f"{PREFIX}To compile op: {op}, compileFlag is {flag}\n"


def write(tmp_path, *lines, name="host.log"):
    path = tmp_path / name
    path.write_text("".join(lines), encoding="utf-8")
    return path


def iteration(i, *ops):
    return [f"=====iter{i}\n", *[compile_line(op) for op in ops]]


def test_many_iterations(tmp_path):
    log = parse_log(write(
        tmp_path, compile_line("TransData"),
        *iteration(0, "MatMul", "Add", "MatMul"), *iteration(1, "Add"), *iteration(2, "Mul"),
        *iteration(3, "NonZero", "Gather"), *iteration(4, "NonZero"), *iteration(5), *iteration(6, "NonZero"),
    ))
    assert log.iterations == 7 and log.gaps == []
    assert op_list_text(log) == (
        "iter: 0\nTransData\niter: 1\nMatMul,Add\niter: 2\nAdd\niter: 3\nMul\n"
        "iter: 4\nNonZero,Gather\niter: 5\nNonZero\niter: 6\n\niter: 7\nNonZero\n"
    )
    assert suspect_rows(log) == [("NonZero", 3, 3, "4 5 7"), ("Gather", 1, 1, "4")]


def test_one_iteration_has_no_suspects(tmp_path):
    log = parse_log(write(tmp_path, *iteration(0, "MatMul", "MatMul")))
    assert log.iterations == 1 and log.segments[1].compiles == {"MatMul": 2}
    assert suspect_rows(log) == []


@pytest.mark.parametrize("lines", [[], [compile_line("Add"), "some other line\n"]])
def test_zero_iterations_and_logs_without_markers_are_errors(tmp_path, lines):
    with pytest.raises(LogError, match="no iteration marker '=====iter'.*--split-flag"):
        parse_log(write(tmp_path, *lines))


def test_missing_markers_are_reported_as_gaps(tmp_path):
    log = parse_log(write(tmp_path, *iteration(0), *iteration(1), *iteration(4, "Add"), *iteration(5)))
    assert log.gaps == [(1, 4)] and log.iterations == 4


def test_garbage_lines_are_ignored(tmp_path):
    path = tmp_path / "host.log"
    path.write_bytes(
        b"\x00\xff\xfe binary junk\n" + "=====iter0\n".encode() + b"To compile op: \n"
        + b"To compile op:, compileFlag is 0\n" + compile_line("Cast").encode() + b"\xc3\x28 bad utf-8\n"
        + b"a line mentioning compile op without the phrase\n" + "=====iter1\n".encode() * 4
        + compile_line("Cast").encode()
    )
    log = parse_log(path)
    assert log.malformed == 2 and log.iterations == 5
    assert log.segments[1].compiles == {"Cast": 1} and suspect_rows(log) == [("Cast", 1, 1, "5")]


def test_a_custom_split_flag(tmp_path):
    log = parse_log(write(tmp_path, "step 0 begins\n", compile_line("Add"), "step 1 begins\n"), "begins")
    assert log.iterations == 2 and log.segments[1].compiles == {"Add": 1}


def test_recompile_log_mode(tmp_path, capsys):
    path = write(tmp_path, *iteration(0, "MatMul"), *iteration(1), *iteration(2), *iteration(3, "Unique", "Unique"),
                 name="host-0.log")
    out = tmp_path / "out"
    out.mkdir()
    assert main(["-m", "recompile_log", "-i", str(path), "-o", str(out)]) == 0
    folder = out / "host-0_analysis"
    assert (folder / "recompile_op_list.txt").read_text(encoding="utf-8").startswith("iter: 0\n\niter: 1\nMatMul\n")
    with open(folder / "recompile_suspects.csv", newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [
            ["Op Name", "Compiles After Warm-up", "Iterations Compiling", "Iterations"], ["Unique", "2", "1", "4"]]
    log = (folder / "pytorch_analysis.txt").read_text(encoding="utf-8")
    assert "dynamic-shape suspect: Unique compiled 2 times in 1 iterations after iteration 3" in log
    assert "recompile_suspects.csv |          1" in capsys.readouterr().out


def test_recompile_log_mode_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    path = write(tmp_path, compile_line("Add"))
    assert main(["-m", "recompile_log", "-i", str(path), "-o", str(out)]) == 2
    assert main(["-m", "recompile_log", "-i", str(tmp_path), "-o", str(out), "--split-flag", "step"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2 and "no iteration marker" in errors[0] and "not a folder" in errors[1]
    assert list(out.iterdir()) == []
