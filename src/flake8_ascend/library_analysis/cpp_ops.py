"""Custom C++/CUDA operators of a source tree, and the devices they have kernels for.

Python reaches a custom operator through a binding: ``m.def("name", ...)`` in a
``PYBIND11_MODULE`` block, or ``m.def("name(...)")`` in a ``TORCH_LIBRARY`` /
``TORCH_LIBRARY_FRAGMENT`` block (``torch.ops.ns.name``).  Which devices an
operator runs on is read from what the binding reaches in the C++ sources:
device registrations (``REGISTER_DEVICE_IMPL(key, CUDA, fn)``, mmcv's
``REGISTER_NPU_IMPL(key, fn)``, ``TORCH_LIBRARY_IMPL(ns, CUDA, m)``) and
functions defined in device-specific files (``.cu``, a ``cuda/`` or ``npu/``
folder, a ``_npu.cpp`` suffix), following the functions the binding calls a
few levels deep.  This is text scanning after comments and preprocessor lines
are blanked out, not a C++ parser.
"""
from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

from ..files import SKIPPED_FOLDERS, SourceError, read_regular, relative

CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".cu", ".cuh", ".h", ".hpp")
NPU = "NPU"
ANY_DEVICE = "any device"  # a Composite* TORCH_LIBRARY_IMPL kernel: built from other torch ops
_DEVICE_WORDS = {"npu": NPU, "cuda": "CUDA", "cpu": "CPU", "mlu": "MLU", "mps": "MPS", "musa": "MUSA",
                 "hip": "ROCm", "rocm": "ROCm"}
_DISPATCH_KEYS = {"CUDA": "CUDA", "CPU": "CPU", "PrivateUse1": NPU, "NPU": NPU, "MPS": "MPS", "Meta": "Meta",
                  "CompositeImplicitAutograd": ANY_DEVICE, "CompositeExplicitAutograd": ANY_DEVICE}
_MAX_DEPTH = 4  # how many calls deep a binding is followed
_MAX_REACHED = 400

