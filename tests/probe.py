"""Ask a helper's question at chosen nodes during a real engine walk, as a rule would, through ``lint``'s
``visitors`` (no engine internals): ``ask(source, ast.Call, question)`` -> one answer per visited node."""
from __future__ import annotations

import ast
import textwrap
from typing import Callable, List, Tuple, Type

from flake8_ascend.config import Config
from flake8_ascend.data import default_version
from flake8_ascend.engine import lint

CONFIG = Config(default_version())


class _Probe:
    def __init__(self, node_types: Tuple[Type[ast.AST], ...], question: Callable) -> None:
        self.node_types = node_types
        self.question = question
        self.answers: List[object] = []

    def check(self, node, ctx) -> None:
        self.answers.append(self.question(node, ctx))


def ask(source: str, node_type: Type[ast.AST], question: Callable) -> List[object]:
    """``question(node, ctx)`` for every ``node_type`` node of ``source`` (dedented), in walk order."""
    source = textwrap.dedent(source)
    probe = _Probe((node_type,), question)
    lint(ast.parse(source), source.splitlines(keepends=True), "snippet.py", CONFIG, rules=[], visitors=[probe])
    return probe.answers
