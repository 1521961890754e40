"""``ascend-analyse`` reads the configuration flake8 reads and decides with flake8's own code.

Both front ends must report the same findings for a project, so the CLI does
not re-implement flake8's rules: it finds the project's flake8 configuration
file the way flake8 does, parses it with flake8's option manager (flake8's own
options plus this plugin's ``ascend-*`` options, but no other plugin is
loaded, so nothing of the analysed project runs), puts its own command line on
top, and asks flake8's ``StyleGuide`` which codes each file reports
(``select``, ``ignore``, ``extend-select``, ``extend-ignore``,
``per-file-ignores``) and which files it skips (``exclude``, ``extend-exclude``).  The configuration file is untrusted input: only a
regular UTF-8 file of modest size is read, and a problem is a one-line
``ConfigError`` that never quotes the file.
"""
from __future__ import annotations

import argparse
import configparser
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import flake8
from flake8.exceptions import ExecutionError
from flake8.main.options import register_default_options
from flake8.options.aggregator import aggregate_options
from flake8.options.manager import OptionManager
from flake8.style_guide import Decision, StyleGuide
from flake8.utils import matches_filename, normalize_path, parse_files_to_codes_mapping

from .codes import OPTIONAL_CODES, named_optional_codes
from .config import MAX_CONFIG_BYTES, ConfigError
from .data import known_versions
from .files import SourceError, read_regular

LOG = logging.getLogger(__name__)
CONFIG_NAMES = ("setup.cfg", "tox.ini", ".flake8")  # flake8's order within one folder


def _read_ini(path: Path) -> Optional[configparser.RawConfigParser]:
    """The parsed file, None when there is none; raises ConfigError for anything else."""
    if not os.path.exists(path):
        return None
    try:
        text = read_regular(path, MAX_CONFIG_BYTES).decode("utf-8")
    except SourceError as error:  # a FIFO, a device, an oversized or unreadable file
        raise ConfigError(f"cannot read {path}: {error}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read {path}: not UTF-8 text") from None
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as error:  # its message quotes the file: name the line only
        line = getattr(error, "lineno", None) or next(iter(getattr(error, "errors", [])), (None,))[0]
        raise ConfigError(f"cannot read {path}: not a valid INI file (line {line})") from None
    return parser


def find_flake8_config(start: Path) -> Optional[Path]:
    """The first ``setup.cfg``, ``tox.ini`` or ``.flake8`` with a flake8 section, at or above ``start``.

    flake8's search, except that it starts at the analysed folder rather than
    the current directory: it stops below the home folder and at the root.
    """
    home = Path.home().resolve()
    folder = start.resolve()
    while True:
        for name in CONFIG_NAMES:
            parser = _read_ini(folder / name)
            if parser is not None and ("flake8" in parser or "flake8:local-plugins" in parser):
                return folder / name
        if folder.parent == folder or folder.parent == home:
            return None
        folder = folder.parent


def _refuse(message: str) -> None:
    raise ValueError(message)


def add_ascend_options(parser) -> None:
    """Register the plugin's ``ascend-*`` options and its default-off codes on a flake8 option manager."""
    parser.add_option(
        "--ascend-torch-version",
        default=None,
        parse_from_config=True,
        help="torch_npu version whose support data ASC1xx findings use "
        f"(one of {', '.join(known_versions())}; default: the newest, or "
        "[tool.flake8-ascend] torch-version in pyproject.toml)",
    )
    parser.add_option(
        "--ascend-api-files",
        default=[],
        parse_from_config=True,
        comma_separated_list=True,
        normalize_paths=True,
        help="third_party result CSVs (full_unsupported_results.csv) whose APIs ASC104 reports",
    )
    parser.add_option(
        "--ascend-official-lists",
        default=False,
        action="store_true",
        parse_from_config=True,
        help="ASC101-103 report what the official torch_npu support lists say, also entries the "
        "version's kernels show to be stale (default: the kernel evidence decides)",
    )
    parser.add_option(
        "--ascend-lint-tests",
        default=False,
        action="store_true",
        parse_from_config=True,
        help="report in test code too (tests/ folders, test_*.py, *_test.py, conftest.py, and elsewhere a module-level "
        "test_* nothing calls or a unittest.TestCase; default: test code is left out)",
    )
    parser.extend_default_ignore(sorted(OPTIONAL_CODES))


def _option_manager() -> OptionManager:
    """flake8's options and this plugin's, registered as flake8 registers them."""
    manager = OptionManager(version=flake8.__version__, plugin_versions="", parents=[], formatter_names=[])
    manager.parser.error = _refuse  # argparse would print flake8's usage and exit
    register_default_options(manager)
    add_ascend_options(manager)
    manager.extend_default_select(["ASC"])
    return manager


