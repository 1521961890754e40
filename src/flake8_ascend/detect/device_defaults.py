"""Device parameters whose CUDA default no call relies on: every call in the file, or in the package for a function
or class other modules import, passes the device, so the default never picks it (ASC201/ASC202 stay quiet there)."""
from __future__ import annotations

import ast
import re
from typing import List, Optional, Tuple

from ..calls import MISSING, argument
from ..walk import defaulted_parameters

CUDA_STRING = re.compile(r"cuda(:\d+)?")
_DEPTH = 3  # subclasses of subclasses followed down (``_subclass_calls``)


def in_unused_default(node: ast.AST, ctx) -> bool:
    """Is ``node`` (the node being checked) inside the default of a device parameter that no call relies on
    (``default_unused``), however the default is chosen (gluonts 0.16.2 attack_var.py:143,
    ``device="cuda" if torch.cuda.is_available() else "cpu"`` where the one construction passes ``device=``)?"""
    for parent, child in ctx.lineage(node):
        if isinstance(parent, ast.arguments):
            function = next((n for n in reversed(ctx.stack) if n.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef)
                             and n.args is parent), None)
            return any(mentions_device_arg(a) and default_unused(ctx, function, a) for a in defaulted(parent, child))
        if isinstance(parent, ast.stmt):
            return False
    return False


def _cuda_default_parameter(function: ast.AST) -> Optional[ast.arg]:
    """The device parameter of ``function`` whose default is a CUDA device string."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return next((a for a, d in defaulted_parameters(function.args) if mentions_device_arg(a)
                 and isinstance(d, ast.Constant) and isinstance(d.value, str) and CUDA_STRING.fullmatch(d.value)),
                None)


def _passes(call: ast.Call, function: ast.AST, arg: ast.arg, method: bool) -> bool:
    """Does ``call`` give ``arg`` a value (by keyword, by position, or through ``*args``/``**kwargs``)?"""
    return _given(call, function, arg, method) is not MISSING


def _given(call: ast.Call, function: ast.AST, arg: ast.arg, method: bool):
    """What ``call`` passes for ``arg``: ``calls.argument``."""
    positional = [a.arg for a in function.args.posonlyargs + function.args.args][1 if method else 0:]
    index = positional.index(arg.arg) if arg.arg in positional else None
    return argument(call, arg.arg, index)


def default_unused(ctx, function: Optional[ast.AST], arg: ast.arg) -> bool:
    """No call in the file relies on the CUDA default of ``arg``: the file calls the function, or (for a method)
    the class's methods that share such a default, and every one of those calls passes the device
    (mmpose 1.3.2 mlvl_point_generator.py: ``self.single_level_grid_priors(..., device=device)``; edpose_head.py:
    a nested helper called with the real device), and so does every call in the other modules of the package of
    a module-level function or class (easyocr 1.7.2 ``DBNet(..., device=device)`` in detection_db.py). A method
    whose class never calls it is judged by the calls of a method so named in the file, else in the package
    (mmdet3d 1.4.0: a subclass's ``anchors_single_range``, called by the base class;
    ``prior_generator.grid_anchors(..., device=device)`` in four heads). A function
    nobody in the package calls is still reported: its callers elsewhere may rely on the default (mmdet 3.1.0
    ``sync_random_seed(seed)``), and so is one of the package's public interface (``project.public``: demucs 4.1.0
    api.py ``Separator``, whose users pass no device)."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False

    def build(c) -> bool:
        model = c.model
        method = model.scope(function).is_class and not any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list)
        own = package_calls(c, function)
        inherited = _subclass_calls(c, function, arg) if function.name == "__init__" else []
        if own is None or inherited is None:
            return False
        group = [(function, arg)]
        if method:
            owner = next(n for n in reversed(c.stack) if isinstance(n, ast.ClassDef))
            group += [(f, _cuda_default_parameter(f)) for f in owner.body
                      if f is not function and _cuda_default_parameter(f) is not None]
        calls = [(call, function, arg) for call in own] + inherited + [
            (call, f, a) for f, a in group[1:] for call in model.summaries.call_sites(f)]
        if method and not calls and not exported_name(function, c):
            # no ``self.f(...)`` in its class: ``x.f(...)`` in the file (a subclass's override, called from the
            # base class's methods), else in the package; the receiver's class is not known, so the nearest calls
            # decide (a name as common as ``prepare_latents`` is many methods)
            named = [(f, a) for f, a in group if not f.name.startswith("__")]  # not ``super().__init__(...)``
            calls = [(call, f, a) for f, a in named for call in model.calls(f.name)
                     if isinstance(call.func, ast.Attribute) and model.function(call) is not f] or [
                (call, f, a) for f, a in named for call in c.calls_elsewhere(f.name, method=True)]
        return bool(calls) and all(_passes(call, f, a, method) for call, f, a in calls)
    return ctx.memo(f"cuda_default_unused.{id(function)}", build)


