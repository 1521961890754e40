"""The figures of docs/migrate.md: ``-m migrate`` on real code bases, checked the way the issue asks.

    python benchmarks/bench_migrate.py [--version 2.6.0] [yolov5 mmdet timm mmsegmentation ultralytics deepspeed]

For each corpus (fetched once through ``benchmarks/corpora.py``): the migration's time and rewrites per code,
the manual work per code, whether every file of the copy compiles, whether migrating the copy again changes
anything, and whether ``flake8 --select ASC2`` (the advisory ASC2 codes named in full) on the copy reports exactly
the rows of ``manual_work.csv``
(file, line, code).  Prints one Markdown row per corpus.  Not part of the test suite (minutes of CPU).
"""
from __future__ import annotations

import argparse
import csv
import filecmp
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import corpora  # noqa: E402
from flake8_ascend.codes import CODES  # noqa: E402

# corpus -> its package folder inside the unpacked release; the last two already support the NPU themselves
PACKAGES = {"yolov5": "yolov5", "mmdet": "mmdet", "timm": "timm", "mmsegmentation": "mmseg",
            "ultralytics": "ultralytics-8.4.190/ultralytics", "deepspeed": "deepspeed-0.19.8/deepspeed"}


def migrate(package: Path, out: Path, version: str) -> float:
    start = time.monotonic()
    subprocess.run(["ascend-analyse", "-q", "-m", "migrate", "-i", str(package), "-o", str(out), "-v", version],
                   check=True)
    return time.monotonic() - start


def table(path: Path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def same_tree(left: Path, right: Path) -> bool:
    compared = filecmp.dircmp(left, right)
    if compared.left_only or compared.right_only or filecmp.cmpfiles(left, right, compared.common_files,
                                                                      shallow=False)[1:] != ([], []):
        return False
    return all(same_tree(left / name, right / name) for name in compared.common_dirs)


def flake8(copy: Path, package: str, version: str) -> set:
    """The ASC2 findings on the copy, the advisory ones named in full (the migration lists them all)."""
    advisory = ",".join(code for code, row in CODES.items() if code.startswith("ASC2") and row.default_off)
    result = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC2", "--extend-select", advisory,
                             "--ascend-torch-version", version, package], cwd=copy, capture_output=True, text=True)
    found = set()
    for line in result.stdout.splitlines():
        path, number, _, rest = line.split(":", 3)
        found.add((path, number, rest.split()[0]))
    return found


def measure(name: str, version: str) -> str:
    package = corpora.fetch(corpora.by_name(name)) / PACKAGES[name]
    with tempfile.TemporaryDirectory() as tmp:
        first, second = Path(tmp) / "first", Path(tmp) / "second"
        first.mkdir()
        second.mkdir()
        seconds = migrate(package, first, version)
        report = first / f"{package.name}_analysis"
        copy = report / f"{package.name}_msft"
        changes = table(report / "change_list.csv")
        manual = table(report / "manual_work.csv")
        files = [p for p in copy.rglob("*.py") if p.is_file() and not p.is_symlink()]
        broken = 0
        for path in files:
            try:
                compile(path.read_bytes(), str(path), "exec")
            except (SyntaxError, ValueError):
                broken += 1
        migrate(copy / package.name, second, version)
        again = second / f"{package.name}_analysis"
        rerun = len(table(again / "change_list.csv"))
        identical = same_tree(copy / package.name, again / f"{package.name}_msft" / package.name)
        listed = {(row["File"], row["Line"], row["Code"]) for row in manual}
        agree = flake8(copy, package.name, version) == listed

    def per_code(rows):
        counts = Counter(row["Code"] for row in rows if row["Code"])
        return ", ".join(f"{code} {n}" for code, n in sorted(counts.items())) or "none"

    imports = sum(1 for row in changes if not row["Code"])
    return (f"| {name} | {len(files)} | {per_code(changes)} | {imports} | {per_code(manual)} | {seconds:.1f} s "
            f"| {'yes' if not broken else f'{broken} do not'} | {rerun} changes, "
            f"{'identical copy' if identical else 'copy differs'} | {'yes' if agree else 'no'} ({len(listed)}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="2.6.0", help="torch_npu version (-v); default 2.6.0")
    parser.add_argument("corpora", nargs="*", metavar="CORPUS", help=f"default: {' '.join(PACKAGES)}")
    args = parser.parse_args()
    unknown = sorted(set(args.corpora) - set(PACKAGES))
    if unknown:
        parser.error(f"unknown corpus {', '.join(unknown)}; choose from {', '.join(PACKAGES)}")
    print("| corpus | .py files | rewrites per code | imports added/removed | manual (per code) | time "
          "| every file compiles | second run | flake8 on copy = manual list |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.corpora or PACKAGES:
        print(measure(name, args.version), flush=True)


if __name__ == "__main__":
    main()
