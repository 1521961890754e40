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
