"""semantic/flow.py: which binding a read sees, how names resolve to values, when two expressions agree."""
import ast

from flake8_ascend.semantic.model import SemanticModel


def flow_of(source: str):
    """(the first function, its flow, every Name read in it by (id, line))."""
    tree = ast.parse(source)
    function = tree.body[0]
    flow = SemanticModel(tree, source.splitlines(keepends=True)).flow(function)
    reads = {(n.id, n.lineno): n for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return function, flow, reads


def test_a_read_inside_its_own_assignment_sees_the_previous_binding():
    function, flow, reads = flow_of("def f(a):\n    x = a + 1\n    x = x * 2\n    return x\n")
    first, second = function.body[0], function.body[1]
    assert flow.binding(reads[("x", 3)]).value is first.value
    assert flow.binding(reads[("x", 4)]).value is second.value


def test_parameters_and_globals_have_no_binding():
    _, flow, reads = flow_of("def f(a):\n    y = a + b\n    return y\n")
    assert flow.binding(reads[("a", 2)]) is None and flow.binding(reads[("b", 2)]) is None


def test_resolve_follows_plain_names_and_stops_at_unpacks():
    source = "def f(t):\n    m = t > 0\n    k = m\n    a, b = t.max(0)\n    return k, a\n"
    function, flow, reads = flow_of(source)
    assert flow.resolve(reads[("k", 5)]) is function.body[0].value  # k -> m -> t > 0
    assert flow.resolve(reads[("a", 5)]) is reads[("a", 5)]  # an unpacked name stays a name


def test_same_value_through_names_but_not_across_rebinding():
    source = "def f(t):\n    m = t > 0\n    n = m\n    u = t[m]\n    v = t[n]\n    m = t < 0\n    w = t[m]\n"
    function, flow, reads = flow_of(source)
    assert flow.same(reads[("m", 4)], reads[("n", 5)])  # n is m's value
    assert not flow.same(reads[("m", 4)], reads[("m", 7)])  # m was rebound in between


def test_products_of_the_body_leave_nested_functions_out():
    _, flow, _ = flow_of("def f(a, b):\n    c = a * b / 2\n    def g(x):\n        return x * x\n    return c\n")
    assert sorted(ast.unparse(p) for p in flow.products) == ["a * b", "a * b / 2"]
