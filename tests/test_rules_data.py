"""The shipped rule data: in sync with rules_data/sources/ and well-formed (load time: benchmarks/bench_startup.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_tool

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "src" / "flake8_ascend" / "data"
SOURCES = REPO / "rules_data" / "sources"
STATUSES = {"supported", "partial", "unsupported", "unknown"}
METHODS = {"official_tool", "docs", "aten", "traced", "kernel_free", "dtypes", "not_listed"}


def load_builder():
    return load_tool("build_rules_data")


def index() -> dict:
    """The committed index.json."""
    return json.loads((DATA / "index.json").read_text(encoding="utf-8"))


def apis(version: str) -> dict:
    """The apis table of one committed version file."""
    return json.loads((DATA / f"torch_npu-{version}.json").read_text(encoding="utf-8"))["apis"]


def test_committed_data_matches_a_rebuild(tmp_path):
    log = load_builder().build(SOURCES, tmp_path)
    assert (REPO / "rules_data" / "build_log.txt").read_text(encoding="utf-8") == "\n".join(log) + "\n", \
        "rules_data/build_log.txt is stale: run tools/build_rules_data.py"
    rebuilt = sorted(p.name for p in tmp_path.iterdir())
    others = {"affinity.json", "transfer_to_npu.json", "mmcv_ops.json", "torch_types.json",  # own tools/build_*.py
              "cuda_fixes.json", "frameworks.json"}
    built_here = [p.name for p in DATA.glob("*.json") if p.name not in others]
    assert rebuilt == sorted(built_here), "run tools/build_rules_data.py"
    for name in rebuilt:
        stale = f"{name} is stale: run tools/build_rules_data.py"
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), stale


def version_file(version: str) -> dict:
    return json.loads((DATA / f"torch_npu-{version}.json").read_text(encoding="utf-8"))


def test_stale_cdist_entry_of_2_6_is_overridden_and_kept_for_parity():
    data = version_file("2.6.0")
    assert data["apis"]["torch.cdist"][:1] + data["apis"]["torch.cdist"][2:] == ["supported", "traced"]
    assert data["official"]["torch.cdist"][0] == "unsupported"
    assert "aten::cdist" in data["official"]["torch.cdist"][1]
    assert apis("2.8.0")["torch.cdist"][0] in {"supported", "partial"}


@pytest.mark.parametrize("api", ["torch.std_mean", "torch.fft.fftshift", "torch.nn.utils.rnn.unpad_sequence",
                                 "torch.fft.fftfreq"])
def test_listed_unsupported_with_a_kernel_for_every_op_is_supported_and_logged(api):
    """The 2.13 list says unsupported and no later list exists; the wheel has a kernel for every ATen op the
    API dispatches (std_mean.correction; roll; index, lt, arange, unbind; fft_fftfreq over arange): the
    kernels win, the list's row stays in `official` and the log names the API."""
    data = version_file("2.13.0")
    assert data["apis"][api][0] == "supported" and data["apis"][api][2] == "traced"
    assert data["official"][api][0] == "unsupported" and "disputed: torch_npu 2.13.0's wheel has" in \
        data["official"][api][1]
    log = (REPO / "rules_data" / "build_log.txt").read_text(encoding="utf-8")
    (line,) = [line for line in log.splitlines() if line.startswith("2.13.0: ") and "the kernels win" in line]
    assert api in line.split(": ")[-1].split(", ")


def test_near_miss_an_op_without_a_kernel_keeps_the_list_row():
    """The same API and trace with aten::std_mean.correction taken out of the wheel's kernels: unsupported,
    the note names the op (the rule reads the kernels, not the API's name)."""
    import csv

    builder = load_builder()
    wheel = json.loads((SOURCES / "wheels" / "torch_npu-2.13.0.json").read_text(encoding="utf-8"))
    with (SOURCES / builder.ATEN_TSV).open(encoding="utf-8", newline="") as handle:
        aten = {row["aten_op"]: row for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)}
    trace = json.loads((SOURCES / builder.TRACE_JSON).read_text(encoding="utf-8"))
    listed = ["unsupported", "", "docs"]
    kernels = builder.kernel_ops(wheel)
    row, parity, _ = builder.decide("2.13.0", "torch.std_mean", listed, trace, kernels, aten, False)
    assert row[0] == "supported" and parity[0] == "unsupported"
    row, parity, what = builder.decide("2.13.0", "torch.std_mean", listed, trace, kernels - {"std_mean.correction"},
                                       aten, False)
    assert row[0] == "unsupported" and parity is None and what == "table unsupported, trace agrees"
    assert "aten::std_mean.correction has no NPU kernel in torch_npu 2.13.0" in row[1]


