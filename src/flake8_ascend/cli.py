"""``ascend-analyse``: the PyTorch Analyse command line on the flake8-ascend rule engine.

The CLI parses and checks the arguments, builds a ``modes.Job``, lets the
selected mode write its reports into a temporary folder beside the target,
then swaps that folder in as ``OUT/<name>_analysis`` so an interrupted run
never leaves a half-written report.  Usage and input errors print one line and
exit 2; a report that cannot be written exits 3; SIGINT/SIGTERM exit 130/143
with the temporary folder removed; one left by a run that was killed outright (SIGKILL, a native crash) is
removed by the next run into the same folder (docs/security.md).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import textwrap
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, TextIO, Tuple

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from . import __version__
from .config import ConfigError, make_config
from .data import UnknownVersionError, resolve_version
from .files import MAX_FILE_BYTES, SourceError, collect, read_regular, report_folders
from .flake8_settings import read_settings
from .modes import Job, JobError, all_modes, positive_number
from .progress import plural
from .codes import OPTIONAL_CODES
from .progress import Progress
from .registry import all_rules, rule_for

PROG = "ascend-analyse"
OFFICIAL_MODES = ("torch_apis", "third_party", "affinity_apis", "dynamic_shape")
LOG_NAME = "pytorch_analysis.txt"
_CODE_PREFIX = re.compile(r"ASC\d{0,3}")


class UsageError(Exception):
    """Bad arguments or input; printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + message
        if message.startswith("argument -v/--version: expected one argument"):
            raise UsageError(f"-v/--version takes the torch_npu version to check against (e.g. -v 2.6.0); "
                             f"the version of {PROG} itself: --tool-version")
        raise UsageError(f"{message} (see {PROG} -h)")


def _code_prefixes(text: str) -> List[str]:
    prefixes = [part.strip().upper() for part in text.split(",") if part.strip()]
    for prefix in prefixes:
        if not _CODE_PREFIX.fullmatch(prefix):
            raise argparse.ArgumentTypeError(f"not an ASC code prefix: {prefix!r}")
    return prefixes


def _mode_lines(modes: Dict[str, type]) -> str:
    lines = []
    for name in sorted(set(OFFICIAL_MODES) | set(modes)):
        mode = modes.get(name)
        text = f"{mode.help}; writes {', '.join(mode.outputs + (LOG_NAME,))}" if mode else "(not available yet)"
        lines.append(textwrap.fill(text, 96, initial_indent=f"  {name:<15} ", subsequent_indent=" " * 18))
    return "\n".join(lines)


EPILOG = """\
modes:
{modes}

output:
  Reports go to OUTPUT/<input name>_analysis/ (for a single file, <file stem>_analysis; OUTPUT
  is created when missing). Each mode replaces only its own files there: the folder is built in a
  hidden temporary folder beside it, with the other modes' files linked in, and renamed into
  place at the end. The official CSV files and {log} (the run log, one section per
  mode) are always written; --format json adds findings.json and --format sarif adds
  findings.sarif (SARIF 2.1.0, for GitHub code scanning; their paths are relative to the current
  directory when the input lies in it, so run from the repository root); --format html adds
  report.html, one self-contained page (torch_apis, affinity_apis, migrate). What to do next is
  printed after the summary.

exit status:
  0    the report was written (with or without findings)
  1    with --fail-on-findings: the report was written and holds findings
  2    usage or input error (nothing is written; an OUTPUT the run created is removed)
  3    the report could not be written (full disk, permissions); nothing in OUTPUT changed
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM; nothing in OUTPUT changed
"""


