"""The flake8 adapter: options, configuration and the checker class."""
from __future__ import annotations

import sys
from typing import FrozenSet, Iterator, Optional, Tuple

from . import __version__
from .codes import OPTIONAL_CODES, named_optional_codes
from .config import Config, ConfigError, make_config
from .engine import lint
from .flake8_settings import add_ascend_options
from .sources import deep


class AscendChecker:
    """flake8 entry point for the ``ASC`` codes."""

    name = "flake8-ascend"
    version = __version__
    config: Optional[Config] = None
    suppressed: FrozenSet[str] = frozenset()  # optional codes the user did not switch on

    def __init__(self, tree, lines, filename: str) -> None:
        self.tree = tree
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, parser) -> None:
        add_ascend_options(parser)

    @classmethod
    def parse_options(cls, options) -> None:
        try:
            cls.config = make_config(options.ascend_torch_version, options.ascend_api_files,
                                     official_lists=options.ascend_official_lists)
        except ConfigError as error:
            print(f"flake8-ascend: error: {error}", file=sys.stderr)
            sys.exit(2)  # a configuration error, not "findings" (1)
        selections = [*(getattr(options, "select", None) or ()), *(getattr(options, "extend_select", None) or ())]
        cls.suppressed = OPTIONAL_CODES - named_optional_codes(selections)

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        config = self.config or make_config()
        try:
            findings = deep(lint, self.tree, self.lines, self.filename, config)
        except RecursionError:  # deeper than even ``deep`` walks: flake8's own checks fail on it too
            return
        for finding in findings:
            if finding.code not in self.suppressed:
                yield finding.line, finding.col, finding.text, type(self)