_COMMENT_OR_STRING = re.compile(
    r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/|^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', re.S | re.M)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_IDENT = re.compile(r"[A-Za-z_]\w*")
_FUNCTION = re.compile(
    r"\b([A-Za-z_]\w*)\s*\((?:[^;{}()]|\([^;{}()]*\))*\)\s*(?:const\s*|noexcept\s*|override\s*)*"
    r"(?:->[^;{}()]*)?\{")
_NOT_FUNCTIONS = frozenset("""if for while switch catch return sizeof decltype alignof static_assert defined
    PYBIND11_MODULE TORCH_LIBRARY TORCH_LIBRARY_FRAGMENT TORCH_LIBRARY_IMPL""".split())
_REGISTER_DEVICE = re.compile(r"\bREGISTER_DEVICE_IMPL\s*\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)")
_REGISTER_NAMED = re.compile(r"\bREGISTER_([A-Z0-9]+)_IMPL\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")
_PYBIND = re.compile(r"\bPYBIND11_MODULE\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
_LIBRARY = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
_LIBRARY_IMPL = re.compile(r"\bTORCH_LIBRARY_IMPL\s*\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
_BINDING_WORDS = frozenset("py arg def impl m torch dispatch c10 DispatchKey TORCH_SELECTIVE_SCHEMA".split())


@dataclass
class CppOp:
    """One operator Python can call."""

    name: str  # the pybind name, or ``ns::name`` for a TORCH_LIBRARY operator
    file: str  # where it is bound (relative path)
    line: int
    devices: Dict[str, str] = field(default_factory=dict)  # device -> first evidence ("path:line")

    @property
    def npu_implementation(self) -> Optional[str]:
        """Where its NPU (or device-independent) kernel is, if it has one."""
        return self.devices.get(NPU) or self.devices.get(ANY_DEVICE)

    @property
    def unsupported(self) -> bool:
        """It has device kernels, none of them for NPU (host-only C++ code runs anywhere)."""
        return bool(self.devices) and not self.npu_implementation

    @property
    def tips(self) -> str:
        kernels = ", ".join(sorted(self.devices)) or "none"
        where = f"bound in {self.file}:{self.line}; kernels: {kernels}"
        if self.npu_implementation:
            return (f"has an NPU implementation ({self.npu_implementation}), so it is not unsupported: "
                    f"build the library with its NPU ops; {where}")
        if not self.devices:
            return f"no device kernel found (host C++ code), so it is not unsupported; {where}"
        return f"no NPU implementation in the sources: port the kernel to NPU; {where}"


@dataclass
class CppOps:
    """The operators of a tree, by the name Python uses."""

    pybind: Dict[str, CppOp] = field(default_factory=dict)  # name -> op
    library: Dict[str, CppOp] = field(default_factory=dict)  # "ns::name" -> op
    modules: Set[str] = field(default_factory=set)  # PYBIND11_MODULE names written literally
    extension_name: bool = False  # a PYBIND11_MODULE(TORCH_EXTENSION_NAME, m): its name comes from setup.py
    files: int = 0
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # (relative path, why it was not read)

    def all_ops(self) -> List[CppOp]:
        return sorted([*self.pybind.values(), *self.library.values()], key=lambda op: op.name)


@dataclass
class _Source:
    rel: str
    text: str  # comments and preprocessor lines blanked, strings kept
    code: str  # the same with string contents blanked too (for braces and identifiers)
    newlines: List[int]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.newlines, offset) + 1


def _blank(match: "re.Match") -> str:
    text = match.group(0)
    if text.startswith('"'):
        return text
    return re.sub(r"[^\n]", " ", text)


def _read(path: Path, rel: str) -> _Source:
    raw = read_regular(path).decode("utf-8", errors="replace")
    text = _COMMENT_OR_STRING.sub(_blank, raw)
    code = _STRING.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', text)
    return _Source(rel, text, code, [i for i, c in enumerate(raw) if c == "\n"])


def _closing(code: str, start: int) -> int:
    """Offset just past the bracket that closes the ``{`` or ``(`` at ``start``."""
    opening = code[start]
    closing = "}" if opening == "{" else ")"
    depth = 0
    for index in range(start, len(code)):
        char = code[index]
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return index + 1
    return len(code)


def device_of_path(rel: str) -> Optional[str]:
    """The device a source file is specific to, from its suffix, folders or ``_<device>`` stem."""
    path = rel.lower()
    if path.endswith((".cu", ".cuh")):
        return "CUDA"
    parts = path.split("/")
    stem = parts[-1].rsplit(".", 1)[0]
    for word, device in _DEVICE_WORDS.items():
        if word in parts[:-1] or stem.endswith("_" + word):
            return device
    return None


class _Tree:
    """Definitions and registrations of every C++ file, then the operators' devices."""

    def __init__(self) -> None:
        self.functions: Dict[str, List[Tuple[str, int, frozenset]]] = {}  # name -> (file, line, identifiers)
        self.registrations: Dict[str, List[Tuple[str, str]]] = {}  # key -> (device, "file:line")
        # (kind, name, line, file, seeds, device) of every m.def / m.impl
        self.bindings: List[Tuple[str, str, int, str, frozenset, Optional[str]]] = []
        self.result = CppOps()

    def add(self, source: _Source) -> None:
        self._functions(source)
        self._registrations(source)
        self._pybind(source)
        self._library(source)

    def _functions(self, source: _Source) -> None:
        code, position = source.code, 0
        while True:
            match = _FUNCTION.search(code, position)
            if match is None:
                return
            name = match.group(1)
            brace = match.end() - 1
            if name in _NOT_FUNCTIONS:
                position = match.end()
                continue
            end = _closing(code, brace)
            identifiers = frozenset(_IDENT.findall(code, brace, end))
            self.functions.setdefault(name, []).append((source.rel, source.line(match.start(1)), identifiers))
            position = end

    def _registrations(self, source: _Source) -> None:
        for match in _REGISTER_DEVICE.finditer(source.code):
            key, device = match.group(1), match.group(2)
            self._register(key, _DISPATCH_KEYS.get(device, device), source, match.start())
        for match in _REGISTER_NAMED.finditer(source.code):
            if match.group(1) != "DEVICE":
                self._register(match.group(2), _DEVICE_WORDS.get(match.group(1).lower(), match.group(1)),
                               source, match.start())

    def _register(self, key: str, device: str, source: _Source, offset: int) -> None:
        self.registrations.setdefault(key, []).append((device, f"{source.rel}:{source.line(offset)}"))

    def _defs(self, source: _Source, block_start: int, var: str, verb: str):
        """(name string, offset, identifiers in the rest of the call) of each ``var.verb("...", ...)``."""
        end = _closing(source.code, block_start)
        pattern = re.compile(r"\b%s\s*\.\s*%s\s*\(\s*(?:TORCH_SELECTIVE_SCHEMA\s*\(\s*)?\"([^\"]*)\"" % (
            re.escape(var), verb))
        for match in pattern.finditer(source.text, block_start, end):
            paren = source.code.index("(", match.start())
            stop = _closing(source.code, paren)
            seeds = frozenset(_IDENT.findall(source.code, match.end(), stop)) - _BINDING_WORDS
            yield match.group(1), match.start(), seeds

    def _pybind(self, source: _Source) -> None:
        for block in _PYBIND.finditer(source.code):
            module, var = block.group(1), block.group(2)
            if module == "TORCH_EXTENSION_NAME":
                self.result.extension_name = True
            else:
                self.result.modules.add(module)
            for name, offset, seeds in self._defs(source, block.end() - 1, var, "def"):
                self.bindings.append(("pybind", name, source.line(offset), source.rel, seeds, None))

    def _library(self, source: _Source) -> None:
        for block in _LIBRARY.finditer(source.code):
            namespace, var = block.group(1), block.group(2)
            for schema, offset, seeds in self._defs(source, block.end() - 1, var, "def"):
                name = schema.split("(")[0].split(".")[0].strip()
                qualified = name if "::" in name else f"{namespace}::{name}"
                self.bindings.append(("library", qualified, source.line(offset), source.rel, seeds, None))
        for block in _LIBRARY_IMPL.finditer(source.code):
            namespace, key, var = block.group(1), block.group(2), block.group(3)
            device = device_of_path(source.rel) or _DISPATCH_KEYS.get(key, key)
            for name, offset, seeds in self._defs(source, block.end() - 1, var, "impl"):
                qualified = name if "::" in name else f"{namespace}::{name}"
                self.bindings.append(("impl", qualified, source.line(offset), source.rel, seeds, device))

    def finish(self) -> CppOps:
        impls = []
        for kind, name, line, rel, seeds, device in self.bindings:
            if kind == "impl":
                impls.append((name, line, rel, seeds, device))
                continue
            table = self.result.pybind if kind == "pybind" else self.result.library
            op = table.setdefault(name, CppOp(name, rel, line))
            self._reach(op, seeds)
        for name, line, rel, seeds, device in impls:
            op = self.result.library.setdefault(name, CppOp(name, rel, line))
            op.devices.setdefault(device, f"{rel}:{line}")
            self._reach(op, seeds)
        return self.result

    def _reach(self, op: CppOp, seeds: Iterable[str]) -> None:
        """Record the devices of what ``seeds`` reach through calls, ``_MAX_DEPTH`` levels deep."""
        frontier = [s for s in seeds if s in self.functions or s in self.registrations]
        seen = set(frontier)
        for _ in range(_MAX_DEPTH):
            following = []
            for name in frontier:
                for device, where in self.registrations.get(name, ()):
                    op.devices.setdefault(device, where)
                for rel, line, identifiers in self.functions.get(name, ()):
                    device = device_of_path(rel)
                    if device:
                        op.devices.setdefault(device, f"{rel}:{line}")
                        continue
                    for word in identifiers:
                        if word not in seen and (word in self.functions or word in self.registrations):
                            seen.add(word)
                            following.append(word)
            if len(seen) > _MAX_REACHED:
                return
            frontier = following


def cpp_files(root: Path) -> List[Path]:
    """The C/C++/CUDA sources under ``root`` (same folders skipped as for Python files)."""
    found = []
    for folder, subfolders, names in os.walk(root, followlinks=False):
        subfolders[:] = sorted(n for n in subfolders if n not in SKIPPED_FOLDERS)
        found.extend(Path(folder) / n for n in sorted(names) if n.endswith(CPP_SUFFIXES))
    return found


def scan(root: Path, files: Optional[Iterable[Path]] = None) -> CppOps:
    """The custom operators bound in the C++ sources under ``root``."""
    tree = _Tree()
    count = 0
    skipped = []
    for path in cpp_files(root) if files is None else files:
        rel = relative(path, root)
        try:
            source = _read(path, rel)
        except SourceError as error:  # unreadable, not a regular file (a FIFO named k.cu) or over the size cap
            skipped.append((rel, str(error)))
            continue
        tree.add(source)
        count += 1
    result = tree.finish()
    result.files = count
    result.skipped = skipped
    return result
