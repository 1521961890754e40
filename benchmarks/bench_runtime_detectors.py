"""Overhead of the runtime overflow and operator detectors on a small CPU training loop.

    python benchmarks/bench_runtime_detectors.py [--iterations N] [--repeat N] [--width N]

Writes a small training script (an MLP with LayerNorm and GELU, trained with
torch.optim.AdamW on random batches) into a temporary project beside a copy of
the hook package and the torch_npu 2.13.0 op table, then runs it in fresh
processes: without a detector, inside a pass-through TorchDispatchMode (torch's
own cost of intercepting every operator, for scale), with ``OVERFLOW.start`` checking every iteration,
with the overflow detector idle (only iteration 0 checked), with ``OPS.start``
recording every iteration (the tracing cost), and with ``OPS.start`` idle after
its 2 default iterations, and with ``OVERFLOW`` checking one iteration in 10
(``MSFT_OVERFLOW_EVERY=10``).  Each run times its own loop after a warm-up of
20 iterations (imports and first calls excluded) and prints iterations per CPU
second (``time.process_time``, one thread: other load on a shared machine does
not count); the variants run in ``--repeat`` interleaved rounds and the best of
each is kept.
The operators per iteration come from a run with ``MSFT_OPS_ALL=1``, so the
cost per operator can be given.  Needs torch.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from flake8_ascend.runtime.inject import PACKAGE, PACKAGE_SOURCE

WARMUP = 20
TABLE = PACKAGE_SOURCE.parent / "aten_ops" / "aten_ops_2.13.0.json"
SCRIPT = textwrap.dedent('''\
    import sys
    import time

    import torch
    import torch.nn as nn

    ITERATIONS, WIDTH, DETECTOR = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    WARMUP = %d
    torch.manual_seed(0)
    torch.set_num_threads(1)


    def batches(count):
        for _ in range(count):
            yield torch.randn(32, WIDTH), torch.randn(32, 1)


    def main():
        model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH),
                              nn.ReLU(), nn.Linear(WIDTH, 1))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        loader = batches(WARMUP + ITERATIONS)
        if DETECTOR == "overflow":
            from msft_dynamic_analysis.overflow import OVERFLOW
            loader = OVERFLOW.start(loader)
        elif DETECTOR == "ops":
            from msft_dynamic_analysis.ops import OPS
            loader = OPS.start(loader)
        mode = None
        if DETECTOR == "bare":  # torch's own cost of a pass-through TorchDispatchMode, for scale
            from torch.utils._python_dispatch import TorchDispatchMode

            class PassThrough(TorchDispatchMode):
                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    return func(*args, **(kwargs or {}))

            mode = PassThrough()
        started = None
        for step, (x, y) in enumerate(loader):
            if step == WARMUP:
                started = time.process_time()
            if mode is not None:
                mode.__enter__()
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if mode is not None:
                mode.__exit__(None, None, None)
        print(ITERATIONS / (time.process_time() - started))


    if __name__ == "__main__":
        main()
    ''' % WARMUP)


def rate(project: Path, args, detector: str, env: dict) -> float:
    """Iterations/s of one fresh run."""
    run = subprocess.run([sys.executable, "train.py", str(args.iterations), str(args.width), detector],
                         cwd=project, capture_output=True, text=True, check=True, env={**os.environ, **env})
    return float(run.stdout.split()[-1])


def operators_per_iteration(project: Path, args) -> float:
    """Every operator of the recorded iterations, counted by the ops detector itself."""
    iterations = WARMUP + args.iterations
    rate(project, args, "ops", {"MSFT_OPS_ALL": "1", "MSFT_OPS_ITERATIONS": str(iterations)})
    with (project / "msft_runtime_ops_report.csv").open(encoding="utf-8", newline="") as handle:
        return sum(int(row["Count"]) for row in csv.DictReader(handle)) / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args()
    everything = str(WARMUP + args.iterations)
    runs = [
        ("no detector", "none", {}),
        ("a pass-through TorchDispatchMode (no detector)", "bare", {}),
        ("OVERFLOW, checking every iteration", "overflow", {}),
        ("OVERFLOW, idle (only iteration 0 checked)", "overflow", {"MSFT_OVERFLOW_ITERATIONS": "0"}),
        ("OVERFLOW, checking one iteration in 10", "overflow", {"MSFT_OVERFLOW_EVERY": "10"}),
        ("OPS, recording every iteration", "ops", {"MSFT_OPS_ITERATIONS": everything}),
        ("OPS, idle after its 2 default iterations", "ops", {}),
    ]
    with tempfile.TemporaryDirectory() as temporary:
        project = Path(temporary)
        (project / "train.py").write_text(SCRIPT, encoding="utf-8")
        shutil.copytree(PACKAGE_SOURCE, project / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copyfile(TABLE, project / PACKAGE / TABLE.name)
        ops = operators_per_iteration(project, args)
        best = [0.0] * len(runs)
        for _ in range(args.repeat):  # rounds over every variant, so a busy moment does not favour one
            for position, (_, detector, env) in enumerate(runs):
                best[position] = max(best[position], rate(project, args, detector, env))
        rates = [(label, value) for (label, _, _), value in zip(runs, best)]
    plain = rates[0][1]
    print(f"MLP width {args.width}, batch 32, AdamW, {args.iterations} timed iterations after {WARMUP}, "
          f"best of {args.repeat}; {ops:.0f} ATen operators per iteration")
    for label, value in rates:
        extra = (1 / value - 1 / plain) / ops * 1e6
        print(f"{label:<48} {value:8.1f} iterations/s  ratio {value / plain:5.2f}  "
              f"{extra:+7.1f} us per operator")


if __name__ == "__main__":
    main()
