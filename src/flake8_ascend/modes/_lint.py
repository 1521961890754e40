"""Lint-style modes: run the rule engine on every file and route findings into CSVs.

Each file is read and parsed once (``ast.parse``), analysed by ``engine.lint``
and filtered with ``engine.unsuppressed`` so ``# noqa`` means the same as in
flake8.  Inputs of ``PARALLEL_MIN_FILES`` files or more are spread over a
process pool.  A finding goes to the report its code's row of ``codes.CODES``
names, so new rules need no edit here or in the CLI.
"""
from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, ClassVar, Dict, Iterator, List, Optional, Sequence, Tuple, Type

from .. import fix, report_page, reports
from ..codes import Report
from ..config import Config
from ..data import load_version
from ..engine import Finding, lint, unsuppressed
from ..files import SourceError
from ..flake8_settings import Selection
from ..pools import process_pool
from . import Job, JobError, Mode
from ..progress import plural
from ..registry import Rule, all_rules, rule_for
from ..sources import deep, parse, read_source

PARALLEL_MIN_FILES = 50


@dataclass(frozen=True)
class Table:
    """One CSV report: its header and how a finding becomes a row."""

    columns: Tuple[str, ...]
    row: Callable[[Finding, Type[Rule]], Sequence[object]]


# -- the per-file work, run in worker processes ---------------------------------------------
_worker_config: Optional[Config] = None
_worker_rules: List[Type[Rule]] = []
_worker_disable_noqa = False
_worker_selection: Optional[Selection] = None


def _init_worker(config: Config, codes: Tuple[str, ...], disable_noqa: bool, selection: Selection) -> None:
    global _worker_config, _worker_rules, _worker_disable_noqa, _worker_selection
    _worker_config = config
    _worker_disable_noqa = disable_noqa
    _worker_selection = selection
    wanted = set(codes)
    _worker_rules = [rule for rule in all_rules() if rule.code in wanted]


def _analyse_file(task: Tuple[str, str]) -> Tuple[str, List[Finding], str, str]:
    """(relative path, findings, "" or why the file was skipped, "" or a note for the log) for one file."""
    path, rel = task
    try:
        source = read_source(Path(path))
        tree = parse(source, path)
    except SourceError as error:
        return rel, [], str(error), ""
    try:
        shown = partial(_worker_selection.selects, path=path)  # what folds into what, as flake8 decides
        findings = deep(lint, tree, source.lines, rel, _worker_config, _worker_rules, (), shown)
    except RecursionError:
        return rel, [], "nested too deeply to analyse", ""
    except Exception as error:  # a rule bug must not cost the whole report; the log names it
        return rel, [], f"internal error in the rule engine, please report it ({type(error).__name__}: {error})", ""
    return rel, unsuppressed(findings, source.lines, _worker_disable_noqa), "", source.note


