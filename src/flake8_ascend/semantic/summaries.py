"""Facts that cross function boundaries inside one file, built once per function or class on first use.

- ``returns(function)``: what a function or method returns when its ``return`` statements agree (its
  return annotation first);
- ``function(name, scope)`` / ``method(name, scope)``: the value of calling a module-level function or
  a method of the enclosing class by name;
- ``parameter(function, name)``: what the file's call sites pass for a parameter (``f(x > 0)`` /
  ``self.f(mask=m)``), when they all agree;
- ``attributes(cls)``: what the methods of a class assign to ``self.x`` (or ``register_buffer``), when
  the assignments agree;
- ``constructed(cls)``: ``self.x = nn.SiLU()`` in ``__init__``: the qualified name each attribute is built by.

The values themselves come from ``values.Values``; a summary only says which expressions to ask about.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ..calls import is_constant
from .names import Scope
from .values import (ARRAY, BUILT_ON_HOST, CONTAINER, HOST, NUMBER, OTHER, TENSOR, UNKNOWN, UNKNOWN_VALUE, Value, agree,
                     annotation_is_tensor, walk)
from ..walk import assign_targets, parameter_defaults

if TYPE_CHECKING:
    from .model import SemanticModel

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_NUMBERS = frozenset(("int", "float"))  # annotations of Python numbers (the builtins, not a local class)


def enclosing_class(scope: Optional[Scope]) -> Optional[Scope]:
    """The class scope whose method (possibly through nested functions) ``scope`` is in."""
    while scope is not None and not (scope.parent is not None and scope.parent.is_class):
        scope = scope.parent
    return scope.parent if scope is not None else None


class Summaries:
    """Per-function and per-class facts of one file (``model.summaries``)."""

    def __init__(self, model: "SemanticModel") -> None:
        self.model = model
        self._functions: Optional[Dict[str, ast.AST]] = None
        self._classes: Optional[Dict[str, ast.ClassDef]] = None
        self._returns: Dict[int, Value] = {}
        self._attributes: Dict[int, Dict[str, Value]] = {}
        self._constructed: Dict[int, Dict[str, str]] = {}
        self._parameters: Dict[Tuple[int, str], Value] = {}
        self._registers: Optional[bool] = None

    # -- functions --------------------------------------------------------------------------------
    def classes(self) -> Dict[str, ast.ClassDef]:
        """Module-level classes by name."""
        if self._classes is None:
            self._classes = {n.name: n for n in self.model.tree.body if isinstance(n, ast.ClassDef)}
        return self._classes

    def function(self, name: str, scope: Scope, depth: int) -> Value:
        """Calling ``name()`` from ``scope``: the return of the module-level function it names."""
        node = self._module_function(name, scope)
        return UNKNOWN_VALUE if node is None else self.returns(node, depth)

    def method(self, name: str, scope: Scope, depth: int) -> Optional[Value]:
        """Calling ``self.name()`` from ``scope``: the return of the class's method (None: no such method)."""
        node = self._method(name, scope)
        return None if node is None else self.returns(node, depth)

    def callee(self, call: ast.Call) -> Optional[ast.AST]:
        """The ``def`` of this file that ``f(...)`` (a module-level function) or ``self.f(...)`` (a method of the
        calling method's class) runs, or None."""
        func, scope = call.func, self.model.scope(call)
        if isinstance(func, ast.Name):
            return self._module_function(func.id, scope)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            return self._method(func.attr, scope)
        return None

    def _module_function(self, name: str, scope: Scope) -> Optional[ast.AST]:
        if self._functions is None:
            self._functions = {n.name: n for n in self.model.tree.body if isinstance(n, _FUNCTIONS)}
        node = self._functions.get(name)
        home = scope.home(name)
        return node if node is not None and home is not None and home.node is self.model.tree else None

    def _method(self, name: str, scope: Scope) -> Optional[ast.AST]:
        cls = enclosing_class(scope)
        if cls is None:
            return None
        return next((n for n in cls.node.body if isinstance(n, _FUNCTIONS) and n.name == name), None)

    def returns(self, node: ast.AST, depth: int = 0) -> Value:
        """What a function returns when all its ``return`` statements agree on a kind."""
        found = self._returns.get(id(node))
        if found is not None:
            return found
        self._returns[id(node)] = UNKNOWN_VALUE  # recursion guard
        values = self.model.values
        scope = self.model.scopes.get(id(node))
        found_values = []
        stack = list(node.body)
        while stack:
            stmt = stack.pop()
            if isinstance(stmt, ast.Return):
                found_values.append(values.value_in(stmt.value, scope, depth) if stmt.value is not None
                                    else Value(OTHER))
            elif not isinstance(stmt, _NESTED):
                stack.extend(c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.stmt) or isinstance(
                    c, ast.excepthandler))
        result = self.annotated(node.returns, scope.parent or scope) if node.returns is not None else UNKNOWN_VALUE
        if result.kind == UNKNOWN:
            result = agree(found_values)
        self._returns[id(node)] = result
        return result

    def call_sites(self, function: ast.AST) -> List[ast.Call]:
        """The calls of ``function`` in this file: ``f(...)`` where the name ``f`` is this def, or
        ``self.f(...)`` in another method of the same class; for an ``__init__``, also ``C(...)`` where ``C`` is
        its class (timm 1.0.31 data/naflex_loader.py:415, ``NaFlexPrefetchLoader(loader, ..., device=device)``)."""
        model = self.model
        home = model.scope(function)
        found = []
        if home.is_class and function.name == "__init__" and isinstance(home.node, ast.ClassDef):
            name = home.node.name
            found += [call for call in model.calls(name) if isinstance(call.func, ast.Name)
                      and model.scope(call).home(name) is home.parent]
        for call in model.calls(function.name):
            func = call.func
            if home.is_class:
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                        and model.function(call) is not function and enclosing_class(model.scope(call)) is home:
                    found.append(call)
            elif isinstance(func, ast.Name) and model.scope(call).home(func.id) is home:
                found.append(call)
        return found

    def parameter(self, function: ast.AST, name: str, depth: int) -> Value:
        """What every call site of ``function`` in this file passes for parameter ``name`` (or its default),
        when they agree; unknown without call sites or when one spreads ``*args`` / ``**kwargs``."""
        key = (id(function), name)
        found = self._parameters.get(key)
        if found is not None:
            return found
        self._parameters[key] = UNKNOWN_VALUE  # recursion guard
        args = function.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        if self.model.receiver(function) is not None:
            positional = positional[1:]  # self / cls
        defaults = parameter_defaults(args)
        values = self.model.values
        passed = []
        for call in self.call_sites(function):
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                passed = []
                break
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and name in positional and positional.index(name) < len(call.args):
                arg = call.args[positional.index(name)]
            if arg is None:
                arg = defaults.get(name)
            if arg is None:
                passed = []
                break
            passed.append(values.value_in(arg, self.model.scope(arg), depth))
        found = self._parameters[key] = agree(passed)
        return found

    def annotated(self, annotation: ast.AST, scope: Scope) -> Value:
        """An annotation: ``Tensor``, ``np.ndarray``, ``int``, ``Tuple[np.ndarray, np.ndarray]``."""
        resolver = self.model.resolver(scope)
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr) and is_constant(
                annotation.right, None):
            annotation = annotation.left  # ``list[float] | None``
        if isinstance(annotation, ast.Subscript):
            base = resolver.qualname(annotation.value) or getattr(annotation.value, "id", "")
            if base.rsplit(".", 1)[-1] == "Optional":
                return self.annotated(annotation.slice, scope)
            if base.rsplit(".", 1)[-1] in ("List", "list", "Sequence") and isinstance(annotation.slice, ast.Name) \
                    and annotation.slice.id in ("float", "int"):
                return Value(CONTAINER, items=(Value(NUMBER),))  # ``List[float]``: numbers, not a tensor
            if base.rsplit(".", 1)[-1] in ("Tuple", "tuple") and isinstance(annotation.slice, ast.Tuple):
                return Value(CONTAINER, items=tuple(self.annotated(e, scope) for e in annotation.slice.elts))
            return Value(TENSOR) if annotation_is_tensor(annotation, resolver) else UNKNOWN_VALUE
        if annotation_is_tensor(annotation, resolver):
            return Value(TENSOR)
        if isinstance(annotation, ast.Name) and annotation.id in _NUMBERS and scope.home(annotation.id) is None:
            return Value(NUMBER)  # ``stride: int``: a Python number
        qualname = resolver.qualname(annotation) if isinstance(annotation, (ast.Name, ast.Attribute)) else None
        if qualname is not None and qualname.split(".")[0] == "PIL":
            return Value(OTHER, HOST)  # ``image: PIL.Image.Image`` (diffusers image_processor.py:524): not a tensor
        return Value(ARRAY, HOST) if qualname in ("numpy.ndarray", "pandas.DataFrame") else UNKNOWN_VALUE

    # -- classes ----------------------------------------------------------------------------------
    def self_attribute(self, attr: str, scope: Scope, depth: int) -> Value:
        """``self.x`` read in a method: what the class's methods assign to it, when they agree."""
        cls = enclosing_class(scope)
        if cls is None:
            return UNKNOWN_VALUE
        table = self._attributes.get(id(cls))
        if table is None:
            self._attributes[id(cls)] = {}  # recursion guard while the table is built
            self._attributes[id(cls)] = table = self._class_attributes(cls, depth)
        return table.get(attr, UNKNOWN_VALUE)

    def _buffers(self) -> bool:
        if self._registers is None:
            self._registers = any("register_buffer" in line for line in self.model.lines)
        return self._registers

    def _class_attributes(self, cls: Scope, depth: int) -> Dict[str, Value]:
        values = self.model.values
        found: Dict[str, List[Value]] = {}
        for node in cls.node.body:
            if not isinstance(node, _FUNCTIONS):
                continue
            scope = self.model.scopes.get(id(node))
            for stmt in self.model.flow(node).assignments:
                targets = assign_targets(stmt)
                for target in targets:
                    if is_self_attribute(target) and stmt.value is not None:
                        found.setdefault(target.attr, []).append(values.value_in(stmt.value, scope, depth))
            for call in walk(node) if self._buffers() else ():  # self.register_buffer('name', tensor)
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                        and call.func.attr == "register_buffer" and len(call.args) >= 2 \
                        and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
                    found.setdefault(call.args[0].value, []).append(Value(TENSOR))
        table = {}
        for attr, assigned in found.items():  # several assignments count only when they agree
            # a tensor built with no device and kept on the object may be a parameter or buffer the module's
            # ``.to(device)`` moves, or be moved by any other method: its device is not known here
            assigned = [Value(v.kind, None, v.const, v.readout, v.items, v.boolean) if v.device == BUILT_ON_HOST
                        else v for v in assigned]
            if len({v.kind for v in assigned}) == 1:
                devices = {v.device for v in assigned}
                table[attr] = assigned[0] if len(assigned) == 1 else Value(
                    assigned[0].kind, devices.pop() if len(devices) == 1 else None)
        return table

    def constructed(self, cls: ast.ClassDef, depth: int = 0) -> Dict[str, str]:
        """``self.<attr>`` -> qualified name of what ``__init__`` builds it with (``self.act = nn.SiLU()``),
        after what the base classes defined in the same module build (a subclass keeps its parent's modules)."""
        found = self._constructed.get(id(cls))
        if found is None:
            found = self._constructed[id(cls)] = {}
            for base in cls.bases if depth < _MAX_BASES else ():
                parent = next((s for s in getattr(self.model.tree, "body", ()) if isinstance(s, ast.ClassDef)
                               and isinstance(base, ast.Name) and s.name == base.id and s is not cls), None)
                if parent is not None:
                    found.update(self.constructed(parent, depth + 1))
            for stmt in cls.body:
                if isinstance(stmt, _FUNCTIONS) and stmt.name == "__init__":
                    for node in self.model.scopes[id(stmt)].assignments:
                        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                            qualname = self.model.qualname(node.value.func)
                            for target in node.targets:
                                if qualname and is_self_attribute(target):
                                    found[target.attr] = qualname
        return found


_MAX_BASES = 8  # base classes followed within one module (a cycle of names stops there)


def is_self_attribute(target: ast.AST) -> bool:
    """``self.<attr>``."""
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
