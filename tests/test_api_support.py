"""ASC101-103 decided from traced ATen ops and each version's kernels: stale entries, kernel-free APIs,
only uses fire, the parity switch and the reasons in the messages."""
import pytest

from conftest import run_rules


def texts(source, version, codes, **settings):
    return [f"{f.line}:{f.text}" for f in run_rules(source, version, codes, **settings)]


@pytest.mark.parametrize("source", [
    "import torch\nd = torch.cdist(a, b)\n",
    "import torch.nn as nn\npool = nn.MaxPool2d(2)\n",
    "import torch.nn.functional as F\ny = F.grid_sample(x, grid)\n",
])
def test_stale_official_entry_is_silent_by_default_and_reported_in_parity_mode(source):
    """The 2.6 list says unsupported; the 2.6.0 wheel has the kernels and a later list agrees."""
    assert texts(source, "2.6.0", ["ASC101"]) == []
    (found,) = texts(source, "2.6.0", ["ASC101"], official_lists=True)
    assert "stale: torch_npu 2.6.0's wheel has" in found


def test_max_pool2d_function_is_silent_in_both_modes():
    source = "import torch.nn.functional as F\ny = F.max_pool2d(x, 2)\n"
    assert texts(source, "2.6.0", ["ASC10"]) == texts(source, "2.6.0", ["ASC10"], official_lists=True) == []


def test_parity_mode_keeps_rows_the_evidence_agrees_with():
    source = "import torch\nx = torch.randn(3, 3)\ny = x.mode()\n"
    assert texts(source, "2.6.0", ["ASC101"]) == texts(source, "2.6.0", ["ASC101"], official_lists=True)
    (found,) = texts(source, "2.6.0", ["ASC101"])
    assert "aten::mode has no NPU kernel in torch_npu 2.6.0" in found


def test_table_row_without_a_note_says_where_it_comes_from():
    source = "import torch\nx = torch.randn(3, 3)\ny = x.cholesky_inverse()\n"
    (found,) = texts(source, "1.11.0", ["ASC101"])
    assert found == ("3:ASC101 torch.Tensor.cholesky_inverse is not supported on NPU (torch_npu 1.11.0: "
                     "listed unsupported by the torch_npu 1.11.0 support table)")


def test_fallback_names_the_op_and_version():
    (found,) = texts("import torch.nn.functional as F\nF.huber_loss(a, b)\n", "2.13.0", ["ASC10"])
    assert "ASC101" in found and "aten::huber_loss has no NPU kernel in torch_npu 2.13.0" in found


def test_assert_async_has_no_npu_kernel():
    (found,) = texts("import torch\ntorch._assert_async(ok)\n", "2.6.0", ["ASC101"])
    assert "aten::_assert_async has no NPU kernel in torch_npu 2.6.0" in found


@pytest.mark.parametrize("source", [
    "import torch\n@torch.jit.ignore\ndef f(x):\n    return x\n",
    "import torch\n@torch.jit.unused\ndef f(x):\n    return x\n",
    "import torch\nif torch.jit.is_scripting() or torch.jit.is_tracing():\n    pass\n",
    "import torch\nwith torch.no_grad(), torch.inference_mode(), torch.set_grad_enabled(False):\n    pass\n",
    "import torch.nn as nn\nf = nn.Flatten(1)\nseq = nn.Sequential(f, nn.Identity())\n",
    "import torch\ntry:\n    pass\nexcept torch.OutOfMemoryError:\n    pass\n",
    "import torch\nx = torch.randn(2)\nn = x.dim() + x.element_size()\n",
])
@pytest.mark.parametrize("version", ["2.6.0", "2.13.0"])
def test_kernel_free_apis_are_never_asc101_or_asc102(source, version):
    assert texts(source, version, ["ASC101", "ASC102"]) == []


