"""Files migrated with ``torch_npu.contrib.transfer_to_npu``: the CUDA rules stay quiet about what it maps.

Importing the module (in any form, anywhere in the file) patches ``torch.cuda``
with ``torch_npu.npu``, rewrites ``'cuda'`` devices in the arguments of the
functions that take one and the ``'nccl'`` backend of ``init_process_group``.
It rewrites no comparison, no ``torch.cuda`` name that ``torch_npu.npu`` lacks
(``torch.cuda.nvtx``) and no other library: those are still reported.

A module is migrated too where it imports a library module that imports transfer_to_npu itself (MindSpeed's
``mindspeed.megatron_adaptor``: ``data/frameworks.json``), or where the ``__init__.py`` of a package above it does
either: Python runs those before the module.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from typing import Sequence, Tuple

from ..data import load_frameworks, load_transfer_to_npu
from ..walk import walk_tree


def _imports_it(tree: ast.AST, module: str) -> bool:
    parent, _, leaf = module.rpartition(".")
    for node in walk_tree(tree):
        if isinstance(node, ast.Import):
            if any(a.name == module or a.name.startswith(module + ".") for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == module or node.module.startswith(module + "."):
                return True
            if node.module == parent and any(a.name == leaf for a in node.names):
                return True
        elif isinstance(node, ast.Call) and node.args:  # importlib.import_module(...) / __import__(...)
            first = node.args[0]
            if isinstance(first, ast.Constant) and first.value == module:
                return True
    return False


def migrated(ctx) -> bool:
    """Whether the file or a package ``__init__`` above it imports transfer_to_npu, or the project does
    (``Config.transfer_to_npu``); memoised per file, the text test keeps other files cheap."""
    if ctx.config.transfer_to_npu:
        return True
    return ctx.memo("transfer_to_npu", _migrated)


def _migrated(ctx) -> bool:
    if imports_transfer_to_npu(ctx.tree, ctx.lines):
        return True
    return any(_init_migrates(tree) for tree in ctx.package_inits(_names_an_importer))


@lru_cache(maxsize=256)
def _init_migrates(tree: ast.Module) -> bool:
    """A package ``__init__`` that imports transfer_to_npu (kept per parsed ``__init__``: every module of the
    package asks)."""
    return any(_imports_it(tree, module) for module in _importing_modules())


def imports_transfer_to_npu(tree: ast.AST, lines: Sequence[str]) -> bool:
    """Whether the module imports transfer_to_npu, or a library module that imports it, in any form."""
    return _names_an_importer("".join(lines)) and any(_imports_it(tree, module) for module in _importing_modules())


def _names_an_importer(text: str) -> bool:
    """Does ``text`` spell the last name of transfer_to_npu or of a library module that imports it, as every import
    of one does? The test before a module or a package ``__init__`` is walked (or parsed) for the import."""
    return any(module.rpartition(".")[2] in text for module in _importing_modules())


@lru_cache(maxsize=None)
def _importing_modules() -> Tuple[str, ...]:
    return (load_transfer_to_npu()["module"], *load_frameworks()["transfer_to_npu_importers"])


def maps(qualname: str, data) -> bool:
    """Whether transfer_to_npu maps the qualified name (``data``: the version's ``torch_npu.npu`` names)."""
    facts = load_transfer_to_npu()
    if qualname in facts["replaced"] or any(qualname == p or qualname.startswith(p + ".") for p in facts["patched"]):
        return True
    parts = qualname.split(".")
    return parts[:2] == ["torch", "cuda"] and len(parts) > 2 and parts[2] in data.npu_all


def quiet(ctx, qualname: str) -> bool:
    """The name is mapped and the file imports transfer_to_npu."""
    return migrated(ctx) and maps(qualname, ctx.data)  # memoised per file: asked first
