"""Machine-readable finding reports: a JSON list and SARIF 2.1.0 (for GitHub code scanning)."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Type
from urllib.parse import quote

from . import __version__
from .engine import Finding
from .registry import Rule, rule_for
from .runtime.msft_dynamic_analysis.cells import safe_row

JSON_NAME = "findings.json"
SARIF_NAME = "findings.sarif"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
ROOT_BASE_ID = "INPUTROOT"
# the rule pages of the repository this package runs from (a checkout or an editable install; a wheel has no docs)
CHECKOUT = Path(__file__).resolve().parents[2]
RULE_PAGES = CHECKOUT / "docs" / "rules.md"


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> int:
    """Write one CSV report (csv defaults, UTF-8, header first); returns the number of data rows.

    Cells a spreadsheet would run as a formula get a leading ``'`` (``safe_row``, docs/security.md).
    """
    count = 0
    with path.open("w", newline="", encoding="utf-8", errors="backslashreplace") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in rows:
            writer.writerow(safe_row(row))
            count += 1
    return count


def to_json(findings: Sequence[Finding], root: Path, cwd: Optional[Path] = None) -> str:
    """A list of finding objects; ``path`` as in SARIF (``_uri_prefix``), ``column`` 1-based as flake8 prints it."""
    prefix = _uri_prefix(root, cwd or Path.cwd()) or ""
    items = [
        {
            "path": prefix + f.path, "line": f.line, "column": f.col + 1, "end_line": f.end_line,
            "code": f.code, "message": f.message, "api": f.api, "tips": f.tips,
            "report": rule_for(f.code).report.value,
        }
        for f in findings
    ]
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def _rule_descriptor(rule: Type[Rule]) -> dict:
    help_text = f"{rule.why}\n\nExample: {rule.example}\n\nFix: {rule.use_instead}\n\nSource: {rule.source}"
    help_markdown = (
        f"{rule.why}\n\n**Example**\n\n```python\n{rule.example}\n```\n\n**Fix**: {rule.use_instead}\n\n"
        f"**Source**: {rule.source}"
    )
    descriptor = {
        "id": rule.code,
        "name": rule.__name__,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.why},
        "help": {"text": help_text, "markdown": help_markdown},
        "defaultConfiguration": {"level": rule.level.value, "enabled": not rule.default_off},
        "properties": {"report": rule.report.value},
    }
    if RULE_PAGES.is_file():
        descriptor["helpUri"] = f"{RULE_PAGES.as_uri()}#{rule.code.lower()}"  # the code's section
    return descriptor


def _uri_prefix(root: Path, cwd: Path) -> Optional[str]:
    """``root`` relative to ``cwd`` ("" for cwd itself), or None when it lies outside it."""
    relative = os.path.relpath(root, cwd)
    if relative == os.curdir:
        return ""
    if relative == os.pardir or relative.startswith(os.pardir + os.sep) or os.path.isabs(relative):
        return None
    return Path(relative).as_posix() + "/"


def to_sarif(findings: Sequence[Finding], root: Path, rules: Sequence[Type[Rule]], cwd: Optional[Path] = None) -> str:
    """One SARIF 2.1.0 run; URIs are relative to ``cwd`` when ``root`` is inside it, else to ``root``."""
    by_code: Dict[str, Type[Rule]] = {rule.code: rule for rule in rules}
    codes = sorted(by_code)
    index = {code: i for i, code in enumerate(codes)}
    prefix = _uri_prefix(root, cwd or Path.cwd())
    results: List[dict] = []
    for f in findings:
        location = {"uri": quote(f"{prefix or ''}{f.path}")}
        if prefix is None:
            location["uriBaseId"] = ROOT_BASE_ID
        region = {"startLine": f.line, "startColumn": f.col + 1, "endLine": max(f.end_line, f.line)}
        results.append({
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": by_code[f.code].level.value,
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {"artifactLocation": location, "region": region}}],
        })
    run = {
        "tool": {"driver": {
            "name": "ascend-analyse",
            "version": __version__,
            **({"informationUri": (CHECKOUT / "README.md").as_uri()} if RULE_PAGES.is_file() else {}),
            "rules": [_rule_descriptor(by_code[code]) for code in codes],
        }},
        "results": results,
    }
    if prefix is None:
        run["originalUriBaseIds"] = {ROOT_BASE_ID: {"uri": root.resolve().as_uri() + "/"}}
    document = {"version": "2.1.0", "$schema": SARIF_SCHEMA, "runs": [run]}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
