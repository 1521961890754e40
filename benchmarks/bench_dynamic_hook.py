"""Overhead of the runtime dynamic-shape detector on a small CPU training loop.

    python benchmarks/bench_dynamic_hook.py [--iterations N] [--repeat N] [--width N]

Writes a small training script (an MLP with a boolean-mask selection, trained
with torch.optim.AdamW on random batches) into a temporary project, runs
``instrument_tree`` on it as ``ascend-analyse -m dynamic_shape`` does, then
runs the original and the instrumented copy in fresh processes.  Each script
times its own training loop (after a warm-up, so imports and first-call costs
are excluded) and prints iterations per CPU second (``time.process_time``, one
thread: other load on a shared machine does not count); the two alternate, and
the best of ``--repeat`` runs of each is kept.  The detector runs with its
default recording window (the first 10 iterations, then one in 10);
``MSFT_SHAPES_EVERY=1`` in the environment records every iteration.
Needs torch.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from flake8_ascend.runtime.inject import instrument_tree

SCRIPT = textwrap.dedent('''\
    import sys
    import time

    import torch
    import torch.nn as nn

    ITERATIONS, WIDTH = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    torch.set_num_threads(1)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU())
            self.head = nn.Linear(WIDTH, 1)

        def forward(self, x):
            features = self.body(x)
            picked = features[x.sum(dim=1) > 0]  # how many rows: varies per batch
            return self.head(features).mean() + picked.pow(2).mean()


    def batches(count):
        for _ in range(count):
            yield torch.randn(32, WIDTH)


    def main():
        model = Net()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        warmup = 20
        train_loader = batches(warmup + ITERATIONS)
        started = None
        for step, x in enumerate(train_loader):
            if step == warmup:
                started = time.process_time()
            loss = model(x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(ITERATIONS / (time.process_time() - started))


    if __name__ == "__main__":
        main()
    ''')


def rate(script: Path, iterations: int, width: int) -> float:
    run = subprocess.run([sys.executable, str(script), str(iterations), str(width)], cwd=script.parent,
                         capture_output=True, text=True, check=True)
    return float(run.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        project = Path(temporary) / "bench"
        project.mkdir()
        (project / "train.py").write_text(SCRIPT, encoding="utf-8")
        copy = Path(temporary) / "bench_analysis"
        result = instrument_tree(project, copy)
        assert [w.line for w in result.wrapped] == [SCRIPT.splitlines().index(
            "    for step, x in enumerate(train_loader):") + 1], "the loop was not wrapped"
        plain, detected = 0.0, 0.0
        for _ in range(args.repeat):  # alternate, so drifting machine load hits both alike
            plain = max(plain, rate(project / "train.py", args.iterations, args.width))
            detected = max(detected, rate(copy / "train.py", args.iterations, args.width))
        report = (copy / "msft_dynamic_shape_analysis_report.csv").read_text(encoding="utf-8").splitlines()
    print(f"MLP width {args.width}, batch 32, AdamW, {args.iterations} timed iterations, best of {args.repeat}")
    print(f"without the detector: {plain:8.1f} iterations/s")
    print(f"with the detector:    {detected:8.1f} iterations/s  ({len(report) - 1} dynamic call sites reported)")
    print(f"ratio (with / without): {detected / plain:.2f}")


if __name__ == "__main__":
    main()