def _command_line(args: argparse.Namespace) -> List[str]:
    """ascend-analyse's flags in flake8's spelling (``--ignore`` is flake8's ``--extend-ignore``)."""
    argv = []
    for flag, values in (("--select", args.select), ("--extend-select", args.extend_select),
                         ("--extend-ignore", args.ignore), ("--ascend-api-files", args.api_files)):
        if values:
            argv.append(f"{flag}={','.join(values)}")
    if args.torch_version is not None:  # an empty -v is an error, not the default
        argv.append(f"--ascend-torch-version={args.torch_version}")
    if args.official_lists:
        argv.append("--ascend-official-lists")
    if getattr(args, "lint_tests", False):
        argv.append("--ascend-lint-tests")
    if args.per_file_ignores is not None:
        argv.append(f"--per-file-ignores={args.per_file_ignores}")
    return argv


class Selection:
    """Which codes flake8 reports in which file: flake8's StyleGuide per ``per-file-ignores`` entry.

    On top of flake8's decision, as in the plugin, a default-off code (ASC103)
    needs a selection more specific than ``ASC``.
    """

    def __init__(self, options: argparse.Namespace, base: Path) -> None:
        self.disable_noqa = bool(options.disable_noqa)
        default = StyleGuide(options, None, None)  # formatter and statistics are for printing only
        mapping = parse_files_to_codes_mapping(options.per_file_ignores)  # ValueError / ExecutionError
        self.guides = [default] + [default.copy(filename=normalize_path(name, str(base)), extend_ignore_with=codes)
                                   for name, codes in mapping]
        self.suppressed = OPTIONAL_CODES - named_optional_codes(
            [*(options.select or ()), *(options.extend_select or ())])
        self.exclude = [*options.exclude, *options.extend_exclude]

    @classmethod
    def defaults(cls) -> "Selection":
        """flake8's defaults, no configuration file."""
        options = aggregate_options(_option_manager(), configparser.RawConfigParser(), os.curdir, [])
        return cls(options, Path.cwd())

    def _guide(self, path: str) -> StyleGuide:
        return max((g for g in self.guides if g.applies_to(path)), key=lambda g: len(g.filename or ""))

    def excluded(self, path: Path, root: Path) -> bool:
        """Whether flake8 would not even read ``path`` (``exclude``/``extend-exclude`` matching it or a folder
        between it and the linted ``root``)."""
        for candidate in (path, *path.parents):
            if matches_filename(str(candidate), self.exclude, "%(path)s: %(whether)sexcluded", LOG):
                return True
            if candidate == root:
                return False
        return False

    def selects(self, code: str, path: Optional[str] = None) -> bool:
        """Whether flake8 reports ``code`` in the file at ``path`` (absolute; None: any file without per-file rules)."""
        guide = self.guides[0] if path is None else self._guide(path)
        return code not in self.suppressed and guide.should_report_error(code) is Decision.Selected


@dataclass(frozen=True)
class Settings:
    """The merged options of one run, the codes they select, and the configuration file they came from."""

    options: argparse.Namespace
    selection: Selection
    path: Optional[Path]


def read_settings(start: Path, args: argparse.Namespace) -> Settings:
    """flake8's options for a run: defaults, then the config file found from ``start``, then ``args``.

    Relative ``per-file-ignores`` paths are relative to the configuration
    file's folder (on the command line: to the current directory).
    """
    found = find_flake8_config(start)
    cfg = _read_ini(found) if found else configparser.RawConfigParser()
    cfg_dir = found.parent if found else start
    try:
        options, selection = _merge(cfg, cfg_dir, args)
    except (ValueError, ExecutionError):  # flake8's messages quote the value: name the file and the key only
        key = _wrong_key(cfg, cfg_dir, args)
        where = f"{found}: [flake8] {key}" if key else f"{found or 'the command line'}: a flake8 setting"
        raise ConfigError(f"{where} has a wrong value (an invalid code, number, choice or per-file-ignores "
                          "pair)") from None
    return Settings(options, selection, found)


def _merge(cfg: configparser.RawConfigParser, cfg_dir: Path, args: argparse.Namespace):
    """(options, Selection) of the configuration ``cfg`` with the command line on top; raises flake8's errors."""
    options = aggregate_options(_option_manager(), cfg, str(cfg_dir), _command_line(args))
    return options, Selection(options, Path.cwd() if args.per_file_ignores is not None else cfg_dir)


def _wrong_key(cfg: configparser.RawConfigParser, cfg_dir: Path, args: argparse.Namespace) -> Optional[str]:
    """The first key of the ``[flake8]`` section that fails on its own, for the message; None if none does."""
    if "flake8" not in cfg:
        return None
    try:
        _merge(configparser.RawConfigParser(), cfg_dir, args)
    except (ValueError, ExecutionError):  # the command line itself is wrong
        return None
    for key, value in cfg.items("flake8"):
        alone = configparser.RawConfigParser()
        alone.read_dict({"flake8": {key: value}})
        try:
            _merge(alone, cfg_dir, args)
        except (ValueError, ExecutionError):
            return key[:40]
    return None