@pytest.mark.parametrize("source", [
    "import torch.nn as nn\nok = isinstance(m, (nn.RNN, nn.MultiLabelMarginLoss))\n",
    "import torch.nn as nn\nok = issubclass(cls, nn.MultiLabelMarginLoss)\n",
    "import torch.nn as nn\nclass L(nn.MultiLabelMarginLoss):\n    pass\n",
    "import torch.nn as nn\nfrom typing import List\n"
    "def f(x: List[nn.MultiLabelMarginLoss]) -> nn.MultiLabelMarginLoss:\n    y: nn.MultiLabelMarginLoss = x[0]\n"
    "    return y\n",
    "import torch.nn as nn\nL = nn.MultiLabelMarginLoss\n",
    "import torch.nn as nn\n__all__ = ['MultiLabelMarginLoss']\n'''nn.MultiLabelMarginLoss()'''\n",
])
def test_non_uses_are_silent(source):
    assert texts(source, "2.13.0", ["ASC10"]) == []


@pytest.mark.parametrize("source,line", [
    ("import torch.nn as nn\nL = nn.MultiLabelMarginLoss\nloss = L()\n", 3),
    ("import functools\nimport torch.nn as nn\nL = functools.partial(nn.MultiLabelMarginLoss, reduction='sum')\n", 3),
    ("import torch.nn as nn\nlayers = {'m': nn.MultiLabelMarginLoss}\n", 2),
    ("import torch.nn as nn\nok = isinstance(m, nn.Linear) and nn.MultiLabelMarginLoss()\n", 2),
])
def test_uses_fire_once(source, line):
    assert [f.line for f in run_rules(source, "2.13.0", ["ASC101"])] == [line]


def test_restriction_only_on_calls():
    calls = ("import functools\nimport torch\nd = torch.topk(a, 2, sorted=False)\n"
             "f = functools.partial(torch.topk, sorted=False)\ng = torch.topk\n")
    assert [f.line for f in run_rules(calls, "2.8.0", ["ASC103"])] == [3, 4]
    hints = ("import torch\nimport torch.nn as nn\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return x\n"
             "class N(nn.Module):\n    pass\nok = isinstance(x, torch.Tensor)\n")
    assert run_rules(hints, "2.8.0", ["ASC103"]) == []


def test_ascend_analyse_official_lists_switch(tmp_path):
    """The CSV Tips say why: the kernel evidence by default, the stale official entry with the switch."""
    import csv
    import io

    from flake8_ascend import cli

    script = tmp_path / "train.py"
    script.write_text("import torch\nd = torch.cdist(a, b)\nx = torch.randn(3)\nm = x.mode()\n")

    def rows(*extra):
        out = tmp_path / ("parity" if extra else "default")
        out.mkdir()
        code = cli.main(["-i", str(script), "-o", str(out), "-v", "2.6.0", "-q", *extra], out=io.StringIO(),
                        err=io.StringIO())
        assert code == 0
        with (out / "train_analysis" / "unsupported_api.csv").open(newline="", encoding="utf-8") as handle:
            return {row[3]: row for row in list(csv.reader(handle))[1:]}

    default, parity = rows(), rows("--official-lists")
    assert set(default) == {"torch.Tensor.mode"} and set(parity) == {"torch.Tensor.mode", "torch.cdist"}
    assert any("aten::mode has no NPU kernel in torch_npu 2.6.0" in cell for cell in default["torch.Tensor.mode"])
    assert any("stale: torch_npu 2.6.0's wheel has" in cell for cell in parity["torch.cdist"])


def test_official_lists_setting_must_be_a_boolean(tmp_path):
    from flake8_ascend.config import ConfigError, make_config

    (tmp_path / "pyproject.toml").write_text('[tool.flake8-ascend]\nofficial-lists = "yes"\n')
    with pytest.raises(ConfigError, match="official-lists must be true or false"):
        make_config(project_dir=tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.flake8-ascend]\nofficial-lists = true\n')
    assert make_config(project_dir=tmp_path).official_lists


@pytest.mark.parametrize("version", ["2.1.0", "2.6.0", "2.13.0"])
def test_disputed_official_entry_is_silent_and_official_in_parity_mode(version):
    """adaptive_max_pool2d: every list says unsupported, every wheel has its kernel: the kernels win (silent);
    --official-lists reports the list's entry and says why the evidence disagrees."""
    source = "import torch.nn.functional as F\ny = F.adaptive_max_pool2d(x, 1)\n"
    assert texts(source, version, ["ASC10"]) == []
    (official,) = texts(source, version, ["ASC10"], official_lists=True)
    assert "ASC101" in official and "disputed:" in official
    assert "has an NPU kernel for aten::adaptive_max_pool2d" in official


