"""The flake8 adapter: options, configuration and the checker class."""
from __future__ import annotations

import sys
from typing import FrozenSet, Iterator, Optional, Tuple

from . import __version__
from .config import Config, ConfigError, make_config
from .data import known_versions, resolve_version
from .engine import analyze
from .registry import all_rules


CONFIG_ERROR_CODE = "ASC000"  # not a rule: a configuration error reported in an editor (stdin)


def optional_codes() -> FrozenSet[str]:
    """Advisory codes that are off unless named explicitly (e.g. ASC103)."""
    return frozenset(rule.code for rule in all_rules() if rule.default_off)


def named_optional_codes(selections) -> FrozenSet[str]:
    """Optional codes switched on by name: ``ASC103`` does, a family (``ASC``, ``ASC1``, ``ASC10``) does not, so
    advisory findings never appear because a whole family was selected."""
    names = {n.strip().upper() for n in selections if n}
    return optional_codes() & names


class AscendChecker:
    """flake8 entry point for the ``ASC`` codes."""

    name = "flake8-ascend"
    version = __version__
    config: Optional[Config] = None
    suppressed: FrozenSet[str] = frozenset()  # optional codes the user did not switch on
    config_error = ""  # a configuration error while linting stdin (an editor): reported as a finding

    def __init__(self, tree, lines, filename: str) -> None:
        self.tree = tree
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, parser) -> None:
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
        parser.extend_default_ignore(sorted(optional_codes()))

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
                                     official_lists=options.ascend_official_lists)
        except ConfigError as error:
            print(f"flake8-ascend: error: {error}", file=sys.stderr)
            if list(getattr(options, "filenames", None) or ()) != ["-"]:
                sys.exit(2)  # a configuration error, not "findings" (1)
            # editors (pylsp, efm) lint stdin and show findings only, not stderr: one finding at line 1 names it
            cls.config_error = str(error)
        selections = [*(getattr(options, "select", None) or ()), *(getattr(options, "extend_select", None) or ())]
        cls.suppressed = optional_codes() - named_optional_codes(selections)

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        if self.config_error:
            yield 1, 0, f"{CONFIG_ERROR_CODE} configuration error: {self.config_error}", type(self)
            return
        config = self.config or make_config()
        try:
            findings = analyze(self.tree, self.lines, self.filename, config)
        except RecursionError:  # absurdly deep expressions: flake8 itself reports nothing either
            return
        for finding in findings:
            if finding.code not in self.suppressed:
                yield finding.line, finding.col, finding.text, type(self)
