"""CUDA-only third-party packages (ASC206's list) and the code paths a user opts into to use them.

``use_memory_efficient_attention_xformers`` / ``if is_xformers_available():`` (diffusers), a class such as
``BnB4BitDiffusersQuantizer``: the code under them runs only when the user picked a package that has no NPU
build at all. The CUDA calls and device strings on such a path are not a migration's work item: the package
is (ASC206 reports its required imports), and on an NPU the path is either never taken or fails on the package
before any of them.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from typing import Iterator, List, Optional

from ..semantic import project
from ..walk import walk_tree
from .training import source_text

# package (or dotted prefix) -> what to use on NPU; facts from rules_data/sources/cuda/cuda_api_catalog.tsv
CUDA_ONLY_PACKAGES = {
    "apex": "torch.amp / torch_npu.optim.NpuFused* (Ascend ships its own apex fork)",
    "amp_C": "remove it (apex CUDA extension)",
    "flash_attn": "torch_npu.npu_fusion_attention or F.scaled_dot_product_attention",
    "xformers": "torch_npu.npu_fusion_attention or F.scaled_dot_product_attention",
    "bitsandbytes": "an NPU quantisation path (torch_npu quant ops)",
    "triton": "triton-ascend, or eager torch ops",
    "mmcv.ops": "mmcv built with NPU ops (mmcv/ops/csrc/pytorch/npu), or torch_npu ops",
    "pycuda": "torch_npu device APIs",
    "cupy": "torch tensors on the NPU",
    "numba.cuda": "torch ops on the NPU",
}

# NVIDIA-only libraries behind an optional feature, which ASC206 does not report (an NPU run does without the
# feature, nothing to port): NVML's bindings (NVIDIA GPU monitoring), Horovod (collectives over NCCL, RCCL or the
# CPU, no HCCL), Nunchaku (SVDQuant kernels for CUDA GPUs only), SonicMoE (CUTLASS kernels for Hopper/Blackwell);
# facts in rules_data/sources/cuda/cuda_api_catalog.tsv
NVIDIA_ONLY_FEATURES = ("pynvml", "horovod", "nunchaku", "sonicmoe")

# How code names the opt-in of a package with no NPU build at all (not triton, which has triton-ascend, nor
# mmcv.ops, which has NPU kernels): the package's name, bitsandbytes' conventional alias ``bnb``, and NVML for
# its bindings (``_HAS_NVML``, ``nvml_memory``).
OPT_IN_SPELLINGS = ("xformers", "flash_attn", "bitsandbytes", "bnb", "apex", "pycuda", "cupy", "nvml", "horovod",
                    "nunchaku", "sonicmoe")

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def names_cuda_only_package(name: str) -> bool:
    """``use_memory_efficient_attention_xformers``, ``is_flash_attn_available``, ``BnB4BitDiffusersQuantizer``."""
    name = name.lower()
    return any(spelling in name for spelling in OPT_IN_SPELLINGS)


def _spelled(test: ast.AST) -> Iterator[str]:
    """The names a test spells, and a string that names a package or a module of it (timm 1.0.31
    optim/_optim_factory.py:205, ``if opt_info.opt_class.startswith('apex.'):``)."""
    for node in walk_tree(test):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value.lower().split(".")[0] in OPT_IN_SPELLINGS:
            yield node.value


def _asks_for_package(test: ast.AST) -> bool:
    return any(names_cuda_only_package(name) for name in _spelled(test))


# the package each opt-in spelling names: bitsandbytes' conventional alias is ``bnb``
_PACKAGE_OF_SPELLING = {"bnb": "bitsandbytes"}


def packages_spelled(name: str) -> List[str]:
    """The packages of ``CUDA_ONLY_PACKAGES`` that ``name`` spells (``is_bnb_4bit_available`` -> bitsandbytes)."""
    name = name.lower()
    return [_PACKAGE_OF_SPELLING.get(spelling, spelling) for spelling in OPT_IN_SPELLINGS if spelling in name]


def _new_cache(_ctx) -> dict:
    return {}


def _cached_asks(test: ast.AST, asks: dict) -> bool:
    found = asks.get(id(test))
    if found is None:
        found = asks[id(test)] = _asks_for_package(test)
    return found


def _negated(test: ast.AST) -> bool:
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)


def _spells_package(lines) -> bool:
    """Whether the file may name a package's opt-in at all: an ASCII source that spells none of the words names
    none (a non-ASCII identifier may normalise to one, so such a file is always asked node by node)."""
    source = "".join(lines)
    if not source.isascii():
        return True
    source = source.lower()
    return any(spelling in source for spelling in OPT_IN_SPELLINGS)


# the packages of OPT_IN_SPELLINGS by their import names: no NPU build at all
_NO_NPU_BUILD = frozenset(("xformers", "flash_attn", "bitsandbytes", "apex", "pycuda", "cupy") + NVIDIA_ONLY_FEATURES)
_BLOCKS = ("body", "orelse", "finalbody")


def _imports_package(statement: ast.stmt) -> bool:
    """``import bitsandbytes as bnb``, ``from xformers.ops import memory_efficient_attention``, or such an import
    in a ``try`` whose every handler raises (ignite 0.5.5 metrics/gpu_info.py:36-42, ``from pynvml.smi import
    nvidia_smi`` then ``raise ModuleNotFoundError``): past it the package is there."""
    if isinstance(statement, ast.Try):
        return any(_imports_package(s) for s in statement.body) and all(
            handler.body and isinstance(handler.body[-1], ast.Raise) for handler in statement.handlers)
    if isinstance(statement, ast.Import):
        return any(alias.name.split(".")[0] in _NO_NPU_BUILD for alias in statement.names)
    return isinstance(statement, ast.ImportFrom) and not statement.level and (
        statement.module or "").split(".")[0] in _NO_NPU_BUILD


def _after_package_import(parent: ast.AST, child: ast.AST) -> bool:
    """``child`` is a statement of a block of ``parent`` that an earlier statement of the same block imports a
    package with no NPU build in (litgpt 0.5.13 lora.py:149-158, ``import bitsandbytes as bnb`` then
    ``self.linear.weight.cuda(weight.device)``): on an NPU the import fails before ``child`` runs."""
    for field in _BLOCKS:
        block = getattr(parent, field, None)
        if isinstance(block, list):
            for statement in block:
                if statement is child:
                    return False
                if _imports_package(statement):
                    return any(s is child for s in block)
    return False


def on_cuda_package_path(node: ast.AST, ctx) -> bool:
    """``node`` runs only on the path of a CUDA-only package the user opted into: in the body of an ``if`` that
    asks for it (``if use_xformers:``, ``if is_xformers_available():``), in the ``else`` of one that asks for its
    absence (``if not is_xformers_available(): raise ...``), in a function or class named after it, or after a
    function's own import of it in the same block."""
    if not ctx.memo("spells_cuda_only_package", lambda c: _spells_package(c.lines)):
        return False
    asks = ctx.memo("cuda_package_tests", _new_cache)  # id of an ``if`` test -> whether it asks for a package
    in_function = ctx.enclosing(*_FUNCTIONS) is not None
    for parent, child in ctx.lineage(node):
        if in_function and isinstance(child, ast.stmt) and not isinstance(parent, ast.Module) and \
                _after_package_import(parent, child):
            return True
        if isinstance(parent, ast.If) and _cached_asks(parent.test, asks):
            if (any(s is child for s in parent.body) and not _negated(parent.test)) or (
                    any(s is child for s in parent.orelse) and _negated(parent.test)):
                return True
        if isinstance(parent, _FUNCTIONS + (ast.ClassDef,)) and names_cuda_only_package(parent.name):
            return True
    return False


