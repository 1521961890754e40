"""Compare two tensor dumps of the overflow detector, operator by operator (``ascend-analyse compare``).

A dump is the folder the detector writes (``{dump_path}/{step}/{rank}/{index}.{op}.{input|output}.{k}.pt``,
see ``msft_dynamic_analysis/overflow.py``), or one of its ``{step}`` or ``{step}/{rank}`` folders.  Folders of
the same step and rank are compared; when each dump holds exactly one, those two are compared whatever their
step.  In a folder, operators are lined up by order and name (``difflib.SequenceMatcher`` over the operator
names, so an operator present in only one run does not shift the rest), and each matched operator's tensors
are compared by role and position: cosine similarity, max absolute error, max relative error (relative to B,
the reference), and a verdict:

fail  the shapes differ, inf/nan sit at different places, or the cosine similarity is below 0.99 (the
      threshold Ascend's accuracy comparison accepts)
pass  cosine similarity at least 0.9999 and every element within ``|a - b| <= 1e-3 + 1e-2 * |b|``
      (``torch.allclose`` with rtol=1e-2, atol=1e-3)
warn  anything between

Operators or tensors found in one dump only are listed with the result ``unmatched``.  Needs torch at run
time (imported here, not by the linter); ``.npy`` dumps need numpy too.
"""
from __future__ import annotations

import csv
import difflib
import inspect
import io
import os
import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from ..files import SourceError, read_regular, regular_file_problem

HEADER = ("Step", "Rank", "Op", "Tensor", "Index A", "Index B", "Dtype A", "Dtype B", "Shape A", "Shape B",
          "Cosine", "Max Abs Error", "Max Relative Error", "Result", "Message", "File Path", "Line Number")
COSINE_FAIL = 0.99
COSINE_PASS = 0.9999
RTOL, ATOL = 1e-2, 1e-3
REL_FLOOR = 1e-12  # |b| below this counts as this in the relative error
RESULTS = ("pass", "warn", "fail", "unmatched")
_FILE = re.compile(r"^(\d+)\.(.+)\.(input|output)\.(\d+)\.(pt|npy)$")


class CompareError(Exception):
    """A dump that cannot be read or compared; one line for the user."""


@dataclass
class Op:
    """One dumped operator."""

    index: int
    name: str  # aten::addmm, aten::sum.dim_IntList
    tensors: Dict[Tuple[str, int], Path] = field(default_factory=dict)  # (role, k) -> file
    site: Tuple[str, str] = ("", "")  # (file, line) from ops.csv


def op_name(stem: str) -> str:
    """``aten.addmm.default`` -> ``aten::addmm``; ``aten.sum.dim_IntList`` -> ``aten::sum.dim_IntList``."""
    namespace, _, rest = stem.partition(".")
    name, _, overload = rest.partition(".")
    return f"{namespace}::{name}" + (f".{overload}" if overload and overload != "default" else "")


def read_folder(folder: Path) -> List[Op]:
    """The operators of one ``{step}/{rank}`` folder, by index."""
    ops: Dict[int, Op] = {}
    for path in folder.iterdir():
        match = _FILE.match(path.name)
        if not match or not path.is_file():
            continue
        index, stem, role, k, _ = match.groups()
        op = ops.setdefault(int(index), Op(int(index), op_name(stem)))
        op.tensors[(role, int(k))] = path
    manifest = folder / "ops.csv"
    if os.path.lexists(manifest):
        try:
            text = read_regular(manifest).decode("utf-8", errors="replace")
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
        except (SourceError, csv.Error) as error:
            raise CompareError(f"cannot read {manifest}: {error}") from None
        for row in rows:
            index = row.get("Index") or ""
            op = ops.get(int(index)) if index.isdigit() else None
            if op is not None:
                op.site = (row.get("File Path", ""), row.get("Line Number", ""))
    return [ops[i] for i in sorted(ops)]


def _has_dump_files(folder: Path) -> bool:
    return any(_FILE.match(p.name) for p in folder.iterdir())