def build_parser(modes: Dict[str, type]) -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Find what must change to move PyTorch code from NVIDIA GPUs to Ascend NPUs (torch_npu), "
        "and write the reports of Huawei's PyTorch Analyse tool.",
        epilog=EPILOG.format(modes=_mode_lines(modes), log=LOG_NAME),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    official = parser.add_argument_group("official PyTorch Analyse options")
    official.add_argument("-i", "--input", metavar="INPUT", help="folder (or single .py file) to analyse")
    official.add_argument("-o", "--output", metavar="OUTPUT", help="existing folder to write the report folder into")
    official.add_argument("-v", "--version", metavar="VERSION", dest="torch_version",
                          help="torch_npu version whose support data is used (e.g. 2.6.0; default: "
                          "[tool.flake8-ascend] torch-version in the project's pyproject.toml, else the newest)")
    official.add_argument("-m", "--mode", default=None,
                          help="analysis mode (default: torch_apis, or affinity_apis with --fix/--diff; see below)")
    official.add_argument("-env", "--env-path", nargs="+", default=[], metavar="PATH",
                          help="extra source folders (site-packages) for third_party analysis")
    official.add_argument("-api", "--api-files", nargs="+", default=[], metavar="CSV",
                          help="full_unsupported_results.csv files of third_party runs; calls of the APIs they "
                          "list are reported (ASC104)")
    extra = parser.add_argument_group("beyond the official tool")
    extra.add_argument("--format", choices=("csv", "json", "sarif", "html"), default="csv",
                       help="also write findings.json or findings.sarif (the CSVs are always written)")
    extra.add_argument("--select", type=_code_prefixes, action="extend", default=[], metavar="CODES",
                       help="only these code prefixes, comma-separated (e.g. ASC1,ASC203); the advisory codes "
                       f"({', '.join(sorted(OPTIONAL_CODES))}) only when named in full")
    extra.add_argument("--extend-select", type=_code_prefixes, action="extend", default=[], metavar="CODES",
                       help="add these code prefixes to the selection (flake8's --extend-select)")
    extra.add_argument("--ignore", type=_code_prefixes, action="extend", default=[], metavar="CODES",
                       help="leave out these code prefixes, comma-separated (flake8's --extend-ignore: "
                       "the default-off codes stay off)")
    extra.add_argument("--per-file-ignores", default=None, metavar="PAIRS",
                       help="flake8's per-file-ignores, e.g. 'train_gpu.py:ASC5 tests/*:ASC2' "
                       "(relative paths: from the current directory)")
    extra.add_argument("--official-lists", action="store_true",
                       help="ASC101-103 as the official support lists say, also entries the version's "
                       "kernels show to be stale (default: the kernel evidence decides)")
    extra.add_argument("--lint-tests", action="store_true",
                       help="report in test code too (tests/ folders, test_*.py, *_test.py, conftest.py, and elsewhere "
                       "a module-level test_* nothing calls or a unittest.TestCase; default: test code is left out)")
    extra.add_argument("--fail-on-findings", action="store_true", help="exit 1 when any report has rows (for CI)")
    extra.add_argument("-j", "--jobs", type=positive_number, default=None, metavar="N",
                       help="worker processes (default: all cores)")
    extra.add_argument("--fix", action="store_true",
                       help="rewrite in place the findings that carry a safe rewrite (their message says "
                       "'rewrites it'): plain --fix the affinity ones (ASC303/ASC304, -m affinity_apis), "
                       "--fix --select ASC2 the CUDA ones (ASC201/202/204/207, -m torch_apis); the reports then "
                       "show what is left")
    extra.add_argument("--diff", action="store_true",
                       help="print the unified diff --fix would apply, without changing any file")
    extra.add_argument("-q", "--quiet", action="store_true",
                       help="no progress display, summary table or next steps (errors, warnings and --statistics "
                       "are still printed)")
    extra.add_argument("--explain", metavar="CODE", help="print the documentation of an ASC code and exit")
    extra.add_argument("--list-codes", action="store_true", help="print every ASC code with its summary and exit")
    extra.add_argument("--statistics", action="store_true",
                       help="after the summary, print how many findings each code has (like flake8 --statistics)")
    extra.add_argument("--tool-version", action="version", version=f"{PROG} {__version__}",
                       help=f"print the version of {PROG} and exit (-v/--version is the torch_npu version)")
    for name, mode in modes.items():
        mode.add_arguments(parser.add_argument_group(f"{name} mode options"))
    return parser


