"""Where the CUDA device, backend and package codes stay quiet by path: test code, and offline converters' CPU
fallbacks (issue 27: findings judged wrong on the tuning set)."""
from __future__ import annotations

import ast
import textwrap

import pytest

from flake8_ascend import engine
from flake8_ascend.detect import device_dispatch
from flake8_ascend.config import Config
from flake8_ascend.data import default_version

CODES = ("ASC201", "ASC202", "ASC204", "ASC206")


def lint(source: str, path: str, **settings):
    source = textwrap.dedent(source)
    config = Config(default_version(), **settings)
    findings = engine.lint(ast.parse(source), source.splitlines(keepends=True), path, config)
    return [(f.line, f.code) for f in findings if f.code in CODES]


# mmsegmentation 1.2.2 tests/test_models/test_heads/utils.py:18 and test_forward.py:191-192,
# whisper 20250625 tests/test_transcribe.py:12
TEST_CODE = """
import torch
import torch.distributed as dist
from apex import amp

def test_forward():
    if torch.cuda.is_available():
        model = model.cuda()
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    dist.init_process_group('nccl')
    return model.to(device)
"""


@pytest.mark.parametrize("path", ["tests/test_models/test_heads/utils.py", "pkg/test/helpers.py", "test_timing.py",
                                  "whisper/timing_test.py", "tests/conftest.py", "conftest.py",
                                  "diffusers/utils/testing_utils.py", "mmdet/testing/_utils.py"])
def test_test_code_is_silent(path):
    assert lint(TEST_CODE, path) == []


@pytest.mark.parametrize("path", ["train.py", "tools/test.py", "latest/model.py", "contest.py", "attests/x.py",
                                  "my_tests.py", "src/testbed.py"])
def test_other_code_is_reported(path):
    """Near misses: mmdet's tools/test.py is its evaluation script; names that only contain 'test'. (The function
    is renamed: a module-level ``test_*`` nothing calls is test code wherever it is, see below.)"""
    assert {code for _, code in lint(TEST_CODE.replace("def test_forward", "def build_model"), path)} == set(CODES)


# espnet 202511 espnet/nets/chainer_backend/rnn/training.py:14, 152: the Chainer backend beside the PyTorch one
CHAINER = """
import numpy as np
from chainer import Variable, cuda, training

def train(updater):
    from cupy.cuda import nccl
    comm = nccl.NcclCommunicator(2, nccl.get_unique_id(), 0)
    dist.init_process_group('nccl')
"""


def test_a_module_for_another_framework_is_silent():
    assert lint(CHAINER, "espnet/nets/chainer_backend/rnn/training.py") == []


def test_near_miss_a_module_that_also_imports_torch_is_reported():
    assert lint("import torch\n" + CHAINER, "espnet/nets/chainer_backend/rnn/training.py")


def test_lint_tests_reports_test_code():
    assert {code for _, code in lint(TEST_CODE, "tests/test_x.py", lint_tests=True)} == set(CODES)


def test_no_code_runs_in_test_files_unless_asked():
    source = "import torch\ndef f(x):\n    return torch.cuda.amp.autocast()\n"
    assert engine.is_test_path("tests/test_amp.py")
    for lint_tests, expected in ((False, []), (True, ["ASC207"])):
        findings = engine.lint(ast.parse(source), source.splitlines(True), "tests/test_amp.py",
                               Config(default_version(), lint_tests=lint_tests))
        assert [f.code for f in findings] == expected


# a benchmark program named like a test (mmselfsup 1.0.0 .mim/tools/benchmarks/classification/knn_imagenet/
# test_knn.py:130-140): argparse and a __main__ block, no test framework
KNN_TOOL = """
import argparse
import torch

def main():
    args = argparse.ArgumentParser().parse_args()
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    return torch.zeros(1).to(device)
{extra}
if __name__ == '__main__':
    main()
"""


def test_a_program_named_like_a_test_is_linted():
    source = KNN_TOOL.format(extra="")
    findings = engine.lint(ast.parse(source), source.splitlines(True), "tools/knn/test_knn.py", Config(default_version()))
    assert findings and not engine.is_test_code("tools/knn/test_knn.py", ast.parse(source))


