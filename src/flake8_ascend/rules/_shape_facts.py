"""What the dynamic-shape rules (ASC401-403) know about the values of one file.

The scope table says which names hold tensors; these rules also need to know
which hold boolean masks (``keep = scores > 0.5``), host numbers read out of
tensors (``n = int(t.sum())``) and numpy arrays (whose masks and ``.item()``
never reach the NPU).  ``ShapeFacts`` learns that from the assignments the
engine walks past, in source order, and keys each fact by the scope table's
``Binding`` object, so shadowing and rebinding behave as name resolution does.
The rules of one file share one instance (``facts_of(ctx)``).
"""
from __future__ import annotations

import ast
from typing import Optional, Set

# Comparison operators that build an element-wise boolean tensor from a tensor.
_MASK_COMPARISONS = (ast.Gt, ast.GtE, ast.Lt, ast.LtE, ast.Eq, ast.NotEq)
# torch functions and tensor methods whose result is a boolean tensor.
_MASK_FUNCTIONS = frozenset(
    "torch." + name
    for name in """isnan isinf isfinite isneginf isposinf isreal isin logical_and logical_or logical_not logical_xor
    eq ne gt ge lt le greater greater_equal less less_equal not_equal""".split()
)
_MASK_METHODS = frozenset(
    """bool isnan isinf isfinite isneginf isposinf logical_and logical_or logical_not logical_xor eq ne gt ge lt le
    greater greater_equal less less_equal not_equal""".split()
)
# Tensor reductions whose value is a count or size once converted to a Python number.
_REDUCTIONS = frozenset("sum max min amax amin argmax argmin count_nonzero prod ceil floor round long int".split())
_TO_INT = frozenset({"int", "round"})
_MATH_TO_INT = frozenset({"math.ceil", "math.floor", "math.trunc"})


def same_expression(a: ast.AST, b: ast.AST) -> bool:
    """Do two expressions spell the same thing (``x`` and ``x``, ``self.x`` and ``self.x``)?"""
    return type(a) is type(b) and ast.dump(a, annotate_fields=False) == ast.dump(b, annotate_fields=False)


def facts_of(ctx) -> "ShapeFacts":
    """The facts of the file ``ctx`` walks, shared by every rule that asks."""
    facts = getattr(ctx, "_shape_facts", None)
    if facts is None:
        facts = ctx._shape_facts = ShapeFacts()
    return facts


