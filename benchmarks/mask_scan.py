"""Mask-read recall scan: which boolean-mask reads in model, loss and post-processing code ASC402 flags.

    PYTHONPATH=src python benchmarks/mask_scan.py [--out FILE] [corpus ...]

A *candidate* is a subscript read whose index (or one element of a tuple index) looks like a boolean mask
by its syntax alone, with no type inference: a comparison (``x[x > 0]``), ``~m`` / ``a & b`` / ``a | b``,
a call of a mask method or function (``isnan``, ``logical_and``, ``.bool()``, ``.any(1)``), or a local name
that the same function ever assigns one of those, or a name with ``mask`` in it.  Only the code that runs
per step is scanned (PATHS below: models, losses, heads, post-processing).  For each candidate the scan
records whether the linter (the ``flake8_ascend`` on ``PYTHONPATH``) reports ASC402 on that line, so
running it with the code before and after a change gives the before/after counts.  Which candidates
really are tensor masks (and not numpy arrays or lists) is judged by hand on a sample: docs/value_model.md.
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Dict, List

CORPORA = Path.home() / ".cache" / "flake8-ascend" / "corpora"
# Per corpus, the path fragments of per-step code (model, loss and post-processing modules).
PATHS: Dict[str, tuple] = {
    "mmdet": ("mmdet/models/", "mmdet/structures/"),
    "mmsegmentation": ("mmseg/models/",),
    "timm": ("timm/models/", "timm/layers/", "timm/loss/"),
    "yolov5": ("yolov5/models/", "yolov5/utils/loss.py", "yolov5/utils/segment/loss.py",
               "yolov5/utils/general.py", "yolov5/utils/segment/general.py"),
}
_MASK_CALLS = frozenset("""isnan isinf isfinite logical_and logical_or logical_not logical_xor bool eq ne gt ge lt le
    isin isclose""".split())


def mask_like(expr: ast.AST) -> bool:
    """Does the expression look like a boolean mask by syntax alone?"""
    if isinstance(expr, ast.Compare):
        return len(expr.ops) == 1 and not isinstance(expr.ops[0], (ast.In, ast.NotIn, ast.Is, ast.IsNot))
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
        return True
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return mask_like(expr.left) or mask_like(expr.right) or isinstance(expr.left, ast.Name)
    if isinstance(expr, ast.Call):
        func = expr.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in _MASK_CALLS:
            return True
        return name in ("any", "all") and bool(expr.args or expr.keywords)
    return False


def candidates(tree: ast.AST) -> List[ast.Subscript]:
    """Subscript reads with a mask-like index, function by function."""
    found = []
    owners = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for owner in owners:
        masks = set()
        for node in ast.walk(owner):
            if isinstance(node, ast.Assign) and mask_like(node.value):
                masks.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(owner):
            if not isinstance(node, ast.Subscript) or not isinstance(node.ctx, ast.Load):
                continue
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if any(mask_like(p) or (isinstance(p, ast.Name) and (p.id in masks or "mask" in p.id.lower()))
                   for p in parts):
                found.append(node)
    unique = {(n.lineno, n.col_offset): n for n in found}  # nested functions are walked twice
    return [unique[k] for k in sorted(unique)]


def scan(corpus: str) -> List[dict]:
    from flake8_ascend.config import make_config
    from flake8_ascend.engine import lint
    from flake8_ascend.registry import all_rules

    config = make_config(project_dir=Path("/"))
    rule = [r for r in all_rules() if r.code == "ASC402"]
    root = CORPORA / corpus / "src"
    rows = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if not relative.startswith(PATHS[corpus]):
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        found = candidates(tree)
        if not found:
            continue
        lines = source.splitlines(keepends=True)
        flagged = {f.line for f in lint(tree, lines, relative, config, rules=rule)}
        for node in found:
            rows.append({"corpus": corpus, "file": relative, "line": node.lineno,
                         "text": ast.unparse(node)[:100], "flagged": node.lineno in flagged})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", default=sorted(PATHS))
    parser.add_argument("--out", type=Path, help="write every candidate as JSON here")
    args = parser.parse_args(argv)
    rows = []
    for corpus in args.corpora:
        found = scan(corpus)
        rows += found
        flagged = sum(r["flagged"] for r in found)
        print(f"{corpus:16} {len(found):5} candidates, {flagged:5} flagged by ASC402")
    print(f"{'all':16} {len(rows):5} candidates, {sum(r['flagged'] for r in rows):5} flagged by ASC402")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