def test_near_misses_of_a_program_named_like_a_test_stay_test_code():
    for path, extra in (("tools/knn/test_knn.py", "import pytest\n"), ("tools/knn/test_knn.py", "def test_main():\n    main()\n"),
                        ("tools/knn/test_knn.py", "class TestKnn:\n    pass\n"), ("tests/test_knn.py", ""),
                        ("tools/knn/knn_test.py", "from unittest import mock\n")):
        source = KNN_TOOL.format(extra=extra)
        assert engine.is_test_code(path, ast.parse(source)), (path, extra)
        assert engine.lint(ast.parse(source), source.splitlines(True), path, Config(default_version())) == []
    source = KNN_TOOL.format(extra="").replace("if __name__ == '__main__':\n    main()\n", "")
    assert engine.is_test_code("tools/knn/test_knn.py", ast.parse(source))  # no __main__ block: a test module


# mmpose 1.3.2 .mim/tools/dataset_converters/ubody_smplx_to_coco.py:40-41, 300-301
CONVERTER = """
import torch

class HumanModel:
    def __init__(self):
        self.neutral_model = smplx.create('smplx')
        if torch.cuda.is_available():
            self.neutral_model = self.neutral_model.to('cuda:0')

def convert(pose):
    device = torch.device(
        'cuda:0') if torch.cuda.is_available() else torch.device('cpu')
    return torch.FloatTensor(pose).to(device)
"""


def test_converter_cpu_fallback_is_silent():
    assert lint(CONVERTER, "mmpose/.mim/tools/dataset_converters/ubody_smplx_to_coco.py") == []
    assert lint(CONVERTER, "scripts/convert_hf_checkpoint.py") == []
    # merging adapter weights into the model, once after training (axolotl 0.19.0 cli/merge_lora.py:83)
    assert lint(CONVERTER, "axolotl/cli/merge_lora.py") == []


@pytest.mark.parametrize("path", ["vit/token_merging.py", "mmdet/models/test_time_augs/merge_augs.py",
                                  "mmcv/ops/merge_cells.py", "utils/emerge.py"])
def test_near_miss_merge_inside_another_word_is_no_merge_tool(path):
    assert lint(CONVERTER, path)


def test_converter_fallback_is_reported_on_the_training_path():
    # line 8's 'cuda:0' folds into the finding on its branch's test (line 7)
    assert lint(CONVERTER, "mmpose/apis/inference.py") == [(7, "ASC201"), (12, "ASC202"), (12, "ASC201")]


def test_converter_without_a_cpu_fallback_is_reported():
    """Near miss: an unguarded device in a converter still fails on an NPU machine."""
    source = "import torch\ndef convert(x):\n    return x.to('cuda:0')\n"
    assert lint(source, "tools/dataset_converters/coco.py") == [(3, "ASC202")]


# diffusers 0.42.1 quantizers/bitsandbytes/bnb_quantizer.py:455-487
BNB_QUANTIZER = """
class BnB8BitDiffusersQuantizer:
    def check_if_quantized_param(self, module, name):
        import bitsandbytes as bnb

        if isinstance(module._parameters.get(name), bnb.nn.Int8Params):
            return True
        return False

    def create_quantized_param(self, module, name, value):
        import bitsandbytes as bnb

        module._parameters[name] = bnb.nn.Int8Params(value)
"""


def test_a_type_check_beside_the_real_use_is_silent():
    """Only the import that uses bitsandbytes is reported; the one that recognises its objects adds nothing."""
    assert lint(BNB_QUANTIZER, "diffusers/quantizers/bitsandbytes/bnb_quantizer.py") == [(11, "ASC206")]


def test_a_type_check_alone_is_reported():
    source = BNB_QUANTIZER.split("    def create_quantized_param")[0]
    assert lint(source, "quantizer.py") == [(4, "ASC206")]


