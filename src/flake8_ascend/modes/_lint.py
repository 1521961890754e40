"""Lint-style modes: run the rule engine on every file and route findings into CSVs.

Each file is read and parsed once (``ast.parse``), analysed by ``engine.analyze``
and filtered with ``engine.unsuppressed`` so ``# noqa`` means the same as in
flake8.  Inputs of ``PARALLEL_MIN_FILES`` files or more are spread over a
process pool.  A finding goes to the report named by its rule's ``csv``
attribute, so new rules need no edit here or in the CLI.
"""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Dict, Iterator, List, Optional, Sequence, Tuple, Type

from .. import fix, reports
from ..config import Config
from ..data import load_version
from ..engine import Finding, analyze, unsuppressed
from ..files import SourceError, read_source
from ..pools import process_pool
from . import Job, Mode, plural
from ..registry import Rule, all_rules, rule_for

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


def _init_worker(config: Config, codes: Tuple[str, ...], disable_noqa: bool) -> None:
    global _worker_config, _worker_rules, _worker_disable_noqa
    _worker_config = config
    _worker_disable_noqa = disable_noqa
    wanted = set(codes)
    _worker_rules = [rule for rule in all_rules() if rule.code in wanted]


def _analyse_file(task: Tuple[str, str]) -> Tuple[str, List[Finding], str]:
    """(relative path, findings, "" or why the file was skipped) for one file."""
    path, rel = task
    try:
        source = read_source(Path(path))
        tree = ast.parse(source, filename=path)
    except SourceError as error:
        return rel, [], str(error)
    except SyntaxError as error:
        return rel, [], f"syntax error at line {error.lineno}: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:  # null bytes, absurd nesting
        return rel, [], f"cannot parse ({type(error).__name__}: {error})"
    lines = source.splitlines(keepends=True)
    try:
        findings = analyze(tree, lines, rel, _worker_config, _worker_rules)
    except RecursionError:
        return rel, [], "nested too deeply to analyse"
    except Exception as error:  # a rule bug must not cost the whole report; the log names it
        return rel, [], f"internal error in the rule engine, please report it ({type(error).__name__}: {error})"
    return rel, unsuppressed(findings, lines, _worker_disable_noqa), ""


def analyse_files(job: Job, rules: Sequence[Type[Rule]]) -> Iterator[Tuple[str, List[Finding], str]]:
    """Results of every file of the job, in file order, in parallel for large inputs."""
    tasks = [(str(path), job.rel(path)) for path in job.files]
    codes = tuple(rule.code for rule in rules)
    setup = (job.config, codes, job.selection.disable_noqa)
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
    """A mode whose reports are rule findings; subclasses declare ``tables`` (file name -> Table)."""

    tables: ClassVar[Dict[str, Table]] = {}
    formats = ("csv", "json", "sarif")
    uses_rules = True
    diff_name: ClassVar[str] = ""  # with ``fixes``: the report --fix/--diff write their diff into

    def __init_subclass__(cls, **kwargs) -> None:
        cls.outputs = tuple(cls.tables)
        super().__init_subclass__(**kwargs)

    @classmethod
    def fix_codes(cls) -> List[str]:
        return [rule.code for rule in all_rules() if rule.csv in cls.tables and rule.code in fix.FIX_CODES] \
            if cls.fixes else []

    def rules(self, job: Job) -> List[Type[Rule]]:
        """The rules feeding this mode's tables that the flake8 selection leaves on (in some file at least)."""
        return [rule for rule in all_rules() if rule.csv in self.tables and job.selection.selects(rule.code)]

    def run(self, job: Job) -> Dict[str, int]:
        rules = self.rules(job)
        fixed: Optional[int] = None
        if job.args.fix and not job.args.diff:  # rewrite first: the reports then show what is left
            fixed = self.apply_fixes(job)
        job.log(f"rules: {', '.join(rule.code for rule in rules) or 'none'}")
        findings: List[Finding] = []
        skipped = 0
        job.progress.start(len(job.files))
        for index, (rel, found, problem) in enumerate(analyse_files(job, rules), 1):
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
        codes = [rule.code for rule in self.rules(job) if rule.code in fix.FIX_CODES]
        results, problems = fix.fix_paths(job.files, job.root, job.config, write, codes)
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
        applied = sum(result.applied for result in results if result.changed)
        files = sum(result.changed for result in results)
        if write:
            job.tell(f"fixed {plural(applied, 'finding')} in {plural(files, 'file')}; the reports show what is left")
        else:
            job.tell(f"--diff: {plural(applied, 'finding')} in {plural(files, 'file')} would be rewritten by --fix")
        return files

    def write(self, job: Job, findings: List[Finding]) -> Dict[str, int]:
        """The CSVs (always), plus findings.json / findings.sarif for --format json / sarif."""
        by_file: Dict[str, List[Finding]] = {name: [] for name in self.tables}
        for finding in findings:
            by_file[_rule(finding).csv].append(finding)
        counts = {}
        for name, table in self.tables.items():
            counts[name] = job.write_csv(name, table.columns, _rows(table, by_file[name]))
        if job.args.format == "json":
            job.output_path(reports.JSON_NAME).write_text(reports.to_json(findings, job.root), encoding="utf-8",
                                                          errors="backslashreplace")
            counts[reports.JSON_NAME] = len(findings)
        elif job.args.format == "sarif":
            document = reports.to_sarif(findings, job.root, [_rule(f) for f in findings])
            job.output_path(reports.SARIF_NAME).write_text(document, encoding="utf-8", errors="backslashreplace")
            counts[reports.SARIF_NAME] = len(findings)
        return counts


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
