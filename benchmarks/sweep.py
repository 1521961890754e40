"""Run the plugin and every ascend-analyse mode on the real corpora; report time, memory and crashes.

    python benchmarks/sweep.py                    # all corpora (downloads them on first use)
    python benchmarks/sweep.py mmdet yolov5       # some
    python benchmarks/sweep.py --skip-flake8      # only ascend-analyse modes
    python benchmarks/sweep.py --flake8-only      # only the plugin's overhead against plain flake8
    python benchmarks/sweep.py --repeat 5         # five alternating plain/ASC pairs per corpus (default 3)
    python benchmarks/sweep.py --flake8-only --instructions mmcv   # also count instructions (valgrind)

For each corpus it times a parse-only pass (``ast.parse`` of every file, one
process), plain ``flake8`` (pycodestyle + pyflakes, from a separate virtual
environment without this plugin), ``flake8 --select ASC`` and every
``ascend-analyse`` mode that analyses a source tree, each in a child process
whose wall time and peak memory (``wait4`` rusage) are recorded together with
the rows of every CSV it wrote, the files it skipped and why, and whether it
crashed (a traceback or an unexpected exit code).  Plain flake8 and ``flake8 --select ASC``
run ``--repeat`` times each, alternating, and the median of each is kept: on a shared machine one pair alone
can be 20% off either way on a corpus that takes a second.  It prints a table and writes
everything to ``benchmarks/results/sweep.json``.

``--instructions`` also runs plain flake8 and ``flake8 --select ASC`` once each under valgrind's callgrind and
counts the instructions of the whole process tree (the parent and the workers it forks): a figure that the load
of a shared machine does not move, where wall and CPU seconds do. Valgrind runs a program about 50 times slower,
so it suits the small corpora (mmcv, yolov5: minutes); it counts work, not the cache misses or page faults that
a larger heap adds to the seconds.
"""
from __future__ import annotations

import argparse
import ast
import compileall
import csv
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import corpora  # noqa: E402
from flake8_ascend.modes import all_modes  # noqa: E402

BIN = Path(sys.executable).parent
NOT_SOURCE_MODES = {"recompile_log", "compare"}  # modes whose input is a log file or tensor dumps, not a source tree
EXPECTED_EXIT = {0, 1}  # 1: flake8 found something, or --fail-on-findings


def plain_flake8() -> Path:
    """A flake8 of the same version in its own environment, without this plugin (the baseline)."""
    import flake8

    env_dir = corpora.CACHE / f"_plain-flake8-{flake8.__version__}"
    python = env_dir / "bin" / "python"
    if not (env_dir / ".ready").exists():
        venv.create(env_dir, with_pip=True, clear=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"flake8=={flake8.__version__}"], check=True)
        (env_dir / ".ready").touch()
    return env_dir / "bin" / "flake8"


def measure(command: List[str], cwd: Path) -> Dict:
    """Run ``command``; wall seconds, peak RSS of the process tree (MiB), exit code, stderr tail."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    code = os.waitstatus_to_exitcode(status)
    crashed = code not in EXPECTED_EXIT or "Traceback (most recent call last)" in stderr + stdout
    # CPU seconds of the process and the workers it waited for: steadier than wall time on a shared machine
    cpu = usage.ru_utime + usage.ru_stime
    return {"command": " ".join(command), "seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
            "peak_mib": round(usage.ru_maxrss / 1024, 1),
            "exit": code, "crashed": crashed, "stderr_tail": stderr[-2000:] if crashed else "",
            "output_lines": stdout.count("\n")}


def instructions(command: List[str], cwd: Path) -> Optional[int]:
    """Instructions ``command`` and every process it forks ran (callgrind's totals); None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([valgrind, "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p", *command], cwd=cwd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        counts = [re.search(r"^(?:summary|totals): (\d+)", path.read_text(encoding="utf-8", errors="replace"), re.M)
                  for path in Path(out).glob("cg.*")]
    return sum(int(found.group(1)) for found in counts if found) or None


def parse_only(files: List[Path]) -> float:
    """CPU seconds to read and ``ast.parse`` every file in this process: the floor for any AST linter."""
    started = time.process_time()
    for path in files:
        try:
            ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            pass
    return round(time.process_time() - started, 2)


def report_facts(folder: Path) -> Dict:
    """Rows per CSV and the skipped files (with reasons) of one analysis folder."""
    csv.field_size_limit(sys.maxsize)  # third_party cells list every affected API: megabytes on transformers
    rows = {}
    for table in sorted(folder.rglob("*.csv")):
        if table.parent == folder:
            with table.open(newline="", encoding="utf-8") as handle:
                rows[table.name] = max(sum(1 for _ in csv.reader(handle)) - 1, 0)
    skipped = []
    log = folder / "pytorch_analysis.txt"
    if log.exists():
        skipped = [line.split("skipped ", 1)[1] for line in log.read_text(encoding="utf-8").splitlines()
                   if re.search(r"\bskipped\b .+: ", line)]
    return {"rows": rows, "skipped": skipped[:50], "skipped_count": len(skipped)}