# pyannote.audio 3.3.2 pipelines/utils/getter.py:189-197: the CUDA device count decides the branch
DEVICE_COUNT = """
import torch

def get_devices(needs=None):
    num_gpus = torch.cuda.device_count()
    if num_gpus {test}:
        return [torch.device("cpu")]
    return [torch.device(f"cuda:{{index:d}}") for index in range(num_gpus)]
"""


@pytest.mark.parametrize("test", ["== 0", "< 1", "<= 0", "< 8"])
def test_code_after_an_exit_on_no_cuda_device_is_one_cuda_branch(test):
    # the device strings fold into the finding on the count: "the CUDA branch also has"
    assert lint(DEVICE_COUNT.format(test=test), "pkg/getter.py") == [(5, "ASC201")]


@pytest.mark.parametrize("test", ["> 1", "!= 0", "== 1"])
def test_an_exit_that_an_npu_machine_does_not_take_leaves_the_strings_reported(test):
    # near misses: on a machine without CUDA the count is 0 and these tests do not exit
    assert lint(DEVICE_COUNT.format(test=test), "pkg/getter.py") == [(5, "ASC201"), (8, "ASC202")]


@pytest.mark.parametrize("test,folded", [("torch.cuda.device_count() > 1", True), ("torch.cuda.device_count()", True),
                                         ("torch.cuda.device_count() < 8", False)])
def test_a_branch_on_the_device_count(test, folded):
    source = f"import torch\ndef place(model):\n    if {test}:\n        model = model.cuda()\n    return model\n"
    assert lint(source, "pkg/place.py") == ([(3, "ASC201")] if folded else [(3, "ASC201"), (4, "ASC202")])


@pytest.mark.parametrize("text,says", [("if is_npu_available():", True), ("device = 'NPU'", True),
                                       ("x = torch_npu.npu_rms_norm(x)", True), ("torch.npu.synchronize()", True),
                                       # near misses: the letters inside other words
                                       ("inputs = self.input_proj(input)", False), ("snpu = 1", False)])
def test_npu_is_read_as_a_word_or_a_names_part(text, says):
    assert device_dispatch._mentions_npu([text]) is says


# unsloth 2026.10.9 kernels/rms_layernorm.py:1195-1216: a kernel module's own pytest-style check
SELF_TEST = """
import torch

def fast_rms_layernorm(layernorm, X):
    return X

def test_rms_layernorm(dim=1024, eps=1e-5, dtype=torch.float16, bsz=21):
    XX = torch.randn((bsz, 512, dim), dtype=dtype, device="cuda")
    torch.cuda.synchronize()
"""


def test_a_self_test_function_in_a_library_module_is_test_code():
    assert lint(SELF_TEST, "unsloth/kernels/rms_layernorm.py") == []
    assert {code for _, code in lint(SELF_TEST, "unsloth/kernels/rms_layernorm.py", lint_tests=True)} == {
        "ASC201", "ASC202"}


def test_near_miss_a_test_named_function_the_module_calls_is_no_test():
    # easyocr 1.7.2 detection.py: CRAFT's inference is called test_net, and get_textbox calls it
    source = SELF_TEST + "\ndef get_textbox(net):\n    return test_rms_layernorm()\n"
    assert {code for _, code in lint(source, "easyocr/detection.py")} == {"ASC201", "ASC202"}


def test_a_unittest_case_in_a_library_module_is_test_code():
    source = ("import unittest\nimport torch\n\nclass TestKernel(unittest.TestCase):\n"
              "    def test_cuda(self):\n        torch.cuda.synchronize()\n")
    assert lint(source, "pkg/kernels/fused.py") == []
    # near miss: a class of the library that is no TestCase
    assert lint(source.replace("unittest.TestCase", "torch.nn.Module"), "pkg/kernels/fused.py") == [(6, "ASC201")]


# unsloth 2026.10.9 kernels/utils.py:49-53, espnet 202511 espnet2/train/reporter.py:351-357
OLD_TORCH = """
import torch
from packaging.version import Version
from distutils.version import LooseVersion as V

if Version(torch.__version__) < Version("2.4.0"):
    custom_fwd = torch.cuda.amp.custom_fwd
else:
    custom_fwd = torch.amp.custom_fwd(device_type="cuda")

def report():
    if V(torch.__version__) >= V("1.4.0"):
        return torch.cuda.max_memory_reserved()
    else:
        return torch.cuda.max_memory_cached()
"""


