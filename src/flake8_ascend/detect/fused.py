"""Hand-written fused-op patterns (ASC304) found on the stdlib ``ast`` of one function body.

The official static tool never finds these; Ascend's profiler advisor lists them as operator sequences
(``timeline_fusion_ops.yaml``).  Each detector starts at the node where the pattern ends (the
``rsqrt``, the ``cat``, the product, the second matmul, the ``layer_norm``) and follows operands back
through local names with ``flow.Flow``.  An operation is a torch function (``torch.rsqrt``,
``F.silu``), a tensor method (``x.pow(2)``), an operator, or a call of a ``self.<name>`` module built in
``__init__`` (``self.norm = nn.LayerNorm(d)``).  A detector returns the first and last node of the
pattern, or None.
"""
from __future__ import annotations

import ast
import operator
import re
from typing import Callable, Dict, FrozenSet, List, Optional, Tuple

from ..calls import integer
from ..semantic import project
from ..semantic.flow import MAX_DEPTH, Flow
from ..semantic.summaries import enclosing_class
from .left_default import field_left_at_default, left_at_default
from .training import source_text
from ..walk import lineage, parameter_defaults, walk_tree

Span = Tuple[ast.AST, ast.AST]
MODULE_OPS = {"torch.nn.SiLU": "silu", "torch.nn.GELU": "gelu", "torch.nn.LayerNorm": "layer_norm",
              "torch.nn.Softmax": "softmax", "torch.nn.Dropout": "dropout", "torch.nn.Linear": "linear"}
_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow", ast.MatMult: "matmul"}
_NAMESPACES = ("torch.nn.functional.", "torch.")
_CASTS = frozenset(("float", "half", "bfloat16", "double", "to", "type", "type_as", "contiguous"))
_BINARY = frozenset(("add", "sub", "mul", "div"))
_SCORE_STEPS = _BINARY | {"masked_fill", "masked_fill_"} | _CASTS  # between q @ k and softmax
_PROB_STEPS = frozenset(("dropout", "mul", "div")) | _CASTS  # between softmax and @ v (head masks too)
_TOKENS = "tokens"  # the token axis of an attention input (``Patterns._axes``)
# the call names a detector can start from (cheap pre-filter on the hot path)
STARTS = frozenset(("rsqrt", "sqrt", "cat", "concat", "concatenate", "layer_norm", "matmul", "bmm", "einsum"))


def module_ops(cls: ast.ClassDef, ctx) -> Dict[str, str]:
    """``self.<attr>`` -> op for the modules ``__init__`` builds (``self.act = nn.SiLU()`` -> silu), those of
    base classes defined in the same file included (litgpt's ``GemmaMLP(LLaMAMLP)`` keeps LLaMAMLP's Linears).
    A LayerNorm that ``__init__``'s defaults do not choose is left out (``_default_norm_differs``)."""
    ops = {attr: MODULE_OPS[q] for attr, q in ctx.model.summaries.constructed(cls).items() if q in MODULE_OPS}
    return {attr: op for attr, op in ops.items() if op != "layer_norm" or not _default_norm_differs(cls, attr)}


UNDECIDED = object()  # a test the literal defaults do not decide
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Lt: operator.lt, ast.LtE: operator.le}
Known = Callable[[ast.AST], object]  # the value of a name or attribute, or UNDECIDED


