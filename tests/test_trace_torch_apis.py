"""tools/trace_torch_apis.py on its hand-written samples (torch only; the OpInfo/ModuleInfo part needs numpy
and expecttest and runs in `make data`): the committed trace holds what a rerun records."""
import json
from pathlib import Path

import pytest
from conftest import load_tool

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO / "rules_data" / "sources" / "aten" / "traced_apis_torch2.13.0.json"


def load_tracer():
    return load_tool("trace_torch_apis")


@pytest.fixture(scope="module")
def rerun():
    tool = load_tracer()
    tracer = tool.Tracer(seconds=10.0, samples=1)
    tool.trace_hand(tracer)
    return tracer


def test_hand_samples_match_the_committed_trace(rerun):
    committed = json.loads(TRACE.read_text(encoding="utf-8"))
    assert committed["meta"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    for api, entry in rerun.apis.items():
        assert committed["apis"].get(api) == entry, api
    for api in rerun.kernel_free:
        assert api in committed["kernel_free"], api


def test_kernel_free_and_traced_examples(rerun):
    assert {"torch.jit.ignore", "torch.jit.is_scripting", "torch.no_grad", "torch.nn.Flatten"} <= set(rerun.kernel_free)
    assert rerun.apis["torch._assert_async"]["forward"] == ["_assert_async"]
    assert "_sample_dirichlet" in rerun.apis["torch.distributions.Beta"]["forward"]


def test_building_inputs_is_not_traced(rerun):
    """The sample's tensors are made outside the recorder: only the API's own ops are recorded."""
    assert rerun.apis["torch.Tensor.to_dense"]["forward"] == ["_to_dense"]


def test_rnn_helpers_and_fftfreq_are_traced(rerun):
    """unpad_sequence is Python over supported ops (a mask per sequence: arange, lt, index); fftfreq takes a
    length, so only a hand-written sample reaches it."""
    unpad = rerun.apis["torch.nn.utils.rnn.unpad_sequence"]["forward"]
    assert set(unpad) == {"arange", "index.Tensor", "lt.Tensor", "unbind.int"}
    assert rerun.apis["torch.fft.fftfreq"]["forward"] == ["fft_fftfreq"]


def test_ops_inside_a_decomposed_composite_are_attributed_to_it(rerun):
    """torch._weight_norm is CompositeImplicitAutograd: the dispatcher only sees _weight_norm_interface, which
    the trace attributes to the torch function it ran inside; the convolution ran inside F.conv1d."""
    entry = rerun.apis["torch.nn.utils.parametrizations.weight_norm"]
    assert entry["composite"]["_weight_norm"] == ["_weight_norm_interface"]
    assert entry["outside_composites"] == []
    assert "composite" not in rerun.apis["torch.nn.utils.rnn.unpad_sequence"]  # no composite op: nothing attributed
