"""The value model every rule asks: what an expression is, and where it lives.

``Values(model).of(expr)`` answers with a ``Value``: its ``kind`` (a torch tensor, a boolean mask, a
numpy/pandas array, a Python number, a container, something else, or unknown), its ``device``
(``host`` for tensors known to live on the CPU, ``device`` for ``.cuda()``-like ones, else None),
whether it is a *constant* tensor (built by factories from sizes and literals, never from data), and
whether a number or list was *read out* of a tensor's data (``t.item()``, ``int(mask.sum())``).

What it knows comes from, in order (docs/value_model.md explains each with examples):

1. the expression itself: literals, comparisons and ``&``/``|``/``~`` of masks, operators;
2. torch's own type stubs: what every ``torch.*`` function, ``torch.nn.functional`` function and
   ``Tensor`` method returns, including tuple results (``values, indices = x.max(dim=1)``), generated
   by tools/build_torch_types.py into data/torch_types.json;
3. local data flow (``flow.Flow``): the assignment in force where a name is read, tuple unpacking,
   loops over ``.tolist()`` or ``split``; module-level constants; ``self.x`` assigned in the class;
   the ``return`` of simple helpers defined in the same file;
4. evidence from use, per name and per function: a name used with tensor-only methods (``new_zeros``,
   ``masked_fill``, ``unsqueeze``, ``.device``, ``x.size(0)``, ``dim=`` keywords) or passed as the tensor
   argument of a torch function is a tensor; ``np.*(x)``, ``x.astype``, ``x.copy()`` make it an array;
   conflicting evidence leaves it unknown.  A loss, a name ``.backward()`` is called on (``loss``,
   ``(loss / n).backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``), is a
   tensor whatever its assignment says (``loss = sum(losses.values())``).

Anything it cannot settle is ``unknown``: rules that need a tensor stay silent on it.
"""
from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Set, Tuple

from ..calls import argument, dotted, is_constant, passed
from ..walk import assign_targets, block_of, child_fields, fields_table, parameter_defaults
from .names import AUGMENTED, LOOP, Resolver, Scope

if TYPE_CHECKING:
    from .model import SemanticModel

_FIELDS = fields_table()  # ``child_fields``' memo, looked up inline by ``walk``
TENSOR, MASK, ARRAY, NUMBER, CONTAINER, OTHER, UNKNOWN = (
    "tensor", "mask", "array", "number", "container", "other", "unknown")
COMPARE = "compare"  # ``a > b`` of unknowns: a mask if a side turns out to be a tensor (evidence decides)
HOST, DEVICE = "host", "device"
# Built on the CPU because nothing named a device: a factory given no ``device=`` inside a function, a
# tokenizer's ``return_tensors="pt"`` batch, ``torch.from_numpy``.  On the host where it is read; whether it
# is moved later is the flow's business (``t = t.to(device)`` rebinds the name).
BUILT_ON_HOST = "built-on-host"
_HOSTS = frozenset((HOST, BUILT_ON_HOST))
_DEPTH = 12  # how many steps one question may follow (names, calls, helpers)
_DATA = Path(__file__).resolve().parent.parent / "data" / "torch_types.json"


_TORCH_MODULES = frozenset({"torch", "torch_npu"})


class Value:
    """What an expression evaluates to, as far as the model can tell."""

    __slots__ = ("kind", "device", "const", "readout", "items", "boolean", "encoding")

    def __init__(self, kind: str, device: Optional[str] = None, const: bool = False, readout: bool = False,
                 items: Optional[Tuple["Value", ...]] = None, boolean: bool = False, encoding: bool = False) -> None:
        self.kind = kind
        # a tokenizer's ``return_tensors="pt"`` batch (a dict of tensors, ``items[0]``), or one of its tensors:
        # token ids or the padding mask, moved or cast, read in the function that tokenized
        self.encoding = encoding
        self.boolean = boolean  # a boolean numpy array (``a > 0``): it still selects rows from a tensor
        self.device = device
        self.const = const  # a tensor built only from literals and sizes (no data flows into it)
        self.readout = readout  # a host number / list read out of a tensor's values
        self.items = items  # a fixed tuple's items, or a 1-tuple (element,) for a sequence of any length

    @property
    def tensor(self) -> bool:
        return self.kind in (TENSOR, MASK)

    def __repr__(self) -> str:
        return f"Value({self.kind}, device={self.device}, const={self.const}, readout={self.readout})"


UNKNOWN_VALUE = Value(UNKNOWN)
_ENCODING = Value(CONTAINER, BUILT_ON_HOST, items=(Value(TENSOR, BUILT_ON_HOST, encoding=True),), encoding=True)
# Tensor methods that keep a tokenizer batch's tensor what it is (moved, cast, copied).
_KEEPS_TOKENS = frozenset("to cuda npu cpu bool long int float contiguous clone detach".split())


def _is_encoding(value: Value) -> bool:
    """A tokenizer's batch itself (not one of its tensors)."""
    return value.encoding and value.kind == CONTAINER and bool(value.items)
SIZES = Value(CONTAINER, items=(Value(NUMBER),))  # ``x.shape``: a sequence of numbers


@lru_cache(maxsize=None)
def torch_types() -> dict:
    """The packaged return-type table (loaded once per process)."""
    return json.loads(_DATA.read_text(encoding="utf-8"))


def returns(api: str) -> FrozenSet[str]:
    """The kinds a torch API returns according to its stubs (empty when the stubs do not say)."""
    return _returns().get(api, frozenset())


@lru_cache(maxsize=None)
def _returns() -> Dict[str, FrozenSet[str]]:
    return {name: frozenset(kinds) for name, kinds in torch_types()["returns"].items()}


def returns_tensor_method(name: str) -> bool:
    """Does ``Tensor.<name>`` return a tensor in every overload?"""
    return returns("torch.Tensor." + name) == {"tensor"}


# -- vocabularies ---------------------------------------------------------------------------------------
_COMPARISONS = (ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.Eq, ast.NotEq)
_LOGICAL = (ast.BitAnd, ast.BitOr, ast.BitXor)
# Functions / methods whose tensor result is boolean (the stubs say "Tensor", not which dtype).
_MASK_OPS = frozenset(
    """isnan isinf isfinite isneginf isposinf isreal isclose isin logical_and logical_or logical_not logical_xor
    gt lt ge le eq ne greater less greater_equal less_equal not_equal bool signbit""".split())
# ``any``/``all`` are masks only when reduced along a dimension (else a 0-d flag used as a condition).
_MASK_REDUCTIONS = frozenset(("any", "all"))
# Ops that keep the dtype of their (first) tensor input: a mask stays a mask through them.
_SAME_DTYPE = frozenset(
    """view view_as reshape reshape_as squeeze unsqueeze flatten unflatten permute transpose t expand expand_as
    repeat contiguous clone detach narrow select index_select gather masked_select flip roll tile
    repeat_interleave cpu cuda npu to stack cat concat concatenate hstack vstack zeros_like ones_like
    empty_like full_like triu tril diag_embed movedim swapaxes""".split())
_FACTORIES = frozenset(
    """zeros ones empty full arange linspace logspace eye tensor as_tensor rand randn randint randperm
    zeros_like ones_like empty_like full_like rand_like randn_like tril_indices triu_indices""".split())
# Factories whose values are fixed by their arguments (not random, not uninitialised memory).
_CONSTANT_FACTORIES = frozenset("zeros ones full arange linspace logspace eye tensor as_tensor tril_indices "
                                "triu_indices".split())
# Legacy constructors (``torch.Tensor(data)``, ``torch.LongTensor(sizes)``): CPU tensor types, so they build on
# the host wherever a factory given no device does (torch/_tensor_docs: "torch.*Tensor" are the CPU types).
_LEGACY_CONSTRUCTORS = frozenset("""Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor
    ShortTensor ByteTensor CharTensor BoolTensor""".split())
_LIKE = frozenset(("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"))
_TO_DEVICE = frozenset(("cuda", "npu"))
# Factories that copy their data argument (which may already be a tensor) rather than make a new tensor.
_DATA_FACTORIES = frozenset(("tensor", "as_tensor", "asarray") + tuple(_LIKE))
_CONVERSIONS = {"float": "torch.float32", "half": "torch.float16", "bfloat16": "torch.bfloat16",
                "double": "torch.float64"}
# A default device set for the file's factories; not where it is the CPU or ``meta`` (ms_swift template/base.py:270,
# ``with torch.device('meta'):`` to build a model skeleton), whose tensors never reach the NPU either.
_DEFAULT_DEVICE = re.compile(
    r"set_default_tensor_type|(?:set_default_device|with\s+(?:torch\.)?device)\(\s*(?!['\"](?:cpu|meta)['\"])")
_FOREIGN = ("numpy", "pandas", "cupy", "scipy")
_BUILTIN_NUMBERS = frozenset(("int", "float", "len", "round", "abs", "min", "max", "sum", "pow"))
_BUILTIN_CONTAINERS = frozenset(("list", "dict", "tuple", "set", "sorted", "zip", "range", "enumerate",
                                 "reversed", "map", "filter", "frozenset", "defaultdict", "OrderedDict"))
