"""ASC650: the legacy Ascend dump and overflow-check switches (``torch.utils.dumper``, ``ACL_DUMP_DATA``)."""
from __future__ import annotations

import ast

from ..registry import Rule

_DUMPER = "torch.utils.dumper"
_ENV = "ACL_DUMP_DATA"
NEW_WAY = ("ascend-analyse -m overflow --dump N (or OVERFLOW.start(loader) from msft_dynamic_analysis.overflow), "
           "then ascend-analyse compare DUMP_A DUMP_B")


class LegacyDump(Rule):
    code = "ASC650"
    summary = "legacy Ascend dump / overflow switch (torch.utils.dumper, the ACL_DUMP_DATA variable)"
    node_types = (ast.Name, ast.Attribute, ast.Constant)
    names = "imported"
    trigger_words = ("dumper", _ENV)
    why = (
        "`torch.utils.dumper(use_dump=..., check_overflow=...)` existed only in Huawei's patched PyTorch 1.5/1.8 "
        "for Ascend; stock PyTorch with torch_npu has no such module, so the script fails with AttributeError. "
        "torch_npu still reads `ACL_DUMP_DATA` but warns that it is deprecated."
    )
    example = "with torch.utils.dumper(check_overflow=True, dump_path='dump.h5'):\n    loss = model(x)"
    use_instead = (
        "Find overflowing operators and dump their data with the runtime detector (`ascend-analyse -m overflow "
        "-i IN -o OUT --dump N`, or `for batch in OVERFLOW.start(loader)`), compare two dumps with "
        "`ascend-analyse compare DUMP_A DUMP_B -o OUT`; on the NPU itself use `torch_npu.npu.init_dump()` / "
        "`set_dump()` instead of `ACL_DUMP_DATA`."
    )
    source = (
        "Huawei's Ascend PyTorch 1.5/1.8 fork, torch/utils/dumper.py (class dumper: use_dump, use_load, "
        "check_overflow, .h5 dump files); Ascend/pytorch torch_npu/csrc/core/npu/register/OptionsManager.cpp "
        "(CheckAclDumpDateEnable: 'The environment variable ACL_DUMP_DATA has been deprecated, please use "
        "torch_npu.npu.init_dump() instead')"
    )
    fires = [
        ("import torch\nwith torch.utils.dumper(use_dump=True, dump_path='a.h5') as dump:\n    pass\n", 2),
        ("from torch.utils.dumper import dumper\nwith dumper(check_overflow=True):\n    pass\n", 2),
        ("import os\nos.environ['ACL_DUMP_DATA'] = '1'\n", 2),
        ("import os\nos.environ.setdefault('ACL_DUMP_DATA', '1')\n", 2),
    ]
    passes = [
        "import torch\nloader = torch.utils.data.DataLoader(ds)\n",
        "import yaml\nyaml.dump(cfg, Dumper=yaml.dumper.SafeDumper)\n",
        "def dumper(x):\n    return x\nwith dumper(1):\n    pass\n",
        "import os\nos.environ['ACL_DUMP_DATA_PATH'] = '/tmp'\n",
        "print('set ACL_DUMP_DATA=1 only on old stacks')\n",
    ]

    def check(self, node, ctx) -> None:
        if isinstance(node, ast.Constant):
            if node.value == _ENV:
                ctx.report(node, self.code, f"{_ENV} is deprecated in torch_npu (use torch_npu.npu.init_dump(), or "
                           "the runtime overflow detector and dump comparison)", api=_ENV, tips=NEW_WAY)
            return
        if isinstance(node.ctx, ast.Store):  # `mode = torch.utils.dumper...`: the target is an alias, not a use
            return
        qualname = ctx.chain(node)
        if qualname and (qualname == _DUMPER or qualname.startswith(_DUMPER + ".")):
            ctx.report(node, self.code, f"{qualname} exists only in Huawei's old Ascend PyTorch 1.x (find overflows "
                       "and compare dumps with the runtime overflow detector instead)", api=qualname, tips=NEW_WAY)
