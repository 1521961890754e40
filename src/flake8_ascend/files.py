"""Finding and reading the Python files of an input tree, without importing anything."""
from __future__ import annotations

import io
import os
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Tuple

# Folders that hold no project source: version control, caches, virtual environments.
SKIPPED_FOLDERS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".tox", ".nox", ".venv", "venv", ".eggs", "node_modules", "site-packages",
})


class SourceError(Exception):
    """A file that cannot be read as Python source text; the message says why."""


@dataclass
class FileSet:
    root: Path  # report paths are relative to it
    files: List[Path]  # sorted by relative path
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # (relative path, reason)


def _rel(path: Path, root: Path) -> str:
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
        found.skipped.append((_rel(Path(error.filename), root), f"cannot list folder ({error.strerror})"))

    for folder, subfolders, names in os.walk(root, onerror=unreadable, followlinks=False):
        here = Path(folder)
        keep = []
        for name in subfolders:
            path = here / name
            if name in SKIPPED_FOLDERS or os.path.normcase(os.path.abspath(path)) in excluded:
                continue
            if path.is_symlink():
                found.skipped.append((_rel(path, root), "symbolic link to a folder, not followed"))
            elif (path / "pyvenv.cfg").is_file():
                found.skipped.append((_rel(path, root), "virtual environment"))
            else:
                keep.append(name)
        subfolders[:] = keep
        for name in names:
            if name.endswith(".py"):
                found.files.append(here / name)
    found.files.sort(key=lambda p: _rel(p, root))
    return found


def read_source(path: Path) -> str:
    """The text of a Python file: UTF-8, or the encoding its BOM/coding cookie declares."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise SourceError(f"cannot read ({error.strerror or error})") from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        raise SourceError(f"not decodable as UTF-8 or its declared encoding ({reason})") from None
