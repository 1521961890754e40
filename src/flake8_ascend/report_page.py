"""``--format html``: one self-contained page that answers what blocks a project on the NPU, what can be rewritten
automatically, and what will be slow or numerically different.

The page loads nothing from anywhere (no network, no external stylesheet, script or font; a Content-Security-Policy
says so to the browser), so it opens from an offline CI artifact. Everything taken from analysed code (paths,
messages, source lines, diffs) is untrusted and goes through ``html.escape``; the inline script reads the page's own
elements only and never builds markup. With scripting off every finding is visible.
"""
from __future__ import annotations

import datetime
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Type

from . import __version__
from .engine import Finding
from .registry import Rule, rule_for

PAGE_NAME = "report.html"
CONTEXT_LINES = 1  # lines shown above and below a finding's line (three lines in all)

# The page's totals: each finding counts once, in the first category that takes it.
CATEGORIES = (
    ("fixable", "Fixable automatically", "a safe rewrite exists; the command below applies it"),
    ("blocking", "Blocking", "unsupported APIs, CUDA code with no automatic NPU form, custom CUDA ops"),
    ("check", "Support to check", "support unknown for this version, or supported with restrictions"),
    ("dynamic", "Dynamic-shape hazards", "shapes that change between steps recompile NPU graphs"),
    ("performance", "Performance advice", "faster NPU APIs and settings"),
    ("precision", "Precision advice", "results that may differ numerically on the NPU"),
)
FAMILIES = {"1": "ASC1 API support", "2": "ASC2 CUDA code", "3": "ASC3 NPU affinity", "4": "ASC4 dynamic shapes",
            "5": "ASC5 performance", "6": "ASC6 precision"}
BLOCKING_CODES = {"ASC101", "ASC104", "ASC205", "ASC206"}


def category(finding: Finding) -> str:
    """Which total a finding counts in (see CATEGORIES)."""
    if finding.rewrite:
        return "fixable"
    family = finding.code[3]
    if finding.code in BLOCKING_CODES or family == "2":
        return "blocking"
    if family == "1":
        return "check"
    return {"4": "dynamic", "6": "precision"}.get(family, "performance")


@dataclass
class PageInput:
    """What one run hands the page."""

    project: str  # the -i folder's name
    version: str  # torch_npu version the run used
    mode: str
    root: Path  # the folder finding paths are relative to
    findings: Sequence[Finding]
    files_analysed: int
    fix_command: str = ""  # the command that applies the rewrites ("" where the mode has none)
    diffs: Dict[str, str] = field(default_factory=dict)  # relative path -> unified diff of its rewrites
    changes: Sequence[Tuple[str, object, str, str, str]] = ()  # migrate: (file, line, code, before, after)
    date: Optional[str] = None  # ISO date; today when None


def explanation(rule: Type[Rule]) -> str:
    """The ``--explain`` sections of a rule, as plain text."""
    return "\n\n".join(f"{title}:\n{text}" for title, text in rule.explanation())


def _source_lines(root: Path, rel: str, cache: Dict[str, List[str]]) -> List[str]:
    if rel not in cache:
        try:
            with open(root / rel, encoding="utf-8", errors="replace", newline="") as handle:
                # Python's own line breaks only, as the findings count lines (not str.splitlines)
                cache[rel] = re.split(r"\r\n|\r|\n", handle.read())
        except OSError:
            cache[rel] = []
    return cache[rel]


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", re.M)


def diff_hunks(diff: str) -> List[Tuple[int, int, str]]:
    """(first old line, last old line, hunk text) of each hunk of a unified diff."""
    starts = [m for m in _HUNK.finditer(diff)]
    hunks = []
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(diff)
        first = int(match.group(1))
        length = int(match.group(2)) if match.group(2) is not None else 1
        hunks.append((first, first + max(length, 1) - 1, diff[match.start():end]))
    return hunks