def median_run(runs: List[Dict]) -> Dict:
    """The run of median wall time, with the median CPU time of all runs and the runs' spread."""
    ordered = sorted(runs, key=lambda run: run["seconds"])
    middle = dict(ordered[len(ordered) // 2])
    middle["cpu_seconds"] = sorted(run["cpu_seconds"] for run in runs)[len(runs) // 2]
    middle["crashed"] = any(run["crashed"] for run in runs)
    middle["all_seconds"] = [run["seconds"] for run in runs]
    return middle


def sweep_corpus(corpus, run_flake8: bool, run_modes: bool = True, repeat: int = 3,
                 count_instructions: bool = False) -> Dict:
    tree = corpora.fetch(corpus)
    files = corpora.python_files(tree)
    _, lines = corpora.size(tree)
    result = {"corpus": corpus.requirement, "files": len(files), "lines": lines, "parse_cpu_s": parse_only(files),
              "runs": {}}
    if run_flake8:
        plain, ours = [], []
        for _ in range(repeat):  # alternating, so a burst of load elsewhere hits both sides alike
            plain.append(measure([str(plain_flake8()), "--exit-zero", "."], tree))
            ours.append(measure([str(BIN / "flake8"), "--select", "ASC", "."], tree))
        result["runs"]["flake8 (plain)"] = median_run(plain)
        result["runs"]["flake8 --select ASC"] = median_run(ours)
        if count_instructions:
            counted = {"plain": instructions([str(plain_flake8()), "--exit-zero", "."], tree),
                       "ASC": instructions([str(BIN / "flake8"), "--select", "ASC", "."], tree)}
            if None not in counted.values():
                result["instructions"] = {**counted, "ratio": round(counted["ASC"] / counted["plain"], 3)}
    with tempfile.TemporaryDirectory() as out:
        for mode in sorted(all_modes()) if run_modes else ():
            if mode in NOT_SOURCE_MODES:
                continue
            run = measure([str(BIN / "ascend-analyse"), "-i", str(tree), "-o", out, "-m", mode, "-q"], tree)
            folder = Path(out) / f"{tree.name}_analysis"
            run.update(report_facts(folder) if folder.exists() else {"rows": {}, "skipped": [], "skipped_count": 0})
            result["runs"][f"ascend-analyse -m {mode}"] = run
    for run in result["runs"].values():
        run["files_per_s"] = round(len(files) / run["seconds"], 1) if run["seconds"] else None
    return result


def table(results: List[Dict]) -> str:
    lines = ["| corpus | files | lines | run | seconds | files/s | peak MiB | crashed | rows |", "|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        plain = result["runs"].get("flake8 (plain)", {})
        for name, run in result["runs"].items():
            ratio = ""
            if plain.get("seconds") and name == "flake8 --select ASC":
                ratio = f" ({run['seconds'] / plain['seconds']:.2f}x plain"
                if plain.get("cpu_seconds"):
                    ratio += f"; CPU {run['cpu_seconds'] / plain['cpu_seconds']:.2f}x"
                ratio += ")"
            rows = ", ".join(f"{k.replace('.csv', '')} {v}" for k, v in run.get("rows", {}).items())
            lines.append(f"| {result['corpus']} | {result['files']} | {result['lines']} | {name} | "
                         f"{run['seconds']}{ratio} | {run['files_per_s']} | {run['peak_mib']} | "
                         f"{'YES' if run['crashed'] else 'no'} | {rows} |")
        counted = result.get("instructions")
        if counted:
            lines.append(f"| {result['corpus']} | {result['files']} | {result['lines']} | instructions (callgrind), "
                         f"plain / ASC | {counted['plain']:,} / {counted['ASC']:,} ({counted['ratio']:.3f}x) | | | | |")
        lines.append(f"| {result['corpus']} | {result['files']} | {result['lines']} | parse only (1 core, CPU s) | "
                     f"{result['parse_cpu_s']} | | | | |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="corpora to run (default: all)")
    parser.add_argument("--skip-flake8", action="store_true", help="do not time flake8 runs")
    parser.add_argument("--flake8-only", action="store_true", help="time only the flake8 runs (plain and ASC)")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="alternating plain/ASC flake8 runs per corpus; the medians are compared (default 3)")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions of one plain and one ASC flake8 run under valgrind's "
                             "callgrind (every process of the tree): a ratio that machine load does not move")
    parser.add_argument("--json", default=str(HERE / "results" / "sweep.json"), help="where to write the results")
    args = parser.parse_args()
    if args.skip_flake8 and args.flake8_only:
        parser.error("--skip-flake8 and --flake8-only exclude each other")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.instructions and args.skip_flake8:
        parser.error("--instructions counts the flake8 runs, which --skip-flake8 leaves out")
    chosen = [corpora.by_name(n) for n in args.names] if args.names else corpora.CORPORA
    if None in chosen:
        parser.error(f"unknown corpus; known: {', '.join(c.name for c in corpora.CORPORA)}")
    results = []
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
               "date": time.strftime("%Y-%m-%d")}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    # Like for like with the plain environment, whose packages pip byte-compiled when it installed them: this
    # checkout's package is byte-compiled too (an editable install run under PYTHONDONTWRITEBYTECODE=1 would
    # otherwise compile its ~60 modules again in every flake8 process, ~75 ms each time).
    compileall.compile_dir(str(HERE.parent / "src" / "flake8_ascend"), quiet=1)
    for corpus in chosen:
        print(f"sweeping {corpus.requirement} ...", file=sys.stderr, flush=True)
        results.append(sweep_corpus(corpus, not args.skip_flake8, not args.flake8_only, args.repeat,
                                    args.instructions))
        Path(args.json).write_text(json.dumps({"machine": machine, "results": results}, indent=1) + "\n")
    print(table(results))
    crashes = sum(run["crashed"] for result in results for run in result["runs"].values())
    print(f"\n{crashes} crash(es); machine: {machine}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
