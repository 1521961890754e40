"""The runtime ops detector's op-status tables: in sync with rules_data/sources/, and faithful to the TSV."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import load_tool

REPO = Path(__file__).resolve().parent.parent
TABLES = REPO / "src" / "flake8_ascend" / "runtime" / "aten_ops"
SOURCES = REPO / "rules_data" / "sources"
TSV = SOURCES / "aten" / "aten_support_torch2.13.0_npu2.13.0.tsv"
STATUSES = ("kernel", "composite", "fallback", "unsupported")
# The TSV's classification for torch_npu 2.13.0 and the status the table must give.
EXPECTED = {
    "npu_kernel": "kernel", "structured_via_out_npu": "kernel", "structured_via_out_unsupported": "fallback",
    "composite_explicit": "composite", "composite_implicit": "composite", "unsupported_cpu_fallback": "fallback",
    "unsupported_cuda_only": "unsupported", "unsupported_other_backend_only": "unsupported",
}


def load_builder():
    return load_tool("build_aten_ops")


def statuses(version: str) -> dict:
    table = json.loads((TABLES / f"aten_ops_{version}.json").read_text(encoding="utf-8"))
    return {op: status for status in STATUSES for op in table[status]}


def test_committed_tables_match_a_rebuild(tmp_path):
    load_builder().build(SOURCES, tmp_path)
    rebuilt = sorted(p.name for p in tmp_path.iterdir())
    assert rebuilt == sorted(p.name for p in TABLES.glob("*.json")), "run tools/build_aten_ops.py"
    for name in rebuilt:
        stale = f"{name} is stale: run tools/build_aten_ops.py"
        assert (tmp_path / name).read_bytes() == (TABLES / name).read_bytes(), stale


def test_one_table_per_version_with_a_wheel():
    wheels = {json.loads(p.read_text(encoding="utf-8"))["version"].partition(".post")[0]
              for p in (SOURCES / "wheels").glob("*.json")}
    assert {p.stem[len("aten_ops_"):] for p in TABLES.glob("*.json")} == wheels


def test_2_13_table_reproduces_the_tsv_classification():
    with TSV.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    table = statuses("2.13.0")
    assert len(table) == len(rows)
    wrong = [(r["aten_op"], r["npu_class"], table[r["aten_op"]]) for r in rows
             if EXPECTED[r["npu_class"]] != table[r["aten_op"]]]
    assert wrong == []


@pytest.mark.parametrize("op,status", [
    ("mode", "fallback"), ("huber_loss", "fallback"), ("linalg_eig", "fallback"),  # no NPU kernel in 2.13.0
    ("addmm", "kernel"), ("argmax", "kernel"),  # argmax: structured, via argmax.out
    ("linear", "composite"), ("t", "composite"), ("_cudnn_rnn", "unsupported"),
])
def test_known_ops(op, status):
    assert statuses("2.13.0")[op] == status


def test_version_differences_follow_the_wheels():
    # bitwise_left_shift.Tensor and repeat_interleave.Tensor entered the yaml after 2.1.0.post17
    for op in ("bitwise_left_shift.Tensor", "repeat_interleave.Tensor"):
        assert statuses("2.1.0")[op] == "fallback"
        assert statuses("2.13.0")[op] == "kernel"