# -- --explain / --list-codes ---------------------------------------------------------------
def explain(code: str) -> str:
    try:
        rule = rule_for(code.strip().upper())
    except KeyError:
        raise UsageError(f"unknown code {code!r} (see {PROG} --list-codes)") from None
    state = f"off by default (enable with --extend-select {rule.code})" if rule.default_off else "on by default"
    sections = rule.explanation()
    if rule.fixable:
        sections.insert(3, ("Automatic fix", fix_story(rule.code)))
    body = "\n\n".join(f"{title}:\n  " + text.replace("\n", "\n  ") for title, text in sections)
    return f"{rule.code}: {rule.summary}\nReport: {rule.report.value}; {state}\n\n{body}\n"


def fix_story(code: str) -> str:
    """What --fix does for ``code``: the same words in --explain, docs/rules.md and the findings' messages."""
    fixers = [mode for mode in all_modes().values() if mode.fixes]  # the first is plain --fix's mode
    modes = "; ".join(f"`-m {mode.name} --fix` rewrites {', '.join(mode.fix_codes())}" for mode in fixers)
    return (f"`{PROG} --fix --select {code}` rewrites in place the findings whose message says \"rewrites it\" "
            f"(`--diff` shows the rewrite first, changing nothing). {modes}; plain `--fix` is "
            f"`-m {fixers[0].name} --fix`.")


def list_codes() -> str:
    rules = all_rules()
    width = max(len(rule.report.value) for rule in rules)
    lines = [f"{'code':<7} {'report':<{width}}  summary"]
    for rule in rules:
        note = " (off by default)" if rule.default_off else ""
        note += f" (has a fix: --fix --select {rule.code})" if rule.fixable else ""
        lines.append(f"{rule.code:<7} {rule.report.value:<{width}}  {rule.summary}{note}")
    return "\n".join(lines) + "\n"


# -- validation -------------------------------------------------------------------------------
def _choose_mode(name: Optional[str], modes: Dict[str, type], fixing: bool = False, select: Sequence[str] = ()) -> type:
    """-m, else with --fix/--diff the first mode that fixes a selected code (affinity_apis unless --select)."""
    if name is None:
        fixers = [mode for mode in modes.values() if mode.fixes] if fixing else []
        chosen = [mode for mode in fixers if select and any(c.startswith(tuple(select)) for c in mode.fix_codes())]
        name = (chosen or fixers)[0].name if fixers else "torch_apis"
    if name in modes:
        return modes[name]
    if name in OFFICIAL_MODES:
        raise UsageError(f"mode {name} is not available yet in this version of {PROG}")
    raise UsageError(f"unknown mode {name!r}; choose from {', '.join(sorted(set(OFFICIAL_MODES) | set(modes)))}")


