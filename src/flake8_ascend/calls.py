"""Small questions about call sites that several rules ask: arguments, and environment variables set in code."""
from __future__ import annotations

import ast
from typing import AbstractSet, Iterator, Optional, Tuple

MISSING = object()  # the parameter is not passed at all


def argument(call: ast.Call, keyword: str, index: Optional[int] = None):
    """The expression passed for a parameter (by keyword or at positional ``index``), or ``MISSING``.

    With ``**kwargs`` in the call and the parameter not given explicitly, the
    value is unknown: ``None`` is returned.
    """
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    if index is not None and len(call.args) > index and not any(
            isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    if any(item.arg is None for item in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    return MISSING


def passed(call: ast.Call, keyword: str, index: Optional[int] = None) -> Optional[ast.AST]:
    """``argument`` for callers that treat "not passed" like "unknown": the expression, else None."""
    value = argument(call, keyword, index)
    return None if value is MISSING else value


def dotted(node: ast.AST) -> Optional[str]:
    """``self.train_loader`` for a pure Name/Attribute chain as spelled (not resolved), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def last_names(*qualnames: str) -> frozenset:
    """The last components of qualified names: what an attribute chain calling one of them ends with."""
    return frozenset(name.rsplit(".", 1)[-1] for name in qualnames)


def callee(call: ast.Call, ctx, lasts: AbstractSet[str]) -> Optional[str]:
    """Qualified name of the called function when it can be one whose last component is in ``lasts``.

    A cheap filter before resolution: an attribute chain (``torch.nn.Embedding``) spells the real last
    name, so other attributes are skipped unresolved; a bare name may be an import alias (``DDP``), so it
    is always resolved.
    """
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr not in lasts:
        return None
    return ctx.chain(func) if isinstance(func, (ast.Name, ast.Attribute)) else None


def integer(node: ast.AST) -> Optional[int]:
    """The int an integer literal spells (``1``, ``-1``), else None (``True`` is no int here)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = integer(node.operand)
        return None if inner is None else -inner
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def is_constant(node, *values) -> bool:
    """Is ``node`` a literal equal to one of ``values`` (``True`` does not match ``1``)?"""
    return isinstance(node, ast.Constant) and any(
        type(node.value) is type(v) and node.value == v for v in values)


def _environ(node: ast.AST, ctx) -> bool:
    return ctx.qualname(node) == "os.environ"


def env_settings(node: ast.AST, ctx) -> Iterator[Tuple[str, ast.AST]]:
    """``(NAME, value)`` for each environment variable a statement or call sets to a literal name.

    Recognised: ``os.environ["N"] = v``, ``os.environ.setdefault("N", v)``,
    ``os.environ.update({"N": v})`` / ``update(N=v)`` and ``os.putenv("N", v)``.
    """
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript) and _environ(target.value, ctx) and isinstance(
                    target.slice, ast.Constant) and isinstance(target.slice.value, str):
                yield target.slice.value, node.value
        return
    if not isinstance(node, ast.Call):
        return
    func = node.func
    qualname = ctx.qualname(func)
    if qualname == "os.putenv" or (isinstance(func, ast.Attribute) and func.attr == "setdefault"
                                   and _environ(func.value, ctx)):
        if len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            yield node.args[0].value, node.args[1]
    elif isinstance(func, ast.Attribute) and func.attr == "update" and _environ(func.value, ctx):
        for item in node.keywords:
            if item.arg:
                yield item.arg, item.value
        if node.args and isinstance(node.args[0], ast.Dict):
            for key, value in zip(node.args[0].keys, node.args[0].values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield key.value, value
