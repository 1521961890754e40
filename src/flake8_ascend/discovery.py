"""Import every module of a plugin package once, so the classes in it register themselves.

Rules (``rules/``) and ``ascend-analyse`` modes (``modes/``) are both found
this way: adding one is dropping a module into the package.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache


@lru_cache(maxsize=None)
def import_submodules(package: str) -> None:
    """Import each public module (name not starting with ``_``) of ``package``, at most once per process."""
    path = importlib.import_module(package).__path__
    for module in pkgutil.iter_modules(path):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package}.{module.name}")
