"""Rule data: the generated per-version support tables shipped in ``data/``.

Each version file is loaded at most once per process.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

DATA_DIR = Path(__file__).parent / "data"


class UnknownVersionError(ValueError):
    """Raised for a torch_npu version the rule data does not cover."""


def _load_json(name: str) -> dict:
    # bytes: json decodes UTF-8 itself, without the text layer's newline pass over the 600 KB version tables
    return json.loads((DATA_DIR / name).read_bytes())


@lru_cache(maxsize=None)
def _index() -> dict:
    return _load_json("index.json")


def known_versions() -> List[str]:
    return list(_index()["versions"])


def default_version() -> str:
    return _index()["default"]


def version_key(version: str) -> Tuple[int, ...]:
    """Sort key of ``2.10.0`` / ``2.1.0.post17``: numeric parts, a plain release before its post releases."""
    base, _, post = version.partition(".post")
    return tuple(int(part) for part in base.split(".")) + (int(post) if post else -1,)


_VERSION_LIKE = re.compile(r"\d{1,3}(\.\d{1,3}){0,2}(\.post\d{1,3}|rc\d{1,3})?")


def resolve_version(spelling: Optional[str]) -> str:
    """``None`` -> the default; ``2.7`` -> ``2.7.1``; unknown -> UnknownVersionError."""
    if spelling is None or spelling == "":
        return default_version()
    index = _index()
    spelling = spelling.strip()
    if spelling in index["versions"]:
        return spelling
    if spelling in index["aliases"]:
        return index["aliases"][spelling]
    # the value may come from the analysed project's configuration: quote it only when it is a version number
    shown = repr(spelling) if _VERSION_LIKE.fullmatch(spelling) else "(not a version number)"
    raise UnknownVersionError(f"unknown torch_npu version {shown}; known versions: {', '.join(index['versions'])}")


class VersionData:
    """The facts of one torch_npu version, as rules use them."""

    def __init__(self, raw: dict) -> None:
        self.version: str = raw["meta"]["version"]
        self.meta: dict = raw["meta"]
        # rows as tuples: the garbage collector stops tracking tuples of strings, so the thousands of rows add
        # nothing to every collection of the process that loaded them
        self.apis: Dict[str, Tuple[str, ...]] = {api: tuple(row) for api, row in raw["apis"].items()}
        self.official: Dict[str, Tuple[str, ...]] = {  # table rows the evidence overrides
            api: tuple(row) for api, row in raw.get("official", {}).items()}
        self.restrictions: Dict[str, dict] = raw.get("restrictions", {})  # facts of each partial row's note
        self.npu_all = frozenset(raw.get("npu_all", ()))
        # ATen base names with an NPU kernel in the wheel's npu_native_functions yaml (empty: no wheel, unknown)
        self.aten_npu_ops = frozenset(raw.get("aten_npu_ops", ()))
        # status -> the last part of every API some table gives it (``tails``), and of every ``torch.Tensor``
        # method (``method_tails``): an attribute spelled otherwise names no API of that status, a method only when
        # its chain resolves to an import, which spares ASC101-103 resolving it
        tails: Dict[str, Set[str]] = {}
        methods: Dict[str, Set[str]] = {}
        for table in (self.apis, self.official):
            for api, row in table.items():
                tail = api.rpartition(".")[2]
                tails.setdefault(row[0], set()).add(tail)
                if api.startswith("torch.Tensor."):
                    methods.setdefault(row[0], set()).add(tail)
        self.tails: Dict[str, FrozenSet[str]] = {status: frozenset(names) for status, names in tails.items()}
        self.method_tails: Dict[str, FrozenSet[str]] = {status: frozenset(names) for status, names in methods.items()}
        self.transfer_to_npu: Dict[str, List[str]] = raw.get("transfer_to_npu", {})

    def api_status(self, qualname: str, official: bool = False) -> Optional[Tuple[str, str, str]]:
        """(status, note, how decided) for a public torch API, or None when unknown to the data.

        ``official``: what the version's official support table says even where the kernel evidence
        shows it is stale (``--official-lists``, for audits that must match the official tool).
        """
        row = (official and self.official.get(qualname)) or self.apis.get(qualname)
        return (row[0], row[1], row[2]) if row else None


@lru_cache(maxsize=None)
def load_version(version: str) -> VersionData:
    """Load the data of an exact version (see ``resolve_version``)."""
    return VersionData(_load_json(f"torch_npu-{version}.json"))


@lru_cache(maxsize=None)
def load_transfer_to_npu() -> dict:
    """What ``torch_npu.contrib.transfer_to_npu`` maps (built by tools/build_transfer_to_npu.py)."""
    return _load_json("transfer_to_npu.json")


@lru_cache(maxsize=None)
def load_cuda_fixes() -> dict:
    """The rewrites of CUDA code that --fix and -m migrate apply (built by tools/build_cuda_fixes.py)."""
    return _load_json("cuda_fixes.json")


@lru_cache(maxsize=None)
def load_mmcv_ops() -> dict:
    """Which names of ``mmcv.ops`` are CUDA-only in mmcv 2.1.0 (built by tools/build_mmcv_ops.py)."""
    return _load_json("mmcv_ops.json")


@lru_cache(maxsize=None)
def load_affinity() -> dict:
    """The NPU affinity and fused APIs, by kind (built by tools/build_affinity.py)."""
    return _load_json("affinity.json")



@lru_cache(maxsize=None)
def load_frameworks() -> dict:
    """Where training frameworks choose the device and backend themselves (built by tools/build_frameworks.py)."""
    return _load_json("frameworks.json")
