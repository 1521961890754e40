"""Time ``ascend-analyse`` on a real PyTorch library: mmdet 3.1.0 from the package index.

    python benchmarks/bench_mmdet.py [--repeat N] [--jobs N]

The wheel is fetched once through ``benchmarks/corpora.py`` (``pip download
--no-deps`` into a cache outside the repository) and unpacked there.
Every mode that exists is run through the installed ``ascend-analyse`` console
script (so process start-up and pool start-up count); the best wall time of
``--repeat`` runs is printed with files/s, next to the cost of ``ast.parse``
alone on one core for scale.
"""
from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flake8_ascend.files import collect
from flake8_ascend.modes import all_modes
from flake8_ascend.sources import read_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora  # noqa: E402


def fetch() -> Path:
    """The unpacked ``mmdet`` package folder, downloading the wheel on first use."""
    return corpora.fetch(corpora.by_name("mmdet")) / "mmdet"


def parse_only(files) -> float:
    """Seconds to read and ``ast.parse`` every file on one core."""
    started = time.perf_counter()
    for path in files:
        ast.parse(read_source(path).text)
    return time.perf_counter() - started


def time_mode(script: str, source: Path, mode: str, jobs: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            command = [script, "-i", str(source), "-o", out, "-m", mode, "-q"] + (["-j", jobs] if jobs else [])
            started = time.perf_counter()
            subprocess.run(command, check=True)
            best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default="", help="passed to ascend-analyse -j (default: all cores)")
    args = parser.parse_args()
    script = shutil.which("ascend-analyse", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                  os.environ.get("PATH", "")]))
    if script is None:
        sys.exit("ascend-analyse is not installed (pip install -e .)")
    source = fetch()
    files = collect(source).files
    lines = sum(len(read_source(path).lines) for path in files)
    print(f"{corpora.by_name('mmdet').requirement}: {len(files)} files, {lines} lines; {os.cpu_count()} cores")
    parse = parse_only(files)
    print(f"{'ast.parse only (1 core)':<28} {parse:7.2f} s {len(files) / parse:8.0f} files/s")
    for mode in all_modes():
        wall = time_mode(script, source, mode, args.jobs, args.repeat)
        print(f"{'ascend-analyse -m ' + mode:<28} {wall:7.2f} s {len(files) / wall:8.0f} files/s")


if __name__ == "__main__":
    main()
