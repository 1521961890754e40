"""The typed rewrite a rule may attach to a finding (``Finding.rewrite``), which ``fix.py`` applies.

A rule decides *what* the code becomes; ``fix.py`` alone decides how (libcst, imports added and removed), so a
finding reaches its edit one way only.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """What part of the reported code is replaced."""

    CALL = "call"  # the callee becomes the target's last name, imported from its module (ASC303)
    INDEX_PUT = "index_put"  # ``x[mask] = v`` -> ``x = name(x, mask, v)``, name imported from its module (ASC304)
    NAME = "name"  # the whole name chain becomes the dotted target, its first name imported (ASC201, ASC207)
    METHOD = "method"  # ``m.cuda(0)`` -> ``m.<target>(0)`` (ASC202)
    STRING = "string"  # the string's text becomes the target, quotes and prefix kept (ASC202, ASC204)


@dataclass(frozen=True)
class Rewrite:
    kind: Kind
    target: str  # a dotted name for CALL, INDEX_PUT and NAME, a method name, or a string's new text

    def __post_init__(self) -> None:
        if not self.target or (self.imports and "." not in self.target):
            raise ValueError(f"{self.kind.value} needs a dotted target, got {self.target!r}")

    @property
    def imports(self) -> bool:
        """The target's last name is imported with ``from <module> import <name>`` and replaces the code."""
        return self.kind in (Kind.CALL, Kind.INDEX_PUT)

    @property
    def module(self) -> str:
        return self.target.rpartition(".")[0]

    @property
    def name(self) -> str:
        return self.target.rpartition(".")[2]

    def __str__(self) -> str:
        return f"{self.kind.value} {self.target}"