@pytest.mark.parametrize("source", [
    "import torch\nstd, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)\n",  # whisper timing
    "from torch.fft import fftshift, ifftshift\nx = ifftshift(fftshift(x, dim=(-2, -1)), dim=(-2, -1))\n",
    "import torch\nh = torch.nn.utils.rnn.unpad_sequence(hidden_states, lengths=torch.tensor(lengths))\n",
    "import torch\nf = torch.fft.fftfreq(n, device=x.device, dtype=torch.float32)\n",
])
def test_listed_unsupported_but_every_op_has_a_kernel_is_silent(source):
    """The 2.13 list says unsupported; the wheel has a kernel for every ATen op they dispatch."""
    assert texts(source, "2.13.0", ["ASC10"]) == []
    assert texts(source, "2.13.0", ["ASC101"], official_lists=True)


def test_disputed_api_only_the_generic_probe_traced_stays_unknown():
    """to_sparse: listed unsupported; the probe's _to_sparse has a kernel, but the sparse tensor's later ops
    (moved to the NPU by model.to, .indices()) were never traced: ASC102, check it on an NPU (whisper)."""
    source = ("import torch\nall_heads = torch.zeros(n_layer, n_head, dtype=torch.bool)\n"
              "self.register_buffer('alignment_heads', all_heads.to_sparse(), persistent=False)\n")
    (found,) = texts(source, "2.13.0", ["ASC10"])
    assert "ASC102" in found and "generic probe" in found


def test_near_miss_whose_op_lacks_a_kernel_still_fires():
    """torch.special.ndtri: aten::special_ndtri has no NPU kernel in the 2.13 wheel (CPU fallback)."""
    (found,) = texts("import torch\nz = torch.special.ndtri(u)\n", "2.13.0", ["ASC10"])
    assert "ASC101" in found and "aten::special_ndtri has no NPU kernel" in found


def test_method_on_a_multi_line_receiver_is_reported_on_its_own_line():
    source = "import torch\np = torch.sparse_coo_tensor(\n    i,\n    v).to_dense()\n"
    (found,) = run_rules(source, "2.13.0", ["ASC101"])
    assert (found.line, found.col) == (4, 7) and found.api == "torch.Tensor.to_dense"


@pytest.mark.parametrize("source", [
    "import torch\ny = torch.cat([a, b])\n",
    "import torch.nn as nn\nact = nn.ReLU()\n",
])
def test_restriction_that_is_only_a_dtype_list_is_silent_but_official(source):
    """"input仅支持bf16，fp16，fp32，...": it cannot matter to float training code."""
    assert run_rules(source, "2.13.0", ["ASC103"]) == []
    assert len(run_rules(source, "2.13.0", ["ASC103"], official_lists=True)) == 1


def test_restriction_beyond_dtypes_fires_where_the_call_breaks_it():
    (found,) = texts("import torch\nv, i = torch.topk(x, 3, sorted=False)\n", "2.13.0", ["ASC103"])
    assert "sorted=False is not supported" in found and "不支持" not in found
    assert texts("import torch\nv, i = torch.topk(x, 3)\n", "2.13.0", ["ASC103"]) == []
    (official,) = run_rules("import torch\nv, i = torch.topk(x, 3)\n", "2.13.0", ["ASC103"], official_lists=True)
    assert "不支持sorted=False" in official.tips  # the audit mode reports the official row, its note in the Tips
    assert official.text.isascii()


def test_except_clause_is_not_a_use():
    source = "import torch.nn as nn\ntry:\n    pass\nexcept (nn.MultiLabelMarginLoss, ValueError):\n    pass\n"
    assert texts(source, "2.13.0", ["ASC10"]) == []


def test_kernel_free_api_keeps_a_restriction_of_its_arguments():
    """profile() dispatches no ATen op, but its restriction (use_device="npu") still matters."""
    (found,) = run_rules("import torch\nwith torch.autograd.profiler.profile():\n    pass\n", "2.13.0", ["ASC103"])
    assert "use_device" in found.tips
    assert texts("import torch.nn as nn\nm = nn.Module()\n", "2.13.0", ["ASC103"]) == []