# the libraries a CUDA implementation is written in: their arrays and kernels are CUDA objects (ASC206's list)
_CUDA_LANGUAGES = ("cupy", "pycuda", "numba.cuda")


def _top_level_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """The import statements the module runs unconditionally: at its top level or in a top-level ``with``, not
    under a ``try`` or an ``if``."""
    for statement in tree.body:
        for inner in statement.body if isinstance(statement, (ast.With, ast.AsyncWith)) else [statement]:
            if isinstance(inner, (ast.Import, ast.ImportFrom)):
                yield inner


def _top_level_imports(tree: ast.Module) -> Iterator[str]:
    """The modules and names the module imports unconditionally (``from numba import cuda`` gives ``numba`` and
    ``numba.cuda``), absolute ones only."""
    for inner in _top_level_statements(tree):
        if isinstance(inner, ast.Import):
            yield from (alias.name for alias in inner.names)
        elif not inner.level and inner.module:
            yield inner.module
            yield from (f"{inner.module}.{alias.name}" for alias in inner.names)


def cuda_implementation(ctx) -> bool:
    """The module imports cupy, pycuda or numba's CUDA target unconditionally: it is a CUDA implementation, which
    its package swaps for another on other devices (nemo 2.5.0 collections/asr/parts/numba/rnnt_loss/rnnt.py and its
    numba CUDA kernels, verl 0.9.1 checkpoint_engine/nixl_checkpoint_engine.py with cupy buffers). Its torch.cuda
    calls and device strings feed those kernels: porting them does not make the module run on an NPU, replacing it
    does, and ASC206 reports the import. A guarded import (``try: import cupy``) keeps a fallback: not this."""
    def imports_cuda_language(c) -> bool:
        source = source_text(c)
        return any(language.partition(".")[0] in source for language in _CUDA_LANGUAGES) and any(
            module == language or module.startswith(language + ".")
            for module in _top_level_imports(c.tree) for language in _CUDA_LANGUAGES)
    return bool(ctx.memo("cuda_implementation", imports_cuda_language))


