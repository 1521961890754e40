"""Finding and reading the files of an input tree, without importing anything.

Input files are untrusted (docs/security.md): ``read_regular`` reads only
regular files, up to ``MAX_FILE_BYTES``, and every reader of input files uses it.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Tuple

# Folders that hold no project source: version control, caches, virtual environments.
SKIPPED_FOLDERS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".tox", ".nox", ".venv", "venv", ".eggs", "node_modules", "site-packages",
})


# Size cap of every file the tool reads from the input (sources, C++/CUDA files, -api CSVs, pyproject.toml):
# the largest Python file of the corpora is under 1 MiB; a bigger "source" is generated data or an attack.
MAX_FILE_BYTES = 16 * 2**20


NOT_REGULAR = "not a regular file (a FIFO, socket or device): not read"


class SourceError(Exception):
    """A file that cannot be read as Python source text; the message says why."""


def regular_file_problem(path: Path) -> str:
    """Why ``path`` (symbolic links followed) is not a readable regular file, or ""; never raises."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return f"cannot read ({error.strerror or error})"
    return "" if stat.S_ISREG(mode) else NOT_REGULAR


def read_regular(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; raises SourceError otherwise.

    FIFOs, sockets and devices (``x.py -> /dev/zero``) are refused before they are
    opened, and the opened file is checked again, so nothing can make a read block
    or run away with the memory.
    """
    problem = regular_file_problem(path)
    if problem:
        raise SourceError(problem)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise SourceError(f"cannot read ({error.strerror or error})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SourceError(NOT_REGULAR)
        try:
            data = handle.read(limit + 1)
        except OSError as error:
            raise SourceError(f"cannot read ({error.strerror or error})") from None
    if len(data) > limit:
        raise SourceError(f"larger than the size cap of {limit // 2**20} MiB: not read")
    return data


@dataclass
class FileSet:
    root: Path  # report paths are relative to it
    files: List[Path]  # sorted by relative path
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # (relative path, reason)


def lstat_problem(path: Path) -> str:
    """Why ``path`` itself cannot be looked at (a path longer than the system allows), or ""."""
    try:
        os.lstat(path)
    except OSError as error:
        return f"cannot read ({error.strerror or error})"
    return ""


def relative(path, root) -> str:
    """``path`` relative to ``root`` with ``/`` separators: how reports and logs name a file."""
    return Path(os.path.relpath(path, root)).as_posix()


def collect(input_path: Path, exclude: Iterable[Path] = ()) -> FileSet:
    """The ``.py`` files of a folder (or the one file given), sorted; symlinked folders are not followed.

    ``exclude`` lists folders never to enter (the output folder when it lies inside the input).
    """
    if input_path.is_file():
        return FileSet(input_path.parent, [input_path])
    root = input_path
    excluded = {os.path.normcase(os.path.abspath(p)) for p in exclude}
    found = FileSet(root, [])

    def unreadable(error: OSError) -> None:
        found.skipped.append((relative(error.filename, root), f"cannot list folder ({error.strerror})"))

    for folder, subfolders, names in os.walk(root, onerror=unreadable, followlinks=False):
        here = Path(folder)
        keep = []
        for name in subfolders:
            path = here / name
            if name in SKIPPED_FOLDERS or os.path.normcase(os.path.abspath(path)) in excluded:
                continue
            problem = lstat_problem(path)
            if problem:
                found.skipped.append((relative(path, root), problem))
            elif path.is_symlink():
                found.skipped.append((relative(path, root), "symbolic link to a folder, not followed"))
            elif os.path.isfile(path / "pyvenv.cfg"):  # os.path: an unreadable folder answers False
                found.skipped.append((relative(path, root), "virtual environment"))
            else:
                keep.append(name)
        subfolders[:] = keep
        for name in names:
            if name.endswith(".py"):
                found.files.append(here / name)
    found.files.sort(key=lambda p: relative(p, root))
    return found


def report_folders(out_dir: Path) -> List[Path]:
    """Folders ``ascend-analyse`` makes in ``out_dir`` (reports, hidden temporary ones).

    Every mode leaves them out when the input holds ``out_dir``: the lint modes and
    the instrumented copies see the same files.
    """
    found = []
    for path in out_dir.iterdir():
        if (path.name.endswith("_analysis") or "_analysis." in path.name) and path.is_dir():
            found.append(path)
    return found
