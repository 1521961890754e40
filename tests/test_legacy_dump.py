"""ASC650: the legacy Ascend dump switches, through every spelling that resolves to them."""
import pytest

from conftest import run_rules


def lines(source):
    return [(f.line, f.api) for f in run_rules(source, codes=["ASC650"])]


@pytest.mark.parametrize("source,expected", [
    ("import torch.utils as tu\nd = tu.dumper(use_dump=True)\n", [(2, "torch.utils.dumper")]),
    ("from torch import utils\nwith utils.dumper(check_overflow=True):\n    pass\n", [(2, "torch.utils.dumper")]),
    ("import torch\nmode = torch.utils.dumper.DumpMode.CHK_OVERFLOW\n",
     [(2, "torch.utils.dumper.DumpMode.CHK_OVERFLOW")]),
    ("import os\nflag = os.getenv('ACL_DUMP_DATA', '0')\n", [(2, "ACL_DUMP_DATA")]),
    ("import os\nos.environ.update({'ACL_DUMP_DATA': '1'})\n", [(2, "ACL_DUMP_DATA")]),
])
def test_fires(source, expected):
    assert lines(source) == expected


@pytest.mark.parametrize("source", [
    # a local name shadows the import
    "import torch\ndef f(torch):\n    return torch.utils.dumper()\n",
    # another library's dumper
    "from yaml import dumper\nd = dumper.Dumper(stream)\n",
    # the new torch_npu dump API and the environment variable's name inside prose
    "import torch_npu\ntorch_npu.npu.init_dump()\n",
    "'''Set ACL_DUMP_DATA=1 on the old stack.'''\n",
    # noqa silences it
    "import os\nos.environ['ACL_DUMP_DATA'] = '1'  # noqa: ASC650\n",
])
def test_silent(source):
    findings = [f for f in run_rules(source, codes=["ASC650"])]
    from flake8_ascend.engine import unsuppressed

    assert unsuppressed(findings, source.splitlines(keepends=True)) == []


def test_message_points_at_the_new_way():
    finding, = run_rules("import torch\ntorch.utils.dumper(use_dump=True)\n", codes=["ASC650"])
    assert finding.text.startswith("ASC650 torch.utils.dumper exists only in Huawei's old Ascend PyTorch 1.x")
    assert "ascend-analyse -m overflow" in finding.tips and "ascend-analyse compare" in finding.tips
