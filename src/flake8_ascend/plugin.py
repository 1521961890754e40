"""The flake8 adapter: options, configuration and the checker class."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import FrozenSet, Iterator, List, Optional, Tuple, Type

from . import __version__
from .codes import OPTIONAL_CODES, named_optional_codes
from .config import Config, ConfigError, make_config
from .data import resolve_version
from .engine import lint
from .flake8_settings import Selection, add_ascend_options
from .registry import Rule, all_rules
from .sources import deep


CONFIG_ERROR_CODE = "ASC000"  # not a rule: a configuration error reported in an editor (stdin)


class AscendChecker:
    """flake8 entry point for the ``ASC`` codes."""

    name = "flake8-ascend"
    version = __version__
    config: Optional[Config] = None
    suppressed: FrozenSet[str] = frozenset()  # optional codes the user did not switch on
    selection: Optional[Selection] = None  # flake8's selection, for findings that fold into another code's
    config_error = ""  # a configuration error while linting stdin (an editor): reported as a finding
    rules: Optional[List[Type[Rule]]] = None  # the rules whose codes can be reported (None: every rule)

    def __init__(self, tree, lines, filename: str) -> None:
        self.tree = tree
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, parser) -> None:
        add_ascend_options(parser)

    @classmethod
    def parse_options(cls, options) -> None:
        cls.config_error = ""
        try:
            if options.ascend_torch_version is not None:
                try:
                    resolve_version(options.ascend_torch_version)
                except ValueError as error:  # from the command line or the flake8 configuration file
                    raise ConfigError(f"ascend-torch-version: {error}") from None
            cls.config = make_config(options.ascend_torch_version, options.ascend_api_files,
                                     official_lists=options.ascend_official_lists,
                                     lint_tests=options.ascend_lint_tests)
        except ConfigError as error:
            print(f"flake8-ascend: error: {error}", file=sys.stderr)
            if list(getattr(options, "filenames", None) or ()) != ["-"]:
                sys.exit(2)  # a configuration error, not "findings" (1)
            # editors (pylsp, efm) lint stdin and show findings only, not stderr: one finding at line 1 names it
            cls.config_error = str(error)
        selections = [*(getattr(options, "select", None) or ()), *(getattr(options, "extend_select", None) or ())]
        cls.suppressed = OPTIONAL_CODES - named_optional_codes(selections)
        try:
            cls.selection = Selection(options, Path.cwd())
        except (AttributeError, ValueError):  # options of a flake8 run that set no selection (an API caller)
            cls.selection = None
        # a suppressed code's rule does not run at all; rule modules and the version's data load here, once, before
        # flake8 forks its workers
        cls.rules = [rule for rule in all_rules() if rule.code not in cls.suppressed]
        if cls.config is not None:
            cls.config.data

    def _shown(self, code: str) -> bool:
        """Whether flake8 reports ``code`` in this file (select, ignore, per-file-ignores, default-off codes)."""
        if self.selection is None:
            return code not in self.suppressed
        return self.selection.selects(code, os.path.abspath(self.filename))

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        if self.config_error:
            yield 1, 0, f"{CONFIG_ERROR_CODE} configuration error: {self.config_error}", type(self)
            return
        config = self.config or make_config()
        try:
            findings = deep(lint, self.tree, self.lines, _linted_path(self.filename), config, self.rules, (),
                            self._shown)
        except RecursionError:  # deeper than even ``deep`` walks: flake8's own checks fail on it too
            return
        for finding in findings:
            if finding.code not in self.suppressed:
                yield finding.line, finding.col, finding.text, type(self)


def _linted_path(filename: str) -> str:
    """The file's path below the folder flake8 runs in, as ascend-analyse's paths are below its input, so that a
    ``tests/`` folder above the project (``/home/me/tests/proj/train.py``) does not make its code test code."""
    if filename in ("-", "stdin") or not os.path.isabs(filename):
        return filename
    relative = os.path.relpath(filename)
    return filename if relative.startswith(os.pardir) else relative
