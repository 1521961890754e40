"""Focused cases for ASC1xx/ASC2xx beyond the rule examples: versions, messages, near misses."""
import pytest

from conftest import run_rules


def messages(source, version=None, codes=("ASC",)):
    return [f"{f.line}:{f.text}" for f in run_rules(source, version=version, codes=codes)]


def test_unknown_non_api_is_silent():
    assert messages("import torch\nw = torch.nn.Parameter(x)\nm = torch.nn.Module()\n", codes=["ASC102"]) == []


def test_restriction_note_is_in_the_tips_and_the_message_stays_english():
    """The official note is Chinese: the CSV Tips keep it, the flake8 message does not paste it."""
    (found,) = run_rules("import torch\nd = torch.cdist(a, b)\n", version="2.8.0", codes=["ASC103"],
                         official_lists=True)  # the audit mode reports the row as the list has it
    assert "compute_mode" in found.tips and "\u652f\u6301" in found.tips  # "支持", as the list writes it
    assert found.text.isascii() and "torch.cdist is supported on NPU with restrictions" in found.text


def test_restriction_text_is_in_the_message():
    (found,) = messages("import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2)\n", "2.8.0", ["ASC103"])
    assert "the scale_factor argument is not supported" in found


@pytest.mark.parametrize("version,expected", [
    ("2.13.0", "transfer_to_npu maps it to torch_npu.npu.synchronize"),
    ("2.2.0", "no torch_npu.npu data for torch_npu 2.2.0"),
])
def test_cuda_api_mapping_depends_on_version(version, expected):
    (found,) = messages("import torch\ntorch.cuda.synchronize()\n", version, ["ASC201"])
    assert expected in found


def test_cuda_api_without_npu_counterpart():
    (found,) = messages("import torch\ntorch.cuda.nvtx.range_push('a')\n", codes=["ASC201"])
    assert "rewrite by hand" in found


def test_cuda_amp_is_not_also_asc201():
    assert [m.split()[0] for m in messages("import torch\ns = torch.cuda.amp.GradScaler()\n")] == ["2:ASC207"]


@pytest.mark.parametrize("source", [
    "import argparse\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda')\n",
    "import torch\nwith torch.autocast('cuda', dtype=torch.float16):\n    pass\n",
    "t = torch.zeros(3, device='cuda:1')\n",
    "self.device = 'cuda'\n",
])
def test_device_strings_fire(source):
    assert [m for m in messages(source, codes=["ASC202"])]


@pytest.mark.parametrize("source", [
    "p.add_argument('--backend', default='cuda')\n",
    "kernels = {'cuda': 1}\n",
    "x = y.cuda\n",
    "import numba\nnumba.cuda.jit(f)\n",
    "log('running on cuda')\n",
])
def test_device_near_misses(source):
    assert messages(source, codes=["ASC202"]) == []


def test_cuda_extension_only_for_cuda_sources():
    ok = "from torch.utils.cpp_extension import load\nm = load('m', sources=['a.cpp'])\n"
    assert messages(ok, codes=["ASC205"]) == []


def test_relative_import_of_triton_module_is_silent():
    assert messages("from .triton import kernels\n", codes=["ASC206"]) == []


def test_binding_a_name_to_a_flagged_api_reports_the_value_only():
    source = "import torch\nScaler = torch.cuda.amp.GradScaler\nsync = torch.cuda.synchronize\n"
    assert [(f.line, f.col, f.code) for f in run_rules(source)] == [(2, 9, "ASC207"), (3, 7, "ASC201")]


def test_setting_a_backend_switch_is_reported():
    assert [f.code for f in run_rules("import torch\ntorch.backends.cudnn.deterministic = True\n")] == ["ASC203"]
