"""Files migrated with ``torch_npu.contrib.transfer_to_npu``: the CUDA rules stay quiet about what it maps.

Importing the module (in any form, anywhere in the file) patches ``torch.cuda``
with ``torch_npu.npu``, rewrites ``'cuda'`` devices in the arguments of the
functions that take one and the ``'nccl'`` backend of ``init_process_group``.
It rewrites no comparison, no ``torch.cuda`` name that ``torch_npu.npu`` lacks
(``torch.cuda.nvtx``) and no other library: those are still reported.
"""
from __future__ import annotations

import ast

from ..data import load_transfer_to_npu
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
    """Whether the file imports transfer_to_npu, or the project does (``Config.transfer_to_npu``); memoised per
    file, the text test keeps other files cheap."""
    if ctx.config.transfer_to_npu:
        return True
    return ctx.memo("transfer_to_npu", lambda c: imports_transfer_to_npu(c.tree, c.lines))


def imports_transfer_to_npu(tree: ast.AST, lines) -> bool:
    """Whether the module imports transfer_to_npu in any form."""
    return any("transfer_to_npu" in line for line in lines) and _imports_it(tree, load_transfer_to_npu()["module"])


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