def _all_codes(source: str, **settings):
    source = textwrap.dedent(source)
    findings = engine.lint(ast.parse(source), source.splitlines(keepends=True), "pkg/kernels/utils.py",
                           Config(settings.pop("version", default_version()), **settings))
    return sorted((f.line, f.code) for f in findings)


def test_a_branch_only_an_older_torch_takes_is_silent():
    assert _all_codes(OLD_TORCH) == [(9, "ASC202"), (13, "ASC201")]


def test_near_miss_the_old_branch_runs_where_the_selected_torch_is_that_old():
    assert _all_codes(OLD_TORCH, version="2.1.0") == [(7, "ASC207"), (9, "ASC202"), (13, "ASC201")]


def test_near_miss_a_version_helper_says_no_direction():
    # yolov5 7.0.14 utils/torch_utils.py:61: check_version(current, minimum) is True on new torch, but nothing
    # in the expression says which side is old
    source = ("import torch\nif check_version(torch.__version__, '1.11.0'):\n    torch.cuda.synchronize()\n"
              "if numpy.__version__ < '1.20':\n    torch.cuda.synchronize()\n")
    assert _all_codes(source) == [(3, "ASC201"), (5, "ASC201")]


# unsloth 2026.10.9 models/lora_init.py:160-168: a device-type test that leaves the function on any other device
TYPE_EXIT = """
import torch

def _fast_fp64(device):
    if device.type == "cpu":
        return True
    if device.type {test} "cuda":
        {exit}
    return torch.cuda.get_device_capability(device) in ((6, 0), (7, 0), (8, 0), (9, 0))
"""


@pytest.mark.parametrize("test", ["!=", "is not"])
def test_code_after_an_exit_on_another_device_type_is_one_cuda_branch(test):
    source = TYPE_EXIT.format(test=test, exit="return False")
    assert lint(source, "pkg/lora_init.py") == [(7, "ASC202")]
    message = next(f.text for f in engine.lint(ast.parse(textwrap.dedent(source)), textwrap.dedent(
        source).splitlines(keepends=True), "pkg/lora_init.py", Config(default_version())) if f.code == "ASC202")
    assert "True on an NPU: the CUDA path after it (line 9) is skipped there" in message
    assert "ASC201 torch.cuda.get_device_capability on line 9" in message


@pytest.mark.parametrize("test,exit", [("!=", "device = torch.device('cpu')"),  # no exit: line 9 runs on the NPU
                                       ("==", "return False")])  # an exit only CUDA takes
def test_near_miss_a_type_test_that_does_not_leave_the_npu_run_out(test, exit):
    assert lint(TYPE_EXIT.format(test=test, exit=exit), "pkg/lora_init.py") == [(7, "ASC202"), (9, "ASC201")]


# mmagic 1.2.0 models/editors/eg3d/renderer.py:436: mmengine's TORCH_VERSION is torch.__version__
# (mmengine 0.10.7 utils/dl_utils/parrots_wrapper.py:7)
MMENGINE_OLD_TORCH = """
import torch
from mmengine.utils import digit_version
from mmengine.utils.dl_utils import TORCH_VERSION

def composite(depth):
    if digit_version(TORCH_VERSION) < digit_version('1.8.0'):
        depth[torch.isnan(depth)] = float('inf')
    else:
        depth = torch.nan_to_num(depth, float('inf'))
    return depth
"""


def test_mmengine_torch_version_reads_as_torch_version():
    assert _all_codes(MMENGINE_OLD_TORCH) == []


def test_near_miss_a_torch_version_of_another_name():
    # a TORCH_VERSION of the file's own, not mmengine's: nothing says what it holds
    source = MMENGINE_OLD_TORCH.replace("from mmengine.utils.dl_utils import TORCH_VERSION", "TORCH_VERSION = get()")
    assert _all_codes(source) == [(8, "ASC304")]
