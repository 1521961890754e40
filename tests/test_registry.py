"""Every rule is registered once, has its row in the table of codes, is documented, and its examples hold."""
import pytest

from flake8_ascend.codes import CODES
from flake8_ascend.registry import Rule, all_rules
from conftest import load_tool, run_rules

RULES = all_rules()


def test_every_code_of_the_table_has_its_rule():
    assert [rule.code for rule in RULES] == sorted(CODES)
    assert all(CODES[rule.code].report is rule.report for rule in RULES)


def test_a_rule_without_a_row_fails_at_definition():
    with pytest.raises(ValueError, match="no row for ASC999"):
        type("Unlisted", (Rule,), {"code": "ASC999"})
    with pytest.raises(ValueError, match="no row for ASC101"):
        type("Impostor", (Rule,), {"code": "ASC101"})


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    for attribute in ("summary", "why", "example", "use_instead", "source"):
        assert getattr(rule, attribute).strip(), f"{rule.code} has no {attribute}"
    assert rule.node_types, f"{rule.code} looks at no node type"
    assert rule.fires, f"{rule.code} has no example that fires"
    assert rule.passes, f"{rule.code} has no near-miss example"


EXAMPLES = [(rule, source, line) for rule in RULES for source, line in rule.fires]
NEAR_MISSES = [(rule, source) for rule in RULES for source in rule.passes]


@pytest.mark.parametrize("rule,source,line", EXAMPLES, ids=[f"{r.code}-{i}" for i, (r, _, _) in enumerate(EXAMPLES)])
def test_example_fires(rule, source, line):
    findings = run_rules(source, codes=[rule.code], **rule.example_settings_dict())
    assert [f.line for f in findings] == [line], f"{rule.code} on:\n{source}\ngot {findings}"


@pytest.mark.parametrize("rule,source", NEAR_MISSES, ids=[f"{r.code}-{i}" for i, (r, _) in enumerate(NEAR_MISSES)])
def test_near_miss_is_silent(rule, source):
    assert run_rules(source, codes=[rule.code], **rule.example_settings_dict()) == []


snapshots = load_tool("snapshot_rule_examples")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_examples_match_their_snapshot(rule):
    """Code, position, message, CSV cells and rewrite of every example finding, as tests/snapshots/ has them."""
    path = snapshots.SNAPSHOTS / f"{rule.code}.txt"
    assert path.read_text(encoding="utf-8") == snapshots.render(rule), \
        f"{path.name} is out of date: review the change, then run python tools/snapshot_rule_examples.py"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_only_fixable_codes_carry_rewrites(rule):
    rewrites = [f.rewrite for source, _ in rule.fires for f in snapshots.findings(rule, source)[1] if f.rewrite]
    assert rule.fixable or not rewrites, f"{rule.code} attaches {rewrites[0]} but codes.CODES says not fixable"


GATED = [rule for rule in RULES if rule.names != "every"]


@pytest.mark.parametrize("rule", GATED, ids=lambda r: r.code)
def test_a_names_gate_changes_no_finding(rule, monkeypatch):
    """``Rule.names`` only spares calls: every example reports the same with the rule called on every name."""
    sources = [source for source, _ in rule.fires] + list(rule.passes)
    gated = [run_rules(source, codes=[rule.code], **rule.example_settings_dict()) for source in sources]
    monkeypatch.setattr(rule, "names", "every")
    assert [run_rules(source, codes=[rule.code], **rule.example_settings_dict()) for source in sources] == gated


def test_the_names_gates_call_a_rule_on_the_chains_it_may_report():
    """"outermost" sees each chain once, whole; "imported" only those rooted in an imported name."""
    import ast

    from flake8_ascend.config import make_config
    from flake8_ascend.engine import lint

    source = "import torch\nx = torch.cuda.amp.autocast\ny = z.w\ntorch = x\n"
    seen = {}
    for gate in ("every", "outermost", "imported"):
        class Spy:
            names = gate
            node_types = (ast.Name, ast.Attribute)
            trigger_words = ()

            def __call__(self):
                return self

            def runs_with(self, config):
                return True

            def check(self, node, ctx):
                seen.setdefault(gate, []).append(ast.unparse(node))

        lint(ast.parse(source), source.splitlines(True), "m.py", make_config(), [Spy()])
    assert sorted(seen["every"]) == sorted(["torch.cuda.amp.autocast", "torch.cuda.amp", "torch.cuda", "torch", "x",
                                            "z.w", "z", "y", "torch", "x"])
    assert sorted(seen["outermost"]) == sorted(["torch.cuda.amp.autocast", "x", "z.w", "y", "torch", "x"])
    assert sorted(seen["imported"]) == sorted(["torch.cuda.amp.autocast", "x", "torch", "x"])