def _check_args(args: argparse.Namespace, mode: type) -> Tuple[Path, Path]:
    """(resolved input, resolved output folder); raises UsageError."""
    if not args.input:
        raise UsageError(f"the following argument is required: -i/--input (see {PROG} -h)")
    if not args.output:
        raise UsageError(f"the following argument is required: -o/--output (see {PROG} -h)")
    source = Path(args.input)
    if not source.exists():
        raise UsageError(f"input not found: {args.input}")
    if not (source.is_dir() or source.is_file()):
        raise UsageError(f"input is neither a folder nor a file: {args.input}")
    if mode.reads_python and source.is_file() and source.suffix != ".py":
        raise UsageError(f"input is not a Python file (.py): {args.input}; give a .py file or a folder")
    if args.torch_version:  # the command line is trusted: the message may quote the value
        try:
            resolve_version(args.torch_version)
        except UnknownVersionError as error:
            raise UsageError(str(error).replace("(not a version number)", repr(args.torch_version))) from None
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise UsageError(f"output is not a folder: {args.output}")
    existing = next(folder for folder in (out.absolute(), *out.absolute().parents) if folder.exists())
    if not existing.is_dir():
        raise UsageError(f"output cannot be created: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"output folder is not writable: {existing if existing != out.absolute() else args.output}")
    for path in args.env_path:
        if not Path(path).is_dir():
            raise UsageError(f"-env folder not found: {path}")
    if args.format not in mode.formats:
        raise UsageError(f"mode {mode.name} writes no {args.format} output (it supports {', '.join(mode.formats)})")
    if (args.select or args.extend_select or args.ignore or args.per_file_ignores is not None) and not mode.uses_rules:
        raise UsageError(f"--select/--extend-select/--ignore/--per-file-ignores do not apply to mode {mode.name}")
    codes = [rule.code for rule in all_rules()]
    unknown = [p for p in args.select + args.extend_select if not any(code.startswith(p) for code in codes)]
    if unknown:
        raise UsageError(f"no ASC code starts with {', '.join(unknown)} (see {PROG} --list-codes)")
    if args.statistics and not mode.uses_rules:
        raise UsageError(f"--statistics does not apply to mode {mode.name}")
    if (args.fix or args.diff) and not mode.fixes:
        raise UsageError(f"--fix/--diff do not apply to mode {mode.name}")
    return source.resolve(), out.resolve()


def _make_output(out_dir: Path) -> Optional[Path]:
    """Create ``out_dir`` (and missing parents) when it does not exist; the topmost folder created, else None."""
    missing = [folder for folder in (out_dir, *out_dir.parents) if not folder.exists()]
    if not missing:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    return missing[-1]


def report_name(source: Path) -> str:
    """``<basename of -i>_analysis``; a single file uses its stem."""
    base = source.stem if source.is_file() else source.name
    return f"{base or 'root'}_analysis"


# -- the run ----------------------------------------------------------------------------------
class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; a BaseException so that ``except Exception`` in libraries lets it through."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class OutputError(Exception):
    """The report could not be written (full disk, permissions); one line, exit status 3."""


@contextmanager
def _signals_raise() -> Iterator[List[int]]:
    """SIGINT and SIGTERM raise ``Interrupted`` while the run lasts, and are remembered in the yielded list,
    so that code which swallows exceptions (jedi) cannot turn an interrupted run into a partial report."""
    received: List[int] = []

    def handler(signum, frame):
        received.append(signum)
        raise Interrupted(signum)

    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous_hook = sys.unraisablehook

    def unraisable(info):
        if not isinstance(info.exc_value, Interrupted):  # raised inside a __del__: already in ``received``
            previous_hook(info)

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    sys.unraisablehook = unraisable
    try:
        yield received
    finally:
        sys.unraisablehook = previous_hook
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` itself (no lock file is left behind), so runs into one -o swap in turn."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


_RUN_START = re.compile(rf"^{re.escape(PROG)} \S+ started ", re.MULTILINE)
_RUN_MODE = re.compile(r"^mode: (\S+?);", re.MULTILINE)
_RUN_FILES = "report files: "  # the log line naming a run's top-level entries of the report folder (JSON list)


def _runs(log_text: str) -> List[Tuple[str, List[str], str]]:
    """(mode, report files, text) of each run recorded in a report folder's log, oldest first."""
    starts = [match.start() for match in _RUN_START.finditer(log_text)]
    runs = []
    for begin, end in zip(starts, [*starts[1:], len(log_text)]):
        text = log_text[begin:end]
        mode = _RUN_MODE.search(text)
        files = next((line[len(_RUN_FILES):] for line in text.splitlines() if line.startswith(_RUN_FILES)), "[]")
        try:
            names = [name for name in json.loads(files) if isinstance(name, str)]
        except ValueError:
            names = []
        runs.append((mode.group(1) if mode else "", names, text))
    return runs


def _link_tree(source: Path, destination: Path) -> None:
    """``source`` (a file, folder or symlink) at ``destination``, hard-linked where possible: nothing is copied
    twice and the previous report stays intact until the swap."""
    if source.is_symlink():
        os.symlink(os.readlink(source), destination)
    elif source.is_dir():
        shutil.copytree(source, destination, symlinks=True, copy_function=_link_or_copy)
    else:
        _link_or_copy(source, destination)


def _link_or_copy(source, destination) -> None:
    try:
        os.link(source, destination)
    except OSError:  # a file system without hard links
        shutil.copy2(source, destination)


def _keep_other_modes(old: Path, new: Path, mode: str) -> None:
    """Bring the reports of other modes from the previous report folder ``old`` into ``new``, with their runs'
    sections of the log before this run's: each mode replaces only its own files (the newest run that wrote a
    name owns it)."""
    try:
        runs = _runs(read_regular(old / LOG_NAME).decode("utf-8", "replace"))
    except (OSError, SourceError):  # no log (an older layout): nothing to keep, as before
        return
    owner = {name: index for index, (_, names, _) in enumerate(runs) for name in names}
    written = {entry.name for entry in new.iterdir()}
    kept = []
    for index, (run_mode, names, text) in enumerate(runs):
        mine = [name for name in names if owner[name] == index and name not in written and "/" not in name
                and name not in (os.curdir, os.pardir) and os.path.lexists(old / name)]
        if run_mode == mode or not mine:
            continue
        for name in mine:
            _link_tree(old / name, new / name)
        kept.append(text)
    if kept:
        log = new / LOG_NAME
        log.write_text("".join(kept) + log.read_text(encoding="utf-8"), encoding="utf-8")


def _replace_folder(temporary: Path, target: Path, mode: str = "") -> None:
    """Move the finished report into place, removing an older one only after the new one is complete; the files
    of other modes in the older one are kept (``_keep_other_modes``)."""
    with _folder_lock(target.parent):
        old: Optional[Path] = None
        if target.is_dir() and not target.is_symlink():
            _keep_other_modes(target, temporary, mode)
        if target.is_symlink() or target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".old", dir=target.parent))
            os.rmdir(old)
            os.replace(target, old)  # same parent: needs no write access to the old report itself
        try:
            os.replace(temporary, target)
        except OSError:
            if old is not None:
                os.replace(old, target)  # put the previous report back
            raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()


def _remove_abandoned(out_dir: Path, name: str) -> None:
    """Remove the hidden folders of earlier runs into ``out_dir`` whose process is gone: a run ended by SIGKILL,
    the kernel's out-of-memory killer or a native crash (SIGABRT, SIGSEGV) could not remove its own."""
    hidden = re.compile(rf"\.{re.escape(name)}\.(\d+)\.[^./]+\.(tmp|old)")
    for path in out_dir.iterdir():
        match = hidden.fullmatch(path.name)
        if match and not _running(int(match.group(1))) and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    """Whether a process ``pid`` exists (this machine's; one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _check_replaceable(target: Path) -> None:
    """Refuse early (before any work) a previous report this user could not remove."""
    if target.is_symlink() or not target.is_dir():
        return
    for folder, subfolders, _ in os.walk(target):
        if not os.access(folder, os.W_OK | os.X_OK) and os.path.isdir(folder):  # gone: a concurrent run swapped it
            raise UsageError(f"the previous report {target} cannot be replaced: {folder} is not writable by you")


_CONTROL = {code: f"\\x{code:02x}" for code in range(32)}


def _one_line(text: str) -> str:
    """``text`` with control characters (newlines in file names) escaped, so a log entry stays one line."""
    return text.translate(_CONTROL)


def summary_table(counts: Dict[str, int]) -> str:
    width = max([len("files"), *map(len, counts)])
    rule = f"+-{'-' * width}-+------------+"
    rows = [rule, f"| {'files':<{width}} | statistics |", rule]
    rows += [f"| {name:<{width}} | {count:>10} |" for name, count in counts.items()]
    rows.append(rule)
    return "\n".join(rows)


def statistics(per_code: Dict[str, int]) -> str:
    """flake8's ``--statistics`` layout: count, code, summary; one line per code found."""
    return "".join(f"{count:<5} {code} {rule_for(code).summary}\n" for code, count in sorted(per_code.items()))


def _run(args: argparse.Namespace, modes: Dict[str, type], out: TextIO, err: TextIO) -> int:
    mode = _choose_mode(args.mode, modes, fixing=args.fix or args.diff, select=args.select)
    source, out_dir = _check_args(args, mode)
    root = source if source.is_dir() else source.parent
    if mode.enables and not args.select:
        args.extend_select = [*args.extend_select, *(c for c in mode.enables if c not in args.extend_select)]
    try:
        settings = read_settings(root, args)
        if args.torch_version is None and settings.options.ascend_torch_version is not None:
            try:  # the version comes from the flake8 configuration file: name it
                resolve_version(settings.options.ascend_torch_version)
            except UnknownVersionError as error:
                raise ConfigError(f"{settings.path}: ascend-torch-version: {error}") from None
        config = make_config(settings.options.ascend_torch_version, settings.options.ascend_api_files,
                             project_dir=root, official_lists=settings.options.ascend_official_lists,
                             lint_tests=settings.options.ascend_lint_tests)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    target = out_dir / (mode.report_name(source, args) or report_name(source))
    if target == source or target in source.parents:
        raise UsageError(f"the input lies inside the report folder it would replace: {target}")
    _check_replaceable(target)

    started = time.monotonic()
    temporary: Optional[Path] = None
    created: Optional[Path] = None
    with _signals_raise() as received:
        try:
            created = _make_output(out_dir)
            _remove_abandoned(out_dir, target.name)
            temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=out_dir))
            umask = os.umask(0)
            os.umask(umask)
            temporary.chmod(0o777 & ~umask)  # mkdtemp makes it private; the report is an ordinary folder
            found = collect(source, exclude=report_folders(out_dir))
            with open(temporary / LOG_NAME, "w", encoding="utf-8", errors="backslashreplace",
                      buffering=1) as log_file:
                def log(line: str) -> None:
                    log_file.write(_one_line(line) + "\n")

                progress = Progress(None if args.quiet else err, tty=err.isatty())
                excluded = {path for path in found.files
                            if mode.uses_rules and settings.selection.excluded(path, found.root)}
                job = Job(source, found.root, [path for path in found.files if path not in excluded], temporary,
                          config, args, log, progress, selection=settings.selection, target=target)
                log(f"{PROG} {__version__} started {time.strftime('%Y-%m-%d %H:%M:%S')}")
                log(f"input: {source}")
                if created is not None:
                    log(f"output folder created: {out_dir}")
                log(f"flake8 configuration: {settings.path or 'none found'}")
                log(f"mode: {mode.name}; torch_npu version: {config.version}; format: {args.format}")
                if config.third_party_apis:
                    log(f"third-party APIs from -api files: {len(config.third_party_apis)}")
                log(f"files: {len(job.files)} Python files (each read only if a regular file of at most "
                    f"{MAX_FILE_BYTES // 2**20} MiB)")
                for rel, reason in found.skipped:
                    job.skip(rel, reason)
                for path in sorted(excluded):
                    job.skip(job.rel(path), "excluded by the flake8 configuration (exclude, extend-exclude)")
                counts = mode().run(job)
                elapsed = time.monotonic() - started
                log(f"skipped: {len(job.skipped)}")
                for name, count in counts.items():
                    log(f"wrote {name}: {plural(count, 'file' if name.endswith('/') else 'row')}")
                if job.statistics:
                    log("findings per code: " + ", ".join(f"{code} {n}" for code, n in sorted(job.statistics.items())))
                log(f"finished in {elapsed:.2f} s")
                log(_RUN_FILES + json.dumps(sorted(entry.name for entry in temporary.iterdir()
                                                   if entry.name != LOG_NAME)))
            if received:  # a signal some library swallowed: the report may be partial
                raise Interrupted(received[0])
            _replace_folder(temporary, target, mode.name)
        except BaseException as error:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
            if created is not None:  # nothing is left of a run that wrote no report
                shutil.rmtree(created, ignore_errors=True)
            if received and not isinstance(error, Interrupted):
                raise Interrupted(received[0]) from None  # e.g. a pool whose workers the signal ended
            if isinstance(error, JobError):
                raise UsageError(str(error)) from None
            if isinstance(error, OSError):
                where = f": {error.filename}" if error.filename else ""
                raise OutputError(f"{error.strerror or error}{where}; no report written") from None
            raise

    if mode.reads_python and not job.files:
        err.write(_printable(f"{PROG}: warning: no Python file to analyse in {args.input}; the report is empty\n"))
    if not args.quiet and counts:  # the copy-making modes write no report table
        out.write(summary_table(counts) + "\n")
    if args.statistics:  # asked for by name, so -q does not hide it
        out.write(statistics(job.statistics))
    if not args.quiet:
        shown = os.path.relpath(target)
        where = target if shown.startswith(os.pardir) else shown
        done = f"Analysed {plural(len(job.files), 'file')} ({len(job.skipped)} skipped)" if mode.reads_python \
            else "Done"
        out.write(_printable(f"{done} in {elapsed:.1f} s; report: {where}\n"))
        out.write("".join(_printable(f"{_one_line(note)}\n") for note in job.notes))
    # a copied tree (``name/``) is not a finding: -m migrate with nothing to migrate passes
    if args.fail_on_findings and any(count for name, count in counts.items() if not name.endswith("/")):
        return 1
    return 0


def _subcommand(argv: List[str]) -> List[str]:
    """``compare DUMP_A DUMP_B [flags]`` -> ``-m compare -i DUMP_A --against DUMP_B [flags]``."""
    if argv[:1] != ["compare"]:
        return argv
    folders = argv[1:3]
    if len(folders) < 2 or any(folder.startswith("-") for folder in folders):
        raise UsageError(f"compare needs two dump folders: {PROG} compare DUMP_A DUMP_B -o OUTPUT")
    return ["-m", "compare", "-i", folders[0], "--against", folders[1], *argv[3:]]


def main(argv: Optional[Sequence[str]] = None, out: TextIO = None, err: TextIO = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        modes = all_modes()
        args = build_parser(modes).parse_args(_subcommand(list(sys.argv[1:] if argv is None else argv)))
        if args.list_codes:
            out.write(list_codes())
            return 0
        if args.explain:
            out.write(explain(args.explain))
            return 0
        return _run(args, modes, out, err)
    except UsageError as error:
        err.write(_printable(f"{PROG}: error: {_one_line(str(error))}\n"))
        return 2
    except OutputError as error:
        err.write(_printable(f"{PROG}: error: {_one_line(str(error))}\n"))
        return 3
    except (KeyboardInterrupt, Interrupted) as error:
        signum = getattr(error, "signum", signal.SIGINT)
        _finalise_quietly(error)
        err.write(f"{PROG}: interrupted by {signal.Signals(signum).name}; no report written "
                  "(a previous report is kept)\n")
        return 128 + signum


def _finalise_quietly(error: BaseException) -> None:
    """Collect now, without a word, what the interrupted run left half-done. A generator suspended in a frame of
    ``error``'s traceback (libcst's position recorder during the migrated copy) runs its cleanup when collected,
    and that cleanup can fail on the state the signal cut short; left to the end of the ``except``, the failure
    would print "Exception ignored in ..." under the one-line message. The run's outcome is already decided."""
    previous = sys.unraisablehook
    sys.unraisablehook = lambda info: None
    try:
        traceback.clear_frames(error.__traceback__)
        gc.collect()
    finally:
        sys.unraisablehook = previous


def _printable(text: str) -> str:
    """``text`` with undecodable file-name bytes shown as escapes, so printing it cannot fail."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
