"""Terminal progress: a redrawn bar on a TTY, a line every 10% otherwise."""
from __future__ import annotations

import time
from typing import Optional, TextIO


class Progress:
    """Counts work done; ``stream=None`` keeps it silent (``--quiet``)."""

    BAR = 30

    def __init__(self, stream: Optional[TextIO], tty: bool = False) -> None:
        self.stream = stream
        self.tty = tty
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
            filled = self.BAR * self.done // self.total
            bar = "#" * filled + "." * (self.BAR - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} {self.unit} ({100 * self.done // self.total}%)")
        else:
            tenth = 10 * self.done // self.total
            if tenth == self._last_tenth:
                return
            self._last_tenth = tenth
            self.stream.write(f"analysed {self.done}/{self.total} {self.unit} ({100 * self.done // self.total}%)\n")
        self.stream.flush()
