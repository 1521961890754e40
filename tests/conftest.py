"""Shared helpers: run the engine on a snippet with a given configuration."""
from __future__ import annotations

import ast
import textwrap

import pytest

from flake8_ascend.config import Config
from flake8_ascend.data import default_version
from flake8_ascend.engine import analyze


def run_rules(source: str, version: str = None, codes=None, **settings):
    """Findings of the engine on ``source`` (dedented), optionally only for ``codes`` prefixes."""
    source = textwrap.dedent(source)
    config = Config(version or default_version(), **settings)
    findings = analyze(ast.parse(source), source.splitlines(keepends=True), "snippet.py", config)
    if codes:
        findings = [f for f in findings if f.code.startswith(tuple(codes))]
    return findings


@pytest.fixture
def lint():
    return run_rules