def _bar_chart(title: str, counts: Sequence[Tuple[str, int]], width: int = 420) -> str:
    """A horizontal bar chart as inline SVG (labels escaped)."""
    if not counts:
        return ""
    top = max(n for _, n in counts) or 1
    row, label_width = 22, 230
    bars = []
    for index, (label, n) in enumerate(counts):
        y = index * row
        length = max(2, int((width - label_width - 50) * n / top))
        short = label if len(label) <= 34 else "..." + label[-31:]
        bars.append(
            f'<text x="{label_width - 6}" y="{y + 15}" text-anchor="end">{escape(short)}</text>'
            f'<rect x="{label_width}" y="{y + 4}" width="{length}" height="14" rx="2"></rect>'
            f'<text x="{label_width + length + 5}" y="{y + 15}">{n}</text>')
    height = row * len(counts)
    return (f'<figure><figcaption>{escape(title)}</figcaption><svg role="img" aria-label="{escape(title)}" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">{"".join(bars)}</svg></figure>')


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2430;background:#f5f6f8}
header,main,.bar{max-width:1100px;margin:0 auto;padding:0 20px}
header{padding-top:18px}h1{font-size:22px;margin:0 0 4px}.meta{color:#5b6472;margin:0 0 14px}
.totals{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:10px;margin:0 0 14px}
.total{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:10px 12px;border-top:4px solid #8a94a6}
.total b{display:block;font-size:26px}.total span{color:#5b6472;font-size:12px}
.total.blocking{border-top-color:#c62828}.total.fixable{border-top-color:#2e7d32}.total.check{border-top-color:#ef6c00}
.total.dynamic{border-top-color:#6a1b9a}.total.performance{border-top-color:#1565c0}.total.precision{border-top-color:#00838f}
.fixcmd{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:8px 12px;margin:0 0 14px}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.charts{display:flex;flex-wrap:wrap;gap:18px;background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:10px 14px}
figure{margin:0}figcaption{font-weight:600;margin-bottom:4px}svg text{font-size:12px;fill:#1d2430}svg rect{fill:#3f6fb5}
.bar{position:sticky;top:0;background:#f5f6f8;padding-top:10px;padding-bottom:10px;z-index:1;display:flex;gap:8px;flex-wrap:wrap}
.bar select,.bar input{font:inherit;padding:4px 6px;border:1px solid #b9c0cb;border-radius:6px;background:#fff}
.bar input{flex:1;min-width:200px}
section.file{background:#fff;border:1px solid #dde1e7;border-radius:8px;margin:0 0 12px}
section.file>h2{font-size:15px;margin:0;padding:8px 12px;border-bottom:1px solid #e6e9ee;word-break:break-all}
section.file>h2 small{color:#5b6472;font-weight:400}
.finding{padding:8px 12px;border-bottom:1px solid #eef0f3}.finding:last-child{border-bottom:0}
.finding p{margin:2px 0 6px}.tag{display:inline-block;border-radius:4px;padding:0 6px;font-size:12px;color:#fff;background:#8a94a6}
.tag.blocking{background:#c62828}.tag.fixable{background:#2e7d32}.tag.check{background:#ef6c00}
.tag.dynamic{background:#6a1b9a}.tag.performance{background:#1565c0}.tag.precision{background:#00838f}
pre{background:#f7f8fa;border:1px solid #e6e9ee;border-radius:6px;padding:6px 8px;overflow-x:auto;margin:4px 0;white-space:pre}
pre .hit{background:#fff3c4;display:inline-block;min-width:100%}
pre.diff .add{color:#1b5e20}pre.diff .del{color:#b71c1c}details summary{cursor:pointer;color:#3f6fb5}
.explain{white-space:pre-wrap}.none{padding:20px;text-align:center;color:#5b6472}
table{border-collapse:collapse;background:#fff;width:100%}td,th{border:1px solid #dde1e7;padding:3px 6px;text-align:left}
"""

# Hides what the filters exclude; reads only the page's own attributes and text, writes only `hidden`.
SCRIPT = """
(function(){
  var fam=document.getElementById('family'),code=document.getElementById('code'),q=document.getElementById('q');
  document.querySelector('.bar').hidden=false;
  function apply(){
    var f=fam.value,c=code.value,t=q.value.toLowerCase();
    document.querySelectorAll('section.file').forEach(function(s){
      var shown=0;
      s.querySelectorAll('.finding').forEach(function(e){
        var ok=(!f||e.dataset.family===f)&&(!c||e.dataset.code===c)&&(!t||e.textContent.toLowerCase().indexOf(t)>=0);
        e.hidden=!ok;if(ok)shown++;
      });
      s.hidden=shown===0;
    });
  }
  [fam,code].forEach(function(e){e.addEventListener('change',apply)});q.addEventListener('input',apply);
})();
"""


def _source_block(lines: List[str], line: int) -> str:
    if not lines:
        return ""
    first, last = max(1, line - CONTEXT_LINES), min(len(lines), line + CONTEXT_LINES)
    width = len(str(last))
    rows = []
    for number in range(first, last + 1):
        text = escape(f"{number:>{width}}  {lines[number - 1].rstrip()}")
        rows.append(f'<span class="hit">{text}</span>' if number == line else text)
    return f'<pre class="src">{chr(10).join(rows)}</pre>'


def _diff_block(hunk: str) -> str:
    rows = []
    for text in hunk.rstrip("\n").split("\n"):
        kind = "add" if text.startswith("+") else "del" if text.startswith("-") else ""
        rows.append(f'<span class="{kind}">{escape(text)}</span>' if kind else escape(text))
    return ('<details open><summary>Automatic rewrite</summary>'
            f'<pre class="diff">{chr(10).join(rows)}</pre></details>')


def _finding(finding: Finding, lines: List[str], hunks: List[Tuple[int, int, str]]) -> str:
    rule = rule_for(finding.code)
    kind = category(finding)
    label = dict((key, title) for key, title, _ in CATEGORIES)[kind]
    parts = [
        f'<article class="finding" data-code="{escape(finding.code)}" data-family="ASC{finding.code[3]}" '
        f'data-category="{kind}">',
        f'<div><b>{escape(finding.code)}</b> line {finding.line}, column {finding.col + 1} '
        f'<span class="tag {kind}">{escape(label)}</span></div>',
        f'<p>{escape(finding.message)}</p>',
        _source_block(lines, finding.line),
    ]
    if finding.tips and finding.tips not in finding.message:
        parts.append(f'<p><small>{escape(finding.tips)}</small></p>')
    for first, last, hunk in hunks:
        if first <= finding.line <= last:
            parts.append(_diff_block(hunk))
            break
    parts.append(f'<details><summary>{escape(rule.summary)}: why and how to fix</summary>'
                 f'<div class="explain">{escape(explanation(rule))}</div></details></article>')
    return "".join(parts)


def _blocking(findings: Iterable[Finding]) -> int:
    return sum(category(f) == "blocking" for f in findings)


def render(page: PageInput) -> str:
    """The whole page as one string."""
    by_file: Dict[str, List[Finding]] = defaultdict(list)
    for finding in page.findings:
        by_file[finding.path].append(finding)
    order = sorted(by_file, key=lambda rel: (-_blocking(by_file[rel]), -len(by_file[rel]), rel))
    totals = Counter(category(f) for f in page.findings)
    families = Counter(f"ASC{f.code[3]}" for f in page.findings)
    codes = sorted({f.code for f in page.findings})
    date = page.date or datetime.date.today().isoformat()
    title = f"NPU migration report: {page.project}"

    cards = "".join(
        f'<div class="total {key}"><b>{totals.get(key, 0)}</b>{escape(name)}<br><span>{escape(hint)}</span></div>'
        for key, name, hint in CATEGORIES)
    fix = ""
    if page.fix_command and totals.get("fixable"):
        fix = f'<div class="fixcmd">Apply the safe rewrites: <code>{escape(page.fix_command)}</code></div>'
    charts = _bar_chart("Findings per family", [(FAMILIES.get(k[3], k), n) for k, n in sorted(families.items())])
    charts += _bar_chart("Files with the most findings", [(rel, len(by_file[rel])) for rel in
                                                          sorted(by_file, key=lambda r: (-len(by_file[r]), r))[:10]])
    family_options = "".join(f'<option value="{k}">{escape(FAMILIES.get(k[3], k))} ({n})</option>'
                             for k, n in sorted(families.items()))
    code_options = "".join(f'<option value="{c}">{c}</option>' for c in codes)
    filters = ('<div class="bar" hidden><select id="family" aria-label="family"><option value="">every family</option>'
               f'{family_options}</select><select id="code" aria-label="code"><option value="">every code</option>'
               f'{code_options}</select><input id="q" type="search" placeholder="search messages, code and paths"'
               ' aria-label="search"></div>')

    cache: Dict[str, List[str]] = {}
    sections = []
    for rel in order:
        found = sorted(by_file[rel], key=lambda f: (f.line, f.col, f.code))
        hunks = diff_hunks(page.diffs.get(rel, ""))
        lines = _source_lines(page.root, rel, cache)
        blocking = _blocking(found)
        count = f"{len(found)} finding{'s' if len(found) != 1 else ''}"
        note = f", {blocking} blocking" if blocking else ""
        sections.append(f'<section class="file"><h2>{escape(rel)} <small>{count}{note}</small></h2>'
                        + "".join(_finding(f, lines, hunks) for f in found) + "</section>")
    if not sections:
        sections.append('<div class="none">No findings.</div>')
    changes = ""
    if page.changes:
        rows = "".join("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in change) + "</tr>"
                       for change in page.changes)
        changes = (f'<section class="file"><h2>Changes made in the migrated copy <small>{len(page.changes)}'
                   '</small></h2><table><tr><th>File</th><th>Line</th><th>Code</th><th>Before</th><th>After</th></tr>'
                   f'{rows}</table></section>')
    findings_count = len(page.findings)
    meta = (f"torch_npu {escape(page.version)} · mode {escape(page.mode)} · {escape(date)} · "
            f"{page.files_analysed} file{'s' if page.files_analysed != 1 else ''} analysed · "
            f"{findings_count} finding{'s' if findings_count != 1 else ''} · flake8-ascend {escape(__version__)}")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
        'script-src \'unsafe-inline\'; img-src data:">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<title>{escape(title)}</title><style>{STYLE}</style></head><body>'
        f'<header><h1>{escape(title)}</h1><p class="meta">{meta}</p><div class="totals">{cards}</div>{fix}'
        f'<div class="charts">{charts}</div></header>{filters}<main>{changes}{"".join(sections)}</main>'
        f'<script>{SCRIPT}</script></body></html>\n'
    )
