"""Parameters that keep their default: a value that crosses a function boundary is known where the project shows
every call of the function. ``nn.LSTM(..., dropout=dropout_prob)`` in a class whose ``dropout_prob`` defaults to
0.0 and that nothing in the package builds with another value applies no dropout (ASC103)."""
from __future__ import annotations

import ast
from typing import Tuple

from ..calls import MISSING, argument
from ..semantic import project
from ..walk import parameter_defaults
from .device_defaults import exported_name, package_calls

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEPTH = 3  # callers followed up a chain of constructors in the file (``SAR`` -> ``SAREncoder``)
UNKNOWN = (False, None)


def constant(node: ast.AST) -> Tuple[bool, object]:
    """(True, value) for a literal constant (``0.0``, ``-1``, ``None``), else ``UNKNOWN``."""
    if isinstance(node, ast.Constant):
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)):
        return True, -node.operand.value
    return UNKNOWN


def left_at_default(ctx, expr: ast.AST, depth: int = 0, called: bool = False) -> Tuple[bool, object]:
    """(True, value) where ``expr`` is a parameter, or ``self.x`` that its class's ``__init__`` stores from one
    and nothing else assigns, of a module-level function or class that is no public interface
    (``package_calls``), has no subclass and whose every call in the package passes the same literal or nothing
    for it (the default then: a literal), which may differ from the default (mmagic 1.2.0 stable_diffusion/vae.py
    ``UNetMidBlock2D``: ``attn_num_head_channels=1`` by default, None in both constructions). A call that spreads
    ``*args``/``**kwargs`` may pass anything; a call in the file may pass a parameter of its own caller, followed up
    to ``_DEPTH`` functions. No call at all leaves the default: a class the package only hands on
    (``cls_model=GRU``) is built as its configuration says, and the default is the configuration the package
    ships; but only where the package shows every call
    (``project.hidden_callers``: a snippet, a script or a package too large to read has callers no one knows).
    ``called``: only where the package shows at least one call (a class no call builds may be built from a user's
    configuration file with any value)."""
    found = ctx.model.parameter(expr)
    if found is None:
        return UNKNOWN
    function, name = found
    return ctx.memo(f"left_at_default.{id(function)}.{name}.{depth}.{called}",
                    lambda c: _agreed(c, function, name, depth, called))


def may_agree(ctx, function: ast.AST, name: str) -> bool:
    """What ``left_at_default`` needs of ``function`` before it reads the package's calls: a literal default for the
    parameter ``name``, and a name other modules call the function by (``exported_name``)."""
    return _literal_default(function, name)[0] and bool(exported_name(function, ctx))


def _literal_default(function: ast.AST, name: str) -> Tuple[bool, object]:
    default = parameter_defaults(function.args).get(name)
    return constant(default) if default is not None else UNKNOWN


def _agreed(ctx, function: ast.AST, name: str, depth: int, called: bool) -> Tuple[bool, object]:
    known, value = _literal_default(function, name)
    exported = exported_name(function, ctx)
    if not (known and exported) or _registered(ctx, function) or _built_unseen(ctx, function, exported):
        return UNKNOWN  # what the file shows first: the package's calls are parsed only after
    calls = package_calls(ctx, function)
    if calls is None or (called and not calls) or ctx.hidden_callers(exported):
        return UNKNOWN
    model = ctx.model
    here = {id(call) for call in model.summaries.call_sites(function)}
    positional = [a.arg for a in function.args.posonlyargs + function.args.args]
    if model.receiver(function) is not None:
        positional = positional[1:]
    index = positional.index(name) if name in positional else None
    agreed = []  # the one value every call gives, its default where it passes nothing
    for call in calls:
        passed = argument(call, name, index)
        if passed is None:
            return UNKNOWN
        found = (True, value) if passed is MISSING else constant(passed)
        if not found[0] and id(call) in here and depth < _DEPTH:
            found = left_at_default(ctx, passed, depth + 1, called)
        if not found[0] or (agreed and not (type(found[1]) is type(agreed[0]) and found[1] == agreed[0])):
            return UNKNOWN
        agreed = agreed or [found[1]]
    return True, agreed[0] if agreed else value


def field_left_at_default(ctx, expr: ast.AST) -> Tuple[bool, object]:
    """(True, value) for ``x.name`` where the project binds ``name`` once, to a literal, and elsewhere only reads it
    (``project.sole_binding``): no call, configuration or command line sets the field, which keeps its default
    (litgpt 0.5.13 config.py:87, ``rope_interleave: bool = False``, read as ``self.config.rope_interleave`` and
    set by none of the configurations config.py ships)."""
    root = ctx.project_root() if isinstance(expr, ast.Attribute) else None
    line = project.sole_binding(root, expr.attr.encode()) if root else None
    try:
        statement = ast.parse(line.strip()).body[0] if line else None
    except SyntaxError:
        return UNKNOWN
    if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
        return constant(statement.value)
    return UNKNOWN


def _registered(ctx, function: ast.AST) -> bool:
    """A decorated function or class: the decorator may register it (``@MODELS.register_module()``), and a
    configuration then builds it with values no call shows (mmseg ``type='...'`` dicts)."""
    owner = ctx.model.scope(function).node if function.name == "__init__" else function
    return bool(owner.decorator_list)


def _built_unseen(ctx, function: ast.AST, exported: str) -> bool:
    """Does the file call the function where no call of its name shows: through a subclass of its class, whose
    ``super().__init__(...)`` may pass another value, or ``partial(name, ...)`` (the package's: ``hidden_callers``)?"""
    model = ctx.model
    subclassed = function.name == "__init__" and any(
        _last_name(base) == exported for scope in model.scopes.values() if scope.is_class for base in scope.node.bases)
    return subclassed or any(call.args and _last_name(call.args[0]) == exported for call in model.calls("partial"))


def _last_name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
