"""Which dotted module name each file of a library is imported by.

A file inside a package (its folder has an ``__init__.py``) is named from the
topmost folder of its package chain, even above the analysed folder, so both
``-i mmcv-2.1.0`` and ``-i mmcv-2.1.0/mmcv`` name ``mmcv/ops/nms.py``
``mmcv.ops.nms``, and a src layout (``src/transformers/...``) gives
``transformers...``.  A file outside any package is named by its path below
the analysed folder (``tests/test_nms.py`` -> ``tests.test_nms``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, List, NamedTuple

from ..files import relative


class ModuleFile(NamedTuple):
    path: Path  # absolute
    rel: str  # relative to the analysed folder, with ``/``
    module: str  # dotted import name
    is_package: bool  # an ``__init__.py``


def module_files(root: Path, files: Iterable[Path]) -> List[ModuleFile]:
    """Name every file; ``root`` is the analysed folder."""
    files = list(files)
    packages = {path.parent for path in files if path.name == "__init__.py"}
    above: Dict[Path, bool] = {}

    def is_package_dir(folder: Path) -> bool:
        if folder in packages:
            return True
        if folder == root or root in folder.parents:  # inside the input: the file list is complete
            return False
        if folder not in above:
            above[folder] = (folder / "__init__.py").is_file()
        return above[folder]

    named = []
    for path in files:
        rel = relative(path, root)
        stem = path.name[:-3] if path.name.endswith(".py") else path.name
        is_package = stem == "__init__"
        folder = path.parent
        if is_package_dir(folder):
            base = folder
            while base.parent != base and is_package_dir(base.parent):
                base = base.parent
            parts = list(path.relative_to(base.parent).parts)
        else:
            parts = rel.split("/")
        parts[-1] = stem
        if is_package:
            parts = parts[:-1]
        module = ".".join(parts) or stem
        named.append(ModuleFile(path, rel, module, is_package))
    return named


def absolute(name: str, module: str, is_package: bool) -> str:
    """``..a.b`` seen in ``module`` -> the absolute dotted name ('' if it climbs above the top)."""
    if not name.startswith("."):
        return name
    rest = name.lstrip(".")
    level = len(name) - len(rest)
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 >= len(base):  # beyond the top-level package
        return ""
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([rest] if rest else []))
