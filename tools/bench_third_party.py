"""Benchmark ``ascend-analyse -m third_party`` on real libraries (network needed; never run in CI).

    python tools/bench_third_party.py mmcv transformers [--cache DIR] [--pip PYTHON]

Downloads the sdists with pip into a cache outside the repository (default
``~/.cache/flake8-ascend-bench``), unpacks them, runs the mode under
``/usr/bin/time -v`` and prints wall time, peak memory and the report counts;
for mmcv also the ``mmcv.ops`` functions that reach CUDA-only operators and
the operators found to have an NPU implementation.  mmcv 2.1.0's sdist runs
its ``setup.py`` just to be downloaded, which needs torch and
``setuptools<70`` in the Python that runs pip: pass that interpreter with
``--pip`` (e.g. a venv with ``torch==2.13.0`` and ``setuptools<70``).
"""
from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LIBRARIES = {
    "mmcv": ("mmcv==2.1.0", "mmcv-2.1.0", "2.6.0", ["--no-build-isolation"]),
    "transformers": ("transformers==4.57.6", "transformers-4.57.6", "2.13.0", []),
}


def fetch(name: str, cache: Path, pip_python: str) -> Path:
    spec, folder, _, extra = LIBRARIES[name]
    source = cache / folder
    if source.is_dir():
        return source
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([pip_python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", *extra, spec,
                    "-d", str(cache)], check=True)
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(cache / f"{folder}.tar.gz") as archive:
        archive.extractall(cache, **safe)
    return source


def read(path: Path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))[1:]


def run(name: str, source: Path, version: str) -> None:
    with tempfile.TemporaryDirectory() as out:
        command = ["/usr/bin/time", "-v", str(Path(sys.executable).with_name("ascend-analyse")), "-q",
                   "-m", "third_party", "-i", str(source), "-o", out, "-v", version]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            sys.exit(result.stderr)
        wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", result.stderr).group(1)
        peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr).group(1))
        user = float(re.search(r"User time \(seconds\): (\S+)", result.stderr).group(1))
        folder = Path(out) / f"{source.name}_analysis"
        print(f"{name}: wall {wall}, user CPU {user:.0f} s, peak RSS {peak / 1024:.0f} MiB")
        log = (folder / "pytorch_analysis.txt").read_text(encoding="utf-8").splitlines()
        for line in log:
            if line.startswith(("files:", "C++ sources:", "call graph:", "jedi:", "wrote ")):
                print("  " + line)
        if name == "mmcv":
            mmcv_report(folder)


def mmcv_report(folder: Path) -> None:
    ops = read(folder / "cuda_op.csv")
    npu = sorted(row[0] for row in ops if row[2].startswith("has an NPU implementation"))
    without = {row[0] for row in ops if row[2].startswith("no NPU implementation")}
    cuda_only = sorted(row[0] for row in ops if row[0] in without and row[2].endswith("kernels: CUDA"))
    full = read(folder / "full_unsupported_results.csv")
    names = {n for row in full for n in row[1].splitlines()}
    reaching = {line.split(" -> ")[0] for row in full for line in row[3].splitlines()
                if line.split(" -> ")[-1].split(" (")[0] in without}
    print(f"  operators called: {len(ops)}; with an NPU implementation: {len(npu)}; without one: {len(without)}"
          f" (a CUDA kernel only: {len(cuda_only)})")
    print(f"  NPU-implemented: {', '.join(npu)}")
    under_ops = sum(n.startswith("mmcv.ops.") for n in names)
    print(f"  unsupported names: {len(names)}, of which under mmcv.ops: {under_ops};"
          f" functions and classes of mmcv.ops reaching an operator without NPU kernel: "
          f"{sum(n.startswith('mmcv.ops.') for n in reaching)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("libraries", nargs="+", choices=sorted(LIBRARIES))
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "flake8-ascend-bench")
    parser.add_argument("--pip", default=sys.executable, help="Python whose pip downloads the sdists")
    args = parser.parse_args()
    for name in args.libraries:
        run(name, fetch(name, args.cache, args.pip), LIBRARIES[name][2])


if __name__ == "__main__":
    main()
