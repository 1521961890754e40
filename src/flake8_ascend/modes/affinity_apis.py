"""``-m affinity_apis``: code an NPU affinity or fused API replaces (ASC301-ASC304), and ``--fix``/``--diff``."""
from __future__ import annotations

from ..codes import Report
from ._lint import LintMode, Table

COLUMNS = ("File", "Start Line", "End Line", "Api Type", "Api Call Name", "Affinity Api Name")


def _row(finding, rule):
    return (finding.path, finding.line, finding.end_line, rule.api_type, finding.api, finding.tips)


class AffinityApis(LintMode):
    name = "affinity_apis"
    help = ("classes, functions, torch calls and code patterns that an NPU affinity or fused API replaces; "
            "--fix rewrites the safe ones, --diff shows the rewrite")
    tables = {Report.AFFINITY_API_CALL: Table(COLUMNS, _row)}
    fixes = True
    diff_name = "affinity_fix.diff"
