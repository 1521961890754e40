"""Where Python reaches a custom C++ operator: the collector's extension part (see ``summary``).

Three ways in, all recorded as ``CUDA_OP`` root causes of the enclosing node:

- an imported compiled module: ``from . import _C; _C.op(...)`` or ``torch.ops.ns.op(...)``, read
  from the call's qualified name;
- a handle a loader returned: ``ext_module = ext_loader.load_ext('_ext', ['op', ...])`` (mmcv),
  ``kernel = torch.utils.cpp_extension.load(...)``, also assigned to a ``global`` inside a function
  (transformers), or ``import ext as kernel`` there after a ``load("ext", ...)``; then any
  ``kernel.op`` reference, called or not (``fn = kernel.forward_bf16``);
- settled after the walk, since a handle may be bound below the functions that use it.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set, Tuple

CUDA_OP = "cuda_op"
LOADER_NAMES = frozenset({"load_ext", "load", "load_inline", "load_kernel"})
_EXTENSION_LOADERS = frozenset({"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"})


class ExtensionCalls:
    """Mixed into ``summary.Collector``, whose ``s``, ``ops``, ``_owner``, ``_binding``,
    ``_is_global``, ``_absolute`` and ``_in_library`` it uses."""

    def init_extensions(self) -> None:
        self.handles: Dict[int, Optional[frozenset]] = {}  # id(binding) -> ops a loader provides (None: any)
        self.global_handles: Dict[str, Optional[frozenset]] = {}  # the same for module-level names
        self.pending: List[Tuple[str, Optional[int], str, str, int]] = []  # key, id(binding), name, op, line
        self.globals: Dict[int, Set[str]] = {}  # id(function) -> names it declares ``global``
        self.global_imports: Dict[str, str] = {}  # ``global m; import ext as m`` in a function: m -> ext
        self.loaded: Set[str] = set()  # extension names given to loaders in this file
        self.listed: Set[str] = set()  # operator names listed by load_ext calls

    def may_be_operator(self, node: ast.Attribute) -> bool:
        return node.attr in self.ops.pybind or node.attr in self.listed

    def custom_op(self, node: ast.Call, qualname: str, key: str) -> bool:
        """Record a call of an imported operator (``_C.op(...)``, ``torch.ops.ns.op(...)``); True if one."""
        op = self._op_of(self._absolute(qualname))
        if op:
            self.s.causes.append((key, CUDA_OP, op, node.lineno, "", False))
        return bool(op)

    def handle_use(self, node: ast.Attribute, ctx) -> None:
        """``handle.op`` where ``handle`` may be a loaded extension; settled in ``finish``."""
        key, _ = self._owner(ctx)
        name = node.value.id
        binding = self._binding(node.value, ctx)
        module_level = binding is None or self._is_global(binding, name)
        self.pending.append((key, None if module_level else id(binding), name, node.attr, node.lineno))

    def _op_of(self, dotted: str) -> str:
        """The operator a dotted call target names, or ''."""
        ops = self.ops
        if dotted.startswith("torch.ops."):
            parts = dotted.split(".")
            name = f"{parts[2]}::{parts[3]}" if len(parts) == 4 else ""
            return name if name in ops.library else ""
        module, _, name = dotted.rpartition(".")
        if not module or name not in ops.pybind or module in ops.modules:
            return ""
        last = module.rsplit(".", 1)[-1]
        if last in ops.ext_modules or module in self.loaded or (ops.extension_name and self._in_library(module)):
            return name
        return ""

    def declared_global(self, function) -> Set[str]:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return set()
        if id(function) not in self.globals:
            self.globals[id(function)] = {name for node in ast.walk(function) if isinstance(node, ast.Global)
                                          for name in node.names}
        return self.globals[id(function)]

    def extension_handle(self, call: ast.Call, ctx):
        """Ops a loader call provides (None: any), or False when it is no extension loader."""
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        qualname = ctx.qualname(func) or ""
        if name != "load_ext" and qualname not in _EXTENSION_LOADERS:
            return False
        named = call.args[:1] + [k.value for k in call.keywords if k.arg == "name"]
        self.loaded.update(a.value for a in named if isinstance(a, ast.Constant) and isinstance(a.value, str))
        for arg in call.args[1:2]:
            if isinstance(arg, (ast.List, ast.Tuple)):
                listed = frozenset(e.value for e in arg.elts
                                   if isinstance(e, ast.Constant) and isinstance(e.value, str))
                self.listed |= listed
                return listed
        return None

    def bind_handle(self, target: ast.Name, loaded: Optional[frozenset], module_level: bool, enclosing,
                    ctx) -> None:
        """``target = <loader call>`` providing ``loaded``."""
        if module_level or target.id in self.declared_global(enclosing):
            known = self.global_handles.get(target.id, frozenset())
            self.global_handles[target.id] = None if known is None or loaded is None else known | loaded
            return
        binding = ctx.model.binding(target)
        if binding is not None:
            self.handles[id(binding)] = loaded

    def global_import(self, node: ast.Import, enclosing) -> None:
        """``global kernel; import ext as kernel`` inside a function."""
        declared = self.declared_global(enclosing)
        for alias in node.names if declared else ():
            local = alias.asname or alias.name.split(".")[0]
            if local in declared:
                self.global_imports[local] = alias.name

    def finish(self) -> None:
        """Settle the ``handle.op`` references now that every handle of the file is known."""
        for key, binding, variable, name, line in self.pending:
            if binding is not None:
                if binding not in self.handles:
                    continue
                listed = self.handles[binding]
            elif variable in self.global_handles:
                listed = self.global_handles[variable]
            elif variable in self.global_imports and (
                    self.global_imports[variable] in self.loaded
                    or self.global_imports[variable].rsplit(".", 1)[-1] in self.ops.ext_modules):
                listed = None
            else:
                continue
            if name in self.ops.pybind or (listed is not None and name in listed):
                self.s.causes.append((key, CUDA_OP, name, line, "", False))
