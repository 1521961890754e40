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


import json
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

from ..files import report_folders
from ..modes import Job
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
    job.log(f"instrumented copy: {result.copied} files copied, {PACKAGE}/ added; detector: "
            f"{PACKAGE}.{detector.module}.{detector.name}; settings: {json.dumps(settings, sort_keys=True)}")
    for rel, reason in result.skipped:
        job.log(f"{rel}: {reason}")
    for loop in result.wrapped:
        job.log(f"wrapped data loop: {loop.path}:{loop.line}: {loop.header}")
    for rel in result.manual:
        job.log(f"no data loop could be wrapped in {rel}, whose loop runs a training step: wrap your training loop "
                "by hand, e.g. `for batch in DETECTOR.start(train_loader):` (DETECTOR is imported)")
    for rel in result.shifted:
        job.log(f"{rel}: the detector import needed a line of its own, so report lines there are one more "
                "than in the original")
    if not result.importing:
        job.log(f"no training script found (no loop running `.backward(` and an optimizer step, no data loop): add "
                f"`{detector.import_line}` and wrap your data loop by hand")
    if result.package:
        job.log(f"{job.input.name} is a package: the copy keeps it as {result.package}/ so that its imports resolve")
    for rel in scripts[:MAX_RUN_LINES]:
        job.log(f"to run {rel} instrumented: {run_command(job.out_dir, job.target, rel)}")
    if len(scripts) > MAX_RUN_LINES:
        job.log(f"... and {len(scripts) - MAX_RUN_LINES} more files with wrapped loops")
    stem = detector.report[:-len(".csv")]
    report = f"{stem}_<script>.csv (one per script run: {stem}_train.csv for train.py, {stem}_yolov5.train.csv " \
        "for python -m yolov5.train)" if len(scripts) > 1 else detector.report
    job.log(f"next: run the training script of the copy for a few iterations; {report} appears in the copy's root "
            "(one per rank in multi-process runs); it is rewritten as recording goes on and on SIGTERM")
    return result
