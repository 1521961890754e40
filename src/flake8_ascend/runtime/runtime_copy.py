"""Instrumented copies for the runtime detectors (``-m dynamic_shape``, ``-m overflow``, ``-m runtime_ops``).

The copy is made by the dynamic-shape injector (``inject.instrument_tree``):
same files, data loops wrapped in ``DETECTOR.start(...)``, the hook package
beside them.  For the other detectors the import it adds (or finds) names the
chosen detector, on the same line, so line numbers stay those of the original::

    from msft_dynamic_analysis.overflow import OVERFLOW as DETECTOR

and the mode's settings go to ``msft_dynamic_analysis/settings.json`` (the
detector reads them at run time; environment variables override them).
"""
from __future__ import annotations


import ast
import json
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Protocol

from ..detect.training import is_main_guard
from ..files import SourceError, report_folders
from ..progress import plural
from ..sources import read_source
from .inject import PACKAGE, REPORT_NAME, Injection, instrument_tree


@dataclass(frozen=True)
class Detector:
    module: str  # msft_dynamic_analysis.<module>
    name: str  # the detector object in it
    report: str  # the CSV it writes at the copy's root
    section: str  # its section of settings.json

    @property
    def import_line(self) -> str:
        alias = "" if self.name == "DETECTOR" else " as DETECTOR"
        return f"from {PACKAGE}.{self.module} import {self.name}{alias}"


class Job(Protocol):
    """What a copy needs of the mode's job (``modes.Job`` has it): runtime/ sits below the modes."""

    input: Path  # the -i path (a folder or one file)
    out_dir: Path  # where the copy is written
    target: Optional[Path]  # what out_dir is renamed to once the run succeeded

    log: Callable[[str], None]  # append one line to the run log


MAX_RUN_LINES = 8  # "to run ..." lines in the log
SHAPES = Detector("hook", "DETECTOR", REPORT_NAME, "dynamic_shape")  # what the injector imports itself


def excluded(job: Job) -> List[Path]:
    """Folders of the input the copy must not enter: the reports and temporary folders of ``-o`` (the same
    ones the lint part leaves out), when ``-o`` lies inside the input or is the input."""
    return report_folders(job.out_dir.parent) if job.input.is_dir() else []


def run_command(copy: Path, shown: Path, rel: str) -> str:
    """How to run the script ``rel`` of ``copy`` (which will lie at ``shown``) so that the copy's own modules are
    imported, not an installed original: ``python -m yolov5.train`` from the folder above the package,
    ``python tools/train.py`` for a plain script.  Names come from the input, so every word is shell-quoted."""
    parts = rel.split("/")
    folders = len(parts) - 1
    top = folders
    while top > 0 and (copy.joinpath(*parts[:top]) / "__init__.py").is_file():
        top -= 1
    if top == folders:
        script = "./" + rel if rel.startswith("-") else rel  # never read as an option of python
        return f"cd {shlex.quote(str(shown))} && python {shlex.quote(script)}"
    module = ".".join([*parts[top:folders], parts[-1][:-len(".py")]])
    return f"cd {shlex.quote(str(shown.joinpath(*parts[:top])))} && python -m {shlex.quote(module)}"


def _module(rel: str) -> str:
    """``pkg/train.py`` -> ``pkg.train``."""
    return rel[:-len(".py")].replace("/", ".")


def entry_scripts(copy: Path, rels: Iterable[str]) -> Dict[str, List[str]]:
    """{script: the modules it imports} for each file of ``rels`` in ``copy`` that has a module-level
    ``if __name__ == '__main__':`` block: the files a user can start."""
    entries = {}
    for rel in rels:
        try:
            text = read_source(copy / rel).text
            tree = ast.parse(text) if "__main__" in text else None
        except (SourceError, SyntaxError, ValueError, RecursionError):
            continue
        if tree is not None and any(is_main_guard(stmt) for stmt in tree.body):
            imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):  # the module, and each name as a possible submodule
                    prefix = f"{node.module}." if node.module else ""
                    imported += [*([node.module] if node.module else []),
                                 *(prefix + alias.name for alias in node.names)]
            entries[rel] = imported
    return entries


