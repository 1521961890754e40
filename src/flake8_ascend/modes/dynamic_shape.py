"""``-m dynamic_shape``: an instrumented copy of the project that reports changing shapes at run time.

Besides the official layout (the copy plus ``msft_dynamic_analysis/``), the
mode wraps the data loops it recognises in ``DETECTOR.start(...)``, logs which
loops it wrapped and which training scripts need the wrap by hand, and writes
the static dynamic-shape hints (ASC401-404) to ``dynamic_shape_hints.csv``.
"""
from __future__ import annotations

from ..codes import CODES, Report
from ..runtime.inject import PACKAGE, REPORT_NAME
from ..runtime.runtime_copy import SHAPES, make_copy
from ._lint import LintMode, Table
from . import Job, Mode, whole_number

HINT_COLUMNS = ("File", "Start Line", "End Line", "OP", "Tips")


def _hint_row(finding, rule):
    return (finding.path, finding.line, finding.end_line, finding.api, finding.text)


class _Hints(LintMode):
    """The ASC4xx findings of the input (no ``name``: not a mode of its own)."""

    tables = {Report.DYNAMIC_SHAPE_HINTS: Table(HINT_COLUMNS, _hint_row)}


class DynamicShape(Mode):
    name = "dynamic_shape"
    help = ("copy the project with its data loops wrapped in a runtime shape detector (run the copy to get "
            f"{REPORT_NAME}); also lists ASC401-404 hints")
    outputs = (Report.DYNAMIC_SHAPE_HINTS.value, f"{PACKAGE}/", "the instrumented copy of the input")
    formats = ("csv", "json", "sarif")  # the hints; the page (html) is for the lint and migrate modes
    uses_rules = True
    # the static hints are advisory in flake8 (docs/accuracy.md, "The default set"); this mode is asked for them
    enables = tuple(code for code, row in CODES.items() if row.report is Report.DYNAMIC_SHAPE_HINTS and row.default_off)

    @classmethod
    def add_arguments(cls, group) -> None:
        group.add_argument("--shape-iterations", type=whole_number, default=10, metavar="N",
                           help="iterations of each wrapped loop recorded in full (default: 10)")
        group.add_argument("--shape-every", type=whole_number, default=10, metavar="K",
                           help="after those, record one iteration in K (default: 10; 0: none), so a long run's "
                           "steady state stays close to the original's speed")

    def run(self, job: Job):
        counts = _Hints().run(job)
        make_copy(job, SHAPES, {"iterations": job.args.shape_iterations, "every": job.args.shape_every})
        return counts
