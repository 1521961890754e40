"""``-m dynamic_shape``: an instrumented copy of the project that reports changing shapes at run time.

Besides the official layout (the copy plus ``msft_dynamic_analysis/``), the
mode wraps the data loops it recognises in ``DETECTOR.start(...)``, logs which
loops it wrapped and which training scripts need the wrap by hand, and writes
the static dynamic-shape hints (ASC401-404) to ``dynamic_shape_hints.csv``.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

from ..dynamic.inject import PACKAGE, REPORT_NAME, instrument_tree
from ..lintmode import LintMode, Table
from ..rules.value_dependent_ops import HINTS_CSV
from . import Job, Mode

HINT_COLUMNS = ("File", "Start Line", "End Line", "OP", "Tips")


def _hint_row(finding, rule):
    return (finding.path, finding.line, finding.end_line, finding.api, finding.text)


class _Hints(LintMode):
    """The ASC4xx findings of the input (no ``name``: not a mode of its own)."""

    tables = {HINTS_CSV: Table(HINT_COLUMNS, _hint_row)}


def _excluded(job: Job) -> List[Path]:
    """Folders of the input the copy must not enter: the output folder when it lies inside the input."""
    out = job.out_dir.parent
    if not job.input.is_dir():
        return []
    if out != job.input:
        return [out]
    from ..cli import report_name  # the CLI imports the modes; import it only when running

    target = out / report_name(job.input)
    return [job.out_dir, target, *out.glob(f".{target.name}.*")]


class DynamicShape(Mode):
    name = "dynamic_shape"
    help = ("copy the project with its data loops wrapped in a runtime shape detector (run the copy to get "
            f"{REPORT_NAME}); also lists ASC401-404 hints")
    outputs = (HINTS_CSV, f"{PACKAGE}/", "the instrumented copy of the input")
    formats = _Hints.formats
    uses_rules = True

    def run(self, job: Job):
        counts = _Hints().run(job)
        result = instrument_tree(job.input, job.out_dir, exclude=_excluded(job))
        job.log(f"instrumented copy: {result.copied} files copied, {PACKAGE}/ added")
        for rel, reason in result.skipped:
            job.log(f"{rel}: {reason}")
        for loop in result.wrapped:
            job.log(f"wrapped data loop: {loop.path}:{loop.line}: {loop.header}")
        for rel in result.manual:
            job.log(f"no data loop found in {rel}: wrap your training loop by hand, e.g. "
                    "`for batch in DETECTOR.start(train_loader):` (DETECTOR is imported)")
        for rel in result.shifted:
            job.log(f"{rel}: the detector import needed a line of its own, so report lines there are one more "
                    "than in the original")
        if not result.importing:
            job.log("no training script found (no `.backward(` call, no data loop): import DETECTOR "
                    f"(from {PACKAGE}.hook import DETECTOR) and wrap your data loop by hand")
        job.log(f"next: run the training script of the copy for a few iterations; {REPORT_NAME} appears in the "
                "copy's root (one per rank in multi-process runs)")
        return counts
