"""Benchmark ``ascend-analyse -m third_party`` on real libraries (network needed; never run in CI).

    python benchmarks/bench_third_party.py mmcv transformers

Fetches the pinned sdists through ``benchmarks/corpora.py`` (cached outside
the repository; mmcv's is downloaded with a torch + ``setuptools<70``
environment it builds itself), runs the mode under ``/usr/bin/time -v`` and
prints wall time, peak memory and the report counts; for mmcv also the
``mmcv.ops`` functions that reach CUDA-only operators and the operators found
to have an NPU implementation.
"""
from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora  # noqa: E402

VERSIONS = {"mmcv": "2.6.0", "transformers": "2.13.0"}  # the torch_npu version each is analysed for


def fetch(name: str) -> Path:
    """The unpacked sdist's top folder (``mmcv-2.1.0``), as the official tool is pointed at it."""
    tree = corpora.fetch(corpora.by_name(name))
    return next(p for p in tree.iterdir() if p.is_dir())


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
    parser.add_argument("libraries", nargs="+", choices=sorted(VERSIONS))
    args = parser.parse_args()
    for name in args.libraries:
        run(name, fetch(name), VERSIONS[name])


if __name__ == "__main__":
    main()
