"""semantic/aliasing.py: when ASC304's rewrite ``x = f(x, mask, v)`` may rebind ``x`` safely."""
import ast

import pytest

from flake8_ascend.semantic.aliasing import aliased, fresh_tensor, source_line
from flake8_ascend.semantic.model import SemanticModel
from probe import ask


@pytest.mark.parametrize("value,fresh", [
    ("torch.zeros(3)", True),
    ("a + b", True),
    ("-a", True),
    ("not a", False),
    ("a.clone()", True),
    ("a.new_zeros(3)", True),
    ("torch.reshape(a, (3,))", False),  # may be a view of a
    ("torch.from_numpy(array)", False),  # shares the array's memory
    ("a.view(3)", False),
    ("torch.linalg.norm(a)", False),  # only plain torch functions are known to allocate
    ("a[a > 0]", True),  # mask indexing copies
    ("a[1:2]", False),  # slicing is a view
    ("make()", False),  # unknown callee
])
def test_fresh_tensor(value, fresh):
    source = f"import torch\na = torch.ones(3)\nx = {value}\n"
    answers = ask(source, ast.Assign, lambda node, ctx: fresh_tensor(node.value, ctx))
    assert answers[-1] is fresh


def _flow(source: str):
    """The model's flow of the first function of ``source``."""
    tree = ast.parse(source)
    function = tree.body[0]
    return function, SemanticModel(tree, source.splitlines(keepends=True)).flow(function)


def _aliased(body: str, name: str = "x") -> bool:
    function, flow = _flow(f"def f(m):\n    x = torch.zeros(3)\n{body}")
    first = function.body[0]
    return aliased(name, flow, (first.end_lineno, first.end_col_offset))


@pytest.mark.parametrize("body,expected", [
    ("    y = x\n", True),
    ("    self.t = x.view(3)\n", True),  # a view still shares the tensor
    ("    pair = (m, x)\n", True),
    ("    x = x + 1\n", False),  # rebinding x itself
    ("    y = x.sum()\n", False),  # a new tensor
    ("    y = m\n", False),
])
def test_aliased_after_the_binding(body, expected):
    assert _aliased(body) is expected


def test_stores_before_the_position_do_not_count():
    function, flow = _flow("def f():\n    y = x\n    x = torch.zeros(3)\n")
    last = function.body[1]
    assert not aliased("x", flow, (last.end_lineno, last.end_col_offset))


def test_source_line_is_the_stripped_first_line():
    tree = ast.parse("if a:\n    x[m] = (v +\n            1)\n")
    statement = tree.body[0].body[0]
    assert source_line(statement, ["if a:\n", "    x[m] = (v +\n", "            1)\n"]) == "x[m] = (v +"