_BUILTIN_OTHER = frozenset(("str", "bool", "repr", "format", "isinstance", "hasattr", "getattr", "type", "open",
                            "print", "id", "callable", "iter", "next"))
_BOUNDING = frozenset(("min", "max", "abs", "round", "pow"))  # numbers of numbers: data in, data out
_CONSTANT_NUMBERS = frozenset(f"{m}.{c}" for m in ("math", "numpy", "torch") for c in ("inf", "nan", "pi", "e"))
# Tensor methods that read values out to the host.
_READOUT = frozenset(("item", "tolist"))
# Reductions whose value, once converted to a Python number, is a count or size read from the data.
_REDUCTIONS = frozenset("sum max min amax amin argmax argmin count_nonzero prod ceil floor round long int".split())

# Evidence from use.  Tensor-only: Tensor methods / attributes that numpy arrays, pandas objects and
# nn.Module do not have (``device`` and ``requires_grad_`` are left out: modules have them too;
# tests/test_values.py checks each is in torch's stubs).
TENSOR_ONLY = frozenset(
    """new_zeros new_ones new_full new_empty new_tensor masked_fill masked_fill_ masked_scatter unsqueeze
    unsqueeze_ permute sigmoid sigmoid_ softmax log_softmax detach detach_ numel contiguous type_as
    view_as expand expand_as clamp clamp_ clamp_min clamp_max index_select scatter scatter_ scatter_add_
    index_fill_ index_put_ nonzero_static is_cuda grad_fn new bool dim
    logical_not logical_and logical_or isnan isinf isfinite exp_ log_ mul_ add_ sub_ div_ fill_ zero_
    topk gather chunk split_with_sizes flip narrow unbind masked_select""".split())
# Numpy / pandas only.
ARRAY_ONLY = frozenset("astype copy iloc loc values to_numpy tobytes reset_index groupby ravel".split())


class _Evidence:
    """What the uses of each name in one function say it holds."""

    __slots__ = ("tensor", "array", "indexes", "written")

    def __init__(self) -> None:
        self.tensor: Set[str] = set()
        self.array: Set[str] = set()
        self.indexes: Dict[str, List[ast.AST]] = {}  # name -> what it indexes (``boxes`` in ``boxes[keep]``)
        # names written in place: (a store?, the index or None, the value): ``x[i] = v``, ``x[m] /= 8``, ``x.add_(y)``
        self.written: Dict[str, List[Tuple[bool, Optional[ast.AST], ast.AST]]] = {}


# Receivers of ``X.backward(loss)`` that scale the loss themselves (accelerate, Lightning Fabric, DeepSpeed).
_LOSS_SCALERS = ("accelerator", "fabric", "engine", "deepspeed")


def framework_backward(call: ast.Call) -> bool:
    """``accelerator.backward(loss)``: a framework's backward, whose argument (not receiver) is the loss."""
    receiver = call.func.value
    name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
    return bool(call.args) and any(word in name.lower() for word in _LOSS_SCALERS)


def _loss_names(expr: ast.AST, names: Set[str]) -> None:
    """Names a loss is computed from: ``loss``, ``(loss / n)``, ``scaler.scale(loss)``."""
    if isinstance(expr, ast.Name):
        names.add(expr.id)
    elif isinstance(expr, ast.BinOp):
        _loss_names(expr.left, names)
        _loss_names(expr.right, names)
    elif isinstance(expr, ast.Call):
        for arg in expr.args:
            _loss_names(arg, names)


def _argument_names(arg: ast.AST):
    """The names an argument of a tensor-only parameter shows to be tensors: ``x``, ``x[i]``, ``x.float()``."""
    while True:
        if isinstance(arg, ast.Name):
            yield arg.id
            return
        if isinstance(arg, ast.Subscript):
            arg = arg.value
        elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and returns_tensor_method(
                arg.func.attr):
            arg = arg.func.value
        elif isinstance(arg, (ast.List, ast.Tuple)):
            for element in arg.elts:
                yield from _argument_names(element)
            return
        else:
            return


