"""Property tests: the engine never raises on valid Python, and the plugin never on arbitrary bytes."""
import ast
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import run_rules
from flake8_ascend.plugin import AscendChecker

hypothesmith = pytest.importorskip("hypothesmith")

# Fragments that exercise the rules, mixed into generated modules.
TORCHY = st.sampled_from([
    "import torch\n", "import torch.nn.functional as F\n", "from torch import cuda\n", "import numpy as torch\n",
    "x = torch.randn(3)\n", "y = x.mode()\n", "torch.cuda.synchronize()\n", "m = m.cuda()\n",
    "d = torch.device('cuda:0')\n", "dist.init_process_group('nccl')\n", "x[x > 0] = 0\n",
    "for b in loader:\n    loss.backward()\n    print(loss.item())\n", "def nonzero(x):\n    return x\n",
    "y = torch([x], dim=-1).sum(dim=-1)\n",
])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar(auto_target=False), st.lists(TORCHY, max_size=4))
def test_engine_never_raises_on_valid_python(generated, fragments):
    source = "".join(fragments) + generated
    try:
        ast.parse(textwrap.dedent(source))  # what run_rules parses ('\n\\\n ' parses, its dedent does not)
    except (SyntaxError, ValueError, RecursionError):
        return
    run_rules(source)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(TORCHY, min_size=1, max_size=8))
def test_engine_never_raises_on_rule_fragments(fragments):
    run_rules("".join(fragments))


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=300))
def test_plugin_never_raises_on_bytes(data):
    text = data.decode("utf-8", errors="replace")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return  # flake8 reports E999 itself and never calls the plugin
    list(AscendChecker(tree, text.splitlines(True), "x.py").run())


SOURCE_TREE_MODES = ["torch_apis", "affinity_apis", "dynamic_shape", "overflow", "runtime_ops", "third_party", "migrate"]


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar(auto_target=False), st.lists(TORCHY, max_size=3), st.binary(max_size=200))
def test_every_mode_survives_generated_and_garbage_files(generated, fragments, garbage):
    """Each source-tree mode writes its report (exit 0) on a valid generated module beside a non-Python file."""
    import io
    import tempfile
    from pathlib import Path

    from flake8_ascend import cli

    source = "".join(fragments) + generated
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return
    with tempfile.TemporaryDirectory() as tmp:
        project, out = Path(tmp) / "project", Path(tmp) / "out"
        project.mkdir()
        out.mkdir()
        (project / "train.py").write_text(source, encoding="utf-8")
        (project / "garbage.py").write_bytes(garbage)
        for mode in SOURCE_TREE_MODES:
            extra = ["--jedi-seconds", "0"] if mode == "third_party" else []
            err = io.StringIO()
            code = cli.main(["-i", str(project), "-o", str(out), "-m", mode, "-q", *extra], out=io.StringIO(), err=err)
            assert code == 0, (mode, err.getvalue())
            assert "Traceback" not in err.getvalue()