def test_an_op_seen_only_inside_a_composite_with_an_npu_kernel_is_no_evidence():
    """parametrizations.weight_norm: the CPU trace reaches _weight_norm_interface (no NPU kernel) only inside
    torch._weight_norm, which torch_npu registers a kernel for: supported.  Near miss: the same trace with
    _weight_norm taken out of the kernels falls back."""
    import csv

    api = "torch.nn.utils.parametrizations.weight_norm"
    assert apis("2.13.0")[api][0] == "supported"
    builder = load_builder()
    wheel = json.loads((SOURCES / "wheels" / "torch_npu-2.13.0.json").read_text(encoding="utf-8"))
    with (SOURCES / builder.ATEN_TSV).open(encoding="utf-8", newline="") as handle:
        aten = {row["aten_op"]: row for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)}
    trace = json.loads((SOURCES / builder.TRACE_JSON).read_text(encoding="utf-8"))
    kernels = builder.kernel_ops(wheel) - {"_weight_norm"}
    row, _, _ = builder.decide("2.13.0", api, None, trace, kernels, aten, False)
    assert row[0] == "unsupported" and "aten::_weight_norm_interface has no NPU kernel" in row[1]
    # an op that also runs outside the composite is not spared
    entry = dict(trace["apis"][api], outside_composites=["_weight_norm_interface"])
    assert builder.behind_npu_composites(entry, builder.kernel_ops(wheel)) == set()


def test_kernel_free_and_fallback_evidence():
    assert apis("2.13.0")["torch.jit.ignore"][0] == "supported"
    assert apis("2.13.0")["torch.jit.is_scripting"][2] == "kernel_free"
    assert apis("2.6.0")["torch._assert_async"][:1] == ["unsupported"]


def test_traced_surface_is_large_and_records_failures():
    trace = json.loads((SOURCES / "aten" / "traced_apis_torch2.13.0.json").read_text(encoding="utf-8"))
    assert len(trace["apis"]) + len(trace["kernel_free"]) > 1500
    assert all(why for why in trace["untraced"].values())
    assert not set(trace["apis"]) & set(trace["kernel_free"])


def test_no_rows_for_names_torch_does_not_have():
    assert "torch.nn.functional.add_" not in apis("2.13.0")


def test_the_cpu_backends_own_kernels_are_no_evidence_forward_or_backward():
    """SDPA traced on the CPU build runs ``_scaled_dot_product_flash_attention_for_cpu`` (and its ``_backward``);
    on an NPU the op above them dispatches to torch_npu's kernel, so neither makes a layer unsupported."""
    builder = load_builder()
    entry = {"forward": ["_scaled_dot_product_flash_attention_for_cpu", "linear"],
             "backward": ["_scaled_dot_product_flash_attention_for_cpu_backward.default", "profiler::record"]}
    assert builder.traced_ops(entry) == ["linear"]
    # near miss: a backward that is no CPU backend's choice stays evidence
    entry = {"forward": ["_efficient_attention_forward"], "backward": ["_efficient_attention_backward"]}
    assert builder.traced_ops(entry) == ["_efficient_attention_forward", "_efficient_attention_backward"]
    assert apis("2.13.0")["torch.nn.TransformerEncoderLayer"][0] != "unsupported"


def test_tensor_mode_is_unsupported_in_2_13():
    assert apis("2.13.0")["torch.Tensor.mode"][0] == "unsupported"


@pytest.mark.parametrize("version", index()["versions"])
def test_version_file_is_well_formed(version):
    path = DATA / f"torch_npu-{version}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["meta"]["version"] == version
    for api, (status, note, method) in data["apis"].items():
        assert status in STATUSES and method in METHODS, api
        assert "\n" not in note and "<br" not in note, api
        if method in {"official_tool", "docs"} and status != "unsupported":
            assert bool(note) == (status == "partial"), api


