"""The ``ascend-analyse -m MODE`` contract; one module per mode, auto-discovered.

To add a mode, drop a module into this package that defines a ``Mode``
subclass with a ``name``; nothing else needs editing.  The CLI owns argument
parsing and validation, the temporary output folder and its atomic rename,
the run log (``pytorch_analysis.txt``) and the summary table.  A mode only
reads ``job`` and writes its files into ``job.out_dir``::

    class Recompile(Mode):
        name = "recompile_log"
        help = "find graph recompilations in a torch_npu log"
        outputs = ("recompile.csv",)

        @classmethod
        def add_arguments(cls, group):            # optional: mode-specific flags
            group.add_argument("--threshold", type=int, default=8)

        def run(self, job):
            rows = ...                            # use job.files, job.config, job.args
            return {"recompile.csv": job.write_csv("recompile.csv", HEADER, rows)}

Lint-style modes (findings of the rule engine routed into CSVs by each rule's
``csv`` attribute) subclass ``LintMode`` from ``flake8_ascend.modes._lint`` and
only declare their ``tables``.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from ..config import Config
from ..discovery import import_submodules
from ..files import relative
from ..flake8_settings import Selection
from ..progress import Progress
from ..reports import write_csv


class JobError(Exception):
    """An input problem a mode found; the CLI prints the one-line message and exits 2."""


@dataclass
class Job:
    """Everything a mode needs for one run."""

    input: Path  # the -i path, resolved (a folder or one file)
    root: Path  # folder that report paths are relative to (the input, or a file's folder)
    files: List[Path]  # the .py files under the input, sorted by relative path
    out_dir: Path  # the temporary analysis folder; renamed to OUT/<name>_analysis on success
    config: Config  # torch_npu version and -api third-party APIs
    args: argparse.Namespace  # every parsed flag, including the modes' own
    log: Callable[[str], None]  # append one line to pytorch_analysis.txt
    progress: Progress  # start(total) / advance() / finish() on the terminal
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # (relative path, why), via skip()
    statistics: Dict[str, int] = field(default_factory=dict)  # findings per code, filled by rule-based modes
    # which codes flake8 reports in which file (select/ignore/per-file-ignores of the flake8 configuration)
    selection: Selection = field(default_factory=Selection.defaults)
    target: Optional[Path] = None  # OUT/<name>_analysis: what out_dir becomes once the run succeeded
    notes: List[str] = field(default_factory=list)  # next steps and warnings, via tell(): shown after the summary

    def skip(self, rel: str, reason: str) -> None:
        """Record and log a file or folder left out of the analysis; the run goes on."""
        self.skipped.append((rel, reason))
        self.log(f"skipped {rel}: {reason}")

    def tell(self, line: str) -> None:
        """Log a next step or a warning that the user must read; the CLI also prints it after the summary."""
        self.notes.append(line)
        self.log(line)

    def rel(self, path: Path) -> str:
        """``path`` relative to ``root`` with ``/`` separators, as reports show it."""
        return relative(path, self.root)

    def output_path(self, relative: str) -> Path:
        """A path inside ``out_dir``; refuses anything that would land outside it."""
        target = (self.out_dir / relative).resolve()
        if target != self.out_dir.resolve() and self.out_dir.resolve() not in target.parents:
            raise JobError(f"refusing to write outside the analysis folder: {relative}")
        return target

    def write_csv(self, name: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> int:
        """Write one report into the analysis folder (``reports.write_csv``); returns the number of data rows."""
        path = self.output_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_csv(path, header, rows)


def whole_number(text: str) -> int:
    """An argparse type: 0, 1, 2..."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a number (0 or more), got {text!r}")
    return int(text)


def positive_number(text: str) -> int:
    """An argparse type: 1, 2..."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return int(text)


class Mode:
    """One ``-m`` mode.  Subclasses with a ``name`` register themselves."""

    name: ClassVar[str] = ""  # the -m value
    help: ClassVar[str] = ""  # one line for ascend-analyse -h
    outputs: ClassVar[Tuple[str, ...]] = ()  # the files it writes besides pytorch_analysis.txt
    formats: ClassVar[Tuple[str, ...]] = ("csv",)  # --format values it supports
    uses_rules: ClassVar[bool] = False  # whether --select/--ignore apply (its reports are rule findings)
    # advisory codes the mode is about, reported as if named in --extend-select (unless --select narrows the run)
    enables: ClassVar[Tuple[str, ...]] = ()
    fixes: ClassVar[bool] = False  # whether --fix/--diff make sense (the first such mode is their default)
    reads_python: ClassVar[bool] = True  # whether -i is Python source (a .py file or a folder of them)

    _registry: ClassVar[Dict[str, Type["Mode"]]] = {}

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            if cls.name in Mode._registry and Mode._registry[cls.name] is not cls:
                raise ValueError(f"duplicate mode {cls.name}")
            Mode._registry[cls.name] = cls

    @classmethod
    def add_arguments(cls, group: argparse._ArgumentGroup) -> None:
        """Add this mode's own flags (optional); they are shown under the mode's heading in -h."""

    @classmethod
    def fix_codes(cls) -> List[str]:
        """The codes whose findings ``--fix`` rewrites in this mode."""
        return []

    @classmethod
    def report_name(cls, source: Path, args: argparse.Namespace) -> Optional[str]:
        """The report folder's name when ``<input name>_analysis`` says too little (it must end in ``_analysis``)."""
        return None

    def run(self, job: Job) -> Dict[str, int]:  # pragma: no cover - abstract
        """Write the reports into ``job.out_dir``; return {file name: data row count} for the summary
        (a name ending in ``/`` is a copied tree and counts files: --fail-on-findings ignores it)."""
        raise NotImplementedError


def all_modes() -> Dict[str, Type[Mode]]:
    """Every mode provided by a module of this package, by name (sorted)."""
    import_submodules(__name__)
    return {name: Mode._registry[name] for name in sorted(Mode._registry)}
