"""ASC205: building or loading a custom CUDA extension."""
from __future__ import annotations

import ast

from ..registry import Rule
from ..walk import walk_tree

CPP_EXTENSION = "torch.utils.cpp_extension."


def _has_cuda_source(node: ast.AST) -> bool:
    """Any string literal under ``node`` that names a .cu/.cuh file."""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith((".cu", ".cuh"))
               for n in walk_tree(node))


class CudaExtension(Rule):
    code = "ASC205"
    summary = "custom CUDA extension build or load (CUDAExtension, cpp_extension.load of .cu, load_inline cuda_sources)"
    node_types = (ast.Call,)
    trigger_words = ("cpp_extension",)
    why = "CUDA kernels cannot run on an NPU; the operator must be re-implemented (Ascend C / OpPlugin) or replaced."
    example = "ext = load(name='ops', sources=['ops.cpp', 'ops_kernel.cu'])"
    use_instead = "Port the kernel to Ascend C or compose it from torch ops; build with torch_npu's cpp_extension (NpuExtension)."
    source = "rules_data/sources/cuda/cuda_api_catalog.tsv (docs: cpp_extension.load unsupported)"
    fires = [
        ("from torch.utils.cpp_extension import CUDAExtension\ne = CUDAExtension('x', ['a.cpp', 'b.cu'])\n", 2),
        ("from torch.utils import cpp_extension\nm = cpp_extension.load('m', sources=['k.cu'])\n", 2),
        ("from torch.utils.cpp_extension import load_inline\nm = load_inline('m', cpp_sources=s, cuda_sources=c)\n", 2),
    ]
    passes = [
        "from torch.utils.cpp_extension import load\nm = load('m', sources=['k.cpp'])\n",
        "from torch.utils.cpp_extension import CppExtension\ne = CppExtension('x', ['a.cpp'])\n",
    ]

    def check(self, node: ast.Call, ctx) -> None:
        qualname = ctx.qualname(node.func) or ""
        if not qualname.startswith(CPP_EXTENSION):
            return
        name = qualname[len(CPP_EXTENSION):]
        if name == "CUDAExtension":
            what = "builds a CUDA extension"
        elif name == "load" and _has_cuda_source(node):
            what = "compiles .cu sources"
        elif name == "load_inline" and any(k.arg == "cuda_sources" for k in node.keywords):
            what = "compiles inline CUDA sources"
        else:
            return
        ctx.report(node, self.code, f"{qualname} {what}: CUDA kernels do not run on NPU", api=qualname,
                   tips="re-implement the kernel for NPU")