def discover(root: Path) -> Dict[Tuple[str, str], Path]:
    """{(step, rank): folder} of a dump root, a ``{step}`` folder or a ``{step}/{rank}`` folder."""
    if not root.is_dir():
        raise CompareError(f"dump folder not found: {root}")
    if _has_dump_files(root):
        return {(root.parent.name, root.name): root}
    found = {}
    for level1 in sorted(p for p in root.iterdir() if p.is_dir() and p.name.isdigit()):
        if _has_dump_files(level1):
            found[(root.name, level1.name)] = level1
        for level2 in sorted(p for p in level1.iterdir() if p.is_dir() and p.name.isdigit()):
            if _has_dump_files(level2):
                found[(level1.name, level2.name)] = level2
    if not found:
        raise CompareError(f"no dump files in {root} (expected {{step}}/{{rank}}/{{index}}.{{op}}.input.{{k}}.pt)")
    return found


def pair_folders(a: Dict, b: Dict) -> List[Tuple[Tuple[str, str], Optional[Path], Optional[Path]]]:
    """Folders to compare: the same (step, rank) on both sides, or the only folder of each."""
    if len(a) == 1 and len(b) == 1 and set(a) != set(b):
        (key, folder_a), (_, folder_b) = next(iter(a.items())), next(iter(b.items()))
        return [(key, folder_a, folder_b)]
    keys = sorted(set(a) | set(b), key=lambda k: (int(k[0]) if k[0].isdigit() else -1, k))
    return [(key, a.get(key), b.get(key)) for key in keys]


def align(ops_a: Sequence[Op], ops_b: Sequence[Op]) -> Iterator[Tuple[Optional[Op], Optional[Op]]]:
    """Pairs of operators in order: matched by name along the longest common sequence, the rest alone."""
    matcher = difflib.SequenceMatcher(None, [o.name for o in ops_a], [o.name for o in ops_b], autojunk=False)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if tag == "equal":
            yield from zip(ops_a[a1:a2], ops_b[b1:b2])
        else:
            for op in ops_a[a1:a2]:
                yield op, None
            for op in ops_b[b1:b2]:
                yield None, op


def _import_torch():
    try:
        with warnings.catch_warnings():  # e.g. "Failed to initialize NumPy" from a torch without numpy beside it
            warnings.simplefilter("ignore")
            import torch
    except ImportError:
        raise CompareError("comparing dumps needs torch (pip install torch)") from None
    return torch


@contextmanager
def _weights_only_enforced():
    """Drop ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` while loading: on some torch versions it overrides the call."""
    saved = os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = saved


def load_tensor(torch, path: Path):
    """A dumped tensor on the CPU.

    Dumps are untrusted: ``.pt`` files are read with torch's weights-only unpickler
    and nothing else (a pickle that would run code is reported unreadable, never
    retried unsafely), ``.npy`` files without pickle, and only regular files.
    """
    problem = regular_file_problem(path)
    if problem:
        raise CompareError(f"cannot read {path}: {problem}")
    try:
        if path.suffix == ".npy":
            try:
                import numpy
            except ImportError:
                raise CompareError(f"reading {path.name} needs numpy (pip install numpy)") from None
            return torch.from_numpy(numpy.load(path, allow_pickle=False))
        if "weights_only" not in inspect.signature(torch.load).parameters:
            raise CompareError(f"cannot read {path} safely: torch {torch.__version__} has no weights-only "
                               "loading (torch >= 1.13 has)")
        with _weights_only_enforced():
            value = torch.load(path, map_location="cpu", weights_only=True)
    except CompareError:
        raise
    except Exception as error:
        raise CompareError(f"cannot read {path}: not a plain tensor file ({type(error).__name__})") from None
    if not isinstance(value, torch.Tensor):
        raise CompareError(f"{path} does not hold a tensor")
    return value