def _default_norm_differs(cls: ast.ClassDef, attr: str) -> bool:
    """Does ``__init__`` bind ``self.<attr>`` in several branches, of which its literal parameter defaults reach
    exactly one, and that one builds something other than a LayerNorm? (neuralforecast 3.0.2 patchtst.py:522,
    ``norm="BatchNorm"`` and ``if "batch" in norm.lower()``; gluonts 0.16.2 daf kernel.py:142, ``norm="none"`` ->
    ``nn.Identity()``.) The LayerNorm then runs only under an option the caller sets."""
    init = next((s for s in cls.body if isinstance(s, _FUNCTIONS) and s.name == "__init__"), None)
    if init is None:
        return False
    rebound = {n.id for n in walk_tree(init) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    defaults = {name: d.value for name, d in parameter_defaults(init.args).items()
                if isinstance(d, ast.Constant) and name not in rebound}
    bindings = list(_bindings(init.body, attr, lambda e: defaults.get(e.id, UNDECIDED) if isinstance(e, ast.Name)
                              else UNDECIDED, True))
    chosen = [value for value, reachable in bindings if reachable]
    return len(bindings) > 1 and len(chosen) == 1 and isinstance(chosen[0], ast.Call) and not any(
        "LayerNorm" in (n.id if isinstance(n, ast.Name) else n.attr)
        for n in ast.walk(chosen[0]) if isinstance(n, (ast.Name, ast.Attribute)))


def _bindings(body: List[ast.stmt], attr: str, known: Known, reachable: bool):
    """(value, reachable with the defaults) of each ``self.<attr> = value`` in ``body``."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            value = _decided(stmt.test, known)
            yield from _bindings(stmt.body, attr, known, reachable and (value is UNDECIDED or bool(value)))
            yield from _bindings(stmt.orelse, attr, known, reachable and (value is UNDECIDED or not value))
        elif isinstance(stmt, ast.Assign):
            if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                   and t.value.id == "self" for t in stmt.targets):
                yield stmt.value, reachable
        elif not isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            for block in (getattr(stmt, "body", []), getattr(stmt, "orelse", []), getattr(stmt, "finalbody", []),
                          *(h.body for h in getattr(stmt, "handlers", []))):
                yield from _bindings(block, attr, known, reachable)


def _decided(test: ast.AST, known: Known) -> object:
    """The value of an ``if`` test given the values ``known`` gives of names and attributes: constants, ``not``,
    ``and``/``or``, one comparison (``==``, ``is not``, ``in``, ``>``...), a string's ``.lower()``/``.upper()``, a
    conditional expression; else UNDECIDED."""
    if isinstance(test, ast.Constant):
        return test.value
    if isinstance(test, ast.IfExp):
        value = _decided(test.test, known)
        return value if value is UNDECIDED else _decided(test.body if value else test.orelse, known)
    if isinstance(test, (ast.Name, ast.Attribute)):
        return known(test)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = _decided(test.operand, known)
        return value if value is UNDECIDED else not value
    if isinstance(test, ast.BoolOp):
        values = [_decided(v, known) for v in test.values]
        deciding = isinstance(test.op, ast.Or)  # a true part decides ``or``, a false one ``and``
        if any(v is not UNDECIDED and bool(v) == deciding for v in values):
            return deciding
        return UNDECIDED if UNDECIDED in values else not deciding
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE:
        left, right = _decided(test.left, known), _decided(test.comparators[0], known)
        if left is UNDECIDED or right is UNDECIDED:
            return UNDECIDED
        try:
            return _COMPARE[type(test.ops[0])](left, right)
        except TypeError:
            return UNDECIDED
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr in ("lower", "upper") \
            and not test.args:
        value = _decided(test.func.value, known)
        return getattr(value, test.func.attr)() if isinstance(value, str) else UNDECIDED
    return UNDECIDED


class Patterns:
    """The detectors for one function body."""

    def __init__(self, ctx, owner: ast.AST, attrs: Dict[str, str]) -> None:
        self.ctx = ctx
        self.owner = owner
        self.attrs = attrs

    @property
    def flow(self) -> Flow:
        """The owner's ``Flow`` (the semantic model's, built on the first question that needs one)."""
        return self.ctx.model.flow(self.owner)

    # -- what an expression computes -------------------------------------------------------
    def op(self, expr: ast.AST, follow: bool = True) -> Optional[Tuple[str, List[ast.AST], ast.AST]]:
        """(operation, operands, node) of an expression, following a local name to its value first."""
        node = self.flow.resolve(expr) if follow and isinstance(expr, ast.Name) else expr
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)], [node.left, node.right], node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return "neg", [node.operand], node
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        qualname = self.ctx.qualname(func)
        if qualname is not None:
            for namespace in _NAMESPACES:
                name = qualname[len(namespace):]
                if qualname.startswith(namespace) and "." not in name:
                    return name, list(node.args), node
            return None
        if not isinstance(func, ast.Attribute):
            return None
        if isinstance(func.value, ast.Name) and func.value.id == "self":
            return (self.attrs[func.attr], list(node.args), node) if func.attr in self.attrs else None
        return func.attr, [func.value, *node.args], node

    def strip_casts(self, expr: ast.AST) -> ast.AST:
        for _ in range(MAX_DEPTH):
            found = self.op(expr)
            if not found or found[0] not in _CASTS or not found[1]:
                return expr
            expr = found[1][0]
        return expr

    def same(self, a: ast.AST, b: ast.AST) -> bool:
        return self.flow.same(self.strip_casts(a), self.strip_casts(b))

    def refers(self, expr: ast.AST, node: ast.AST) -> bool:
        """Is ``expr`` the node itself or a local name bound to it?"""
        return expr is node or self.flow.resolve(expr) is node

    def half(self, expr: ast.AST) -> Optional[Tuple[ast.AST, int, str]]:
        """(tensor, 0 or 1, how it was split) when ``expr`` is one half of a tensor along its last dim."""
        if isinstance(expr, ast.Name):
            binding = self.flow.binding(expr)
            if binding is not None and binding.index in (0, 1) and binding.value is not None:
                return self._chunk(binding.value, binding.index)
            resolved = self.flow.resolve(expr)
            return None if resolved is expr else self.half(resolved)
        if isinstance(expr, ast.Subscript):
            index = expr.slice
            if isinstance(index, ast.Constant) and index.value in (0, 1):
                return self._chunk(expr.value, index.value)
            if isinstance(index, ast.Tuple) and index.elts and isinstance(index.elts[-1], ast.Slice):
                leading, last = index.elts[:-1], index.elts[-1]
                if all(_is_full(e) for e in leading) and last.step is None:
                    if last.lower is None and last.upper is not None:
                        return expr.value, 0, "slice " + ast.dump(last.upper)
                    if last.upper is None and last.lower is not None:
                        return expr.value, 1, "slice " + ast.dump(last.lower)
        return None

    def _chunk(self, value: ast.AST, index: int) -> Optional[Tuple[ast.AST, int, str]]:
        found = self.op(value)
        if found and found[0] == "chunk" and len(found[1]) >= 2 and isinstance(found[2], ast.Call):
            pieces = found[1][1]
            dims = [k.value for k in found[2].keywords if k.arg == "dim"] + found[1][2:3]
            if isinstance(pieces, ast.Constant) and pieces.value == 2 and dims and integer(dims[0]) == -1:
                return found[1][0], index, f"chunk {id(found[2])}"
        return None

    def halves(self, first: ast.AST, second: ast.AST) -> bool:
        """Are the two expressions the first and second half of the same tensor?"""
        a, b = self.half(first), self.half(second)
        return bool(a and b and a[1] == 0 and b[1] == 1 and a[2] == b[2] and self.same(a[0], b[0]))

    # -- the patterns ---------------------------------------------------------------------
    def rms_norm(self, call: ast.Call) -> Optional[Span]:
        """x * rsqrt(mean(x ** 2) + eps), or x / sqrt(...): pow-mean-add-rsqrt-mul."""
        found = self.op(call, follow=False)
        if not found or found[0] not in ("rsqrt", "sqrt") or not found[1]:
            return None
        inner = self.op(found[1][0])
        terms = inner[1] if inner and inner[0] == "add" else [found[1][0]]
        for term in terms:
            mean = self.op(term)
            if not mean or mean[0] != "mean" or not mean[1] or not self._mean_of_last_dim(mean):
                continue
            base = self._squared(mean[1][0])
            if base is None or (self.op(base) or ("",))[0] == "sub":  # centred: a LayerNorm, not RMSNorm
                continue
            product = self._scaled(call, base, ast.Mult if found[0] == "rsqrt" else ast.Div)
            if product is not None:
                return mean[2], product
        return None

    def _mean_of_last_dim(self, found) -> bool:
        """A ``mean`` found by ``op`` may reduce the last dimension: npu_rms_norm normalises the trailing
        dimensions, so a mean over everything or over a leading dimension (``dim=1``, the channels of a feature map:
        timm 1.0.31 fast_norm.py:181 ``rms_norm2d``; ``self.dim`` set from a parameter whose default is 1, diffusers
        0.42.1 autoencoder_kl_ltx2_audio.py:93 pixel norm) is no RMSNorm it replaces.  Any other dimension may be
        (``dim=self.dim``, -1 by default in litgpt 0.5.13 model.py:1319; ``dim=2`` of a 3-D tensor)."""
        dims = [k.value for k in found[2].keywords if k.arg in ("dim", "axis")] + list(found[1][1:2])
        if not dims:
            return False
        dim = dims[0]
        if isinstance(dim, ast.Attribute) and isinstance(dim.value, ast.Name) and dim.value.id == "self":
            dim = self.ctx.model.parameter_default(dim)
        return not (isinstance(dim, ast.Constant) and dim.value in (0, 1))

    def _squared(self, expr: ast.AST) -> Optional[ast.AST]:
        found = self.op(expr)
        if not found:
            return None
        name, args, _ = found
        if name == "pow" and len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value == 2:
            return args[0]
        if name == "square" and args:
            return args[0]
        if name == "mul" and self.same(args[0], args[1]):
            return args[0]
        return None

    def _scaled(self, call: ast.AST, base: ast.AST, operator: type) -> Optional[ast.AST]:
        for product in self.flow.products:
            if not isinstance(product.op, operator):
                continue
            sides = [(product.right, product.left)] + ([(product.left, product.right)] if operator is ast.Mult else [])
            for scale, value in sides:  # x / sqrt(...): the scale is on the right
                if self.refers(scale, call) and self.same(value, base):
                    return product
        return None

    def rotate_half(self, call: ast.Call) -> Optional[Span]:
        """cat((-x2, x1), dim=-1) where x1, x2 are the halves of one tensor."""
        found = self.op(call, follow=False)
        if not found or found[0] not in ("cat", "concat", "concatenate") or not call.args:
            return None
        parts = call.args[0]
        if not isinstance(parts, (ast.Tuple, ast.List)) or len(parts.elts) != 2 or not _last_dim(call):
            return None
        negated = self.op(parts.elts[0])
        if negated and negated[0] == "neg" and self.halves(parts.elts[1], negated[1][0]):
            return call, call
        return None

    def gated(self, product: ast.BinOp) -> Optional[Tuple[str, Span]]:
        """("swiglu" | "geglu", span) for act(a) * b where a, b are the halves of one tensor;
        ("swiglu_proj" | "geglu_proj", span) where they are two ``nn.Linear`` projections of one input
        (``F.silu(self.fc_1(x)) * self.fc_2(x)``, LLaMA's MLP): one Linear of twice the width gives the halves."""
        if not isinstance(product.op, ast.Mult):
            return None
        for gate, value in ((product.left, product.right), (product.right, product.left)):
            activation = self._activation(gate)
            kind = "swiglu" if activation and activation[0] == "silu" else "geglu"
            if activation and self.halves(activation[1], value):
                return kind, (product, product)
            if activation and self._projections(activation[1], value):
                return kind + "_proj", (product, product)
        return None

    def _projections(self, first: ast.AST, second: ast.AST) -> bool:
        """Two different ``self.<linear>`` modules applied to the same input."""
        a, b = self.op(first), self.op(second)
        if not (a and b and a[0] == b[0] == "linear" and len(a[1]) == len(b[1]) == 1):
            return False
        attrs = {n.func.attr for n in (a[2], b[2]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        return len(attrs) == 2 and self.same(a[1][0], b[1][0])

    def _activation(self, expr: ast.AST) -> Optional[Tuple[str, ast.AST]]:
        found = self.op(expr, follow=False)
        if not found or not found[1]:
            return None
        name, args, _ = found
        if name in ("silu", "gelu"):
            return name, args[0]
        if name == "mul" and len(args) == 2:  # a * sigmoid(a)
            for a, b in ((args[0], args[1]), (args[1], args[0])):
                sigmoid = self.op(b, follow=False)
                if sigmoid and sigmoid[0] == "sigmoid" and sigmoid[1] and self.same(sigmoid[1][0], a):
                    return "silu", a
        return None

    def attention(self, node: ast.AST) -> Optional[Span]:
        """softmax(q @ k ... [scale, mask, casts]) [casts, dropout, head mask] @ v; either product may be an
        ``einsum`` of two tensors (neuralforecast 3.0.2 timellm.py:158-161)."""
        found = self.op(node, follow=False)
        for weights in _product_operands(found)[:1 if found[0] != "einsum" else 2] if found else ():
            probs = self._search(weights, ("softmax",), _PROB_STEPS)
            if probs is None or not probs[1]:
                continue
            # q @ k first: an einsum also added to the scores (relative positions) is not the product of q and k
            scores = self._search(probs[1][0], ("matmul", "bmm"), _SCORE_STEPS) or self._search(
                probs[1][0], ("einsum",), _SCORE_STEPS)
            if scores is None or not _product_operands(scores) or self._returned(weights, found[2]) \
                    or _contracts_many(scores) or _contracts_many(found) \
                    or (self._axes(_product_operands(scores)[0]) or [None])[-1] == _TOKENS:
                continue
            return scores[2], node
        return None

    def _axes(self, expr: ast.AST, depth: int = 0) -> Optional[List[Optional[str]]]:
        """The axes of ``expr``, the token axis marked, when it is (through local names, ``unbind(0)``, ``[i]``,
        scaling, ``F.normalize``, ``permute`` and ``transpose``) a ``reshape``/``view`` of a ``(B, N, C)`` input
        whose second size is its token count ``N`` (``B, N, C = x.shape``); None when unknown. A ``q @ k`` whose
        first operand has the tokens last sums over the tokens (channel attention: timm 1.0.31 edgenext.py:166-170,
        ``permute(2, 0, 3, 4, 1)``; davit.py:204-209, ``k.transpose(-1, -2) @ v``): its head size would be the
        token count, past the fused kernel's limit of 512."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(expr, ast.Name):
            binding = self.flow.binding(expr)
            if binding is None or binding.value is None:
                return None
            if binding.index is None:
                return self._axes(binding.value, depth + 1)
            if isinstance(binding.value, (ast.Tuple, ast.List)):
                elements = binding.value.elts
                return self._axes(elements[binding.index], depth + 1) if binding.index < len(elements) else None
            found = self.op(binding.value, follow=False)
            if not found or found[0] != "unbind" or not found[1] or any(
                    integer(dim) != 0 for dim in found[1][1:2] + [k.value for k in found[2].keywords]):
                return None  # only ``qkv.unbind(0)``: q, k and v along the first axis
            axes = self._axes(found[1][0], depth + 1)
            return axes[1:] if axes else None
        if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
            axes = self._axes(expr.value, depth + 1)
            return axes[1:] if axes else None
        found = self.op(expr, follow=False)
        if not found or not found[1]:
            return None
        name, args = found[0], found[1]
        if name in ("mul", "div", "normalize") or name in _CASTS:
            return self._axes(args[0], depth + 1)
        if name in ("reshape", "view") and len(args) >= 5:  # tensor, B, N, ... (at least 4 sizes)
            return [_TOKENS if i == 1 and self._token_count(size) else None for i, size in enumerate(args[1:])]
        axes = self._axes(args[0], depth + 1) if name in ("permute", "transpose") else None
        order = [integer(a) for a in args[1:]]
        if axes is None or None in order:
            return None
        if name == "permute" and sorted(order) == list(range(len(axes))):
            return [axes[i] for i in order]
        if name == "transpose" and len(order) == 2 and all(-len(axes) <= i < len(axes) for i in order):
            axes = list(axes)
            axes[order[0]], axes[order[1]] = axes[order[1]], axes[order[0]]
            return axes
        return None

    def _token_count(self, size: ast.AST) -> bool:
        """``size`` is the second of the names a ``.shape`` unpacks to (``B, N, C = x.shape``)."""
        binding = self.flow.binding(size) if isinstance(size, ast.Name) else None
        return binding is not None and binding.index == 1 and isinstance(binding.value, ast.Attribute) \
            and binding.value.attr == "shape"

    def _returned(self, weights: ast.AST, product: ast.AST) -> bool:
        """The attention weights leave the function other than through ``product`` (``return out, attn_prob``:
        neuralforecast 3.0.2 tft.py:269, weights kept for interpretability): the fused kernel does not give them,
        so it cannot replace the block."""
        return isinstance(weights, ast.Name) and any(
            any(isinstance(parent, (ast.Return, ast.Yield)) for parent in read.path)
            and not any(parent is product for parent in read.path)
            for read in self.ctx.model.reads(self.owner, weights.id))

    def _search(self, expr: ast.AST, wanted: Tuple[str, ...], through: frozenset):
        """The first operation in ``wanted`` reached from ``expr`` through operations in ``through``."""
        pending, steps = [expr], 0
        while pending and steps < 4 * MAX_DEPTH:
            steps += 1
            step = self.op(pending.pop())
            if step is None:
                continue
            if step[0] in wanted:
                return step
            if step[0] in through:
                pending.extend(step[1] if step[0] in _BINARY else step[1][:1])
        return None

    def add_layer_norm(self, call: ast.Call) -> Optional[Span]:
        """layer_norm(a + b)."""
        found = self.op(call, follow=False)
        if not found or found[0] != "layer_norm" or not found[1]:
            return None
        total = self.op(found[1][0])
        if total and total[0] == "add" and not all(isinstance(a, ast.Constant) for a in total[1]):
            return total[2], call
        return None


def _is_full(element: ast.AST) -> bool:
    if isinstance(element, ast.Constant):
        return element.value is Ellipsis
    return isinstance(element, ast.Slice) and element.lower is None and element.upper is None and element.step is None


def _product_operands(found) -> List[ast.AST]:
    """The two tensors of a product ``op`` found: ``matmul``/``bmm`` (``a @ b``), or ``einsum`` given an equation
    and exactly two operands; none for anything else."""
    name, args = found[0], found[1]
    if name in ("matmul", "bmm") and len(args) >= 2:
        return args[:2]
    if name == "einsum" and len(args) == 3 and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        return args[1:]
    return []


def _contracts_many(found) -> bool:
    """An ``einsum`` product that sums over more than one index (``"bhtcfn,bhtefn->bhce"``: channels attended with
    time, frequency and features flattened, espnet 202511 enh/layers/uses.py:364): not the product over one head
    dimension, ``(L, d) x (S, d)``, that the fused kernel computes."""
    equation = found[1][0].value if found[0] == "einsum" and _product_operands(found) else ""
    equation = equation.replace(" ", "")
    if "->" not in equation or "." in equation:
        return False
    inputs, output = equation.split("->")
    return len(set(inputs.replace(",", "")) - set(output)) > 1


def _last_dim(call: ast.Call) -> bool:
    dims = [k.value for k in call.keywords if k.arg in ("dim", "axis")] + list(call.args[1:2])
    return bool(dims) and integer(dims[0]) == -1


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def function_patterns(ctx) -> Optional[Patterns]:
    """The detectors of the function around the node being checked, shared by the rules of a file (None at
    module level, where nothing fuses); a method's ``self.<attr>`` modules come from its class's ``__init__``."""
    owner = ctx.enclosing(*_FUNCTIONS)
    if owner is None:
        return None

    def build(ctx) -> Patterns:
        cls = enclosing_class(ctx.model.scopes[id(owner)])
        return Patterns(ctx, owner, module_ops(cls.node, ctx) if cls is not None else {})

    return ctx.memo(f"fused.patterns.{id(owner)}", build)


def attention_scores(ctx) -> FrozenSet[int]:
    """ids of the ``q @ k`` nodes of the hand-written attentions in the function around the checked node.

    ASC303 leaves these to ASC304: the fused attention replaces the whole
    matmul-softmax-matmul, ``matmul_transpose`` only its first product.
    """
    patterns = function_patterns(ctx)
    if patterns is None:
        return frozenset()

    def build(ctx) -> FrozenSet[int]:
        found = set()
        for node in walk_tree(patterns.owner):
            if isinstance(node, (ast.Call, ast.BinOp)):
                span = patterns.attention(node)
                if span is not None:
                    found.add(id(span[0]))
        return frozenset(found)

    return ctx.memo(f"fused.attention.{id(patterns.owner)}", build)


_SDPA = "scaled_dot_product_attention"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def sdpa_in_other_branch(node: ast.AST, ctx) -> bool:
    """``node`` is in one branch of an ``if`` whose other branch calls ``scaled_dot_product_attention``.

    timm's ``if self.fused_attn: F.scaled_dot_product_attention(...) else: <q @ k.T, softmax, @ v>``:
    torch_npu runs SDPA as its fused attention, so the hand-written branch is the fallback nobody takes
    by default and rewriting it gains nothing.
    """
    return other_branch_calls(node, ctx, _SDPA)


# transformers' attention dispatch: ``attention_interface = eager_attention_forward`` unless the configuration's
# ``_attn_implementation`` names an entry of ``ALL_ATTENTION_FUNCTIONS``; a model class that declares
# ``_supports_sdpa = True`` gets "sdpa" by default, which torch_npu runs as its fused attention
# (transformers 4.57.6 modeling_utils.py:2695, ``get_correct_attn_implementation``: "sdpa" when none is requested,
# "eager" only when ``_sdpa_can_dispatch`` fails, as it does without ``_supports_sdpa``)
_SUPPORTS_SDPA = re.compile(r"\b_supports_sdpa\s*=\s*True\b")
_PICKED_BY_TRANSFORMERS = re.compile(r"\._attn_implementation\b")


def attention_fallback(node: ast.AST, ctx) -> bool:
    """``node`` is on a hand-written attention path the model does not take by default: a branch beside one that
    calls SDPA (``sdpa_in_other_branch``), a method called only from such a branch (``_fallback_methods``) or
    overridden by an SDPA subclass that transformers picks (``_sdpa_overridden``), or ``eager_attention_forward`` in
    a module that dispatches through ``ALL_ATTENTION_FUNCTIONS`` and whose model supports SDPA (transformers
    4.57.6's modeling files, xtuner's internlm3 copy): rewriting it gains nothing by default."""
    if sdpa_in_other_branch(node, ctx):
        return True
    function = ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef)
    if function is None:
        return False
    cls = ctx.enclosing(ast.ClassDef)
    if cls is not None and any(m is function for m in cls.body) and (function.name in ctx.memo(
            f"fused.fallback_methods.{id(cls)}", lambda c: _fallback_methods(cls, c.model)) or function.name in
            ctx.memo(f"fused.sdpa_overridden.{id(cls)}", lambda c: _sdpa_overridden(cls, c))):
        return True
    return function.name == "eager_attention_forward" and ctx.memo("fused.dispatches_attention", _dispatches_attention)


def _self_calls(tree: ast.AST, names) -> List[ast.Call]:
    """Every ``self.<name>(...)`` in ``tree`` for a name in ``names``."""
    return [n for n in walk_tree(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" and n.func.attr in names]


def _fallback_methods(cls: ast.ClassDef, model) -> FrozenSet[str]:
    """Methods of ``cls`` that the file calls only from one branch of an ``if`` whose other branch calls SDPA, itself
    or through another method of the class (darts 0.41.0 chronos2_submodels.py:391: ``if self.attn_implementation ==
    "sdpa": self._sdpa_attention(...) else: self._eager_attention(...)``): the hand-written fallback, factored out."""
    methods = [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    fused = {m.name for m in methods if _calls([m], _SDPA)}
    names = {m.name for m in methods} - fused
    fallback = set()  # the calls of those methods made beside a branch that reaches SDPA
    for branch_if in walk_tree(cls):
        if isinstance(branch_if, ast.If) and branch_if.orelse:
            for branch, other in ((branch_if.body, branch_if.orelse), (branch_if.orelse, branch_if.body)):
                if _calls(other, _SDPA) or any(_self_calls(s, fused) for s in other):
                    fallback.update(id(c) for s in branch for c in _self_calls(s, names))
    sites = {name: [c for c in model.calls(name) if isinstance(c.func, ast.Attribute)] for name in names}
    return frozenset(name for name in names if sites[name] and all(id(s) in fallback for s in sites[name]))


def _sdpa_overridden(cls: ast.ClassDef, ctx) -> FrozenSet[str]:
    """Methods of ``cls`` that a subclass in the same module overrides with one calling SDPA, in a module whose model
    supports SDPA and picks its attention class by the configuration's ``_attn_implementation``: the layout of
    transformers before 4.48, copied into many projects (surya 0.22.1 rfdetr/.../dinov2_with_windowed_attn.py:411,
    ``Dinov2WithRegistersSdpaSelfAttention(Dinov2WithRegistersSelfAttention)``, chosen by
    ``ATTENTION_CLASSES[config._attn_implementation]``). transformers picks "sdpa", so the base class's hand-written
    method is the fallback (the subclass calls it back only for ``output_attentions``). A class chosen by a field of
    the project's own configuration (``config.attn_implementation``, xtuner's internlm2 defaulting to "eager") is not
    one."""
    source = source_text(ctx)
    if not (_SUPPORTS_SDPA.search(source) and _PICKED_BY_TRANSFORMERS.search(source)):
        return frozenset()
    overridden = set()
    for sub in ctx.tree.body:
        if isinstance(sub, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == cls.name for b in sub.bases):
            overridden.update(m.name for m in sub.body if isinstance(m, _FUNCTIONS) and _calls([m], _SDPA))
    return frozenset(overridden)


def _dispatches_attention(ctx) -> bool:
    source = source_text(ctx)
    return "ALL_ATTENTION_FUNCTIONS" in source and bool(_SUPPORTS_SDPA.search(source))


def other_branch_calls(node: ast.AST, ctx, name: str) -> bool:
    """``node`` is in one branch of an ``if`` whose other branch calls ``name`` (``f.name(...)`` or ``name(...)``):
    the code already uses that API where it chose to, and its other branch is the deliberate fallback (diffusers
    normalization.py:555, ``if is_torch_npu_available() and self.weight is not None: torch_npu.npu_rms_norm(...)
    else: <hand-written RMSNorm>``)."""
    for parent, child in ctx.lineage(node):
        if isinstance(parent, _SCOPES):
            return False
        if isinstance(parent, ast.If):
            other = parent.orelse if any(s is child for s in parent.body) else (
                parent.body if any(s is child for s in parent.orelse) else [])
            if other and ctx.memo(f"fused.calls.{name}.{id(other)}", lambda _: _calls(other, name)):
                return True
    return False


def untaken_branch(node: ast.AST, ctx) -> bool:
    """``node`` is in a branch of an ``if`` of its function that the values its parameters keep never take
    (``_in_untaken``), or in a module-level function that the project calls only from such branches of its file
    (litgpt 0.5.13 model.py:1176 ``apply_rope_interleave``, called under ``if self.config.rope_interleave:``
    alone). The pattern there never runs as the package builds its models."""
    if _in_untaken(ctx.lineage(node), ctx):
        return True
    top = ctx.stack[1] if len(ctx.stack) > 1 else None
    return isinstance(top, _FUNCTIONS) and ctx.memo(f"fused.called_untaken.{id(top)}",
                                                    lambda c: _called_untaken(c, top))


def _called_untaken(ctx, function: ast.AST) -> bool:
    """Every call of ``function`` is ``name(...)`` in its file, in an untaken branch, and no other word of the
    project names it (an import, a value handed on, a configuration string: ``project.word_count``)."""
    calls = [c for c in ctx.model.calls(function.name) if isinstance(c.func, ast.Name)]
    root = ctx.project_root() if calls and not function.decorator_list else None
    if root is None or project.word_count(root, function.name.encode()) != 1 + len(calls):
        return False
    for call in calls:
        if not _in_untaken(lineage(ctx.model.ancestors(call), call), ctx):
            return False
    return True


def _in_untaken(lineage, ctx) -> bool:
    """The (parent, child) pairs ``lineage`` (outwards from a node) pass through a branch of an ``if`` of the
    node's function that the values its parameters keep never take: the test reads parameters (or ``self.x``
    stored from one) that every call in the package leaves at, or passes as, one literal (``left_at_default``,
    with at least one call), and that value decides it (coqui 0.27.2 utils/measures.py:13, ``if binary:`` where no
    call passes ``binary=True``; espnet 202511 uhifigan/sine_generator.py:66, the ``else`` of ``if not
    self.flag_for_pulse:`` where the one construction leaves it False); or ``self.x`` that ``__init__`` computes
    once from such parameters, not from constants alone (mmagic 1.2.0 stable_diffusion/vae.py:291,
    ``self.num_heads = channels // num_head_channels if num_head_channels is not None else 1`` where every
    construction passes None); or a field that the project only reads (``field_left_at_default``: litgpt 0.5.13
    model.py:506, ``if self.config.rope_interleave:``)."""
    reading = set()  # the ``self.x`` being computed: a class whose stores read each other decides nothing

    def known(expr: ast.AST) -> object:
        found, value = left_at_default(ctx, expr, called=True)
        if not found:
            found, value = field_left_at_default(ctx, expr)
        if found:
            return value
        stored = ctx.model.stored(expr)
        if stored is None or id(stored) in reading or not any(
                ctx.model.parameter(n) for n in ast.walk(stored) if isinstance(n, ast.Name)):
            return UNDECIDED  # a flag ``__init__`` sets to a constant: others turn it on (yolov5 ``m.export = True``)
        reading.add(id(stored))
        value = _decided(stored, known)
        reading.discard(id(stored))
        return value

    return untaken(lineage, known)


def untaken(lineage, known: Known) -> bool:
    """The (parent, child) pairs ``lineage`` (outwards from a node) pass through a branch of an ``if`` of the node's
    function whose test, with the values ``known`` gives, never takes it."""
    for parent, child in lineage:
        if isinstance(parent, _SCOPES):
            return False
        if isinstance(parent, ast.If):
            taken = True if any(s is child for s in parent.body) else (
                False if any(s is child for s in parent.orelse) else None)
            if taken is not None:
                value = _decided(parent.test, known)
                if value is not UNDECIDED and bool(value) is not taken:
                    return True
    return False


def _calls(statements: List[ast.stmt], name: str) -> bool:
    for statement in statements:
        for sub in walk_tree(statement):
            if isinstance(sub, ast.Call):
                func = sub.func
                if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) == name:
                    return True
    return False
