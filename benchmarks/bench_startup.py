"""Start-up cost of the plugin: importing it and loading one version's rule data (median of 15 runs).

    python benchmarks/bench_startup.py [VERSION]

Each run is a fresh interpreter, so nothing is cached between runs.
"""
from __future__ import annotations

import statistics
import subprocess
import sys

PROBE = """
import time
t0 = time.perf_counter()
from flake8_ascend.plugin import AscendChecker
from flake8_ascend.registry import all_rules
all_rules()
t1 = time.perf_counter()
from flake8_ascend.config import make_config
make_config({version!r}).data
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def main() -> None:
    version = sys.argv[1] if len(sys.argv) > 1 else None
    imports, loads = [], []
    for _ in range(15):
        out = subprocess.run([sys.executable, "-c", PROBE.format(version=version)], capture_output=True, text=True,
                             check=True).stdout.split()
        imports.append(float(out[0]))
        loads.append(float(out[1]))
    print(f"import plugin + rules: {statistics.median(imports) * 1000:.0f} ms; "
          f"load rule data ({version or 'default version'}): {statistics.median(loads) * 1000:.0f} ms (medians of 15)")


if __name__ == "__main__":
    main()