class Values:
    """The value model of one file (``model.values``); answers are memoised per node."""

    def __init__(self, model: "SemanticModel") -> None:
        self.model = model
        self.summaries = model.summaries
        self._memo: Dict[int, Value] = {}
        self._evidence: Dict[int, _Evidence] = {}
        self._foreign: Dict[int, bool] = {}
        self._placing: Dict[int, bool] = {}
        self._moves: Dict[int, List[Tuple[ast.Call, object]]] = {}
        self._lists: Dict[int, Value] = {}
        self._busy: Set[int] = set()
        self._cut = False  # the answer being built depends on a question cut off (too deep, or a cycle)
        self._cycle = False  # ... on a cycle: the answer depends on the path it was asked from
        # answers cut off only by depth, per (node, depth): the same at that depth however they are reached, so a
        # long chain of assignments is walked once per depth instead of once per question that reaches it
        self._deep: Dict[Tuple[int, int], Value] = {}
        self._imports_torch: Optional[bool] = None
        self._default_device: Optional[bool] = None
        self._loss_table: Optional[Dict[int, Set[str]]] = None

    # -- the query API ---------------------------------------------------------------------------
    def of(self, expr: ast.AST) -> Value:
        """The value of ``expr``, read in the scope it appears in."""
        return self._value(expr, self.model.scope(expr), 0)

    def value_in(self, expr: ast.AST, scope: Scope, depth: int = 0) -> Value:
        """The value of ``expr`` read in ``scope`` (for summaries, which ask about other functions)."""
        return self._value(expr, scope, depth)

    def is_tensor(self, expr: ast.AST) -> bool:
        return self.of(expr).tensor

    def is_mask(self, expr: ast.AST) -> bool:
        return self.of(expr).kind == MASK

    def is_array(self, expr: ast.AST) -> bool:
        """A numpy / pandas / cupy object (host-side; never an NPU tensor)."""
        return self.of(expr).kind == ARRAY

    def not_tensor(self, expr: ast.AST) -> bool:
        """Known to be something other than a tensor (array, number, container, string...)."""
        return self.of(expr).kind in (ARRAY, NUMBER, CONTAINER, OTHER)

    def on_host(self, expr: ast.AST) -> bool:
        """A tensor known to live on the CPU where it is read: said so (``device='cpu'``, ``.cpu()``), or built
        there and not moved since (a factory given no device inside a function, ``torch.from_numpy``, a
        tokenizer's ``return_tensors="pt"`` output)."""
        value = self.of(expr)
        return value.tensor and value.device in _HOSTS

    def on_host_here(self, expr: ast.AST) -> bool:
        """On the CPU where it is read: by its value (``on_host``) or by what its function does with it
        (``host_here``)."""
        return self.on_host(expr) or self.host_here(expr)

    def host_side(self, expr: ast.AST) -> bool:
        """Lives on the CPU: said so (``.cpu()``, ``device='cpu'``), or a constant table built in a function
        that places nothing on a device (``torch.arange(n)`` there never reaches the NPU)."""
        value = self.of(expr)
        if value.device == HOST:
            return True
        if not (value.tensor and (value.const and value.device is None and not self._default_device_changed()
                                  or value.device == BUILT_ON_HOST)):
            return False  # under ``torch.set_default_device('cuda')`` a table made with no device is on the GPU
        owner = self.model.function(expr)
        return owner is not None and not self._places_on_device(owner)

    def host_here(self, expr: ast.AST) -> bool:
        """The local tensor ``expr`` reads (a name, or a subscript or method chain of one that moves nothing) is on
        the host here. Bound by a host value (``.cpu()``, ``.to('cpu')``) in a statement that runs before the read
        on every path (scvi-tools 1.4.2 model/_multivi.py:565-574: ``p = ...cpu()``, ``p *= w`` under an ``if``,
        then ``p[p < t] = 0``); or moved to a device, itself or through view and shape methods, by a statement
        that runs after the read on every path (kraken 7.1.1 blla.py:116-121, ``tensor_im.unsqueeze(0).to(device)``
        inside two ``with`` blocks; pyannote 3.3.2 pipelines/speaker_verification.py:192-197); or converted, the same
        binding, by a ``.numpy()`` of the function (``_numpy_reads``). ``with`` bodies run whole. Not a ``.cpu()``
        in a branch of its own (``if assign_on_cpu: x = x.cpu()``), a move in a branch or beside another tensor
        (``labels.to(logits.device)`` only puts them together), a conversion that only looks like a move
        (``h.to(self.compute_dtype)``, ``h.to(dtype_map[self.llm_dtype])``) or a copy to the host, nor a loop that
        binds the name elsewhere (moved in one iteration, read in the next)."""
        name = _chain_root(expr)
        owner = self.model.function(name) if name is not None else None
        read = next((r for r in self.model.reads(owner, name.id) if r.node is name), None) if owner else None
        if read is None or self.of(name).device == DEVICE:
            return False
        flow = self.model.flow(owner)
        bound = flow.binding(name, in_place=False)
        levels = _levels(read.path, owner)
        before = [_unfolded(block[:index]) for _, block, index in levels]
        for loop in (node for node in read.path if isinstance(node, _LOOPS)):
            k = next((k for k, (parent, block, _) in enumerate(levels) if block is loop.body), None)
            if (k is not None or isinstance(loop, ast.While)) and not _fresh_each_time(
                    loop, bound, flow.bindings.get(name.id, ()), before[:k + 1] if k is not None else []):
                return False  # the name may still hold what an earlier iteration left in it (a ``while`` test too)
        if bound is not None and bound.index is None and _copied_to_host(bound.value) \
                and any(_binds(s, bound) for b in before for s in b):
            return True
        if bound is not None and any(flow.binding(root, in_place=False) is bound
                                     for root in self._numpy_reads(owner, name.id)):
            return True
        later = [s for _, block, index in levels for s in _unfolded(block[index + 1:]) if isinstance(s, _STRAIGHT)]
        for call, _ in self.data_placements(owner):
            receiver = _chain_root(call.func.value, _RESHAPES) if isinstance(call.func, ast.Attribute) else None
            where = passed(call, "device", 0)
            if receiver is not None and receiver.id == name.id and flow.binding(receiver, in_place=False) is bound \
                    and not (isinstance(where, ast.Attribute) and where.attr == "device"
                             and isinstance(where.value, ast.Name) and where.value.id != "self") \
                    and not (where is not None and any("dtype" in (getattr(n, "attr", None) or getattr(n, "id", ""))
                                                       for n in walk(where))) \
                    and any(s.lineno <= call.lineno <= s.end_lineno for s in later):
                return True
        return False

    def _numpy_reads(self, owner: ast.AST, name: str) -> List[ast.Name]:
        """The reads of ``name`` in ``owner`` that ``.numpy()`` converts with no move before it (``t[:, j][m].numpy()``,
        ``t.detach().numpy()``): without ``force=True`` it converts "only if the tensor is on the CPU" (torch 2.13.0
        torch/_tensor_docs.py:3640-3641), so the tensor they read is on the host (chemprop 2.2.1
        uncertainty/calibrator.py:381-389)."""
        found = []
        for call in self.model.calls("numpy"):
            if isinstance(call.func, ast.Attribute) and not call.args and not call.keywords \
                    and self.model.function(call) is owner:
                root = _chain_root(call.func.value)
                if root is not None and root.id == name:
                    found.append(root)
        return found

    def maybe_tensor(self, expr: ast.AST) -> bool:
        """For pattern rules: a tensor, or unknown in a function that uses no numpy / pandas / cupy, in a file
        that imports torch.

        Per function, not per file: a file that imports numpy keeps this for the functions that never
        call it, and a name that evidence shows to be an array is never a maybe.  A file that never imports
        torch (a sympy or numpy module) has no unknown tensors.
        """
        value = self.of(expr)
        if value.tensor:
            return True
        if value.kind not in (UNKNOWN, COMPARE) or (isinstance(expr, ast.Name) and expr.id in ("self", "cls")):
            return False
        if not self.imports_torch():
            return False
        owner = self.model.function(expr) or self.model.tree
        return not self._uses_foreign(owner)

    def imports_torch(self) -> bool:
        """Whether the file imports torch (or torch_npu) anywhere, functions included: from the bindings the
        model holds anyway, cheaper than another walk over the tree."""
        if self._imports_torch is None:
            self._imports_torch = any(
                binding.qualname and binding.qualname.split(".")[0] in _TORCH_MODULES
                for scope in self.model.scopes.values() for bindings in scope.bindings.values()
                for binding in bindings)
        return self._imports_torch

    def _uses_foreign(self, owner: ast.AST) -> bool:
        found = self._foreign.get(id(owner))
        if found is None:
            resolver = self.model.resolver(self.model.scopes[id(owner)])
            stack = list(owner.body)
            found = False
            while stack and not found:
                node = stack.pop()
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                if isinstance(node, ast.Name):
                    qualname = resolver.qualname(node)
                    found = qualname is not None and qualname.split(".")[0] in _FOREIGN
                else:
                    stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(
                        c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or owner is not self.model.tree)
            self._foreign[id(owner)] = found
        return found

    def host_only(self, call: ast.Call) -> bool:
        """A torch factory (or ``torch.from_numpy``) that builds on the CPU and stays there: ``device='cpu'``, or no
        device at all inside a function that places nothing on a device (no ``.cuda()``/``.npu()``,
        ``.to(device)``, ``device=...``).  Module-level code is never host-only: scripts move tensors implicitly."""
        qualname = self.model.qualname(call.func)
        if qualname is None or not qualname.startswith("torch.") or (
                qualname[len("torch."):] not in _FACTORIES and qualname != "torch.from_numpy"):
            return False
        device = next((k.value for k in call.keywords if k.arg == "device"), None)
        if device is not None:
            return _device_literal(device) == HOST
        owner = self.model.function(call)
        return owner is not None and not self._places_on_device(owner)

    def _places_on_device(self, owner: ast.AST) -> bool:
        found = self._placing.get(id(owner))
        if found is None:
            found = self._placing[id(owner)] = places_on_device(owner)
        return found

    def data_placements(self, owner: ast.AST) -> List[Tuple[ast.Call, object]]:
        """The calls of ``owner`` that move existing data to a device, each with the dtype the data gets there
        when the same expression converts it (``.to(device, dtype=d)``, ``.to(d, device=...)``, ``.to(device,
        d)``, ``torch.tensor(x, device=..., dtype=d)``, ``.to(device).float()``: the ``d`` expression, or the
        name ``"torch.float32"`` for a conversion method) or None.  Factories that make new tensors on a device
        (``torch.zeros(n, device=d)``) move nothing and are left out."""
        found = self._moves.get(id(owner))
        if found is None:
            moves: Dict[int, list] = {}
            converted: Dict[int, str] = {}
            resolver = self.model.resolver(self.model.scopes[id(owner)]) if id(owner) in self.model.scopes else None
            for node in walk(owner):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in _CONVERSIONS and not node.args \
                        and isinstance(func.value, ast.Call):
                    converted[id(func.value)] = _CONVERSIONS[func.attr]
                device = next((k.value for k in node.keywords if k.arg == "device"), None)
                dtype = next((k.value for k in node.keywords if k.arg == "dtype"), None)
                if isinstance(func, ast.Attribute) and (func.attr in _TO_DEVICE or func.attr == "to" and (
                        device is not None or node.args and not _is_dtype(node.args[0]))):
                    where = device if device is not None else node.args[0] if func.attr == "to" and node.args else None
                    if where is not None and _device_literal(where) == HOST:
                        continue  # ``.to('cpu')`` (deepspeed 0.19.8 sequence/fpdt_layer.py:1293) moves to the host
                    if dtype is None and func.attr == "to" and len(node.args) > 1 and _is_dtype(node.args[1]):
                        dtype = node.args[1]
                    if dtype is None and func.attr == "to" and device is not None and node.args \
                            and _is_dtype(node.args[0]):
                        dtype = node.args[0]
                    moves[id(node)] = [node, dtype]
                elif device is not None and _device_literal(device) != HOST:
                    qualname = resolver.qualname(func) if resolver is not None and isinstance(
                        func, (ast.Name, ast.Attribute)) else None
                    name = (qualname or "").rsplit(".", 1)[-1]
                    if not (qualname or "").startswith("torch.") or name not in _FACTORIES or name in _DATA_FACTORIES:
                        moves[id(node)] = [node, dtype]
            for key, dtype in converted.items():
                if key in moves and moves[key][1] is None:
                    moves[key][1] = dtype
            found = self._moves[id(owner)] = [(call, dtype) for call, dtype in moves.values()]
        return found

    def readout(self, expr: ast.AST) -> bool:
        """A Python number or list read out of a tensor's values (``n.item()``, ``int(t.sum())``)."""
        return self.of(expr).readout

    # -- scopes, flows, evidence -----------------------------------------------------------------
    def _evidence_of(self, owner: ast.AST, scope: Scope) -> _Evidence:
        found = self._evidence.get(id(owner))
        if found is None:
            found = self._evidence[id(owner)] = self._collect(owner, scope)
        return found

    def _indexes_tensor(self, name: str, owner: ast.AST, scope: Scope, depth: int) -> bool:
        """Is ``name`` used as an index of a value known to be a tensor (``boxes[keep]``)?"""
        return any(self._value(value, scope, depth).tensor
                   for value in self._evidence_of(owner, scope).indexes.get(name, ()))

    def _collect(self, owner: ast.AST, scope: Scope) -> _Evidence:
        """One walk of a function body: which names are used as tensors, which as arrays."""
        evidence = _Evidence()
        resolver = self.model.resolver(scope)
        for node in walk(owner):  # the node's class by identity: this loop sees every node of every function asked
            cls = node.__class__
            if cls is ast.Name or cls is ast.Constant:
                continue
            if cls is ast.Assign or cls is ast.AugAssign:
                for target in assign_targets(node):
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        evidence.written.setdefault(target.value.id, []).append(
                            (cls is ast.Assign, target.slice, node.value))
            elif cls is ast.Subscript:
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                for part in parts:
                    if isinstance(part, ast.Name):
                        evidence.indexes.setdefault(part.id, []).append(node.value)
            elif cls is ast.Attribute:
                if node.value.__class__ is ast.Name:
                    if node.attr in TENSOR_ONLY:
                        evidence.tensor.add(node.value.id)
                    elif node.attr in ARRAY_ONLY:
                        evidence.array.add(node.value.id)
            elif cls is ast.Call:
                func = node.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    if func.attr.endswith("_") and not func.attr.startswith("_"):  # ``x.index_put_(...)``
                        evidence.written.setdefault(func.value.id, []).extend((False, None, a) for a in node.args)
                    if func.attr == "size" or (func.attr == "view" and node.args and all(
                            isinstance(a, (ast.Constant, ast.UnaryOp, ast.Name)) for a in node.args)
                            and not any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                        for a in node.args)) or any(
                            k.arg in ("dim", "keepdim") for k in node.keywords):
                        evidence.tensor.add(func.value.id)
                    elif any(k.arg in ("axis", "keepdims") for k in node.keywords):
                        evidence.array.add(func.value.id)
                if not node.args:
                    continue
                qualname = resolver.qualname(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
                if qualname is None:
                    continue
                first = node.args[0]
                if qualname.split(".")[0] in _FOREIGN:
                    for arg in node.args:
                        if isinstance(arg, ast.Name):
                            evidence.array.add(arg.id)
                elif _takes_tensor(qualname) and not isinstance(first, (ast.List, ast.Tuple)) or (
                        qualname in ("torch.cat", "torch.stack")):
                    evidence.tensor.update(_argument_names(first))
        return evidence

    def _from_use(self, name: str, owner: ast.AST, scope: Scope) -> Optional[str]:
        """TENSOR or ARRAY when the uses of ``name`` in ``owner`` agree, else None."""
        if not isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            return None
        evidence = self._evidence_of(owner, scope)
        tensor, array = name in evidence.tensor, name in evidence.array
        if tensor and not array:
            return TENSOR
        if array and not tensor:
            return ARRAY
        return None

    # -- inference -------------------------------------------------------------------------------
    def _value(self, expr: ast.AST, scope: Scope, depth: int) -> Value:
        key = id(expr)
        found = self._memo.get(key)
        if found is not None:
            return found
        if depth > _DEPTH or key in self._busy:
            self._cut = True  # a cycle or a long chain: this answer is partial
            self._cycle = self._cycle or depth <= _DEPTH
            return UNKNOWN_VALUE
        found = self._deep.get((key, depth))
        if found is not None:
            self._cut = True
            return found
        self._busy.add(key)
        outer, outer_cycle, self._cut, self._cycle = self._cut, self._cycle, False, False
        try:
            value = self._infer(expr, scope, depth + 1)
        finally:
            self._busy.discard(key)
        if not self._cut:  # answers that depended on a cut-off question are kept only where they do not depend
            self._memo[key] = value  # on the path they were asked from
        elif not self._cycle:
            self._deep[key, depth] = value
        self._cut = self._cut or outer
        self._cycle = self._cycle or outer_cycle
        return value

    def _infer(self, expr: ast.AST, scope: Scope, depth: int) -> Value:
        if isinstance(expr, ast.Constant):
            if isinstance(expr.value, bool) or expr.value is None or isinstance(expr.value, (str, bytes)):
                return Value(OTHER)
            return Value(NUMBER) if isinstance(expr.value, (int, float)) else Value(OTHER)
        if isinstance(expr, ast.Name):
            return self._name(expr, scope, depth)
        if isinstance(expr, ast.Call):
            return self._call(expr, scope, depth)
        if isinstance(expr, ast.Attribute):
            return self._attribute(expr, scope, depth)
        if isinstance(expr, ast.Subscript):
            return self._subscript(expr, scope, depth)
        if isinstance(expr, ast.Compare):
            return self._compare(expr, scope, depth)
        if isinstance(expr, ast.BinOp):
            return self._binop(expr, scope, depth)
        if isinstance(expr, ast.UnaryOp):
            if isinstance(expr.op, ast.Not):
                return Value(OTHER)
            operand = self._value(expr.operand, scope, depth)
            if isinstance(expr.op, ast.Invert) or operand.kind not in (MASK, COMPARE):
                return operand
            return Value(TENSOR, operand.device, operand.const)  # -mask is an integer tensor
        if isinstance(expr, (ast.Tuple, ast.List)):
            return Value(CONTAINER, items=tuple(self._value(e, scope, depth) for e in expr.elts)
                         if isinstance(expr, ast.Tuple) else None)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):  # ``[torch.tensor(u.shape) for u in xs]``
            element = self._value(expr.elt, scope, depth)  # or CPU copies: ``[o.cpu() for o in outs]``
            return Value(CONTAINER, items=(element,)) if element.tensor or element.device == HOST else Value(CONTAINER)
        if isinstance(expr, (ast.Dict, ast.Set, ast.DictComp, ast.SetComp)):
            return Value(CONTAINER)
        if isinstance(expr, ast.JoinedStr):
            return Value(OTHER)
        if isinstance(expr, ast.IfExp):
            body, orelse = self._value(expr.body, scope, depth), self._value(expr.orelse, scope, depth)
            return body if body.kind == orelse.kind else UNKNOWN_VALUE
        if isinstance(expr, ast.NamedExpr):
            return self._value(expr.value, scope, depth)
        return UNKNOWN_VALUE

    # names --------------------------------------------------------------------------------------
    def _name(self, name: ast.Name, scope: Scope, depth: int) -> Value:
        resolver = self.model.resolver(scope)
        qualname = resolver.qualname(name)
        if qualname is not None:
            return Value(NUMBER) if qualname in _CONSTANT_NUMBERS else Value(OTHER)
        home = scope.home(name.id)
        if home is None:
            return UNKNOWN_VALUE  # a builtin or an undefined name
        owner = home.node
        if isinstance(owner, (ast.Lambda, ast.ClassDef)):
            return UNKNOWN_VALUE
        flow = self.model.flow(owner)
        binding = flow.binding(name) if home is scope else (flow.bindings.get(name.id) or [None])[-1]
        if binding is None:
            return self._parameter(name.id, owner, home, depth)
        if binding.value is None:
            if binding.each is not None:  # for n in counts.tolist(): one element of the iterable
                return self._element(self._value(binding.each, home, depth), name.id, owner, home)
            return self._refine(UNKNOWN_VALUE, name.id, owner, home)
        literal = binding.value
        if binding.index is not None and isinstance(literal, ast.Tuple) and binding.index < len(literal.elts):
            literal = literal.elts[binding.index]  # ``images, texts = [], []``
        if isinstance(literal, ast.List):
            value = self._grown_list(literal, name.id, home, depth)
        else:
            value = self._value(binding.value, home, depth)
            if binding.index is not None:
                value = _item(value, binding.index)
            if binding.kind == AUGMENTED and value.tensor and value.device is None:
                value = self._in_place(value, binding.value.left, home, depth)
        if value.const and (binding.fallback is not None and binding.fallback <= (name.lineno, name.col_offset) or (
                isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))
                and self._written_with_data(name.id, owner, home, depth))):
            # read after ``if mask is None: mask = torch.ones(n)`` (the default, or what was passed), or a table
            # the function writes data into (``ids = torch.full((n,), -1)`` then ``ids[c] = ...``)
            value = Value(value.kind, value.device, readout=value.readout, items=value.items, boolean=value.boolean)
        return self._refine(value, name.id, owner, home, depth)

    def _in_place(self, value: Value, target: ast.Name, scope: Scope, depth: int) -> Value:
        """``x += y`` writes into the tensor ``x``, which stays where it is whatever ``y`` is: torch's
        TensorIterator (aten/src/ATen/TensorIterator.cpp, ``compute_types``) lets a CPU scalar be an input of a
        device kernel, never its output, so a CPU ``x`` beside a device ``y`` raises instead of moving (torchtitan
        0.3.0 trainer.py:883-893, ``local_valid_tokens = torch.tensor(0)`` summed into in a loop, then
        ``int(local_valid_tokens)``)."""
        written = self._value(target, scope, depth)
        if not (written.tensor and written.device is not None):
            return value
        return Value(value.kind, written.device, value.const, value.readout, value.items, value.boolean)

    def _grown_list(self, literal: ast.List, name: str, home: Scope, depth: int) -> Value:
        """``masks = []`` then ``masks.append(x > t)`` in the same body: a list of what the literal and the
        appends put in, when every element is a tensor (``torch.cat(masks)`` is then a mask)."""
        found = self._lists.get(id(literal))
        if found is None:
            found = self._lists[id(literal)] = self._list_elements(literal, name, home, depth)
        return found

    def _list_elements(self, literal: ast.List, name: str, home: Scope, depth: int) -> Value:
        elements = [self._value(e, home, depth) for e in literal.elts]
        for call in self.model.calls("append"):
            receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
            if isinstance(receiver, ast.Name) and receiver.id == name and len(call.args) == 1 \
                    and self.model.scope(call) is home:
                elements.append(self._value(call.args[0], home, depth))
        if elements and all(v.tensor for v in elements):
            return Value(CONTAINER, items=(agree(elements),))
        if elements and all(v.device == HOST for v in elements):
            return Value(CONTAINER, items=(Value(UNKNOWN, HOST),))  # ``feats.append(x.cpu())``: CPU copies
        return Value(CONTAINER)

    def _written_with_data(self, name: str, owner: ast.AST, scope: Scope, depth: int) -> bool:
        """Does the function write data into ``name`` in place?  A store of anything but a number or a constant
        table (``ids[c] = active_ids[r]``), an in-place op with a tensor of data (``x += y``), or any write at
        positions that are not literals, slices or sizes (``counts[hits] += 1``); scaling a table by numbers
        (``table[:, :, 0] /= (size - 1)``) keeps it a table."""
        for store, index, value in self._evidence_of(owner, scope).written.get(name, ()):
            written = self._value(value, scope, depth)
            if not (written.const or written.kind in (NUMBER, OTHER)) and (store or written.tensor):
                return True
            for part in (index.elts if isinstance(index, ast.Tuple) else [index]) if index is not None else ():
                if isinstance(part, (ast.Slice, ast.Constant)):
                    continue
                where = self._value(part, scope, depth)
                if not (where.const or where.kind == NUMBER):
                    return True
        return False

    def _refine(self, value: Value, name: str, owner: ast.AST, scope: Scope, depth: int = 0) -> Value:
        """Evidence from use settles what the assignment left open (``m = a > b``, ``x = f(y)``); a loss is a
        tensor even where the assignment says otherwise (``loss = sum(parts)``: a sum of tensors)."""
        if value.tensor:
            return value
        if name in self._losses().get(id(owner), ()):
            return Value(TENSOR)
        if value.kind not in (UNKNOWN, COMPARE):
            return value
        use = self._from_use(name, owner, scope)
        if use == TENSOR:
            return Value(MASK) if value.kind == COMPARE else Value(TENSOR)
        if use == ARRAY:
            return Value(ARRAY, HOST)
        if value.kind == COMPARE and isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)) \
                and self._indexes_tensor(name, owner, scope, depth):
            return Value(MASK)  # a comparison that selects from a tensor is a boolean tensor
        return value

    def _parameter(self, name: str, owner: ast.AST, scope: Scope, depth: int) -> Value:
        args = getattr(owner, "args", None)
        if args is None:
            return UNKNOWN_VALUE
        receiver = self._receiver(owner, name)
        if receiver is not None:
            return receiver  # ``self.mode`` names the instance's option, not ``Tensor.mode``
        for arg in args.posonlyargs + args.args + args.kwonlyargs:
            if arg.arg == name:
                if arg.annotation is not None:
                    annotated = self.summaries.annotated(arg.annotation, scope.parent or scope)
                    if annotated.tensor and isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        passed = self.summaries.parameter(owner, name, depth)
                        if passed.tensor and passed.device in _HOSTS:
                            return passed  # ``T44: torch.Tensor`` that every caller passes from the host
                    if annotated.kind in (TENSOR, ARRAY, NUMBER, CONTAINER, OTHER):
                        return annotated  # ``x: torch.Tensor``, ``x: Optional[Tensor]``, ``a: np.ndarray``, ``n: int``
                break
        else:
            return UNKNOWN_VALUE
        value = self._refine(UNKNOWN_VALUE, name, owner, scope)
        if value.kind == UNKNOWN and isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            passed = self.summaries.parameter(owner, name, depth)  # what the file's call sites pass
            if passed.tensor:  # only tensors: the flow is not branch-aware, so "not a tensor" would be a guess
                return passed
        if value.kind == UNKNOWN and _numeric_default(args, name):
            return Value(NUMBER)  # ``ignore_index=255``: a number unless its uses say otherwise
        return value

    def _receiver(self, owner: ast.AST, name: str) -> Optional[Value]:
        """The value of ``name`` when it is the instance parameter of a method (not of a static or class method): a
        tensor in a subclass of a tensor class, else something else; None for any other parameter."""
        if not isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        receiver = self.model.receiver(owner)
        if receiver is None or receiver.arg != name or any(
                isinstance(d, ast.Name) and d.id == "classmethod" for d in owner.decorator_list):
            return None
        bases = self.model.scope(owner).node.bases
        return Value(TENSOR) if any("Tensor" in (dotted(base) or "") for base in bases) else Value(OTHER)

    def _element(self, iterable: Value, name: str, owner: ast.AST, scope: Scope) -> Value:
        if iterable.tensor:  # iterating a tensor yields its rows
            return Value(iterable.kind, iterable.device, iterable.const)
        if iterable.readout:
            return Value(NUMBER, readout=True)
        if iterable.kind == CONTAINER and iterable.items is not None and len(iterable.items) == 1 \
                and iterable.items[0].tensor:
            return iterable.items[0]
        return self._refine(UNKNOWN_VALUE, name, owner, scope)

    # attributes ---------------------------------------------------------------------------------
    def _attribute(self, expr: ast.Attribute, scope: Scope, depth: int) -> Value:
        qualname = self.model.resolver(scope).qualname(expr)
        if qualname is not None:
            if qualname in _CONSTANT_NUMBERS:
                return Value(NUMBER)
            return Value(ARRAY, HOST) if qualname.split(".")[0] in _FOREIGN and qualname.count(".") > 1 else \
                Value(OTHER)
        value = expr.value
        if isinstance(value, ast.Name) and value.id == "self":
            return self.summaries.self_attribute(expr.attr, scope, depth)
        if isinstance(value, ast.Call) and self.model.resolver(scope).qualname(value.func) in (
                "torch.finfo", "torch.iinfo"):
            return Value(NUMBER)  # torch.finfo(t.dtype).min
        if expr.attr == "shape":
            return SIZES  # of a tensor, an array or a frame alike
        if expr.attr == "ndim":
            return Value(NUMBER)
        receiver = self._value(value, scope, depth)
        if receiver.tensor:
            kinds = _attribute_kinds(expr.attr) - {"none"}  # ``grad`` is Optional[Tensor]
            if kinds == {"tensor"}:
                return Value(MASK if receiver.kind == MASK and expr.attr in ("T", "mT", "data") else TENSOR,
                             receiver.device, receiver.const)
            if kinds in ({"size"}, {"int"}):
                return SIZES if kinds == {"size"} else Value(NUMBER)
            return Value(OTHER) if kinds else UNKNOWN_VALUE
        if receiver.kind == CONTAINER and receiver.items and expr.attr in ("values", "indices"):
            return _item(receiver, 0 if expr.attr == "values" else 1)
        if _is_encoding(receiver) and not expr.attr.startswith("_"):
            return receiver.items[0]  # ``inputs.input_ids``, ``inputs.attention_mask``
        if receiver.kind == ARRAY:
            return Value(ARRAY, HOST)
        return UNKNOWN_VALUE

    # subscripts ---------------------------------------------------------------------------------
    def _subscript(self, expr: ast.Subscript, scope: Scope, depth: int) -> Value:
        value = self._value(expr.value, scope, depth)
        if value.tensor:
            return Value(value.kind, value.device, value.const, encoding=value.encoding)
        if value.kind == ARRAY:
            return Value(ARRAY, HOST)
        if value.readout:
            return Value(NUMBER, readout=True)
        if value.kind == UNKNOWN and self._value(expr.slice, scope, depth).kind == MASK:
            return Value(TENSOR)  # what a boolean tensor selects from is a tensor
        if _is_encoding(value) and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
            return value.items[0]  # ``inputs["input_ids"]``
        if value.kind == CONTAINER and value.items:
            index = expr.slice
            if isinstance(index, ast.Constant) and isinstance(index.value, int):
                return _item(value, index.value)
            if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) \
                    and isinstance(index.operand, ast.Constant) and isinstance(index.operand.value, int):
                return _item(value, -index.operand.value)
        return UNKNOWN_VALUE

    # operators ----------------------------------------------------------------------------------
    def _compare(self, expr: ast.Compare, scope: Scope, depth: int) -> Value:
        if len(expr.ops) != 1 or not isinstance(expr.ops[0], _COMPARISONS):
            return Value(OTHER)
        left, right = (self._value(side, scope, depth) for side in (expr.left, expr.comparators[0]))
        if left.tensor or right.tensor:
            tensor = left if left.tensor else right
            const = left.const and right.const if left.tensor and right.tensor else tensor.const
            found = _combine(MASK, left, right) if tensor.device == BUILT_ON_HOST else Value(MASK, tensor.device, const)
            if tensor.encoding and not (left if tensor is right else right).tensor:
                found.encoding = True  # ``attention_mask == 0``: still the batch's padding mask
            return found
        if ARRAY in (left.kind, right.kind):
            return Value(ARRAY, HOST, boolean=True)
        if left.kind == UNKNOWN and right.kind in (UNKNOWN, NUMBER) or right.kind == UNKNOWN and left.kind == NUMBER:
            return Value(COMPARE)  # a mask if the unknown side is a tensor: decided by evidence
        if left.kind == NUMBER and right.kind == NUMBER:  # a bool, which Python arithmetic takes for an int:
            return Value(NUMBER, readout=left.readout or right.readout)  # ``1.0 + 1.0 * (x.size(2) > 1)``
        return Value(OTHER)

    def _binop(self, expr: ast.BinOp, scope: Scope, depth: int) -> Value:
        left, right = self._value(expr.left, scope, depth), self._value(expr.right, scope, depth)
        if isinstance(expr.op, _LOGICAL) and {left.kind, right.kind} <= {COMPARE, UNKNOWN} and COMPARE in (
                left.kind, right.kind):
            return Value(COMPARE)
        if isinstance(expr.op, ast.Mult) and left.kind == MASK and right.kind in (MASK, COMPARE):
            return _combine(MASK, left, right)  # ``keep *= scores > thr`` stays boolean
        if isinstance(expr.op, _LOGICAL) and MASK in (left.kind, right.kind) \
                and left.kind not in (ARRAY, CONTAINER) and right.kind not in (ARRAY, CONTAINER):
            return _combine(MASK, left, right)
        if left.tensor or right.tensor:
            if left.kind in (CONTAINER, OTHER) or right.kind in (CONTAINER, OTHER):
                return UNKNOWN_VALUE
            return _combine(TENSOR, left, right)
        if ARRAY in (left.kind, right.kind):
            return Value(ARRAY, HOST, boolean=isinstance(expr.op, _LOGICAL) and (left.boolean or right.boolean))
        if left.kind == NUMBER and right.kind == NUMBER:
            return Value(NUMBER, readout=left.readout or right.readout)
        if CONTAINER in (left.kind, right.kind) and isinstance(expr.op, (ast.Add, ast.Mult)):
            return Value(CONTAINER, readout=left.readout or right.readout)
        if left.readout or right.readout:
            return Value(NUMBER, readout=True)
        return UNKNOWN_VALUE

    # calls --------------------------------------------------------------------------------------
    def _call(self, call: ast.Call, scope: Scope, depth: int) -> Value:
        func = call.func
        if any(k.arg == "return_tensors" and is_constant(k.value, "pt") for k in call.keywords):
            return _ENCODING  # a tokenizer's / processor's batch of CPU tensors (``inputs.input_ids``)
        resolver = self.model.resolver(scope)
        qualname = resolver.qualname(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if qualname is not None:
            found = self._function(qualname, call, scope, depth)
        elif isinstance(func, ast.Name):
            if resolver.binding(func.id, func.lineno) is None:
                return self._builtin(func.id, call, scope, depth)
            found = self.summaries.function(func.id, scope, depth)
            if found.kind == UNKNOWN and self.summaries.classes().get(func.id) is not None:
                return Value(OTHER)  # an instance of a class defined in this file
        else:
            found = None
        if found is not None:
            if found.kind == UNKNOWN and call.args and all(self._value(a, scope, depth).const for a in call.args):
                return Value(UNKNOWN, const=True)  # a function of constant tables (``ndgrid(h, w)``)
            return found
        if not isinstance(func, ast.Attribute):
            return UNKNOWN_VALUE
        if isinstance(func.value, ast.Name) and func.value.id == "self":
            found = self.summaries.method(func.attr, scope, depth)
            if found is not None:
                return found
        receiver = self._value(func.value, scope, depth)
        return self._method(func.attr, receiver, call, scope, depth)

    def _builtin(self, name: str, call: ast.Call, scope: Scope, depth: int) -> Value:
        if name in _BUILTIN_NUMBERS:
            readout = False
            if name in ("int", "float", "round") and len(call.args) == 1:
                arg = call.args[0]
                inner = self._value(arg, scope, depth)
                readout = (inner.tensor and not inner.const) or inner.readout or _reduction_of_unknown(
                    arg, self, scope, depth)
            elif name in _BOUNDING and call.args and not call.keywords:
                # ``min(int(mask.sum()), k)``: a bound on a value read from data is still read from data
                readout = any(self._value(a, scope, depth).readout for a in call.args)
            return Value(NUMBER, readout=readout)
        if name in _BUILTIN_CONTAINERS:
            return Value(CONTAINER)
        if name in _BUILTIN_OTHER:
            return Value(OTHER)
        return UNKNOWN_VALUE

    def _function(self, qualname: str, call: ast.Call, scope: Scope, depth: int) -> Value:
        root = qualname.split(".")[0]
        if root in _FOREIGN:
            return Value(ARRAY, HOST)
        if root == "math":
            return self._builtin("int", call, scope, depth) if qualname in (
                "math.ceil", "math.floor", "math.trunc") else Value(NUMBER)
        if root != "torch" or qualname == "torch":  # ``torch([...])``, a call of the module itself (nemo 2.5.0)
            return UNKNOWN_VALUE
        name = qualname.rsplit(".", 1)[1]
        if qualname in ("torch.unique", "torch.unique_consecutive"):
            return _unique(call)
        if qualname == "torch.where" and len(call.args) == 1 and not call.keywords:
            return Value(CONTAINER, items=(Value(TENSOR),))
        if qualname == f"torch.{name}" and name in _LEGACY_CONSTRUCTORS:
            device = self._device(name, call, None, 0, scope, depth) or (
                BUILT_ON_HOST if self._builds_on_host(name, call, scope, depth) else None)
            return Value(MASK if name == "BoolTensor" else TENSOR, device)
        kinds = returns(qualname)
        if not kinds and qualname.startswith(("torch.linalg.", "torch.fft.", "torch.special.")) \
                and name.islower() and not name.startswith("_"):
            kinds = frozenset(("tensor",))  # re-exported from torch._C._linalg etc., which have no stubs here
        first = self._first_input(name, call, scope, depth)
        return self._result(kinds, name, call, first, 0, scope, depth)

    def _first_input(self, name: str, call: ast.Call, scope: Scope, depth: int) -> Optional[Value]:
        """The value of a torch function's first argument; for ``cat``/``stack`` of a literal list, of its
        elements (a mask when every element is one)."""
        if not call.args:
            return None
        first = call.args[0]
        if name in _SAME_DTYPE and isinstance(first, (ast.List, ast.Tuple)):
            items = [self._value(e, scope, depth) for e in first.elts]
            if items and all(v.kind == MASK for v in items):
                return Value(MASK, _common_device(items), all(v.const for v in items))
            tensors = [v for v in items if v.tensor]
            if items and all(v.device == HOST for v in items):
                return Value(TENSOR, HOST)  # ``torch.cat([a.cpu(), b.cpu()])``: what it joins are CPU tensors
            return Value(TENSOR, _common_device(items), all(v.const for v in items)) if tensors else UNKNOWN_VALUE
        value = self._value(first, scope, depth)
        if name in _SAME_DTYPE and value.kind == CONTAINER and value.items is not None and len(value.items) == 1:
            if value.items[0].tensor:
                return value.items[0]  # ``torch.cat(masks)`` of a list of masks
            if value.items[0].device == HOST:
                return Value(TENSOR, HOST)  # ``torch.cat(feats)`` of a list of ``.cpu()`` copies
        return value

    def _method(self, name: str, receiver: Value, call: ast.Call, scope: Scope, depth: int) -> Value:
        if _is_encoding(receiver) and name == "to":  # ``inputs.to(device)`` moves every tensor of the batch
            device = self._device(name, call, receiver.items[0], 1, scope, depth)
            return Value(CONTAINER, device, items=(Value(TENSOR, device, encoding=True),), encoding=True)
        if receiver.kind == ARRAY:
            if name in ("item",):
                return Value(NUMBER)
            return Value(CONTAINER) if name == "tolist" else Value(ARRAY, HOST)
        if receiver.kind in (UNKNOWN, COMPARE) and name in TENSOR_ONLY:
            receiver = Value(MASK if receiver.kind == COMPARE else TENSOR)  # only a tensor has this method
        if not receiver.tensor:
            if name == "cpu" and receiver.kind == UNKNOWN:
                return Value(UNKNOWN, HOST)  # a tensor's or a module's copy on the CPU
            if name in _TO_DEVICE and receiver.kind == UNKNOWN:
                return Value(UNKNOWN, DEVICE)  # on the device, whichever it is
            if name in ("size", "dim", "numel") and receiver.kind == UNKNOWN:
                return SIZES if name == "size" and not call.args else Value(NUMBER)
            if name == "numpy":
                return Value(ARRAY, HOST)
            if name in _READOUT and not call.args and receiver.kind == UNKNOWN:
                return Value(NUMBER if name == "item" else CONTAINER, readout=not receiver.const)
            if name == "item" and not call.args:
                # a Python number whatever has it: a numpy scalar, or a name flow took for the number that the
                # other branch bound (``i = i[0].item()`` / ``else: i = i.item()``, espnet gan_trainer.py:305)
                return Value(NUMBER, readout=receiver.readout)
            return UNKNOWN_VALUE
        if name in _READOUT:  # a constant tensor's values are the literals and sizes it was built from, not data
            return Value(NUMBER if name == "item" else CONTAINER, readout=not receiver.const)
        if name == "numpy":
            return Value(ARRAY, HOST)
        if name in ("unique", "unique_consecutive"):
            return _unique(call, receiver)
        kinds = returns("torch.Tensor." + name)
        return self._result(kinds, name, call, receiver, 1, scope, depth)

    def _result(self, kinds: FrozenSet[str], name: str, call: ast.Call, first: Optional[Value], receiver_args: int,
                scope: Scope, depth: int) -> Value:
        """The value a torch API returns, given the kinds its stubs list and how it was called."""
        tuples = [k for k in kinds if k.startswith("tuple:")]
        if tuples and ("tensor" not in kinds or _reduces_along_dim(call, receiver_args, self, scope, depth)):
            fields = tuples[0][len("tuple:"):]
            arity = int(fields) if fields.isdigit() else len(fields.split(","))
            # each result where the input is (nougat 0.1.17 model.py:614-622, ``.cpu().max(-1)``'s values and indices)
            device = self._device(name, call, first, receiver_args, scope, depth)
            return Value(CONTAINER, items=tuple(Value(TENSOR, device) for _ in range(arity)))
        if "tensors" in kinds and ("tensor" not in kinds or is_constant(argument(call, "as_tuple"), True)):
            device = self._device(name, call, first, receiver_args, scope, depth)
            return Value(CONTAINER, items=(Value(TENSOR, device),))
        if "tensor" not in kinds:
            if kinds and kinds <= {"int", "float", "number"}:
                return Value(NUMBER)
            if kinds == {"int", "size"}:  # ``x.size()`` is the sizes, ``x.size(2)`` / ``x.size(dim=2)`` one of them
                return Value(NUMBER) if len(call.args) > 1 - receiver_args or call.keywords else SIZES
            return Value(OTHER) if kinds else UNKNOWN_VALUE
        device = self._device(name, call, first, receiver_args, scope, depth)
        const = self._constant(name, call, first, receiver_args, scope, depth)
        encoding = receiver_args == 1 and name in _KEEPS_TOKENS and first is not None and first.encoding
        if _is_mask_op(name, call, first, self.model.resolver(scope)):
            return Value(MASK, device, const, encoding=encoding)
        return Value(TENSOR, device, const, encoding=encoding)

    def _device(self, name: str, call: ast.Call, first: Optional[Value], receiver_args: int, scope: Scope,
                depth: int) -> Optional[str]:
        if name == "cpu":
            return HOST
        if name in _TO_DEVICE:
            return DEVICE
        for keyword in call.keywords:
            if keyword.arg == "device":
                return _device_literal(keyword.value) or self._device_of(keyword.value, scope, depth)
        if name == "to" and call.args:
            target = call.args[0]
            literal = _device_literal(target)
            if literal is not None or isinstance(target, ast.Constant):
                return literal
            other = self._value(target, scope, depth)
            if other.tensor:
                return other.device
            if isinstance(target, ast.Name) and _is_dtype(target) and first is not None and first.tensor:
                return first.device  # ``x.to(dtype)``: converts, stays where it is
            return first.device if other.kind == OTHER and isinstance(target, ast.Attribute) \
                and target.attr.startswith(("float", "int", "bool", "long", "half")) else None
        if receiver_args == 0 and name in _FACTORIES and name not in _LIKE:
            return BUILT_ON_HOST if self._builds_on_host(name, call, scope, depth) else None
        if receiver_args == 0 and name == "from_numpy":
            return HOST
        return first.device if first is not None and first.tensor else None

    def _device_of(self, expr: ast.AST, scope: Scope, depth: int) -> Optional[str]:
        """``device=t.device`` of a tensor ``t`` on the host: the host too."""
        if isinstance(expr, ast.Attribute) and expr.attr == "device":
            owner = self._value(expr.value, scope, depth)
            if owner.tensor and owner.device in _HOSTS:
                return owner.device
        return None

    def _builds_on_host(self, name: str, call: ast.Call, scope: Scope, depth: int) -> bool:
        """A factory given no device builds on the CPU: inside a function other than ``__init__`` (whose
        tensors become a module's parameters or buffers, or are built under a caller's device context), in a
        file that never changes the default device, and for ``tensor``/``as_tensor``/``asarray`` only from
        data that is not a tensor (which would keep its own device)."""
        owner = scope
        while owner is not None and not isinstance(owner.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owner = owner.parent
        if owner is None or owner.node.name == "__init__" or self._default_device_changed():
            return False
        if name in ("tensor", "as_tensor", "asarray") and call.args:
            data = call.args[0]
            if not isinstance(data, (ast.List, ast.Tuple, ast.ListComp, ast.Constant)):
                kind = self._value(data, scope, depth)
                return not kind.tensor and kind.kind not in (UNKNOWN, COMPARE)
        return True

    def _losses(self) -> Dict[int, Set[str]]:
        """id(def, class, lambda or module) -> the names a backward call in it (nested bodies included)
        differentiates; from the model's index of calls, without a walk."""
        if self._loss_table is None:
            self._loss_table = {}
            for call in self.model.calls("backward"):
                func = call.func
                if not isinstance(func, ast.Attribute):
                    continue
                names: Set[str] = set()
                _loss_names(call.args[0] if framework_backward(call) else func.value, names)
                scope: Optional[Scope] = self.model.scope(call)
                while scope is not None:
                    self._loss_table.setdefault(id(scope.node), set()).update(names)
                    scope = scope.parent
        return self._loss_table

    def _default_device_changed(self) -> bool:
        """``torch.set_default_device``, ``set_default_tensor_type`` or ``with torch.device(...)`` in the file, but
        for the CPU or ``meta``: a factory given no device may build on the device there."""
        if self._default_device is None:
            text = "".join(self.model.lines)
            self._default_device = bool(_DEFAULT_DEVICE.search(text))
        return self._default_device

    def _constant(self, name: str, call: ast.Call, first: Optional[Value], receiver_args: int, scope: Scope,
                  depth: int) -> bool:
        """Built from literals and sizes only: factories, or ops whose tensor inputs are all constant."""
        if receiver_args == 0 and name in _FACTORIES and name not in _LIKE:
            return name in _CONSTANT_FACTORIES and not any(_data(self._value(a, scope, depth)) for a in call.args)
        if receiver_args and name == "new_tensor":  # like torch.tensor: values given by the code, not data
            return bool(call.args) and not any(_data(self._value(a, scope, depth)) for a in call.args)
        inputs = ([first] if receiver_args and first is not None else []) + [
            self._value(a, scope, depth) for a in call.args]
        for arg, value in zip(call.args, inputs[len(inputs) - len(call.args):]):
            if isinstance(arg, (ast.List, ast.Tuple)):
                inputs += [self._value(e, scope, depth) for e in arg.elts]
            elif value.kind == CONTAINER and value.items is not None and len(value.items) == 1 and value.items[0].tensor:
                inputs.append(value.items[0])  # ``torch.stack(sizes)`` of a list of tensors
        tensors = [v for v in inputs if v.tensor or v.const]
        return bool(tensors) and all(v.const for v in tensors) and not any(
            v.kind == UNKNOWN and not v.const for v in inputs if v is not first)


# -- small helpers ------------------------------------------------------------------------------------
def _numeric_default(args: ast.arguments, name: str) -> bool:
    default = parameter_defaults(args).get(name)
    return isinstance(default, ast.Constant) and type(default.value) in (int, float)


def agree(values: List[Value]) -> Value:
    """What several values (returns, call-site arguments) have in common (item by item for tuples of one length);
    a device only when all say the same one."""
    if not values:
        return UNKNOWN_VALUE
    if all(v.tensor for v in values):
        devices = {v.device for v in values}
        return Value(MASK if all(v.kind == MASK for v in values) else TENSOR, devices.pop() if len(devices) == 1
                     else None, all(v.const for v in values))
    if all(v.kind == CONTAINER and v.items for v in values) and len({len(v.items) for v in values}) == 1:
        return Value(CONTAINER, items=tuple(agree([v.items[i] for v in values]) for i in range(len(values[0].items))))
    kinds = {v.kind for v in values}
    if len(kinds) == 1 and kinds <= {ARRAY, NUMBER, OTHER}:
        return Value(kinds.pop(), HOST if ARRAY in kinds else None)
    return UNKNOWN_VALUE


def places_on_device(owner: ast.AST) -> bool:
    """Does the code of ``owner`` place anything on a device: ``.cuda()``/``.npu()``, ``.to(device)``, a
    ``device=`` other than the CPU?"""
    for node in walk(owner):
        if isinstance(node, ast.keyword) and node.arg == "device":
            if _device_literal(node.value) != HOST:
                return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in _TO_DEVICE or (name == "to" and bool(node.args) and not _is_dtype(node.args[0])):
                return True
    return False


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_STRAIGHT = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)  # statements with no branch inside
_MOVES = frozenset(("to", "cuda", "npu", "cpu"))
# Methods that keep a tensor where it is and show it whole (``x.unsqueeze(0).to(device)`` moves ``x``'s data).
_RESHAPES = frozenset("""view view_as reshape reshape_as squeeze unsqueeze flatten unflatten permute transpose t
    expand expand_as movedim swapaxes contiguous clone detach float half double bfloat16 long int bool""".split())


def _chain_root(expr: ast.AST, methods: Optional[FrozenSet[str]] = None) -> Optional[ast.Name]:
    """The name a chain of calls of ``methods`` starts from (by default: subscripts, attributes and calls of
    any method that moves nothing), or None."""
    while not isinstance(expr, ast.Name):
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and (
                expr.func.attr in methods if methods is not None else expr.func.attr not in _MOVES):
            expr = expr.func.value
        elif methods is None and isinstance(expr, (ast.Subscript, ast.Attribute)):
            expr = expr.value
        else:
            return None
    return expr


def _copied_to_host(value: Optional[ast.AST]) -> bool:
    """``x.cpu()``, ``x.to('cpu')`` or ``x.to(device='cpu')``, then perhaps reshaped or converted."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _RESHAPES:
        value = value.func.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    where = passed(value, "device", 0)
    return value.func.attr == "cpu" or value.func.attr == "to" and where is not None and _device_literal(where) == HOST


def _levels(path, owner: ast.AST) -> List[Tuple[ast.AST, list, int]]:
    """(statement, block, position) of each block around a read, innermost first: the read's statement is
    ``block[position]`` of ``statement`` (the function itself last)."""
    found = []
    for child, parent in zip(path, path[1:] + (owner,)):
        block, index = block_of(parent, child)
        if index >= 0:
            found.append((parent, block, index))
    return found


def _unfolded(block: list) -> list:
    """The statements of ``block``, each ``with`` replaced by the statements of its body (which runs whole)."""
    found = []
    for stmt in block:
        found.extend(_unfolded(stmt.body) if isinstance(stmt, (ast.With, ast.AsyncWith)) else [stmt])
    return found


def _binds(stmt: ast.AST, binding) -> bool:
    return stmt.lineno == binding.line and (stmt.end_lineno, stmt.end_col_offset) == binding.end


def _fresh_each_time(loop: ast.AST, bound, bindings, before: List[list]) -> bool:
    """No binding of the name inside ``loop`` but the one in force, made in every iteration before the read:
    the loop's own target, or a statement of ``before`` (the statements before the read in the loop's body)."""
    inside = [b for b in bindings if loop.lineno <= b.line <= loop.end_lineno and b.kind != AUGMENTED]
    return not inside or bound in inside and (bound.kind == LOOP and bound.line == loop.lineno or any(
        _binds(s, bound) for b in before for s in b))


def walk(node: ast.AST):
    """Every node under ``node`` (``ast.walk`` without contexts and operators, which is much faster)."""
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        yield node
        cls = node.__class__
        for name in _FIELDS.get(cls) or child_fields(cls):  # ``iter_children`` inlined: the same nodes, same order
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)


def _item(value: Value, index: int) -> Value:
    if value.tensor:  # ``a, b = mask.T``: unpacking a tensor gives tensors of its dtype
        return Value(value.kind, value.device, value.const)
    items = value.items
    if value.kind != CONTAINER or not items:
        return Value(NUMBER, readout=True) if value.readout else UNKNOWN_VALUE
    if len(items) == 1:
        return items[0]  # a sequence of any length (``x.split(2)``, ``x.shape``), or a 1-tuple
    try:
        return items[index]
    except IndexError:
        return UNKNOWN_VALUE


def _data(value: Value) -> bool:
    """Holds values that came from a tensor's data: a tensor, or numbers read out of one (``x.tolist()``)."""
    return value.tensor or value.readout


