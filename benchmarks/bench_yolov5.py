"""The three runtime copies on a real training program: yolov5 7.0.14's own ``train.py``, CPU, from scratch.

    python benchmarks/bench_yolov5.py --python /tmp/yolo-venv/bin/python [--yolov5 PKG] [--work DIR]
        [--images 64] [--imgsz 128] [--batch 4] [--epochs 2] [--repeat 2] [--variants ...]

Not part of the test suite (it needs yolov5's dependencies and minutes of CPU).
``--python`` is an interpreter with torch, yolov5's requirements (numpy, opencv,
PyYAML, pandas, matplotlib, seaborn, scipy, tqdm, psutil, requests, ultralytics,
roboflow, setuptools < 81 for ``pkg_resources``) and torchvision; ``--yolov5``
the ``yolov5`` package folder of the 7.0.14 wheel (``benchmarks/corpora.py``
fetches it; default: its place in the corpus cache).  The benchmark:

1. writes a tiny detection dataset (``--images`` PNG images with one to three
   filled rectangles each, YOLO labels; the first quarter is also the
   validation set) and its ``data.yaml``;
2. makes the instrumented copy of the yolov5 package for each variant with
   ``ascend-analyse -m MODE -i <yolov5 package folder>`` (this interpreter runs
   ascend-analyse): dynamic_shape and runtime_ops with their defaults,
   overflow checking every iteration (its default) and one in 10
   (``--overflow-every 10``);
3. trains the original and each copy with the same command, ``python -m
   yolov5.train --weights '' --cfg yolov5n.yaml`` from scratch on the CPU with
   one thread, from the folder above the package (as the copy's log says),
   offline (``YOLOV5_CONFIG_DIR`` holds matplotlib's DejaVu Sans as the
   ``Arial.ttf`` yolov5 would download);
4. compares the copies' ``results.csv`` (losses and metrics per epoch) with the
   original's, counts report rows, looks for the NMS call site
   (``utils/general.py:950``) and for Conv/BatchNorm rows in the dynamic-shape
   report, and gives the steady-state overhead: the mean training-iteration
   CPU time of the training process (``time.process_time``, one thread, so
   other load on a shared machine does not count) after the first 12
   iterations, instrumented / original, the best of ``--repeat`` interleaved
   rounds; and the same ratio for the first 12 iterations and the whole run.

Iteration times come from a launcher outside the project, which wraps yolov5's
``Callbacks.run`` to time ``on_train_batch_end`` events, after importing
``torchvision_cpu_ops`` (beside this file): when torchvision's C++ operators
cannot load (a CUDA-only wheel beside a CPU torch), it defines
``torchvision::nms`` with a plain-torch greedy NMS kernel and says so: the call
site and output sizes are those of the real program, the kernel is not
torchvision's.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import zlib
from pathlib import Path

DEFAULT_YOLOV5 = Path.home() / ".cache" / "flake8-ascend" / "corpora" / "yolov5" / "src" / "yolov5"
STEADY_AFTER = 12  # training iterations left out of the steady state (the detectors' first, fully recorded ones)
NMS_SITE = ("yolov5/utils/general.py", "950")
LAUNCHER = '''\
"""Run yolov5.train as `python -m yolov5.train` would, timing its training iterations (benchmark harness)."""
import json
import os
import runpy
import sys
import time

import torch

torch.set_num_threads(1)
sys.path.insert(0, os.environ["BENCH_HARNESS"])
import torchvision_cpu_ops  # noqa: E402  (torchvision beside a CPU torch; harness, not the program)

sys.path.remove(os.environ["BENCH_HARNESS"])

print(torchvision_cpu_ops.STATUS, file=sys.stderr)
sys.path.insert(0, os.getcwd())  # as `python -m yolov5.train` from here
from yolov5.utils import callbacks  # noqa: E402

times = []
plain_run = callbacks.Callbacks.run


def timed_run(self, hook, *args, **kwargs):
    if hook == "on_train_epoch_start":
        times.append(None)  # an epoch boundary: validation time is not an iteration's
    elif hook == "on_train_batch_end":
        times.append(time.process_time())  # this process's CPU time: other load on the machine does not count
    return plain_run(self, hook, *args, **kwargs)


callbacks.Callbacks.run = timed_run
sys.argv = ["train.py"] + sys.argv[1:]
try:
    runpy.run_module("yolov5.train", run_name="__main__", alter_sys=True)
finally:
    durations, last = [], None
    for stamp in times:
        if stamp is not None and last is not None:
            durations.append(stamp - last)
        last = stamp
    with open(os.environ["BENCH_TIMES"], "w") as handle:
        json.dump(durations, handle)
'''


def png(width: int, height: int, pixels: bytes) -> bytes:
    """An 8-bit RGB PNG (standard library only)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\0" + pixels[y * width * 3:(y + 1) * width * 3] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def make_dataset(root: Path, images: int, size: int) -> Path:
    """``images`` pictures of coloured rectangles on noise with their YOLO labels; returns data.yaml."""
    rng = random.Random(0)
    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
    for index in range(images):
        pixels = bytearray(rng.getrandbits(6) for _ in range(size * size * 3))
        labels = []
        for _ in range(rng.randint(1, 3)):
            cls = rng.randrange(2)
            w, h = rng.randint(size // 8, size // 2), rng.randint(size // 8, size // 2)
            x, y = rng.randint(0, size - w), rng.randint(0, size - h)
            colour = (230, 40, 40) if cls == 0 else (40, 40, 230)
            for row in range(y, y + h):
                for col in range(x, x + w):
                    pixels[(row * size + col) * 3:(row * size + col) * 3 + 3] = bytes(colour)
            labels.append("%d %.6f %.6f %.6f %.6f" % (cls, (x + w / 2) / size, (y + h / 2) / size, w / size, h / size))
        splits = ["train"] + (["val"] if index < max(1, images // 4) else [])
        for split in splits:
            (root / "images" / split / f"{index:03d}.png").write_bytes(png(size, size, bytes(pixels)))
            (root / "labels" / split / f"{index:03d}.txt").write_text("\n".join(labels) + "\n")
    data = root / "data.yaml"
    data.write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnc: 2\nnames: ['red', 'blue']\n")
    return data


def offline_config(python: str, work: Path) -> Path:
    """A yolov5 settings folder holding the font yolov5 would otherwise download (matplotlib's DejaVu Sans)."""
    folder = work / "config"
    folder.mkdir(exist_ok=True)
    if not (folder / "Arial.ttf").is_file():
        found = subprocess.run([python, "-c", "import matplotlib, os; print(os.path.join(matplotlib.get_data_path(), "
                                "'fonts', 'ttf', 'DejaVuSans.ttf'))"], capture_output=True, text=True, check=True)
        shutil.copyfile(found.stdout.strip(), folder / "Arial.ttf")
    return folder


def train(python: str, cwd: Path, work: Path, name: str, args, data: Path) -> dict:
    """One training run from ``cwd``; its results.csv rows, iteration CPU times, stderr and CPU time."""
    times = work / f"times_{name}.json"
    command = [python, str(work / "launch.py"), "--weights", "", "--cfg", "yolov5n.yaml", "--data", str(data),
               "--imgsz", str(args.imgsz), "--batch-size", str(args.batch), "--epochs", str(args.epochs),
               "--device", "cpu", "--workers", "0", "--project", str(work / "runs"), "--name", name, "--exist-ok",
               "--noplots", "--seed", "0"]
    env = {**os.environ, "BENCH_TIMES": str(times), "BENCH_HARNESS": str(Path(__file__).resolve().parent),
           "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled",
           "YOLOv5_VERBOSE": "False", "PYTHONPATH": "",
           "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",  # yolov5 7.0 reloads the checkpoints it wrote with torch.load
           "YOLOV5_CONFIG_DIR": str(offline_config(python, work))}
    before = os.times()
    run = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    after = os.times()
    cpu = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    (work / f"log_{name}.txt").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"{name}: training failed (exit {run.returncode}); see {work / f'log_{name}.txt'}")
    with open(work / "runs" / name / "results.csv", newline="") as handle:
        results = [{key.strip(): value.strip() for key, value in row.items()} for row in csv.DictReader(handle)]
    return {"results": results, "times": json.loads(times.read_text()), "stderr": run.stderr, "cpu": cpu}


def steady(times):
    """The mean iteration time after the first ones: sampled iterations count with their whole cost."""
    kept = times[STEADY_AFTER:]
    return statistics.mean(kept) if kept else float("nan")


def read_report(path: Path):
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def summarise_report(mode: str, rows) -> str:
    if rows is None:
        return "no report written"
    if mode == "dynamic_shape":
        sites = [(r["Function Name"], r["File Path"], r["Line Number"]) for r in rows]
        nms = [r for r in rows if (r["File Path"], r["Line Number"]) == NMS_SITE]
        conv_bn = [r for r in rows if r["Function Name"].rsplit(".", 1)[-1] in ("Conv2d", "BatchNorm2d", "Conv")]
        phases = {}
        for row in rows:
            phases[row["Phase"]] = phases.get(row["Phase"], 0) + 1
        found = "; ".join(f"{r['Function Name']} via {r['Library Frame']}, out {r['Output Shape Range']}" for r in nms)
        return (f"{len(rows)} rows, {len(set(sites))} distinct (function, file, line); phases {phases}; "
                f"NMS site {':'.join(NMS_SITE)}: {found or 'MISSING'}; Conv/BN rows: {len(conv_bn)}")
    if mode == "runtime_ops":
        listed = sorted({(r["Op"], r["NPU Status"], r["File Path"] + ":" + r["Line Number"], r["Loop"].split()[0])
                         for r in rows})
        return f"{len(rows)} rows: " + "; ".join(" ".join(item) for item in listed[:12])
    return f"{len(rows)} overflowing operators"


REPORTS = {"dynamic_shape": "msft_dynamic_shape_analysis_report.csv", "overflow": "msft_overflow_report.csv",
           "runtime_ops": "msft_runtime_ops_report.csv"}
VARIANTS = {  # name -> ascend-analyse arguments
    "dynamic_shape": ["-m", "dynamic_shape"],
    "overflow": ["-m", "overflow"],
    "overflow_every10": ["-m", "overflow", "--overflow-every", "10"],
    "runtime_ops": ["-m", "runtime_ops", "-v", "2.13"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="interpreter with torch and yolov5's requirements")
    parser.add_argument("--yolov5", type=Path, default=DEFAULT_YOLOV5, help="the yolov5 package folder")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_yolov5"))
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--imgsz", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds; the best steady state is kept")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "launch.py").write_text(LAUNCHER)
    data = make_dataset(work / "data", args.images, args.imgsz)
    places = {"original": args.yolov5.resolve().parent}
    for name in args.variants:
        out = work / f"out_{name}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        subprocess.run([sys.executable, "-m", "flake8_ascend.cli", *VARIANTS[name], "-i", str(args.yolov5), "-o",
                        str(out), "-q"], check=True, capture_output=True)
        places[name] = out / f"{args.yolov5.name}_analysis"
    runs = {name: [] for name in places}
    for round_ in range(args.repeat):  # rounds over every variant, so a busy moment of the machine favours none
        for name, place in places.items():
            runs[name].append(train(args.python, place, work, f"{name}_{round_}", args, data))
    base = runs["original"]
    best = {name: min(steady(run["times"]) for run in done) for name, done in runs.items()}
    print(f"yolov5 7.0.14 train.py, yolov5n from scratch, {args.images} images {args.imgsz}px, batch {args.batch}, "
          f"{args.epochs} epochs, CPU, 1 thread; {len(base[0]['times'])} timed training iterations; "
          f"best of {args.repeat} interleaved rounds")
    print([line for line in base[0]["stderr"].splitlines() if line.startswith("torchvision operators")][0])
    print(f"original: steady-state iteration {best['original'] * 1000:.1f} ms CPU (mean after the first "
          f"{STEADY_AFTER}), whole run {min(r['cpu'] for r in base):.0f} s CPU")
    if any(run["results"] != base[0]["results"] for run in base):
        print("original: results.csv differs between its own rounds: comparisons below are not meaningful")
    for name in args.variants:
        done = runs[name]
        same = all(run["results"] == base[0]["results"] for run in done)
        first = min(sum(r["times"][:STEADY_AFTER]) for r in done) / min(sum(r["times"][:STEADY_AFTER]) for r in base)
        whole = min(r["cpu"] for r in done) / min(r["cpu"] for r in base)
        print(f"{name}: results.csv (losses, metrics per epoch) {'identical' if same else 'DIFFERENT'}; steady state "
              f"{best[name] * 1000:.1f} ms = {best[name] / best['original']:.2f}x; first {STEADY_AFTER} iterations "
              f"{first:.2f}x; whole run {whole:.2f}x")
        mode = VARIANTS[name][1]
        print(f"  report: {summarise_report(mode, read_report(places[name] / REPORTS[mode]))}")


if __name__ == "__main__":
    main()