def _subclass_calls(ctx, function: ast.AST, arg: ast.arg, depth: int = 0) -> Optional[
        List[Tuple[ast.Call, ast.AST, ast.arg]]]:
    """The constructions of a module-level class through its subclasses in the file, each with the function and
    parameter that must receive the device: a subclass's ``super().__init__(...)``, or where that call hands on
    the subclass's own ``**kwargs`` for it, every construction of the subclass (``package_calls``, and through its
    own subclasses, ``_DEPTH`` levels down), which must name the device (mmyolo 0.6.0
    .mim/tools/analysis_tools/optimize_anchors.py:130, three optimizers built with ``device=args.device`` whose
    ``__init__(**kwargs)`` calls ``super().__init__(**kwargs)``). None where a subclass's part is not known: it
    inherits ``__init__`` or calls it other than through ``super()``, keeps a device of its own, or no
    construction of it shows (its users may leave the device out)."""
    model = ctx.model
    name = exported_name(function, ctx)
    found = []
    for scope in model.scopes.values():
        if not (name and scope.is_class and model.scope(scope.node) is model.module and any(
                isinstance(b, ast.Name) and b.id == name for b in scope.node.bases)):
            continue
        init = next((f for f in scope.node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        supers = [call for call in model.calls("__init__") if init is not None and model.function(call) is init
                  and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call)
                  and isinstance(call.func.value.func, ast.Name) and call.func.value.func.id == "super"]
        if not supers:
            return None
        for call in supers:
            kwargs = init.args.kwarg
            if _given(call, function, arg, True) is not None or kwargs is None or not any(
                    k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwargs.arg
                    for k in call.keywords):
                found.append((call, function, arg))  # passes the device, or leaves it out, itself
                continue
            own = [a.arg for a in init.args.posonlyargs + init.args.args + init.args.kwonlyargs]
            built = package_calls(ctx, init)
            deeper = _subclass_calls(ctx, init, arg, depth + 1) if depth < _DEPTH else None
            if arg.arg in own or built is None or deeper is None or not built + deeper:
                return None
            found += [(construction, init, arg) for construction in built] + deeper
    return found


def package_calls(ctx, function: ast.AST) -> Optional[List[ast.Call]]:
    """The calls of ``function`` the project shows: those in the file (``Summaries.call_sites``) and, for a
    module-level function or class (``exported_name``), those in the other modules of the package; None for one
    of the package's public interface (``project.public``): users call it from outside, and what the package
    passes proves nothing."""
    exported = exported_name(function, ctx)
    if exported and ctx.public(exported):
        return None
    return ctx.model.summaries.call_sites(function) + (ctx.calls_elsewhere(exported) if exported else [])


def exported_name(function: ast.AST, ctx) -> str:
    """The name other modules call ``function`` by: its own for a module-level function, its class's for the
    ``__init__`` of a module-level class; "" for any other (a method's callers are not known by name)."""
    scope = ctx.model.scope(function)
    if scope is ctx.model.module:
        return function.name
    if function.name == "__init__" and scope.is_class and ctx.model.scope(scope.node) is ctx.model.module:
        return scope.node.name
    return ""


def mentions_device_arg(arg: ast.arg) -> bool:
    name = arg.arg.lower()
    return "device" in name or name == "dev"


def defaulted(args: ast.arguments, default: ast.AST) -> List[ast.arg]:
    """The parameter whose default is ``default``."""
    return [arg for arg, value in defaulted_parameters(args) if value is default]
