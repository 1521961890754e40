"""semantic/reads.py: where a function's local names are read, with the ancestors of each read."""
import ast

from flake8_ascend.semantic.model import SemanticModel


def model_of(source: str):
    tree = ast.parse(source)
    return tree, SemanticModel(tree, source.splitlines(keepends=True))


def test_reads_of_a_local_in_source_order_with_their_ancestors():
    tree, model = model_of("def f(model):\n    device = pick()\n    print(f'Device: {device}')\n"
                           "    model.to(device)\n")
    function = tree.body[0]
    reads = model.reads(function, "device")
    assert [r.node.lineno for r in reads] == [3, 4]
    assert [type(p).__name__ for p in reads[0].path] == ["FormattedValue", "JoinedStr", "Call", "Expr"]
    assert isinstance(reads[1].path[0], ast.Call) and reads[1].path[0].func.attr == "to"


def test_reads_in_nested_scopes_and_augmented_targets_count_but_not_shadowed_names():
    tree, model = model_of("def f():\n    x = 1\n    g = lambda: x\n    x += 2\n"
                           "    def h():\n        x = 3\n        return x\n    return [x for _ in range(2)]\n")
    function = tree.body[0]
    assert [r.node.lineno for r in model.reads(function, "x")] == [3, 4, 8]
    assert model.reads(function, "missing") == []


def test_the_index_is_built_once_per_scope():
    tree, model = model_of("def f():\n    x = 1\n    return x\n")
    function = tree.body[0]
    assert model.reads(function, "x")[0] is model.reads(function, "x")[0]
