"""Every rule is registered once, belongs to the catalogue, is documented, and its examples hold."""
import re

import pytest

from flake8_ascend.registry import all_rules
from conftest import run_rules

# The code families of the catalogue (shared/design/codes.md); 5xx and 6xx are numbered by the project.
CATALOGUE = re.compile(r"ASC(10[1-4]|20[1-8]|30[1-4]|40[1-4]|5\d\d|6\d\d)")
RULES = all_rules()


def test_codes_are_unique_and_catalogued():
    codes = [rule.code for rule in RULES]
    assert len(codes) == len(set(codes))
    assert all(CATALOGUE.fullmatch(code) for code in codes), codes


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    for attribute in ("summary", "why", "example", "fix", "source", "csv"):
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