def analyse_files(job: Job, rules: Sequence[Type[Rule]]) -> Iterator[Tuple[str, List[Finding], str, str]]:
    """Results of every file of the job, in file order, in parallel for large inputs."""
    tasks = [(str(path), job.rel(path)) for path in job.files]
    codes = tuple(rule.code for rule in rules)
    setup = (job.config, codes, job.selection.disable_noqa, job.selection)
    workers = job.args.jobs or os.cpu_count() or 1
    if len(tasks) < PARALLEL_MIN_FILES or workers == 1:
        _init_worker(*setup)
        yield from map(_analyse_file, tasks)
        return
    load_version(job.config.version)  # loaded before the pool starts, so forked workers share it instead of reloading
    chunk = max(1, min(32, len(tasks) // (workers * 8)))
    with process_pool(workers, _init_worker, setup) as pool:
        yield from pool.map(_analyse_file, tasks, chunksize=chunk)


class LintMode(Mode):
    """A mode whose reports are rule findings; subclasses declare ``tables`` (report file -> Table)."""

    tables: ClassVar[Dict[Report, Table]] = {}
    formats = ("csv", "json", "sarif", "html")
    uses_rules = True
    diff_name: ClassVar[str] = ""  # with ``fixes``: the report --fix/--diff write their diff into

    def __init_subclass__(cls, **kwargs) -> None:
        cls.outputs = tuple(report.value for report in cls.tables)
        super().__init_subclass__(**kwargs)

    @classmethod
    def fix_codes(cls) -> List[str]:
        return [rule.code for rule in all_rules() if rule.report in cls.tables and rule.fixable] \
            if cls.fixes else []

    def rules(self, job: Job) -> List[Type[Rule]]:
        """The rules feeding this mode's tables that the flake8 selection leaves on (in some file at least)."""
        return [rule for rule in all_rules() if rule.report in self.tables and job.selection.selects(rule.code)]

    def selected_fix_codes(self, job: Job) -> List[str]:
        """The fixable codes of ``rules(job)``: what --fix rewrites and the report page shows rewrites of."""
        return [rule.code for rule in self.rules(job) if rule.fixable]

    def run(self, job: Job) -> Dict[str, int]:
        rules = self.rules(job)
        fixed: Optional[int] = None
        if job.args.fix and not job.args.diff:  # rewrite first: the reports then show what is left
            fixed = self.apply_fixes(job)
        job.log(f"rules: {', '.join(rule.code for rule in rules) or 'none'}")
        findings: List[Finding] = []
        skipped = 0
        job.progress.start(len(job.files))
        for index, (rel, found, problem, note) in enumerate(analyse_files(job, rules), 1):
            if note:
                job.log(f"{rel}: {note}: read as Latin-1, as flake8 reads it")
            if problem:
                skipped += 1
                job.skip(rel, problem)
            else:
                path = str(job.root / rel)
                found = [f for f in found if job.selection.selects(f.code, path)]
                job.log(f"[{index}/{len(job.files)}] {rel}: {plural(len(found), 'finding')}")
                findings.extend(found)
            job.progress.advance()
        job.progress.finish()
        findings.sort(key=lambda f: (f.path, f.line, f.col, f.code))
        for finding in findings:
            job.statistics[finding.code] = job.statistics.get(finding.code, 0) + 1
        job.log(f"analysed {len(job.files) - skipped} of {plural(len(job.files), 'file')}: "
                f"{plural(len(findings), 'finding')}")
        counts = self.write(job, findings)
        if job.args.diff:
            counts[self.diff_name] = self.apply_fixes(job)
        elif fixed is not None:
            counts[self.diff_name] = fixed
        return counts

    def apply_fixes(self, job: Job) -> int:
        """Apply (--fix) or only show (--diff) the safe rewrites; the diff also goes to ``diff_name``."""
        write = job.args.fix and not job.args.diff
        # rules() keeps this mode's tables, and only a mode that ``fixes`` gets here: these are fix_codes()
        codes = self.selected_fix_codes(job)
        try:
            results, problems = fix.fix_paths(job.files, job.root, job.config, write, codes)
        except fix.UnwritableInput as error:
            raise JobError(str(error)) from None
        for problem in problems:
            job.log(f"fix: skipped {problem}")
        for result in results:
            written = " written" if write and result.changed else ""
            job.log(f"fix: {result.rel}: {plural(result.applied, 'rewrite')}{written}")
            for change in result.changes:
                job.log(f"fix: {result.rel}: {change}")
                if write and not job.args.quiet:
                    sys.stdout.write(f"fixed {result.rel}: {change}\n")
            for reason in result.left:
                job.log(f"fix: {result.rel}: left {reason}")
        diff = "".join(result.diff() for result in results)
        job.output_path(self.diff_name).write_text(diff, encoding="utf-8")
        if job.args.diff:
            sys.stdout.write(diff)
        fixed = sum(result.fixed for result in results if result.changed)  # as the reports count findings
        files = sum(result.changed for result in results)
        if write:
            job.tell(f"fixed {plural(fixed, 'finding')} in {plural(files, 'file')}; the reports show what is left")
        else:
            job.tell(f"--diff: {plural(fixed, 'finding')} in {plural(files, 'file')} would be rewritten by --fix")
        return files

    def write(self, job: Job, findings: List[Finding]) -> Dict[str, int]:
        """The CSVs (always), plus findings.json / findings.sarif / report.html for --format json / sarif / html."""
        by_file: Dict[Report, List[Finding]] = {report: [] for report in self.tables}
        for finding in findings:
            by_file[_rule(finding).report].append(finding)
        counts = {}
        for report, table in self.tables.items():
            counts[report.value] = job.write_csv(report.value, table.columns, _rows(table, by_file[report]))
        if job.args.format == "json":
            job.output_path(reports.JSON_NAME).write_text(reports.to_json(findings, job.root), encoding="utf-8",
                                                          errors="backslashreplace")
            counts[reports.JSON_NAME] = len(findings)
        elif job.args.format == "sarif":
            document = reports.to_sarif(findings, job.root, [_rule(f) for f in findings])
            job.output_path(reports.SARIF_NAME).write_text(document, encoding="utf-8", errors="backslashreplace")
            counts[reports.SARIF_NAME] = len(findings)
        elif job.args.format == "html":
            counts[report_page.PAGE_NAME] = self.write_page(job, findings)
        return counts

    def write_page(self, job: Job, findings: List[Finding]) -> int:
        """report.html: the findings, and for a mode that fixes, the rewrite each fixable one would get."""
        diffs: Dict[str, str] = {}
        command = ""
        if self.fixes:
            codes = self.selected_fix_codes(job)
            fixable = {f.path for f in findings for site in f.with_folded() if site.rewrite and site.code in codes}
            results, _ = fix.fix_paths([job.root / rel for rel in sorted(fixable)], job.root, job.config, False, codes)
            diffs = {result.rel: result.diff() for result in results}
            command = fix_command(self.name, job, codes)
        page = report_page.PageInput(
            project=job.input.name, version=job.config.version, mode=self.name, root=job.root, findings=findings,
            files_analysed=len(job.files) - len(job.skipped), fix_command=command, diffs=diffs)
        job.output_path(report_page.PAGE_NAME).write_text(report_page.render(page), encoding="utf-8",
                                                          errors="backslashreplace")
        return len(findings)


def fix_command(mode: str, job: Job, codes: Sequence[str]) -> str:
    """The command line that applies these rewrites, with -i and -o as the user gave them, shell-quoted."""
    select = sorted({code[:4] for code in codes})
    words = ["ascend-analyse", "-i", job.args.input, "-o", job.args.output, "-m", mode, "--fix"]
    if mode == "torch_apis":
        words += ["--select", ",".join(select)]
    return " ".join(shlex.quote(word) for word in words)


def _rows(table: Table, findings: List[Finding]) -> List[Sequence[object]]:
    """Rows in finding order; configuration advice (``Rule.no_line``) after them, each distinct row once."""
    located: List[Sequence[object]] = []
    unlocated: List[Sequence[object]] = []
    for finding in findings:
        rule = _rule(finding)
        row = table.row(finding, rule)
        if not rule.no_line:
            located.append(row)
        elif row not in unlocated:
            unlocated.append(row)
    return located + unlocated


def _rule(finding: Finding) -> Type[Rule]:
    return rule_for(finding.code)
