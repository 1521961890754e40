"""Run configuration shared by the flake8 plugin and ``ascend-analyse``.

Settings come from the command line first, then from ``[tool.flake8-ascend]``
in the analysed project's ``pyproject.toml`` (keys ``torch-version``,
``api-files`` and ``official-lists``), then from defaults.  The project's
configuration is untrusted data (docs/security.md): ``setting_text`` and
``setting_paths`` check each value, and nothing read through it is ever quoted
in a message.
"""
from __future__ import annotations

import csv
import io
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Union

from .data import load_version, resolve_version
from .files import SourceError, read_regular


def _toml():
    """The TOML parser, imported when a pyproject.toml is found (most runs find none: a lint run starts faster)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python < 3.11 only
        import tomli as tomllib
    return tomllib


THIRD_PARTY_COLUMNS = ("File", "3rd-party API", "Message")
SECTION = "flake8-ascend"
PYPROJECT_KEYS = ("api-files", "official-lists", "torch-version")
MAX_CONFIG_BYTES = 2**20  # a pyproject.toml is a few KiB
_CSV_FIELD_LIMIT = 2**31 - 1  # third_party cells list every affected name and chain: far beyond csv's 128 KiB


class ConfigError(ValueError):
    """A setting or input file that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Config:
    version: str
    third_party_apis: FrozenSet[str] = field(default_factory=frozenset)
    official_lists: bool = False  # ASC101-103 as the official lists say, stale entries included
    # every file read as importing transfer_to_npu: a project whose entry script imports it (it patches torch for
    # the whole process), as ``-m migrate --transfer-to-npu`` leaves it
    transfer_to_npu: bool = False
    # test files (tests/ folders, test_*.py, *_test.py, conftest.py) get the device and package codes too; off by
    # default: a test's CUDA case is skipped or faked where there is no CUDA (engine.TEST_PATH)
    lint_tests: bool = False
    # the folder linted paths are relative to (ascend-analyse's input); "" for the working folder (flake8). The
    # project's other modules are read from there for facts one file cannot show (semantic/project.py)
    root: str = ""

    @property
    def data(self):
        return load_version(self.version)


def _kind(value: object) -> str:
    """The TOML type of a value, for messages that must not echo the value itself."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
             dict: "a table"}
    return next((text for kind, text in names.items() if isinstance(value, kind)), "a date or time")


def setting_text(value: object, key: str, where: str) -> str:
    """A non-empty string setting (``torch-version``); raises ConfigError naming ``key`` and ``where``."""
    if not isinstance(value, str) or not value.strip():
        shown = "an empty string" if isinstance(value, str) else _kind(value)
        raise ConfigError(f"{where}: {key} must be a non-empty string, not {shown}")
    return value.strip()


def setting_paths(value: object, key: str, where: str, base: Path) -> List[Path]:
    """A path or list of paths (``api-files``), resolved relative to ``base`` (the configuration's folder)."""
    items = value if isinstance(value, list) else [value]
    paths = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            shown = "an empty string" if isinstance(item, str) else _kind(item)
            raise ConfigError(f"{where}: {key} must be a path or a list of paths, not {shown}")
        paths.append(base / item.strip())
    return paths


def _check_table(document: dict, where: str) -> dict:
    """``[tool.flake8-ascend]`` of a parsed pyproject.toml, each key checked; raises ConfigError."""
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{where}: [tool] must be a table, not {_kind(tool)}")
    table = tool.get(SECTION, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.{SECTION}] must be a table, not {_kind(table)}")
    unknown = sorted(set(table) - set(PYPROJECT_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0][:40]!r} in [tool.{SECTION}] "
                          f"(known: {', '.join(PYPROJECT_KEYS)})")
    return table


def find_pyproject_settings(start: Path) -> Dict[str, object]:
    """The checked settings of ``[tool.flake8-ascend]`` in the nearest ``pyproject.toml`` at or above ``start``.

    The file belongs to the analysed project, so it is data: paths in it are resolved
    relative to it, every value's type is checked, and no message quotes its content.
    """
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if not os.path.lexists(candidate):
            continue
        tomllib = _toml()
        try:
            document = tomllib.loads(read_regular(candidate, MAX_CONFIG_BYTES).decode("utf-8"))
        except SourceError as error:
            raise ConfigError(f"{candidate}: {error}") from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            reason = "not UTF-8" if isinstance(error, UnicodeDecodeError) else str(error).splitlines()[0]
            raise ConfigError(f"cannot read {candidate}: {reason}") from None
        table = _check_table(document, str(candidate))
        settings: Dict[str, object] = {}
        if "torch-version" in table:
            settings["torch-version"] = setting_text(table["torch-version"], "torch-version", str(candidate))
            try:
                resolve_version(settings["torch-version"])
            except ValueError as error:
                raise ConfigError(f"{candidate}: torch-version: {error}") from None
        if "api-files" in table:
            settings["api-files"] = setting_paths(table["api-files"], "api-files", str(candidate), folder)
        if "official-lists" in table:
            if not isinstance(table["official-lists"], bool):
                raise ConfigError(f"{candidate}: [tool.{SECTION}] official-lists must be true or false")
            settings["official-lists"] = table["official-lists"]
        return settings
    return {}


def load_third_party_apis(paths: Iterable[Union[str, Path]]) -> FrozenSet[str]:
    """Qualified API names listed in ``full_unsupported_results.csv`` files (``-api``).

    Only regular files under the size cap are read (a FIFO or ``/dev/tty`` would
    block), a UTF-8 BOM (Excel's "CSV UTF-8") is accepted, and messages never quote
    the file's content.
    """
    names = set()
    for path in paths:
        try:
            text = read_regular(Path(path)).decode("utf-8-sig")
        except SourceError as error:
            raise ConfigError(f"API file {path}: {error}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"cannot read API file {path}: not UTF-8") from None
        try:
            csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
            reader = csv.reader(io.StringIO(text, newline=""))
            header = next(reader, None)
            if header is None or tuple(header[:3]) != THIRD_PARTY_COLUMNS:
                raise ConfigError(f"{path}: not a third_party result file: expected the columns "
                                  f"{', '.join(THIRD_PARTY_COLUMNS)} first")
            for row in reader:
                if len(row) >= 2:
                    names.update(n.strip() for n in row[1].splitlines() if n.strip())
        except csv.Error as error:
            raise ConfigError(f"cannot read API file {path}: malformed CSV ({str(error).splitlines()[0]})") from None
    return frozenset(names)


def make_config(
    version: Optional[str] = None,
    api_files: Sequence[Union[str, Path]] = (),
    project_dir: Optional[Path] = None,
    official_lists: bool = False,
    lint_tests: bool = False,
) -> Config:
    """Build a Config, filling unset values from pyproject.toml; raises ConfigError."""
    settings = find_pyproject_settings((project_dir or Path.cwd()).resolve())
    official_lists = official_lists or bool(settings.get("official-lists", False))
    if version is None:
        version = settings.get("torch-version")
    elif not version.strip():
        raise ConfigError("the torch_npu version is empty")
    if not api_files:
        api_files = settings.get("api-files", [])
    try:
        resolved = resolve_version(version)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return Config(resolved, load_third_party_apis(api_files), official_lists, lint_tests=lint_tests,
                  root=str(project_dir.resolve()) if project_dir is not None else "")
