"""``-m affinity_apis``: code an NPU affinity or fused API replaces (ASC301-ASC304), and ``--fix``/``--diff``."""
from __future__ import annotations

import sys
from typing import Dict

from .. import fix
from ._lint import LintMode, Table
from . import Job

COLUMNS = ("File", "Start Line", "End Line", "Api Type", "Api Call Name", "Affinity Api Name")
DIFF_NAME = "affinity_fix.diff"


def _row(finding, rule):
    return (finding.path, finding.line, finding.end_line, rule.api_type, finding.api, finding.tips)


class AffinityApis(LintMode):
    name = "affinity_apis"
    help = ("classes, functions, torch calls and code patterns that an NPU affinity or fused API replaces; "
            "--fix rewrites the safe ones, --diff shows the rewrite")
    tables = {"affinity_api_call.csv": Table(COLUMNS, _row)}
    fixes = True

    def run(self, job: Job) -> Dict[str, int]:
        counts = super().run(job)
        if job.args.fix or job.args.diff:
            counts[DIFF_NAME] = self.apply_fixes(job)
        return counts

    def apply_fixes(self, job: Job) -> int:
        """Apply (--fix) or only show (--diff) the safe rewrites; the diff also goes to affinity_fix.diff."""
        write = job.args.fix and not job.args.diff
        codes = [rule.code for rule in self.rules(job) if rule.code in fix.FIX_CODES]
        results, problems = fix.fix_paths(job.files, job.root, job.config, write, codes)
        for problem in problems:
            job.log(f"fix: skipped {problem}")
        for result in results:
            job.log(f"fix: {result.rel}: {result.applied} rewrites{' written' if write and result.changed else ''}")
            for change in result.changes:
                job.log(f"fix: {result.rel}: {change}")
                if write and not job.args.quiet:
                    sys.stdout.write(f"fixed {result.rel}: {change}\n")
            for reason in result.left:
                job.log(f"fix: {result.rel}: left {reason}")
        diff = "".join(result.diff() for result in results)
        job.output_path(DIFF_NAME).write_text(diff, encoding="utf-8")
        if job.args.diff:
            sys.stdout.write(diff)
        return sum(result.changed for result in results)
