"""The README rule table, docs/rules.md and docs/codes.md are generated from the registry and must be current."""
from pathlib import Path
from conftest import load_tool

ROOT = Path(__file__).resolve().parents[1]
gen = load_tool("gen_rule_docs")


def test_readme_rule_table_is_current():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert gen.updated_readme(text) == text, "run: python tools/gen_rule_docs.py"


def test_rule_pages_are_current():
    assert (ROOT / "docs" / "rules.md").read_text(encoding="utf-8") == gen.rule_pages(), \
        "run: python tools/gen_rule_docs.py"


def test_code_catalogue_is_current():
    assert (ROOT / "docs" / "codes.md").read_text(encoding="utf-8") == gen.codes_page(), \
        "run: python tools/gen_rule_docs.py"


def test_readme_names_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
