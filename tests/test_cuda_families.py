"""ASC201's torch.cuda families (``rules/cuda_api.CUDA_FAMILIES``) are the parts of torch.cuda that define them."""
import inspect

import pytest

from flake8_ascend.rules.cuda_api import CUDA_FAMILIES

torch_cuda = pytest.importorskip("torch.cuda")

# the stream functions live in torch/cuda/__init__.py beside the classes of torch/cuda/streams.py
_MODULES = {"streams": {"torch.cuda.streams", "torch.cuda"}, "random": {"torch.cuda.random"},
            "properties": {"torch.cuda"}}
_STREAM_FUNCTIONS = {"StreamContext", "current_stream", "default_stream", "set_stream", "stream"}


@pytest.mark.parametrize("name", sorted(CUDA_FAMILIES))
def test_family_is_where_torch_defines_the_name(name):
    family = CUDA_FAMILIES[name]
    module = inspect.getmodule(getattr(torch_cuda, name)).__name__
    assert module in _MODULES[family], (name, module)
    if family == "streams" and module == "torch.cuda":
        assert name in _STREAM_FUNCTIONS
    if family == "properties":  # answered from the device's properties
        assert name == "get_device_properties" or "get_device_properties(" in inspect.getsource(getattr(torch_cuda, name))


def test_two_parts_of_torch_cuda_in_one_function_are_two_findings():
    from conftest import run_rules

    source = ("import torch\ndef step(self, x):\n    s = torch.cuda.Stream()\n    with torch.cuda.stream(s):\n"
              "        y = self.model(x)\n    torch.cuda.manual_seed(0)\n    torch.cuda.seed()\n    return y\n")
    findings = run_rules(source, codes=["ASC201"])
    assert [(f.line, f.api) for f in findings] == [(3, "torch.cuda.Stream"), (6, "torch.cuda.manual_seed")]
    assert "again in this function on line 4" in findings[0].message
    assert "again in this function on line 7" in findings[1].message


def test_near_miss_a_memory_figure_and_empty_cache_stay_apart():
    # yolov5 7.0.14 utils/torch_utils.py:190 and :198: a statistic for the log, then the cache freed
    from conftest import run_rules

    source = ("import torch\ndef profile(x, ops):\n    for m in ops:\n"
              "        mem = torch.cuda.memory_reserved() / 1e9\n        y = m(x)\n        torch.cuda.empty_cache()\n"
              "        x = y + mem\n    return x\n")
    findings = run_rules(source, codes=["ASC201"])
    assert [f.line for f in findings] == [4, 6]


def test_the_device_properties_asked_twice_in_one_function_are_one_finding():
    # instructlab-training 0.16.2 instructlab/training/model.py:462-470: the capability and the properties in one
    # flash-attention gate; near miss: the properties and a stream are two parts
    from conftest import run_rules

    source = ("import torch\ndef supports_flash_attention(device_id=0):\n"
              "    major, minor = torch.cuda.get_device_capability(device_id)\n"
              "    dev_name = torch.cuda.get_device_properties(device_id).gcnArchName.split(':')[0]\n"
              "    s = torch.cuda.Stream()\n    return major >= 8 or dev_name in ('gfx90a',), s\n")
    findings = run_rules(source, codes=["ASC201"])
    assert [(f.line, f.api) for f in findings] == [(3, "torch.cuda.get_device_capability"), (5, "torch.cuda.Stream")]
    assert "again in this function on line 4" in findings[0].message
