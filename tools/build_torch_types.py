#!/usr/bin/env python3
"""Build src/flake8_ascend/data/torch_types.json: what each torch function and Tensor method returns.

The value model (``semantic/values.py``) asks "is ``torch.sparse.sum(x)`` a tensor?", "what does
``scores.max(dim=1)`` unpack into?".  The answers come from torch's own type stubs, read here as text
with ``ast`` (nothing of torch is imported or executed):

torch/_C/_VariableFunctions.pyi   ``torch.X`` functions                       -> ``torch.X``
torch/_C/__init__.pyi             ``class TensorBase`` methods and properties -> ``torch.Tensor.X``
torch/_tensor.py                  ``class Tensor`` methods written in Python  -> ``torch.Tensor.X``
torch/functional.py               annotated Python functions re-exported as ``torch.X``
torch/nn/functional.pyi           ``torch.nn.functional.X``
torch/sparse/__init__.py          annotated ``torch.sparse.X``
torch/return_types.pyi            field names of the structseq results (``max`` -> values, indices)

Each API maps to the sorted set of kinds its overloads return: ``tensor``, ``bool``, ``int``,
``float``, ``number``, ``none``, ``tensors`` (a list or tuple of any length), ``tuple:a,b`` (a
fixed tuple of tensors with field names, or ``tuple:2`` without), ``size``, ``device``, ``dtype``,
``unknown`` (no annotation) or ``other``; ``attributes`` holds the annotated Tensor attributes
(``T``, ``grad``, ``device``, ``shape``).  A union (``Tensor | None``) contributes each member.  tests/test_values_data.py checks
the committed file is a fresh build when torch is installed.

    python tools/build_torch_types.py [--torch DIR] [--out FILE]
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "src" / "flake8_ascend" / "data" / "torch_types.json"
GENERATOR = "tools/build_torch_types.py"
# (stub file under torch/, qualified prefix, class whose methods are read or None for module functions)
SOURCES = (
    ("_C/_VariableFunctions.pyi", "torch.", None),
    ("functional.py", "torch.", None),
    ("_C/__init__.pyi", "torch.Tensor.", "TensorBase"),
    ("_tensor.py", "torch.Tensor.", "Tensor"),
    ("nn/functional.pyi", "torch.nn.functional.", None),
    ("sparse/__init__.py", "torch.sparse.", None),
)
_SCALARS = {
    "Tensor": "tensor", "Self": "tensor", "_bool": "bool", "bool": "bool", "_int": "int", "int": "int",
    "SymInt": "int", "_float": "float", "float": "float", "Number": "number", "_complex": "number",
    "Size": "size", "_size": "size", "_device": "device", "_dtype": "dtype",
}
_SEQUENCES = {"tuple", "list", "Sequence", "List", "Tuple"}


def torch_dir() -> Path:
    """The installed torch package, found without importing it."""
    for entry in sys.path:
        candidate = Path(entry) / "torch"
        if (candidate / "_C" / "_VariableFunctions.pyi").is_file():
            return candidate
    raise SystemExit("build_torch_types: torch is not installed in this Python (give --torch DIR)")


def torch_version(root: Path) -> str:
    """The version string torch/version.py records (read as text)."""
    for node in ast.parse((root / "version.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "__version__":
            return node.value.value
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__version__":
            return node.value.value
    return "unknown"


def structseq_fields(root: Path) -> Dict[str, str]:
    """``max`` -> ``values,indices``: the property names of each class in return_types.pyi."""
    fields = {}
    for node in ast.parse((root / "return_types.pyi").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            names = [f.name for f in node.body if isinstance(f, ast.FunctionDef)
                     and any(getattr(d, "id", "") == "property" for d in f.decorator_list)]
            fields[node.name] = ",".join(names)
    return fields


def kinds_of(annotation: Optional[ast.AST], fields: Dict[str, str]) -> Set[str]:
    """The kinds one return annotation stands for."""
    if annotation is None:
        return {"unknown"}
    if isinstance(annotation, ast.Constant):
        if annotation.value is None:
            return {"none"}
        if isinstance(annotation.value, str):
            try:
                return kinds_of(ast.parse(annotation.value, mode="eval").body, fields)
            except SyntaxError:
                return {"other"}
        return {"other"}
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return kinds_of(annotation.left, fields) | kinds_of(annotation.right, fields)
    if isinstance(annotation, ast.Name):
        return {_SCALARS.get(annotation.id, "other")}
    if isinstance(annotation, ast.Attribute):
        if isinstance(annotation.value, ast.Attribute) and annotation.value.attr == "return_types":
            names = fields.get(annotation.attr)
            return {f"tuple:{names}"} if names else {"other"}
        return {"tensor"} if annotation.attr == "Tensor" else {"other"}
    if isinstance(annotation, ast.Subscript):
        base = annotation.value.attr if isinstance(annotation.value, ast.Attribute) else getattr(
            annotation.value, "id", "")
        items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if base in ("Optional",):
            return kinds_of(items[0], fields) | {"none"}
        if base == "Union":
            return set().union(*(kinds_of(i, fields) for i in items))
        if base in _SEQUENCES:
            if base in ("tuple", "Tuple") and items and not (isinstance(items[-1], ast.Constant)
                                                              and items[-1].value is Ellipsis):
                if all(kinds_of(i, fields) == {"tensor"} for i in items):
                    return {f"tuple:{len(items)}"}
                return {"other"}
            return {"tensors"} if kinds_of(items[0], fields) == {"tensor"} else {"other"}
    return {"other"}


def _functions(body: Iterable[ast.AST]) -> Iterable[ast.FunctionDef]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield node


def read_source(path: Path, prefix: str, cls: Optional[str], fields: Dict[str, str], out: Dict[str, Set[str]],
                attributes: Dict[str, Set[str]]) -> None:
    """Add the public functions (or ``cls`` methods) of one file to ``out``, its class attributes to ``attributes``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body: List[ast.AST] = tree.body
    if cls is not None:
        body = next(n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    for node in body:
        if isinstance(node, ast.If):  # TYPE_CHECKING / version branches of the Python files
            body.extend(node.body)
    for node in body:
        if cls is not None and isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and not node.target.id.startswith("_"):
            attributes.setdefault(prefix + node.target.id, set()).update(kinds_of(node.annotation, fields))
    for node in _functions(body):
        if path.suffix == ".py" and node.returns is None:
            continue  # an unannotated Python function says nothing
        out.setdefault(prefix + node.name, set()).update(kinds_of(node.returns, fields))


def build(root: Path) -> dict:
    fields = structseq_fields(root)
    returns: Dict[str, Set[str]] = {}
    attributes: Dict[str, Set[str]] = {}
    for relative, prefix, cls in SOURCES:
        read_source(root / relative, prefix, cls, fields, returns, attributes)
    return {
        "meta": {
            "generator": GENERATOR,
            "torch_version": torch_version(root),
            "sources": [f"torch/{relative}" for relative, _, _ in SOURCES] + ["torch/return_types.pyi"],
            "kinds": "tensor bool int float number size device dtype none tensors tuple:<fields or arity> "
                     "unknown other",
        },
        "returns": {name: sorted(kinds) for name, kinds in sorted(returns.items())},
        "attributes": {name: sorted(kinds) for name, kinds in sorted(attributes.items())},
    }


def render(data: dict) -> str:
    return json.dumps(data, indent=0, sort_keys=True) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", type=Path, help="the torch package directory (default: the installed one)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    root = args.torch or torch_dir()
    data = build(root)
    args.out.write_text(render(data), encoding="utf-8")
    print(f"{args.out}: {len(data['returns'])} APIs from torch {data['meta']['torch_version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
