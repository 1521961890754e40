"""Qualified-name resolution and tensor inference on the stdlib ast tree."""
import ast
import textwrap

import pytest

from flake8_ascend.semantic.model import SemanticModel
from flake8_ascend.semantic.names import canonical


def resolve_last_call(source):
    """Qualified name of the function called by the last expression statement, and whether its receiver is a tensor."""
    tree = ast.parse(textwrap.dedent(source))
    semantic = SemanticModel(tree, source.splitlines(keepends=True))
    target = max((n for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)),
                 key=lambda n: n.lineno)
    func = target.value.func
    receiver_is_tensor = isinstance(func, ast.Attribute) and semantic.values.is_tensor(func.value)
    return semantic.qualname(func), receiver_is_tensor


@pytest.mark.parametrize(
    "source,expected",
    [
        ("import torch\ntorch.where(c)\n", "torch.where"),
        ("import torch.nn as nn\nnn.Linear(1, 2)\n", "torch.nn.Linear"),
        ("from torch import fft\nfft.rfft(x)\n", "torch.fft.rfft"),
        ("from torch.nn import functional as F\nF.relu(x)\n", "torch.nn.functional.relu"),
        ("import torch.nn.functional as F\nF.relu(x)\n", "torch.nn.functional.relu"),
        ("from torch import where as w\nw(c)\n", "torch.where"),
        ("import torch.nn\ntorch.nn.functional.relu(x)\n", "torch.nn.functional.relu"),
        ("import torch\nnn = torch.nn\nnn.ReLU()\n", "torch.nn.ReLU"),
        ("from torch.nn.modules.conv import Conv2d\nConv2d(1, 1, 1)\n", "torch.nn.Conv2d"),
        ("try:\n    import apex\nexcept ImportError:\n    apex = None\napex.amp.init()\n", "apex.amp.init"),
        ("import torch\ndef f():\n    torch.zeros(1)\n", "torch.zeros"),
        ("from .ops import nms\nnms(b)\n", ".ops.nms"),
        # a version test's import wins over the stand-in its else defines for old installs (espnet 202511
        # espnet2/train/trainer.py:44-55); an except ImportError's stand-in likewise
        ("if new_torch:\n    from torch.cuda.amp import autocast\nelse:\n    def autocast(enabled=True):\n        yield\n"
         "def step():\n    autocast(True)\n", "torch.cuda.amp.autocast"),
        ("try:\n    from torch.cuda.amp import autocast\nexcept ImportError:\n    autocast = nullcontext\n"
         "autocast(True)\n", "torch.cuda.amp.autocast"),
    ],
)
def test_resolves(source, expected):
    assert resolve_last_call(source)[0] == expected


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ndef nonzero(x):\n    return x\nnonzero(t)\n",
        "from torch import nonzero\ndef nonzero(x):\n    return x\nnonzero(t)\n",
        "import numpy as torch\ntorch.where(c)\n",
        "import torch\ntorch = object()\ntorch.where(c)\n",
        "import torch\ndef f(torch):\n    torch.where(c)\n",
        "import torch\nfor torch in range(3):\n    torch.where(c)\n",
        "where(c)\n",
        "import torch\nclass A:\n    def where(self):\n        pass\n    def g(self):\n        self.where()\n",
        # near misses of the stand-in above: a redefinition after the if (not its fallback), and a body that imports
        # nothing of that name
        "if new_torch:\n    from torch import where\nelse:\n    pass\ndef where(c):\n    return c\nwhere(c)\n",
        "import torch\nif new_torch:\n    import numpy\nelse:\n    def where(c):\n        return c\nwhere(c)\n",
    ],
)
def test_shadowed_names_do_not_resolve_to_torch(source):
    qualname, _ = resolve_last_call(source)
    assert qualname is None or not qualname.startswith("torch.")


