"""The runtime copies on a library-heavy step: torchvision's Faster R-CNN trained by a short script, CPU.

    python benchmarks/bench_torchvision_detection.py --python /tmp/yolo-venv/bin/python [--steps 6] [--work DIR]

Not part of the test suite (it needs torchvision).  Writes a training script
(``fasterrcnn_mobilenet_v3_large_320_fpn``, no pretrained weights, 3 classes,
SGD; batches of two 160 px random images with one to three random boxes;
fewer RPN proposals and sampled RoIs than the defaults, so a CPU step takes
about a second), makes the instrumented copy of it for each mode with
``ascend-analyse``, runs the original and each copy with ``--python`` (one
thread, ``TORCHDYNAMO_DISABLE=1``: torchvision's pure-torch ``roi_align``
fallback would otherwise be compiled on its first call) and prints whether the
losses are identical and what each report holds.  Every torch call of this
step except the script's own few lines happens inside torchvision: the rows
show that they are attributed to the script's ``model(images, targets)`` line
with torchvision's frame named.  ``torchvision_cpu_ops`` (beside this file)
stands in for torchvision's ``nms`` when its C++ operators cannot load.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

SCRIPT = '''\
import sys

import torch
import torchvision


def batches(steps):
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        images, targets = [], []
        for _ in range(2):
            images.append(torch.rand(3, 160, 160, generator=generator))
            count = int(torch.randint(1, 4, (), generator=generator))
            corner = torch.rand(count, 2, generator=generator) * 100
            size = 20 + torch.rand(count, 2, generator=generator) * 40
            targets.append({"boxes": torch.cat([corner, corner + size], 1),
                            "labels": torch.randint(1, 3, (count,), generator=generator)})
        yield images, targets


def main():
    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=3, box_batch_size_per_image=32,
        rpn_pre_nms_top_n_train=300, rpn_post_nms_top_n_train=200)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9)
    for images, targets in batches(int(sys.argv[1])):
        losses = model(images, targets)
        loss = sum(losses.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print("loss %.6f" % loss.item())


if __name__ == "__main__":
    main()
'''
MODEL_LINE = SCRIPT.splitlines().index("        losses = model(images, targets)") + 1
LAUNCHER = '''\
import os
import runpy
import sys

import torch

torch.set_num_threads(1)
sys.path.insert(0, os.environ["BENCH_HARNESS"])
import torchvision_cpu_ops  # noqa: E402  (harness, not the program)

sys.path.remove(os.environ["BENCH_HARNESS"])
print(torchvision_cpu_ops.STATUS, file=sys.stderr)
script = sys.argv[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
'''
MODES = {"dynamic_shape": (["-m", "dynamic_shape"], "msft_dynamic_shape_analysis_report.csv"),
         "overflow": (["-m", "overflow"], "msft_overflow_report.csv"),
         "runtime_ops": (["-m", "runtime_ops", "-v", "2.13"], "msft_runtime_ops_report.csv")}


def run(python: str, work: Path, folder: Path, steps: int):
    env = {**os.environ, "BENCH_HARNESS": str(Path(__file__).resolve().parent), "TORCHDYNAMO_DISABLE": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}
    done = subprocess.run([python, str(work / "launch.py"), str(folder / "train.py"), str(steps)], cwd=folder, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{folder}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout, done.stderr


def describe(mode: str, rows) -> str:
    if mode == "dynamic_shape":
        at_model = [r for r in rows if r["File Path"] == "train.py" and r["Line Number"] == str(MODEL_LINE)]
        libraries = Counter(r["Library Frame"].split(":")[0] for r in at_model if r["Library Frame"])
        top = "; ".join(f"{r['Function Name']} via {r['Library Frame']}: out {r['Output Shape Range']}"
                        for r in at_model[:6])
        return (f"{len(rows)} rows; {len(at_model)} at train.py:{MODEL_LINE} (model(images, targets)); library files "
                f"{dict(libraries.most_common(6))}; most varying: {top}")
    if mode == "runtime_ops":
        listed = [f"{r['Op']} {r['NPU Status']} at {r['File Path']}:{r['Line Number']} via {r['Library Frame']}"
                  for r in rows]
        return f"{len(rows)} rows: " + "; ".join(listed)
    return f"{len(rows)} overflowing operators"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="interpreter with torch and torchvision")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_torchvision_detection"))
    args = parser.parse_args()
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    (work / "proj").mkdir(parents=True)
    (work / "proj" / "train.py").write_text(SCRIPT)
    (work / "launch.py").write_text(LAUNCHER)
    original, log = run(args.python, work, work / "proj", args.steps)
    print(f"Faster R-CNN (mobilenet_v3_large_320_fpn), {args.steps} training steps, CPU, 1 thread")
    print([line for line in log.splitlines() if line.startswith("torchvision operators")][0])
    for mode, (flags, report) in MODES.items():
        out = work / f"out_{mode}"
        out.mkdir()
        subprocess.run([sys.executable, "-m", "flake8_ascend.cli", *flags, "-i", str(work / "proj"), "-o", str(out),
                        "-q"], check=True, capture_output=True)
        copy = out / "proj_analysis"
        losses, _ = run(args.python, work, copy, args.steps)
        with open(copy / report, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        print(f"{mode}: losses {'identical' if losses == original else 'DIFFERENT'}; {describe(mode, rows)}")


if __name__ == "__main__":
    main()