def _starters(rel: str, entries: Dict[str, List[str]]) -> List[str]:
    """The entry scripts that start ``rel``: itself when it is one, else those importing its module."""
    if rel in entries:
        return [rel]
    module = _module(rel)
    return [entry for entry, imported in entries.items()
            if any(name == module or name.endswith("." + module) or module.endswith("." + name)
                   for name in imported)]


def make_copy(job: Job, detector: Detector, settings: Dict[str, object], extra: Dict[str, Path] = None) -> Injection:
    """The instrumented copy of ``job.input`` in ``job.out_dir`` for ``detector``; logs what it did."""
    result = instrument_tree(job.input, job.out_dir, exclude=excluded(job), import_line=detector.import_line)
    package = job.out_dir / PACKAGE
    scripts = sorted({loop.path for loop in result.wrapped} | set(result.manual))
    if len(scripts) > 1:  # each script run writes its own report, never over another's
        settings = {**settings, "per_script": True}
    if settings:
        (package / "settings.json").write_text(
            json.dumps({detector.section: settings}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for name, source in (extra or {}).items():
        shutil.copyfile(source, package / name)
    job.log(f"instrumented copy: {plural(result.copied, 'file')} copied, {PACKAGE}/ added; detector: "
            f"{PACKAGE}.{detector.module}.{detector.name}; settings: {json.dumps(settings, sort_keys=True)}")
    for rel, reason in result.skipped:
        job.log(f"{rel}: {reason}")
    for loop in result.wrapped:
        job.log(f"wrapped data loop: {loop.path}:{loop.line}: {loop.header}")
    for rel in result.manual:
        job.tell(f"no data loop could be wrapped in {rel}, whose loop runs a training step: wrap your training loop "
                 "by hand, e.g. `for batch in DETECTOR.start(train_loader):` (DETECTOR is imported)")
    for rel in result.shifted:
        job.log(f"{rel}: the detector import needed a line of its own, so report lines there are one more "
                "than in the original")
    if not result.importing:
        job.tell(f"no training script found (no loop running `.backward(` and an optimizer step, no data loop): add "
                f"`{detector.import_line}` and wrap your data loop by hand")
    if result.package:
        job.log(f"{job.input.name} is a package: the copy keeps it as {result.package}/ so that its imports resolve")
    copied = sorted(path.relative_to(job.out_dir).as_posix() for path in job.out_dir.rglob("*.py")
                    if path.parts[len(job.out_dir.parts)] != PACKAGE)
    entries = entry_scripts(job.out_dir, copied)
    runs: List[str] = []
    for rel in scripts:
        starters = _starters(rel, entries)
        if not starters:
            job.tell(f"{rel} has wrapped loops but no `if __name__ == '__main__':` block and no entry script of the "
                     "copy imports it: start training the way you usually do, from the copy")
        runs += [entry for entry in starters if entry not in runs]
    for rel in runs[:MAX_RUN_LINES]:
        job.tell(f"to run {rel} instrumented: {run_command(job.out_dir, job.target, rel)}")
    if len(runs) > MAX_RUN_LINES:
        job.tell(f"... and {len(runs) - MAX_RUN_LINES} more entry scripts")
    if result.importing:
        stem = detector.report[:-len(".csv")]
        report = f"{stem}_<script>.csv (one per script run: {stem}_train.csv for train.py, " \
            f"{stem}_yolov5.train.csv for python -m yolov5.train)" if len(scripts) > 1 else detector.report
        job.tell(f"next: run the training script of the copy for a few iterations; {report} appears in the copy's "
                 "root (one per rank in multi-process runs); it is rewritten as recording goes on and on SIGTERM")
    return result