def _combine(kind: str, left: Value, right: Value) -> Value:
    devices = {v.device for v in (left, right) if v.tensor}
    device = DEVICE if DEVICE in devices else HOST if devices == {HOST} else None
    if device is None and devices and devices <= _HOSTS and not any(
            v.kind in (UNKNOWN, COMPARE) for v in (left, right)):
        device = BUILT_ON_HOST  # not with an unknown operand: ``torch.tensor(2.0) * x`` is where ``x`` is
    const = all(v.const for v in (left, right) if v.tensor) and all(
        v.kind in (NUMBER, TENSOR, MASK) for v in (left, right))
    return Value(kind, device, const)


def _common_device(items: List[Value]) -> Optional[str]:
    """The device of ``cat``/``stack`` of these items: the first tensor's, unless the items disagree or one is
    a value built on the host beside something unknown."""
    devices = {v.device for v in items if v.tensor}
    device = next((v.device for v in items if v.tensor), None)
    if BUILT_ON_HOST in devices and (len(devices) > 1 or any(not v.tensor for v in items)):
        return None
    return device


def _attribute_kinds(attr: str) -> FrozenSet[str]:
    return frozenset(torch_types()["attributes"].get("torch.Tensor." + attr, ()))


def _takes_tensor(qualname: str) -> bool:
    """``torch.f(x, ...)``: is ``x`` a tensor for sure?  Functions returning tensors, not factories."""
    name = qualname.rsplit(".", 1)[-1]
    if not qualname.startswith("torch.") or name in _FACTORIES or name in (
            "tensor", "as_tensor", "from_numpy", "asarray", "is_tensor", "numel", "save", "load", "device"):
        return False
    kinds = returns(qualname)
    return bool(kinds) and all(k in ("tensor", "tensors", "none") or k.startswith("tuple:") for k in kinds)


