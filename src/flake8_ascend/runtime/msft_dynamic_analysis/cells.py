"""Spreadsheet-safe CSV cells (the OWASP "CSV injection" advice).

The reports are opened in Excel, which runs a cell starting with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return as a formula.  File, function and
operator names come from the analysed project, so such a cell gets a leading
``'`` (Excel shows the text as is and hides the quote).  Numbers such as ``-1``
or ``-0.5`` are left alone: they are values, not formulas.  Shared by every
CSV writer of flake8-ascend and of this package (which must stay standalone).
"""

import re

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")


def _is_number(text):
    return _NUMBER.match(text) is not None


def safe_cell(value):
    """``value`` with a ``'`` in front when a spreadsheet would read it as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _is_number(value):
        return "'" + value
    return value


def safe_row(row):
    """A CSV row with every cell made safe."""
    return [safe_cell(value) for value in row]

