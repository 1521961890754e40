"""``-m torch_apis`` (the default): torch APIs, CUDA uses and advice, in the official report files."""
from __future__ import annotations

from ..codes import Report
from ._lint import LintMode, Table

API_COLUMNS = ("File", "Start Line", "End Line", "OP", "Tips")
CUDA_COLUMNS = ("File", "Api", "Start Line", "End Line", "Tips")


def _api_row(finding, rule):
    # Tips start with the code in every report, as in cuda_op_list.csv; then the note or advice, as the
    # official lists word it (a restriction note in Chinese stays here, out of the English flake8 message)
    tips = f"{finding.code} {finding.tips}" if finding.tips else finding.code
    if rule.no_line:  # configuration advice for a whole entry script: no line to name
        return (finding.path, "NA", "NA", finding.api, tips)
    return (finding.path, finding.line, finding.end_line, finding.api, tips)


def _cuda_row(finding, rule):
    return (finding.path, finding.api, finding.line, finding.end_line, finding.text)


class TorchApis(LintMode):
    name = "torch_apis"
    help = ("torch APIs the NPU lacks or restricts, CUDA-only code, precision and performance advice (default); "
            "with --select ASC2, --fix rewrites the CUDA code that has an NPU form, --diff shows the rewrite")
    tables = {
        Report.UNSUPPORTED_API: Table(API_COLUMNS, _api_row),
        Report.UNKNOWN_API: Table(API_COLUMNS, _api_row),
        Report.CUDA_OP_LIST: Table(CUDA_COLUMNS, _cuda_row),
        Report.PRECISION_ADVICE: Table(API_COLUMNS, _api_row),
        Report.PERFORMANCE_ADVICE: Table(API_COLUMNS, _api_row),
    }
    fixes = True
    diff_name = "cuda_fix.diff"
    # the official layout's list of APIs to check by hand: written in full here, though ASC102 is advisory in flake8
    enables = ("ASC102",)