# NVIDIA's inference runtimes: TensorRT runs engines "on NVIDIA hardware" (pypi.org/project/tensorrt-cu12), TensorRT-LLM
# on NVIDIA GPU architectures only (nvidia.github.io/TensorRT-LLM/supported-hardware.html); facts in
# rules_data/sources/cuda/cuda_api_catalog.tsv
NVIDIA_RUNTIMES = ("tensorrt", "tensorrt_llm")


def _imports_runtime(tree: ast.Module) -> bool:
    return any(module.partition(".")[0] in NVIDIA_RUNTIMES for module in _top_level_imports(tree))


@lru_cache(maxsize=4096)
def _runtime_module(path: str) -> bool:
    """Does the project's module at ``path`` import an NVIDIA runtime unconditionally? Read once per process."""
    text = project.module_text(path)
    if text is None or not any(runtime in text for runtime in NVIDIA_RUNTIMES) or not _may_import_at_top(text):
        return False
    try:
        return _imports_runtime(ast.parse(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _may_import_at_top(text: str) -> bool:
    """Could the module import an NVIDIA runtime where ``_top_level_statements`` looks? Not where no ``with`` may start
    at column 0 and every line that names a runtime is indented, holds no ``;`` and continues no line ended by a
    backslash: a top-level statement starts at column 0, after a ``;`` or on a continued line, and another indented
    import is in a function, a class or a branch. A cheap test before parsing a module that names TensorRT only in
    its export code (yolov5 7.0.14 export.py, models/common.py)."""
    lines = text.splitlines()
    for number, line in enumerate(lines):
        indented = line.startswith((" ", "\t"))
        if not indented and line.startswith(("with", "async")):
            return True
        if any(runtime in line for runtime in NVIDIA_RUNTIMES) and (
                not indented or ";" in line or number and lines[number - 1].endswith("\\")):
            return True
    return False


def _spelled_modules(statement: ast.stmt) -> Iterator[str]:
    if isinstance(statement, ast.Import):
        yield from (alias.name for alias in statement.names)
    else:
        yield "." * statement.level + (statement.module or "")


def for_nvidia_runtime(path: Optional[str], tree: ast.Module) -> bool:
    """Does the module import TensorRT or TensorRT-LLM unconditionally, itself or through a module of its project
    that it so imports (f5-tts 1.1.22 runtime/triton_trtllm: ``benchmark.py`` and ``f5_tts_trtllm.py`` import
    ``tensorrt_llm``, the Triton model ``model.py`` imports ``f5_tts_trtllm``)? It serves an NVIDIA-only runtime:
    the port replaces the deployment (ATC, MindIE), none of its lines is ported, and no rule reports in it. A
    guarded import (``try: import tensorrt``, an import inside a function: an optional export) is not this."""
    if _imports_runtime(tree):
        return True
    if path is None:
        return False
    return any(found is not None and _runtime_module(found)
               for statement in _top_level_statements(tree) for dotted in _spelled_modules(statement)
               for found in [project.local_module(path, dotted)])
