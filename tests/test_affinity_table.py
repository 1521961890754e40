"""The affinity table: in sync with its sources, every target real, the matching rule as documented."""
from __future__ import annotations

import ast
import json
from itertools import combinations
from pathlib import Path

import pytest

from flake8_ascend.data import DATA_DIR, load_affinity
from flake8_ascend.detect import affinity
from conftest import load_tool

REPO = Path(__file__).resolve().parents[1]
build_affinity = load_tool("build_affinity")
WHEELS = sorted((REPO / "rules_data" / "sources" / "wheels").glob("torch_npu-*.json"))
HEADER = "api_type\tnative\tmatch\taffinity_api\tdeprecated_from\tsource\n"


def test_packaged_table_is_in_sync_with_its_sources():
    assert build_affinity.build() == (DATA_DIR / "affinity.json").read_text(encoding="utf-8"), \
        "run: python tools/build_affinity.py"


def test_every_row_has_a_source_and_every_target_is_exported_by_the_wheels():
    data = load_affinity()
    assert data["meta"]["wheels"] and len(data["meta"]["wheels"]) == len(WHEELS)
    for api_type in ("class", "function", "torch", "special"):
        for value in data[api_type].values():
            for entry in value if isinstance(value, list) else [value]:
                assert entry["source"].strip() and entry["evidence"].strip()
                assert entry["min_version"] in {w.partition(".post")[0] for w in data["meta"]["wheels"]}


def test_the_official_decode_target_exists_in_no_wheel_and_is_not_in_the_table():
    wrong = "npu_bbox_coder_decode_xyxy2xywh"
    for path in WHEELS:
        contrib = json.loads(path.read_text(encoding="utf-8"))["contrib"]
        assert all(wrong not in names for names in contrib.values()), path.name
    targets = [e["target"] for entries in affinity.entries("function").values() for e in entries]
    assert "torch_npu.contrib.function.npu_bbox_coder_decode_xywh2xyxy" in targets
    assert not [t for t in targets if t.endswith(wrong)]


def test_fused_targets_come_from_the_yaml_custom_section():
    for pattern in ("rms_norm", "rotate_half", "swiglu", "attention", "add_layer_norm"):
        assert "custom section" in affinity.entries("special")[pattern]["evidence"]


def write_table(tmp_path, row: str) -> Path:
    path = tmp_path / "table.tsv"
    path.write_text(HEADER + row + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("row,message", [
    ("function\tdecode\tparams=self,bboxes,pred_bboxes,stride\t"
     "torch_npu.contrib.function.npu_bbox_coder_decode_xyxy2xywh\t\tofficial list", "exported by no torch_npu wheel"),
    ("torch\ttorch.roll\t\ttorch_npu.contrib.function.roll\t\t ", "no source"),
    ("torch\ttorch.roll\tspeed=fast\ttorch_npu.contrib.function.roll\t\tdoc", "unknown match key"),
    ("method\tf\t\ttorch_npu.contrib.function.roll\t\tdoc", "api_type"),
    ("torch\ttorch.optim.SGD\tfix=params; needs=lr\ttorch_npu.optim.NpuFusedSGD\t\tdoc", "needs="),
    ("special\tx\tmanual\tmindspeed.ops.npu_matmul_add\t\tdoc", "exported by no torch_npu wheel"),
])
def test_build_rejects_bad_rows(tmp_path, row, message):
    with pytest.raises(build_affinity.BuildError, match=message):
        build_affinity.build(write_table(tmp_path, row), REPO / "rules_data" / "sources" / "wheels")


def test_synonym_sets_are_disjoint():
    for a, b in combinations(affinity.SYNONYMS, 2):
        assert not a & b, a & b


def signature(source: str):
    return ast.parse(source).body[0]


@pytest.mark.parametrize("source,expected,same", [
    ("def f(self, x, groups=2): ...", ["x", "groups"], True),
    ("def f(input: Tensor, g: int, *args, **kwargs): ...", ["x", "groups"], True),
    ("def f(_x, __groups__): ...", ["x", "groups"], True),
    ("def f(ctx, x, groups): ...", ["x", "groups"], True),
    ("def f(x, *, groups): ...", ["x", "groups"], True),
    ("def f(groups, x): ...", ["x", "groups"], False),
    ("def f(x, groups, extra=None): ...", ["x", "groups"], False),
    ("def f(x, chunks): ...", ["x", "groups"], False),
])
def test_signature_rule(source, expected, same):
    assert affinity.same_signature(signature(source), expected) is same


def test_versions_from_minimum_up_to_deprecation():
    entry = {"min_version": "2.3.1", "deprecated_from": "2.9.0"}
    assert [affinity.available(entry, v) for v in ("2.1.0", "2.3.1", "2.8.0", "2.9.0", "2.13.0")] == \
        [False, True, True, False, False]
    assert affinity.available({"min_version": "2.1.0", "deprecated_from": None}, "2.13.0")
