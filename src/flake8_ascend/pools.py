"""Worker process pools that an interruption ends cleanly.

The parent owns SIGINT and SIGTERM: the CLI turns them into an exception that
cancels the pending work, and the pool's shutdown then ends the workers after
their running chunk.  Workers ignore both signals, which a terminal or a job
runner sends to the whole process group: otherwise each would print a
traceback (SIGINT) or die under the pool's feet, which breaks the pool with a
traceback of its own (SIGTERM), or run the parent's handler it inherited.
"""
from __future__ import annotations

import signal
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence


def _quiet_then(initializer: Callable[..., None], *args: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    initializer(*args)


def process_pool(workers: int, initializer: Callable[..., None], initargs: Sequence[object]) -> ProcessPoolExecutor:
    """A ``ProcessPoolExecutor`` whose workers run ``initializer(*initargs)`` after quieting their signals."""
    return ProcessPoolExecutor(max_workers=workers, initializer=_quiet_then, initargs=(initializer, *initargs))
