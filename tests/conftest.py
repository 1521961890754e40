"""Shared helpers: run the engine on a snippet with a given configuration; load a data tool from tools/."""
from __future__ import annotations

import ast
import importlib.util
import textwrap
from pathlib import Path

import pytest

from flake8_ascend.config import Config
from flake8_ascend.data import default_version
from flake8_ascend import engine

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def load_tool(name: str):
    """The module ``tools/<name>.py`` (the tools are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_rules(source: str, version: str = None, codes=None, **settings):
    """Findings of the engine on ``source`` (dedented), optionally only for ``codes`` prefixes."""
    source = textwrap.dedent(source)
    config = Config(version or default_version(), **settings)
    shown = (lambda code: code.startswith(tuple(codes))) if codes else None  # as flake8 --select CODES would
    findings = engine.lint(ast.parse(source), source.splitlines(keepends=True), "snippet.py", config, shown=shown)
    if codes:
        findings = [f for f in findings if f.code.startswith(tuple(codes))]
    return findings


@pytest.fixture
def lint():
    return run_rules
