"""From a file under ``-i`` to text, lines and a syntax tree: the one ladder every reader of sources climbs.

The lint modes, third_party, ``--fix``/``--diff``, migrate and the instrumented copies all read sources
here, so a file is decoded, split into lines and parsed the same way everywhere, and in the same way as
flake8 does it for the plugin (docs/security.md):

* decoding: the BOM or coding cookie's encoding, else UTF-8; a file that is not decodable that way (a
  bogus or non-text cookie such as ``rot13``, invalid UTF-8) is read as Latin-1, as flake8 reads it, and
  marked ``exact = False`` so that nothing rewrites it;
* lines: ``\\n``, ``\\r\\n`` and ``\\r`` end a line, as for Python's tokenizer and flake8; ``str.splitlines``
  also breaks at form feeds, ``\\x0b``, ``\\x1c``-``\\x1e``, ``\\x85`` and U+2028/2029, which would shift every later
  line number;
* parsing: the stdlib ``ast``; what it refuses becomes a ``SourceError`` with a one-line reason;
* walking: a tree too deep for the default recursion limit is walked again in a thread with a larger stack
  (``deep``), so a chain of 500 ``+`` costs no finding;
* libcst: given only files within its budget (``check_libcst``), since it crashes the process on deep
  nesting and spends minutes and gigabytes on files of many small nodes.
"""
from __future__ import annotations

import ast
import io
import sys
import threading
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, TypeVar, Union

from .files import SourceError, read_regular

T = TypeVar("T")

FALLBACK_ENCODING = "latin-1"  # what flake8 reads a file with when its declared encoding fails
MAX_NESTING = 1000  # syntax-tree depth handed to libcst; it crashed at 5,000 nested lambdas, not at 2,500
# syntax-tree nodes handed to libcst: the largest file of eleven real code bases (diffusers'
# attention_processor.py, 240 KB) has 34,405; a 200 KB one-line call has 66,000 and costs libcst a minute
MAX_NODES = 50_000
DEEP_RECURSION = 60_000  # recursion limit of the ``deep`` thread: ``ast`` trees stop about 3,000 levels deep
DEEP_STACK = 512 * 2**20  # bytes of stack for it (reserved, used only as deep as the walk goes)


def split_lines(text: str) -> List[str]:
    """The lines of ``text`` with their endings, split where Python's tokenizer and flake8 split them."""
    return io.StringIO(text, newline="").readlines()


@dataclass(frozen=True)
class Source:
    """The text of one Python file and its lines."""

    text: str
    lines: List[str]
    exact: bool = True  # decoded as declared: a rewrite can be written back in the same encoding
    note: str = ""  # why it was not, for the log

    @classmethod
    def of(cls, text: str) -> "Source":
        return cls(text, split_lines(text))


def decode(raw: bytes) -> Source:
    """``raw`` decoded as Python (BOM, coding cookie, else UTF-8), or as flake8 reads it when that fails."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        text = raw.decode(FALLBACK_ENCODING)
        note = f"not decodable as UTF-8 or its declared encoding ({reason})"
        return Source(text, split_lines(text), exact=False, note=note)
    return Source.of(text)


def read_source(path: Path) -> Source:
    """The decoded text of a Python file; raises SourceError when the file cannot be read (files.read_regular)."""
    return decode(read_regular(path))


def parse(source: Source, path: str = "<unknown>") -> ast.Module:
    """The ``ast`` tree of ``source``; raises SourceError with a one-line reason when Python refuses it."""
    try:
        return ast.parse(source.text, filename=path)
    except SyntaxError as error:
        if "\0" in source.text:  # Python 3.11 says "line None", 3.12 names no line either
            raise SourceError(_null_byte(source.text)) from None
        where = f" at line {error.lineno}" if error.lineno else ""
        raise SourceError(f"syntax error{where}: {error.msg}") from None
    except ValueError:  # Python < 3.11.4: a null byte
        raise SourceError(_null_byte(source.text)) from None
    except (RecursionError, MemoryError) as error:  # Python's own parser gives up on the nesting
        raise SourceError(f"nested too deeply for Python's parser ({type(error).__name__})") from None


def _null_byte(text: str) -> str:
    line = text.count("\n", 0, text.index("\0")) + 1
    return f"a null byte at line {line}: not Python source"


def deep(function: Callable[..., T], *args) -> T:
    """``function(*args)``, retried with room for deep recursion when the default limit stops it.

    Walks over ``ast`` trees recurse once or more per level; Python parses about 3,000 levels,
    the default limit stops at 1,000 frames.  The retry runs in a thread with ``DEEP_STACK``
    bytes of stack, so a raised limit cannot overflow the C stack; files that need it are rare,
    so the common path costs nothing.
    """
    try:
        return function(*args)
    except RecursionError:
        pass
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as error:  # handed to the caller's thread
            outcome.append((False, error))

    limit = sys.getrecursionlimit()
    stack = threading.stack_size(DEEP_STACK)
    sys.setrecursionlimit(max(limit, DEEP_RECURSION))
    try:
        thread = threading.Thread(target=run, name="deep-walk", daemon=True)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(stack)
        sys.setrecursionlimit(limit)
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value


class TooComplex(ValueError):
    """A file libcst should not parse: nested deeper than its native parser survives, or too many nodes."""


def check_libcst(source: Union[str, bytes], depth: int = MAX_NESTING, nodes: int = MAX_NODES) -> None:
    """Raise ``TooComplex`` when ``source`` is beyond what libcst parses safely and in bounded time.

    libcst crashes the whole process on a 20,000-term expression or 5,000 nested
    lambdas (real code stays far below ``MAX_NESTING`` levels), and costs about
    a millisecond and 7 KB per node.  Depth and nodes are counted without
    recursion.  A file the stdlib parser rejects (a syntax error, or syntax newer
    than this Python) is left to libcst unless one of its statements has more
    than ``2 * depth`` tokens: depth cannot be told then.
    """
    try:
        tree = ast.parse(source)
    except (RecursionError, MemoryError):
        raise TooComplex(f"nested more than {depth} levels deep, more than libcst parses safely") from None
    except (SyntaxError, ValueError):
        if _longest_statement(source) > 2 * depth:
            raise TooComplex(f"a statement of more than {2 * depth} tokens that does not parse, more than libcst "
                             "parses safely") from None
        return
    stack = [(tree, 1)]
    count = 0
    while stack:
        node, level = stack.pop()
        count += 1
        if level > depth:
            raise TooComplex(f"nested more than {depth} levels deep, more than libcst parses safely")
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    if count > nodes:
        raise TooComplex(f"{count} syntax-tree nodes, more than the {nodes} libcst is given (it would take "
                         "minutes and gigabytes)")


def _longest_statement(source: Union[str, bytes]) -> int:
    """The most tokens in one logical line (the whole file when it cannot be tokenized)."""
    longest = count = 0
    if isinstance(source, bytes):
        tokens = tokenize.tokenize(io.BytesIO(source).readline)
    else:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    try:
        for token in tokens:
            count += 1
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                longest, count = max(longest, count), 0
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, LookupError):
        return max(longest, count, len(source))
    return longest
