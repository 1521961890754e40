"""Which operators a torch_npu run keeps compiling: the recompile-log analysis.

The NPU compiles an operator for every new input shape, and CANN's host log
(INFO level) says so on a line holding ``To compile op: <OpType>, compileFlag
is <n>``.  Print a marker line at the start of every training iteration
(``print(f"=====iter{step}")``), run a few iterations, and this module splits
the log at the markers: ops compiled during the first iterations are the
warm-up every run pays, ops still compiled after ``warmup`` iterations (3 by
default) point at dynamic shapes.

It does properly what the Ascend PyTorch training guide's ``recompiled_op.py``
sample does: the op name stops at the comma (the sample kept the whole line
tail), numbered markers are checked for gaps, unreadable bytes and unrelated
lines are ignored, the log is streamed, and the suspects come with counts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

DEFAULT_SPLIT_FLAG = "=====iter"
WARMUP = 3
COMPILE_PATTERN = re.compile(r"To compile op:\s*([A-Za-z_][\w.\-]*)")
LIST_NAME = "recompile_op_list.txt"
SUSPECTS_NAME = "recompile_suspects.csv"
SUSPECT_COLUMNS = ("Op Name", "Compiles After Warm-up", "Iterations Compiling", "Iterations")


class LogError(ValueError):
    """A log that cannot be analysed; the message is one line."""


@dataclass
class Segment:
    """The ops compiled between two markers: ``index`` 0 is the setup before the first marker."""

    index: int
    marker: str  # the marker line ("" for the setup segment)
    compiles: Dict[str, int] = field(default_factory=dict)  # op -> times compiled, in first-seen order


@dataclass
class Suspect:
    op: str
    compiles: int  # compilations after the warm-up iterations
    iterations: List[int]  # iterations (after warm-up) that compiled it


@dataclass
class RecompileLog:
    segments: List[Segment]
    warmup: int
    gaps: List[Tuple[int, int]] = field(default_factory=list)  # (previous marker number, next marker number)
    malformed: int = 0  # "To compile op:" lines without an op name

    @property
    def iterations(self) -> int:
        return len(self.segments) - 1

    def suspects(self) -> List[Suspect]:
        """Ops compiled after the warm-up iterations, most compilations first."""
        found: Dict[str, Suspect] = {}
        for segment in self.segments[self.warmup + 1:]:
            for op, count in segment.compiles.items():
                suspect = found.setdefault(op, Suspect(op, 0, []))
                suspect.compiles += count
                suspect.iterations.append(segment.index)
        return sorted(found.values(), key=lambda s: (-s.compiles, s.op))


_NUMBER = re.compile(r"\d+")


def parse_log(path: Path, split_flag: str = DEFAULT_SPLIT_FLAG, warmup: int = WARMUP) -> RecompileLog:
    """Split a host log into iterations at the marker lines; raises ``LogError`` when it has no marker."""
    if not split_flag:
        raise LogError("the split flag is empty")
    segments = [Segment(0, "")]
    gaps: List[Tuple[int, int]] = []
    malformed = 0
    previous: Optional[int] = None
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                position = line.find(split_flag)
                if position >= 0:
                    marker = line.strip()
                    number = _NUMBER.match(line, position + len(split_flag))
                    if number is not None:
                        value = int(number.group())
                        if previous is not None and value != previous + 1:
                            gaps.append((previous, value))
                        previous = value
                    segments.append(Segment(len(segments), marker))
                    continue
                if "To compile op:" not in line:
                    continue
                match = COMPILE_PATTERN.search(line)
                if match is None:
                    malformed += 1
                    continue
                compiles = segments[-1].compiles
                compiles[match.group(1)] = compiles.get(match.group(1), 0) + 1
    except OSError as error:
        raise LogError(f"cannot read {path}: {error.strerror or error}") from None
    if len(segments) == 1:
        compiled = sum(segments[0].compiles.values())
        raise LogError(
            f"no iteration marker {split_flag!r} in {path} ({compiled} 'To compile op' lines): print "
            f"{split_flag!r} at the start of every iteration, or pass the marker you print with --split-flag"
        )
    return RecompileLog(segments, warmup, gaps, malformed)


def op_list_text(log: RecompileLog) -> str:
    """``recompile_op_list.txt``: ``iter: N`` then the ops compiled in it, comma-separated (the sample's layout)."""
    lines = []
    for segment in log.segments:
        lines.append(f"iter: {segment.index}")
        lines.append(",".join(segment.compiles))
    return "\n".join(lines) + "\n"


def suspect_rows(log: RecompileLog) -> List[Tuple[str, int, int, str]]:
    return [(s.op, s.compiles, len(s.iterations), " ".join(map(str, s.iterations))) for s in log.suspects()]
