"""Code that runs only to export a model for another runtime: ONNX export and deployment conversion.

An exported graph must hold standard operators: the converter (``torch.onnx``, mmdeploy, Ascend's ATC, which reads
ONNX) knows no ``torch_npu`` API, so the NPU's fused APIs would break the export, and a one-off trace has no step
whose speed or reproducibility matters. Advice for running on the NPU (the affinity, dynamic-shape, performance and
precision reports) is wrong there; what stops the code on an NPU machine (the CUDA and support codes) is not.

A function is on an export path when:

- its name says so: a word ``onnx``, ``export`` or ``deploy`` between underscores (``forward_onnx``,
  ``switch_to_deploy``, ``onnx_export``; not ``exported`` or ``deployment``), or the name of its module or of a
  package above it does (torchtune 0.6.1 ``modules/_export/``, yolov5 ``export.py``);
- a ``def`` around it is on one (a forward built and installed by a deploy conversion);
- the file calls it, and every call sits in a function on an export path (``_convert_gau``, which only
  ``switch_to_deploy`` calls), followed up to a few calls back.

Examples come from mmpose 1.3.2 ``rtmo_head.py`` (``switch_to_deploy`` -> ``_convert_gau`` -> a nested ``_forward``)
and diffusers 0.42.1 ``safety_checker.py`` (``forward_onnx``).
"""
from __future__ import annotations

import ast
import os
import re
from typing import Dict, Sequence

from ..semantic.model import SemanticModel

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_EXPORT_NAME = re.compile(r"(?:^|_)(?:onnx|export|deploy)(?:_|$)", re.IGNORECASE)
_HOPS = 4  # calls followed back from a helper to a function named for export


class ExportPaths:
    """The per-file answers, memoised per function."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._known: Dict[int, bool] = {}

    def on_path(self, ancestors: Sequence[ast.AST]) -> bool:
        """Is the innermost function among ``ancestors`` (outermost first) on an export path?"""
        functions = [node for node in ancestors if isinstance(node, _FUNCTIONS)]
        return any(self._exports(function, 0) for function in functions)

    def _exports(self, function: ast.AST, hops: int) -> bool:
        found = self._known.get(id(function))
        if found is None:
            self._known[id(function)] = False  # recursion guard
            found = self._known[id(function)] = self._decide(function, hops)
        return found

    def _decide(self, function: ast.AST, hops: int) -> bool:
        if _EXPORT_NAME.search(function.name):
            return True
        if hops >= _HOPS:
            return False
        sites = self.model.summaries.call_sites(function)
        return bool(sites) and all(self._caller_exports(site, hops) for site in sites)

    def _caller_exports(self, site: ast.Call, hops: int) -> bool:
        caller = self.model.function(site)
        while caller is not None:
            if self._exports(caller, hops + 1):
                return True
            caller = self.model.function(caller)
        return False


def exporting_module(path: str) -> bool:
    """Does the module's path name it for export (a folder or the file itself)?"""
    return any(_EXPORT_NAME.search(part) for part in re.split(r"[\\/]", os.path.splitext(path)[0]))


def on_export_path(ctx) -> bool:
    """Is the node the engine is checking in a function on an export path (module docstring)?"""
    if ctx.memo("export_module", lambda c: exporting_module(c.path)):
        return True
    return ctx.memo("export_paths", lambda c: ExportPaths(c.model)).on_path(ctx.stack)
