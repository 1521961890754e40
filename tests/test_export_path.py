"""detect/export_path.py: which functions only export the model, and the advice the engine keeps out of them."""
import ast

import pytest

from flake8_ascend.config import make_config
from flake8_ascend.detect.export_path import ExportPaths, exporting_module
from flake8_ascend.engine import lint
from flake8_ascend.semantic.model import SemanticModel

SOURCE = """\
import torch
class Head:
    def switch_to_deploy(self):
        self._convert_gau()
        self._shared()

    def _convert_gau(self):
        def _forward(x):
            return x
        self.forward = _forward

    def _shared(self):
        return 1

    def forward(self, x):
        return self._shared()

    def _unused(self):
        return 2

    def forward_onnx(self, x):
        return x

    def onnx_export(self):
        return self._ping() + self._again(2)

    def _ping(self):
        return self._pong()

    def _pong(self):
        return 0

    def _again(self, n):
        return self._again(n - 1) if n else 0

    def exported_scores(self):
        return 3

    def deployment(self):
        return 4

def export(model):
    return model
"""


def _functions(source):
    """name -> on an export path, for every def, asked with its ancestors as the engine's walk has them."""
    tree = ast.parse(source)
    paths = ExportPaths(SemanticModel(tree, source.splitlines(True)))
    found = {}

    def visit(node, ancestors):
        if isinstance(node, ast.FunctionDef):
            found[node.name] = paths.on_path([*ancestors, node])
        for child in ast.iter_child_nodes(node):
            visit(child, [*ancestors, node])

    visit(tree, [])
    return found


@pytest.mark.parametrize("name,exports", [
    ("switch_to_deploy", True), ("forward_onnx", True), ("onnx_export", True), ("export", True),
    ("_convert_gau", True),  # called only by switch_to_deploy
    ("_forward", True),  # a def inside a function on the path
    ("_ping", True), ("_pong", True),  # a chain of helpers from onnx_export
    ("_again", True),  # a helper that also calls itself: only the other calls say where it runs
    # near misses: also called from the forward; never called in the file; the word inside a longer one
    ("_shared", False), ("_unused", False), ("forward", False), ("exported_scores", False), ("deployment", False),
])
def test_export_paths(name, exports):
    assert _functions(SOURCE)[name] is exports


def test_advice_stays_out_of_export_code_but_a_cuda_finding_does_not():
    source = ("import torch\ndef forward_onnx(q, k):\n    k = k.cuda()\n    return torch.matmul(q, k.transpose(-1, -2))\n"
              "def forward(q, k):\n    return torch.matmul(q, k.transpose(-1, -2))\n")
    found = [(f.line, f.code) for f in lint(ast.parse(source), source.splitlines(True), "m.py", make_config())]
    assert found == [(3, "ASC202"), (6, "ASC303")]


@pytest.mark.parametrize("path,exports", [
    ("torchtune/modules/_export/_position_embeddings.py", True), ("yolov5/export.py", True),
    ("pkg\\onnx\\symbolic.py", True), ("tools/deploy/convert.py", True),
    # near misses: the word inside a longer one; a module about something else
    ("tools/deployment/handler.py", False), ("utils/exporter.py", False), ("models/heads/rtmo_head.py", False),
])
def test_export_modules(path, exports):
    assert exporting_module(path) is exports


def test_advice_stays_out_of_an_export_module():
    source = "import torch\ndef forward(q, k):\n    return torch.matmul(q, k.transpose(-1, -2))\n"
    for path, found in (("pkg/_export/attention.py", []), ("pkg/modules/attention.py", [(3, "ASC303")])):
        assert [(f.line, f.code) for f in lint(ast.parse(source), source.splitlines(True), path, make_config())] == found
