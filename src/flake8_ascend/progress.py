"""Terminal progress: a redrawn bar on a TTY, a line every 10% otherwise.

The bar shrinks to the terminal's width (and is left out below a few
columns), so a redraw never wraps onto a new line.
"""
from __future__ import annotations

import shutil
import time
from typing import Optional, TextIO


class Progress:
    """Counts work done; ``stream=None`` keeps it silent (``--quiet``)."""

    BAR = 30
    MIN_BAR = 5

    def __init__(self, stream: Optional[TextIO], tty: bool = False, columns: Optional[int] = None) -> None:
        self.stream = stream
        self.tty = tty
        self.columns = columns  # None: the terminal's width when drawing
        self.total = 0
        self.done = 0
        self.unit = "files"
        self._last_draw = 0.0
        self._last_tenth = 0

    def start(self, total: int, unit: str = "files") -> None:
        self.total, self.done, self.unit = total, 0, unit
        self._last_tenth = 0  # lines start at 10%; the bar is drawn at once
        self._draw(force=True)

    def advance(self, count: int = 1) -> None:
        self.done += count
        self._draw(force=self.done >= self.total)

    def finish(self) -> None:
        if self.stream is not None and self.tty and self.total:
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, force: bool) -> None:
        if self.stream is None or not self.total:
            return
        if self.tty:
            now = time.monotonic()
            if not force and now - self._last_draw < 0.1:
                return
            self._last_draw = now
            text = f"{self.done}/{self.total} {self.unit} ({100 * self.done // self.total}%)"
            columns = self.columns or shutil.get_terminal_size().columns
            width = min(self.BAR, columns - len(text) - 4)  # "[", "] " and a spare column for the cursor
            if width >= self.MIN_BAR:
                filled = width * self.done // self.total
                text = f"[{'#' * filled}{'.' * (width - filled)}] {text}"
            self.stream.write(f"\r{text[:max(columns - 1, 1)]}")
        else:
            tenth = 10 * self.done // self.total
            if tenth == self._last_tenth:
                return
            self._last_tenth = tenth
            self.stream.write(f"analysed {self.done}/{self.total} {self.unit} ({100 * self.done // self.total}%)\n")
        self.stream.flush()


def plural(count: int, noun: str) -> str:
    """``1 file``, ``2 files``: counts in messages and logs."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