def metrics(torch, a, b) -> Tuple[str, str, str, str, str]:
    """(cosine, max abs error, max relative error, result, message) of tensor ``a`` against the reference ``b``."""
    if tuple(a.shape) != tuple(b.shape):
        return "", "", "", "fail", f"shapes differ: {_shape(a)} vs {_shape(b)}"
    if a.is_complex() != b.is_complex():
        return "", "", "", "fail", "one tensor is complex, the other is not"
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    x = a.detach().reshape(-1).to(torch.float64)
    y = b.detach().reshape(-1).to(torch.float64)
    message = ""
    if not (torch.equal(torch.isnan(x), torch.isnan(y)) and torch.equal(torch.isposinf(x), torch.isposinf(y))
            and torch.equal(torch.isneginf(x), torch.isneginf(y))):
        message = "inf/nan at different places"
    finite = torch.isfinite(x) & torch.isfinite(y)
    x, y = x[finite], y[finite]
    if x.numel() == 0 or torch.equal(x, y):
        return "1", "0", "0", "fail" if message else "pass", message
    diff = (x - y).abs()
    size_y = y.abs()
    norm_x, norm_y = float(x.norm()), float(y.norm())
    if norm_x == 0.0 or norm_y == 0.0:
        cosine = 0.0
    else:
        cosine = max(-1.0, min(1.0, float(torch.dot(x, y)) / (norm_x * norm_y)))
    max_abs = float(diff.max())
    max_rel = float((diff / size_y.clamp_min(REL_FLOOR)).max())
    if message or cosine < COSINE_FAIL:
        result = "fail"
    elif cosine >= COSINE_PASS and bool((diff <= ATOL + RTOL * size_y).all()):
        result = "pass"
    else:
        result = "warn"
    return f"{cosine:.8g}", f"{max_abs:.6g}", f"{max_rel:.6g}", result, message


def _shape(value) -> str:
    return "[%s]" % ",".join(str(int(size)) for size in value.shape)


def _dtype(value) -> str:
    return str(value.dtype).replace("torch.", "")


def compare_ops(torch, key, op_a: Optional[Op], op_b: Optional[Op]) -> Iterator[tuple]:
    """The rows of one aligned pair of operators."""
    step, rank = key
    op = op_a or op_b
    site = op_a.site if op_a and op_a.site != ("", "") else (op_b.site if op_b else ("", ""))
    index_a = op_a.index if op_a else ""
    index_b = op_b.index if op_b else ""
    if op_a is None or op_b is None:
        where = "A" if op_b is None else "B"
        yield (step, rank, op.name, "-", index_a, index_b, "", "", "", "", "", "", "", "unmatched",
               f"operator only in dump {where}", *site)
        return
    for role, k in sorted(set(op_a.tensors) | set(op_b.tensors), key=lambda t: (t[0] != "input", t[1])):
        name = f"{role}.{k}"
        if (role, k) not in op_a.tensors or (role, k) not in op_b.tensors:
            where = "A" if (role, k) in op_a.tensors else "B"
            yield (step, rank, op.name, name, index_a, index_b, "", "", "", "", "", "", "", "unmatched",
                   f"tensor only in dump {where}", *site)
            continue
        a = load_tensor(torch, op_a.tensors[(role, k)])
        b = load_tensor(torch, op_b.tensors[(role, k)])
        yield (step, rank, op.name, name, index_a, index_b, _dtype(a), _dtype(b), _shape(a), _shape(b),
               *metrics(torch, a, b), *site)


def compare(dump_a: Path, dump_b: Path) -> List[tuple]:
    """Every row of compare_result.csv for two dumps; raises CompareError on unreadable input."""
    folders_a, folders_b = discover(Path(dump_a)), discover(Path(dump_b))
    torch = _import_torch()
    rows: List[tuple] = []
    for key, folder_a, folder_b in pair_folders(folders_a, folders_b):
        ops_a = read_folder(folder_a) if folder_a else []
        ops_b = read_folder(folder_b) if folder_b else []
        for op_a, op_b in align(ops_a, ops_b):
            rows.extend(compare_ops(torch, key, op_a, op_b))
    return rows
