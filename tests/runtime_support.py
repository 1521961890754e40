"""Helpers for the runtime detector tests: run a script in this process as ``python script.py`` would."""
from __future__ import annotations

import csv
import io
import runpy
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from flake8_ascend.runtime.inject import PACKAGE

PACKAGE_SOURCE = Path(__file__).resolve().parent.parent / "src" / "flake8_ascend" / "runtime" / PACKAGE


def forget_package() -> None:
    """Drop every imported ``msft_dynamic_analysis`` module, so the next import is a fresh copy."""
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def run_script(script: Path, *argv: str) -> str:
    """Run ``script`` in this process (its folder first on sys.path, fresh detectors); return its stderr."""
    forget_package()
    saved_path, saved_argv = list(sys.path), list(sys.argv)
    sys.path.insert(0, str(script.parent))
    sys.argv = [str(script), *argv]
    err = io.StringIO()
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.path[:], sys.argv[:] = saved_path, saved_argv
    return err.getvalue()


def read_rows(path: Path):
    """The rows of a CSV report as dicts."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def header(path: Path):
    with open(path, newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))
