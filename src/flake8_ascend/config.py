"""Run configuration shared by the flake8 plugin and ``ascend-analyse``.

Settings come from the command line first, then from ``[tool.flake8-ascend]``
in the analysed project's ``pyproject.toml`` (keys ``torch-version``,
``api-files`` and ``official-lists``), then from defaults.
"""
from __future__ import annotations

import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import FrozenSet, Iterable, Optional, Sequence

from .data import load_version, resolve_version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

THIRD_PARTY_COLUMNS = ("File", "3rd-party API", "Message")
_CSV_FIELD_LIMIT = 2**31 - 1  # third_party cells list every affected name and chain: far beyond csv's 128 KiB


class ConfigError(ValueError):
    """A setting or input file that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Config:
    version: str
    third_party_apis: FrozenSet[str] = field(default_factory=frozenset)
    official_lists: bool = False  # ASC101-103 as the official lists say, stale entries included

    @property
    def data(self):
        return load_version(self.version)


def find_pyproject_settings(start: Path) -> dict:
    """``[tool.flake8-ascend]`` of the nearest ``pyproject.toml`` at or above ``start``."""
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                with candidate.open("rb") as handle:
                    document = tomllib.load(handle)
            except (OSError, tomllib.TOMLDecodeError) as error:
                raise ConfigError(f"cannot read {candidate}: {error}") from None
            return document.get("tool", {}).get("flake8-ascend", {})
    return {}


def load_third_party_apis(paths: Iterable[str]) -> FrozenSet[str]:
    """Qualified API names listed in ``full_unsupported_results.csv`` files (``-api``)."""
    names = set()
    for path in paths:
        try:
            with open(path, newline="", encoding="utf-8") as handle:
                csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
                reader = csv.reader(handle)
                header = next(reader, None)
                if header is None or tuple(header[:3]) != THIRD_PARTY_COLUMNS:
                    raise ConfigError(
                        f"{path}: not a third_party result file: expected columns "
                        f"{', '.join(THIRD_PARTY_COLUMNS)}, got {', '.join(header or ['nothing'])}"
                    )
                for row in reader:
                    if len(row) >= 2:
                        names.update(n.strip() for n in row[1].splitlines() if n.strip())
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            raise ConfigError(f"cannot read API file {path}: {error}") from None
    return frozenset(names)


def make_config(
    version: Optional[str] = None,
    api_files: Sequence[str] = (),
    project_dir: Optional[Path] = None,
    official_lists: bool = False,
) -> Config:
    """Build a Config, filling unset values from pyproject.toml; raises ConfigError."""
    settings = find_pyproject_settings((project_dir or Path.cwd()).resolve())
    if not official_lists:
        official_lists = settings.get("official-lists", False)
        if not isinstance(official_lists, bool):
            raise ConfigError("[tool.flake8-ascend] official-lists must be true or false")
    if version is None:
        version = settings.get("torch-version")
    if not api_files:
        api_files = settings.get("api-files", [])
        if isinstance(api_files, str):
            api_files = [api_files]
    try:
        resolved = resolve_version(None if version is None else str(version))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return Config(resolved, load_third_party_apis(api_files), official_lists)