@pytest.mark.parametrize(
    "source,expected",
    [
        ("import torch\nx = torch.randn(3)\nx.mode()\n", True),
        ("import torch\nx = torch.randn(3).float() * 2\nx.mode()\n", True),
        ("import torch\ndef f(x: torch.Tensor):\n    x.mode()\n", True),
        ("from torch import Tensor\ndef f(x: Tensor):\n    x.mode()\n", True),
        ("import torch\nx = torch.randn(3)\nx[0].mode()\n", True),
        ("import torch.nn.functional as F\ny = F.relu(x)\ny.mode()\n", True),
        ("import torch\nx = torch.randn(3)\nx.grad.mode()\n", True),
        ("import pandas as pd\npd.DataFrame({}).mode()\n", False),
        ("import numpy as np\na = np.zeros(3)\na.mode()\n", False),
        ("def f(x):\n    x.mode()\n", False),
        ("import torch\nn = torch.randn(3).item()\nn.mode()\n", False),
        ("import torch\na, b = torch.randn(2, 3)\na.mode()\n", True),  # unpacking a tensor gives its rows
        # return types from torch's stubs (data/torch_types.json): mmdet free_anchor_retina_head.py:206, 225
        ("import torch\ny = torch.sparse.sum(x, dim=1)\ny.to_dense()\n", True),
        ("import torch\ntorch.sparse.sum(x, dim=1).to_dense()\n", True),
        ("import torch\ntorch.sparse_coo_tensor(i, v, size=s).to_dense()\n", True),
        ("import torch\nv, i = torch.max(x, dim=1)\ni.mode()\n", True),
        ("import torch\nflag = torch.is_tensor(x)\nflag.mode()\n", False),
        ("import torch\nn = torch.numel(x)\nn.mode()\n", False),
    ],
)
def test_tensor_receiver(source, expected):
    assert resolve_last_call(source)[1] is expected


def test_canonical_keeps_public_paths():
    assert canonical("torch.nn.modules.linear.Linear") == "torch.nn.Linear"
    assert canonical("torch.functional.norm") == "torch.norm"
    assert canonical("torch.where") == "torch.where"


def test_the_semantic_package_imports_no_higher_layer():
    """semantic/ answers rules; it must not import them, the front ends or the engine (issue 23)."""
    import flake8_ascend.semantic as package
    from pathlib import Path

    higher = ("rules", "modes", "cli", "plugin", "engine", "flake8_settings", "registry")
    for path in Path(package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                parts = (node.module or "").split(".")
                top = parts[0] if node.level else parts[1] if parts[0] == "flake8_ascend" and len(parts) > 1 else ""
                assert node.level == 1 or top not in higher, f"{path.name} imports {'.' * node.level}{node.module}"


def test_answers_do_not_depend_on_the_order_of_questions():
    """A rule may ask about any node in any order: the same answers, asked backwards or forwards."""
    source = textwrap.dedent("""\
        import torch
        import numpy as np
        def f(x: torch.Tensor, a):
            keep = x > 0
            a = np.asarray(a)
            return x[keep], a[a > 0], F.relu(x)
        def g(y):
            from torch.nn import functional as F
            return F.relu(y)
        """)
    answers = []
    for order in (1, -1):
        tree = ast.parse(source)
        semantic = SemanticModel(tree, source.splitlines(keepends=True))
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.expr)][::order]
        answers.append(sorted((n.lineno, n.col_offset, type(n).__name__, semantic.value_of(n).kind,
                               semantic.qualname(n) or "") for n in nodes))
    assert answers[0] == answers[1]
    assert (9, 11, "Attribute", "other", "torch.nn.functional.relu") in answers[0]  # g's local import
    assert (6, 30, "Attribute", "unknown", "") in answers[0]  # not imported in f


def _default_of_last_keyword(source):
    tree = ast.parse(textwrap.dedent(source))
    model = SemanticModel(tree, source.splitlines(keepends=True))
    call = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.keywords][-1]
    default = model.parameter_default(call.keywords[-1].value)
    return ast.literal_eval(default) if default is not None else "none"


@pytest.mark.parametrize("source,expected", [
    ("def f(n, p=0.0):\n    return g(n, dropout=p)\n", 0.0),
    ("class M:\n    def __init__(self, p: float = 0.5):\n        self.p = p\n"
     "    def build(self):\n        return g(dropout=self.p)\n", 0.5),
    # near misses: rebound in the body, stored twice, stored from an expression, no default, a module name
    ("def f(n, p=0.0):\n    p = p or 0.1\n    return g(n, dropout=p)\n", "none"),
    ("class M:\n    def __init__(self, p=0.0):\n        self.p = p\n        if x:\n            self.p = 0.3\n"
     "        g(dropout=self.p)\n", "none"),
    ("class M:\n    def __init__(self, p=0.0):\n        self.p = p * 2\n        g(dropout=self.p)\n", "none"),
    ("def f(n, p):\n    return g(n, dropout=p)\n", "none"),
    ("p = 0.0\ndef f(n):\n    return g(n, dropout=p)\n", "none"),
    ("def f(p=0.0):\n    def inner():\n        return g(dropout=p)\n    return inner\n", 0.0),
])
def test_parameter_default(source, expected):
    assert _default_of_last_keyword(source) == expected
