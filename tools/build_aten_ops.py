#!/usr/bin/env python3
"""Build the per-version ATen op-status tables that the runtime ops detector reads.

Pure standard library, deterministic, no network.  For every torch_npu version with wheel facts in
rules_data/sources/wheels/, writes src/flake8_ascend/runtime/aten_ops/aten_ops_<V>.json: every ATen
op (``name.overload``, the default overload as the bare name) of the torch 2.13 classification
(rules_data/sources/aten/aten_support_torch2.13.0_npu2.13.0.tsv), sorted into one of four lists:

kernel       the op is in a kernel section (supported, symint, autograd) of V's npu_native_functions*.yaml,
             or is one of the few ops torch_npu registers in C++ outside the yaml (the TSV classifies them
             npu_kernel without a yaml entry), or is structured and its ``.out`` delegate has an NPU kernel
fallback     a dense op without an NPU kernel (structured ones: their ``.out`` delegate has none): torch_npu
             runs it on the CPU
composite    CompositeImplicitAutograd (decomposes) or CompositeExplicitAutograd that is not structured
             (its default kernel calls other ops): runs on NPU when the ops it calls do
unsupported  kernels only for CUDA/cuDNN or for sparse/quantized/other backends: fails on NPU

The mode ``ascend-analyse -m runtime_ops -v V`` copies the chosen table next to the hook package, which
loads it without importing flake8_ascend.  tests/test_aten_ops_data.py checks the committed tables are
a fresh build.

    python tools/build_aten_ops.py [--sources DIR] [--out DIR] [--quiet]
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "src" / "flake8_ascend" / "runtime" / "aten_ops"
GENERATOR = "tools/build_aten_ops.py"
STATUSES = ("kernel", "composite", "fallback", "unsupported")
NOTES = (
    "Op classification (composite, structured delegate, other-backend-only) of torch 2.13 from {tsv} for "
    "every version, with the NPU kernels of this version's wheel; ops absent from torch 2.13 are unknown. "
    "The statuses are those of the dispatcher: a composite op runs on NPU when the ops it calls do."
)


def _rules_builder():
    """tools/build_rules_data.py as a module: the same wheel loading and kernel sections as the linter's data."""
    spec = importlib.util.spec_from_file_location("build_rules_data", Path(__file__).with_name("build_rules_data.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RULES = _rules_builder()


def build_table(version: str, rel: str, wheel: dict, aten: dict, manual: set) -> dict:
    """The op-status table of one version."""
    kernels = RULES.kernel_ops(wheel) | manual
    lists = {status: [] for status in STATUSES}
    delegates = {}
    for op in sorted(aten):
        status = RULES.op_status(op, aten[op], kernels)
        lists[status].append(op)
        if status == "fallback" and aten[op]["structured_delegate"]:
            delegates[op] = aten[op]["structured_delegate"]
    meta = {
        "version": version,
        "wheel": wheel["wheel"],
        "extracted": wheel["extracted"],
        "generator": GENERATOR,
        "sources": [rel, RULES.ATEN_TSV],
        "manual_kernels": sorted(manual),
        "notes": NOTES.format(tsv=RULES.ATEN_TSV),
    }
    return {"meta": meta, **lists, "fallback_delegates": delegates}


def build(sources: Path, out: Path) -> list:
    """Write aten_ops_<V>.json for every version with wheel facts; return the log lines."""
    aten = {row["aten_op"]: row for row in RULES.read_tsv(sources / RULES.ATEN_TSV)}
    wheels = RULES.load_wheels(sources)
    if "2.13.0" not in wheels:
        raise SystemExit(f"no torch_npu 2.13.0 wheel facts in {sources / 'wheels'} (the TSV's own version)")
    manual = RULES.manual_kernels(aten, RULES.kernel_ops(wheels["2.13.0"][1]))
    log = [f"{RULES.ATEN_TSV}: {len(aten)} ops; registered outside the yaml: {sorted(manual)}"]
    out.mkdir(parents=True, exist_ok=True)
    for version in sorted(wheels, key=RULES.version_key):
        rel, wheel = wheels[version]
        table = build_table(version, rel, wheel, aten, manual)
        (out / f"aten_ops_{version}.json").write_text(RULES.dump(table), encoding="utf-8")
        counts = Counter({status: len(table[status]) for status in STATUSES})
        log.append(f"aten_ops_{version}.json ({wheel['version']}): {dict(counts)}")
    return log


def main(argv=None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=Path, default=RULES.SOURCES, help="facts directory (rules_data/sources)")
    parser.add_argument("--out", type=Path, default=OUT, help="output directory (src/flake8_ascend/runtime/aten_ops)")
    parser.add_argument("--quiet", action="store_true", help="do not print the log")
    args = parser.parse_args(argv)
    log = build(args.sources, args.out)
    if not args.quiet:
        print("\n".join(log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
