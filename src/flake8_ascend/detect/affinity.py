"""The affinity table (``data/affinity.json``) and the signature matching of ASC301/ASC302.

The table is built by ``tools/build_affinity.py`` from the curated
``rules_data/sources/affinity/affinity_rules.tsv`` and the torch_npu wheel facts, and loaded once per
process.  An entry is suggested for the selected torch_npu version V when
``min_version <= V < deprecated_from``.

Signature rule (ours; the official tool compares name and the exact parameter list):

* a parameter list is the names of the positional-only, ordinary and keyword-only parameters in order;
  ``*args``/``**kwargs``, defaults and annotations are ignored;
* a leading ``self``, ``cls`` or ``ctx`` is dropped from both lists, so a method, a plain function and an
  ``autograd.Function.forward`` compare alike;
* two lists match when they have the same length and every pair of names is equal after normalisation
  (lower case, leading and trailing underscores removed) or belongs to the same synonym set below;
* a missing ``__init__`` matches an entry whose ``__init__`` takes only ``self``.
"""
from __future__ import annotations

import ast
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from ..data import load_affinity, version_key

# Names that mean the same parameter; the sets are disjoint (tests check it).
SYNONYMS: Tuple[FrozenSet[str], ...] = tuple(frozenset(s.split()) for s in (
    "x inp input inputs input1 input_tensor tensor feat feats features",
    "c1 in_channels in_ch ch_in c_in",
    "c2 out_channels out_ch ch_out c_out",
    "k kernel_size ksize kernel",
    "s stride",
    "p padding pad",
    "g groups group num_groups",
    "act activation",
    "bboxes boxes",
    "gt_bboxes gt_boxes",
    "pred_bboxes pred_boxes",
))
_CANONICAL = {name: min(group) for group in SYNONYMS for name in group}
_RECEIVERS = ("self", "cls", "ctx")


def available(entry: dict, version: str) -> bool:
    """Is the entry's target in ``version`` and not deprecated there?"""
    key = version_key(version)
    if key < version_key(entry["min_version"]):
        return False
    return not entry["deprecated_from"] or key < version_key(entry["deprecated_from"])


def since(entry: dict) -> str:
    """The version note of a message: ``in torch_npu 2.1.0 and later``."""
    return f"in torch_npu {entry['min_version']} and later"


# -- signatures ------------------------------------------------------------------------------
def _normal(name: str) -> str:
    name = name.strip("_").lower()
    return _CANONICAL.get(name, name)


def normalised(names: Iterable[str]) -> Tuple[str, ...]:
    """The comparable form of a parameter list (see the module docstring)."""
    names = list(names)
    if names and names[0] in _RECEIVERS:
        names = names[1:]
    return tuple(_normal(n) for n in names)


def parameters(function: Optional[ast.AST]) -> List[str]:
    """Parameter names of a def (``[]`` for None, i.e. a class without that method)."""
    if function is None:
        return []
    args = function.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]


def same_signature(function: Optional[ast.AST], expected: Sequence[str]) -> bool:
    return normalised(parameters(function)) == normalised(expected)


def extends_signature(function: ast.AST, expected: Sequence[str]) -> bool:
    """The expected parameters first, then only ones with a default (mmdet 3.x's ``multiclass_nms`` added
    ``box_dim=4``): every call written for the expected list still fits."""
    args = function.args
    positional = args.posonlyargs + args.args
    required = [a.arg for a in positional[:len(positional) - len(args.defaults)]]
    required += [a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults) if default is None]
    names = parameters(function)
    want = normalised(expected)
    ours = normalised(names)
    extra = names[len(names) - len(ours) + len(want):]
    return ours[:len(want)] == want and not set(extra) & set(required)


def is_stub(function: ast.AST) -> bool:
    """An abstract or placeholder def: ``@abstractmethod``, or only docstring/pass/.../raise NotImplementedError."""
    for decorator in function.decorator_list:
        name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
        if name == "abstractmethod":
            return True
    for stmt in function.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                continue
        return False
    return True


def function_matches(function: ast.AST, entry: dict, owner: Optional[str]) -> bool:
    """Name already equal; ``owner`` is the enclosing class's name (None for a plain function)."""
    if entry.get("owner") and owner not in entry["owner"]:
        return False
    return extends_signature(function, entry["params"]) and not is_stub(function)


def method(cls: ast.ClassDef, name: str) -> Optional[ast.AST]:
    """The last ``def name`` directly in the class body, or None."""
    found = None
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            found = stmt
    return found


def class_matches(cls: ast.ClassDef, entry: dict, bases: Sequence[Optional[str]]) -> bool:
    """Name already equal; ``bases`` are the qualified names of the class's bases (None: unresolved)."""
    if entry.get("base") and not any(b in entry["base"] for b in bases):
        return False
    for method_name, key in (("__init__", "init"), ("forward", "forward")):
        if key in entry and not same_signature(method(cls, method_name), entry[key]):
            return False
    return True


def first_available(entries: Iterable[dict], version: str, matches) -> Optional[dict]:
    """The first entry that ``matches`` and is available in ``version``."""
    for entry in entries:
        if matches(entry) and available(entry, version):
            return entry
    return None


def entries(api_type: str) -> Dict[str, object]:
    return load_affinity()[api_type]