def test_index_default_and_aliases_resolve():
    idx = index()
    assert idx["versions"] == sorted(idx["versions"], key=lambda v: tuple(map(int, v.split("."))))
    assert idx["default"] in idx["versions"]
    assert set(idx["aliases"].values()) <= set(idx["versions"])
    for version in idx["versions"]:
        assert idx["aliases"][version] == version
        assert idx["aliases"][".".join(version.split(".")[:2])] == version
    assert idx["aliases"]["1.11"] == "1.11.0"
    assert idx["aliases"]["2.7"] == idx["aliases"]["2.7.0"] == "2.7.1"


def test_names_torch_2_13_lacks_get_no_unknown_row_in_2_13_only():
    assert "torch.onnx.dynamo_export" not in apis("2.13.0")
    assert "torch.onnx.dynamo_export" in apis("2.12.0")


def test_a_table_that_omits_an_api_carries_the_latest_earlier_support():
    """The 2.13.0 docs table omits the collectives every list up to 2.12.0 supports: the 2.12.0 row stands
    (restriction note included); an earlier "unsupported" is not carried (a later release may add the kernel)."""
    for api in ("torch.distributed.all_gather_into_tensor", "torch.distributed.reduce_scatter_tensor"):
        assert apis("2.13.0")[api] == apis("2.12.0")[api]
        assert apis("2.13.0")[api][0] == "partial"
    assert apis("1.11.0")["torch.cuda.comm.broadcast"][0] == "unsupported"
    assert apis("2.13.0")["torch.cuda.comm.broadcast"][0] == "unknown"


def test_reexported_api_takes_the_table_row_of_its_definition():
    assert apis("2.13.0")["torch.distributions.Beta"] == apis("2.13.0")["torch.distributions.beta.Beta"]


def restrictions(version: str) -> dict:
    return json.loads((DATA / f"torch_npu-{version}.json").read_text(encoding="utf-8"))["restrictions"]


def test_restriction_notes_become_facts():
    """Real notes of the 2.13 docs table and the 2.6 official list, parsed by the build (ASC103)."""
    facts = restrictions("2.13.0")
    assert facts["torch.topk"]["args"] == [{"arg": "sorted", "rule": "not", "value": False}]
    assert facts["torch.Tensor.to"]["args"] == [
        {"arg": "memory_format", "rule": "in", "values": ["torch.contiguous_format", "torch.preserve_format"]}]
    pad = facts["torch.nn.functional.pad"]["dtypes"]  # "属性mode为constant时 ... 属性mode非constant时 ..."
    assert [f["when"] for f in pad] == [["mode", "constant", "eq"], ["mode", "constant", "ne"]]
    assert "bf16" in pad[0]["dtypes"] and "bf16" not in pad[1]["dtypes"]
    assert "bf16" in facts["torch.nn.Linear"]["dtypes"][0]["dtypes"]  # "fp16，fp32" + the autocast policy's addmm
    assert facts["torch.autograd.profiler.profile"]["args"] == [{"arg": "use_device", "rule": "set_to", "value": "npu"}]
    assert "args" not in facts.get("torch.utils.data.DataLoader", {})  # "num_workers仅支持0" is about NPU data only
    assert restrictions("2.6.0")["torch.nn.functional.interpolate"]["args"] == [
        {"arg": "scale_factor", "rule": "absent"}]  # the table's "scale_factors", spelled as the docs spell it


def test_hardware_and_switch_notes_give_no_fact():
    builder = load_builder()
    facts, other = builder.restriction_facts("Atlas 推理系列产品不支持跨NPU拷贝", bf16_runs=False)
    assert facts == {} and other == ["Atlas 推理系列产品不支持跨NPU拷贝"]
    # the 2.6 list glues two clauses together: the last dtype and the argument fact are both kept
    facts, _ = builder.restriction_facts("支持bf16，fp16，fp32，fp64，uint8，int8，int16，int32，int64不支持sorted=False场景",
                                         bf16_runs=False)
    assert "int64" in facts["dtypes"][0]["dtypes"] and facts["args"] == [{"arg": "sorted", "rule": "not", "value": False}]
