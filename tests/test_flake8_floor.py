"""The flake8 floor in pyproject.toml is one the code works with.

flake8's internals (the option manager, the style guide, noqa patterns) are not a
public API, so each one the package imports is listed here with the oldest
release checked that has it in the form used.  The floor must be at least the newest of
those; the table must name every internal the package imports.  Checked by hand
against flake8 5.0.4, 6.0.0 and 7.0.0 in throwaway virtual environments: 5.0.4
lacks ``OptionManager(formatter_names=...)`` and prints findings in another order;
the CLI, plugin and front-ends tests pass on 6.0.0.
"""
from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import flake8

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# (module, name): the oldest flake8 release checked (5.0 was the oldest tried) that has it as the package uses it
INTERNALS = {
    ("flake8.defaults", "NOQA_FILE"): (5, 0),
    ("flake8.defaults", "NOQA_INLINE_REGEXP"): (5, 0),
    ("flake8.exceptions", "ExecutionError"): (5, 0),
    ("flake8.main.options", "register_default_options"): (5, 0),
    ("flake8.options.aggregator", "aggregate_options"): (5, 0),
    ("flake8.options.manager", "OptionManager"): (6, 0),  # the formatter_names keyword
    ("flake8.style_guide", "Decision"): (5, 0),
    ("flake8.style_guide", "StyleGuide"): (5, 0),
    ("flake8.utils", "matches_filename"): (5, 0),
    ("flake8.utils", "normalize_path"): (5, 0),
    ("flake8.utils", "parse_comma_separated_list"): (5, 0),
    ("flake8.utils", "parse_files_to_codes_mapping"): (5, 0),
}
OPTION_MANAGER_KEYWORDS = {"version", "plugin_versions", "parents", "formatter_names"}  # flake8_settings


def floor() -> tuple:
    document = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    spec = next(dep for dep in document["project"]["dependencies"] if re.match(r"flake8\b", dep))
    return tuple(int(part) for part in re.search(r">=\s*([\d.]+)", spec).group(1).split("."))


def test_the_floor_is_at_least_the_newest_internal_used():
    assert floor() >= max(INTERNALS.values())


def test_the_table_names_every_flake8_internal_the_package_imports():
    used = set()
    for path in (ROOT / "src" / "flake8_ascend").rglob("*.py"):
        for module, names in re.findall(r"^\s*from (flake8\.[\w.]+) import ([\w, ]+)", path.read_text("utf-8"), re.M):
            used |= {(module, name.strip()) for name in names.split(",")}
    assert used == set(INTERNALS)


def test_the_installed_flake8_has_them_and_satisfies_the_floor():
    installed = tuple(int(part) for part in re.findall(r"\d+", flake8.__version__)[:3])
    assert installed >= floor()
    for module, name in INTERNALS:
        assert hasattr(importlib.import_module(module), name), (module, name)
    manager = importlib.import_module("flake8.options.manager").OptionManager
    assert OPTION_MANAGER_KEYWORDS <= set(inspect.signature(manager.__init__).parameters)
