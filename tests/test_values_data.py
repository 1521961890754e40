"""data/torch_types.json: a fresh build from the installed torch's stubs, and the facts the value model needs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import load_tool

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "src" / "flake8_ascend" / "data" / "torch_types.json"


def load_builder():
    return load_tool("build_torch_types")


def installed_torch():
    """The torch package directory on sys.path (found without importing torch), or None."""
    for entry in sys.path:
        candidate = Path(entry) / "torch"
        if (candidate / "_C" / "_VariableFunctions.pyi").is_file():
            return candidate
    return None


def committed():
    return json.loads(DATA.read_text(encoding="utf-8"))


def test_committed_file_matches_a_rebuild():
    root = installed_torch()
    if root is None:
        pytest.skip("torch is not installed: its stubs are the source of torch_types.json")
    builder = load_builder()
    data = builder.build(root)
    if data["meta"]["torch_version"] != committed()["meta"]["torch_version"]:
        pytest.skip(f"installed torch {data['meta']['torch_version']} is not the one the data was built from")
    assert builder.render(data) == DATA.read_text(encoding="utf-8"), "stale: run tools/build_torch_types.py"


def test_provenance_is_recorded():
    meta = committed()["meta"]
    assert meta["generator"] == "tools/build_torch_types.py"
    assert meta["torch_version"].startswith("2.13.0")
    assert "torch/_C/_VariableFunctions.pyi" in meta["sources"]


@pytest.mark.parametrize("api,kinds", [
    ("torch.sparse.sum", ["tensor"]),  # mmdet free_anchor_retina_head.py:206
    ("torch.sparse_coo_tensor", ["tensor"]),  # mmdet free_anchor_retina_head.py:225
    ("torch.Tensor.to_dense", ["tensor"]),
    ("torch.max", ["tensor", "tuple:values,indices"]),
    ("torch.Tensor.topk", ["tuple:values,indices"]),
    ("torch.Tensor.sort", ["tuple:values,indices"]),
    ("torch.split", ["tensors"]),
    ("torch.Tensor.item", ["number"]),
    ("torch.is_floating_point", ["bool"]),
    ("torch.nn.functional.relu", ["tensor"]),
])
def test_return_kinds(api, kinds):
    assert committed()["returns"][api] == kinds


def test_tensor_attributes():
    attributes = committed()["attributes"]
    assert attributes["torch.Tensor.T"] == ["tensor"]
    assert attributes["torch.Tensor.shape"] == ["size"]