class ShapeFacts:
    """Masks, host values and numpy arrays among the name bindings of one file."""

    def __init__(self) -> None:
        self._masks: Set[int] = set()
        self._host: Set[int] = set()
        self._numpy: Set[int] = set()
        self._last: Optional[ast.AST] = None

    # -- learning ------------------------------------------------------------
    def learn(self, node: ast.AST, ctx) -> None:
        """Record what an ``Assign``/``AnnAssign``/``For`` binds (once, however many rules ask)."""
        if node is self._last:
            return
        self._last = node
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            if self.is_host_value(node.iter, ctx):  # for n in counts.tolist(): each n is a host number
                for name in _names(node.target):
                    self._add(self._host, name, node.lineno, ctx)
            return
        else:
            return
        kinds = []
        if self.is_mask(value, ctx):
            kinds.append(self._masks)
        if self.is_host_value(value, ctx):
            kinds.append(self._host)
        if _is_numpy_call(value, ctx):
            kinds.append(self._numpy)
        for target in targets:
            if isinstance(target, ast.Name):
                for kind in kinds:
                    self._add(kind, target, node.lineno, ctx)
            elif isinstance(target, (ast.Tuple, ast.List)) and self._host in kinds:
                for name in _names(target):  # a, b = t.tolist()
                    self._add(self._host, name, node.lineno, ctx)

    @staticmethod
    def _add(kind: Set[int], name: ast.Name, line: int, ctx) -> None:
        binding = ctx.resolver.binding(name.id, line)
        if binding is not None:
            kind.add(id(binding))

    def _bound(self, kind: Set[int], node: ast.AST, ctx) -> bool:
        if not isinstance(node, ast.Name):
            return False
        binding = ctx.resolver.binding(node.id, node.lineno)
        return binding is not None and id(binding) in kind

    # -- questions -----------------------------------------------------------
    def is_numpy(self, node: ast.AST, ctx) -> bool:
        """Known to be a numpy value (a name bound to a numpy call, or such a call)."""
        return self._bound(self._numpy, node, ctx) or _is_numpy_call(node, ctx)

    def is_tensor_like(self, node: ast.AST, ctx) -> bool:
        return ctx.is_tensor(node) or self.is_mask(node, ctx)

    def is_mask(self, node: ast.AST, ctx) -> bool:
        """A boolean tensor: a comparison of a tensor, a mask function, ``~m``, ``m & n``, a mask name."""
        if isinstance(node, ast.Name):
            return self._bound(self._masks, node, ctx)
        if isinstance(node, ast.Compare):
            return (len(node.ops) == 1 and isinstance(node.ops[0], _MASK_COMPARISONS)
                    and (ctx.is_tensor(node.left) or ctx.is_tensor(node.comparators[0])))
        if isinstance(node, ast.UnaryOp):
            return isinstance(node.op, ast.Invert) and self.is_mask(node.operand, ctx)
        if isinstance(node, ast.BinOp):
            return isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and (
                self.is_mask(node.left, ctx) or self.is_mask(node.right, ctx))
        if isinstance(node, ast.Call):
            qualname = ctx.chain(node.func)
            if qualname is not None:
                return qualname in _MASK_FUNCTIONS or (qualname.startswith("torch.") and _bool_dtype(node, ctx))
            func = node.func
            return (isinstance(func, ast.Attribute) and func.attr in _MASK_METHODS
                    and self.is_tensor_like(func.value, ctx))
        return False

    def is_host_value(self, node: ast.AST, ctx) -> bool:
        """A Python number or list read out of a tensor: ``t.item()``, ``t.tolist()``, ``int(t.sum())``."""
        if isinstance(node, ast.Name):
            return self._bound(self._host, node, ctx)
        if isinstance(node, ast.Subscript):  # sizes.tolist()[0], counts[i] with counts = t.tolist()
            return self.is_host_value(node.value, ctx)
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and not node.args:
            return ctx.qualname(func) is None and not self.is_numpy(func.value, ctx)
        if len(node.args) != 1 or not self._converts_to_int(func, ctx):
            return False
        value = node.args[0]
        if self.is_tensor_like(value, ctx) or self.is_host_value(value, ctx):
            return True
        return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and value.func.attr in _REDUCTIONS and ctx.qualname(value.func) is None
                and not self.is_numpy(value.func.value, ctx))

    @staticmethod
    def _converts_to_int(func: ast.AST, ctx) -> bool:
        if isinstance(func, ast.Name) and func.id in _TO_INT:
            return ctx.resolver.binding(func.id, func.lineno) is None  # the builtin, not a local def
        return ctx.qualname(func) in _MATH_TO_INT

    def mentions_host_value(self, node: Optional[ast.AST], ctx) -> Optional[ast.AST]:
        """The first host value inside an expression (``n.item() + 1``), skipping ``len(...)``."""
        if node is None:
            return None
        if self.is_host_value(node, ctx):
            return node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
            return None
        if isinstance(node, (ast.Lambda, ast.comprehension, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
            return None
        for child in ast.iter_child_nodes(node):
            found = self.mentions_host_value(child, ctx)
            if found is not None:
                return found
        return None


def _names(target: ast.AST):
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _names(element)
    elif isinstance(target, ast.Starred):
        yield from _names(target.value)


def _is_numpy_call(node: ast.AST, ctx) -> bool:
    if not isinstance(node, ast.Call):
        return False
    qualname = ctx.qualname(node.func)
    if qualname is None and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy":
        return True  # t.numpy()
    return qualname is not None and qualname.split(".")[0] in ("numpy", "pandas")


def _bool_dtype(call: ast.Call, ctx) -> bool:
    """``dtype=torch.bool`` among the keywords (``torch.zeros(n, dtype=torch.bool)``)."""
    return any(k.arg == "dtype" and ctx.qualname(k.value) == "torch.bool" for k in call.keywords)