def annotation_is_tensor(annotation: Optional[ast.AST], resolver: Resolver) -> bool:
    """``torch.Tensor`` / ``Tensor`` / ``Optional[Tensor]`` / ``'Tensor'`` annotations."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.split("[")[-1].rstrip("]") in ("Tensor", "torch.Tensor")
    if isinstance(annotation, ast.Subscript):
        return annotation_is_tensor(annotation.slice, resolver)
    return resolver.qualname(annotation) == "torch.Tensor"


def _unique(call: ast.Call, receiver: Optional[Value] = None) -> Value:
    """``unique`` returns a tensor, or a tuple when asked for inverse indices or counts."""
    extra = sum(is_constant(argument(call, k), True) for k in ("return_inverse", "return_counts"))
    device = receiver.device if receiver is not None else None
    if extra:
        return Value(CONTAINER, items=tuple(Value(TENSOR, device) for _ in range(1 + extra)))
    return Value(TENSOR, device)


def _reduces_along_dim(call: ast.Call, receiver_args: int, values: Values, scope: Scope, depth: int) -> bool:
    """``x.max(1)`` / ``torch.max(x, dim=1)`` return (values, indices); ``torch.max(a, b)`` a tensor."""
    if any(k.arg == "dim" for k in call.keywords):
        return True
    position = 1 - receiver_args
    if len(call.args) <= position:
        return False
    arg = call.args[position]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, int) or isinstance(arg, ast.UnaryOp):
        return True
    return values._value(arg, scope, depth).kind == NUMBER


def _is_mask_op(name: str, call: ast.Call, first: Optional[Value], resolver: Resolver) -> bool:
    if name in _MASK_OPS:
        return True
    if name in _MASK_REDUCTIONS:
        return bool(call.args) or any(k.arg == "dim" for k in call.keywords)
    for keyword in call.keywords:
        if keyword.arg == "dtype":
            return resolver.qualname(keyword.value) == "torch.bool"
    if name in ("to", "type") and call.args:
        return resolver.qualname(call.args[0]) == "torch.bool"
    if name in _SAME_DTYPE and first is not None:
        return first.kind == MASK
    return False


def _device_literal(node: ast.AST) -> Optional[str]:
    """``'cpu'`` -> HOST, ``'cuda:0'`` / ``'npu'`` -> DEVICE, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.split(":")[0]
        return HOST if text == "cpu" else DEVICE if text in ("cuda", "npu") else None
    if isinstance(node, ast.Call) and node.args and isinstance(node.func, (ast.Name, ast.Attribute)) and (
            getattr(node.func, "attr", getattr(node.func, "id", "")) == "device"):
        return _device_literal(node.args[0])
    return None


def _is_dtype(node: ast.AST) -> bool:
    """``torch.float64`` / ``x.dtype`` / ``dtype``: a ``.to(...)`` argument that converts, not moves."""
    if isinstance(node, ast.Attribute):
        return node.attr == "dtype" or (isinstance(node.value, ast.Name) and node.value.id == "torch"
                                        and node.attr.startswith(("float", "int", "bool", "half", "double",
                                                                  "long", "bfloat", "uint", "complex")))
    return isinstance(node, ast.Name) and "dtype" in node.id


def _reduction_of_unknown(arg: ast.AST, values: Values, scope: Scope, depth: int) -> bool:
    """``int(x.sum())`` on an unknown ``x`` that is not an array: a size read out of a tensor."""
    return (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr in _REDUCTIONS
            and values.model.resolver(scope).qualname(arg.func) is None
            and values._value(arg.func.value, scope, depth).kind == UNKNOWN)
