#!/usr/bin/env python3
"""Decide, per name ``mmcv.ops`` exports, whether it is CUDA-only (ASC206), from mmcv 2.1.0's own sources.

Two steps, like the wheel facts:

``--extract SDIST`` (needs the unpacked mmcv-2.1.0 sdist: ``python benchmarks/corpora.py mmcv``) runs this
project's ``third_party`` mode on it, whose C++ scan reads the kernels of every custom operator
(``REGISTER_NPU_IMPL``, ``.cu`` files...) and whose call graph names the Python functions reaching each
operator, and writes the facts to ``rules_data/sources/mmcv/mmcv-2.1.0_ops.json``: the names
``mmcv/ops/__init__.py`` exports, and for every top-level function and class of every ``mmcv/ops`` module the
operators it reaches with their kernels and the sibling imports it uses. (The mode's ``cuda_op.csv`` does not
depend on the table this tool ships: extracting twice gives the same facts.)

Without ``--extract`` (offline, deterministic) the facts become ``src/flake8_ascend/data/mmcv_ops.json``:

- an operator is CUDA-only when it has a CUDA kernel and no NPU kernel;
- a name is CUDA-only when it reaches a CUDA-only operator, or reaches no operator at all while it uses a
  CUDA-only sibling import (the call graph does not follow every dynamic dispatch: ``PointsSampler`` picks
  ``furthest_point_sample`` from a table);
- except where mmcv's Python code itself leaves the CUDA kernel (``paths``, with their lines): a branch for
  tensors on an NPU that calls torch_npu or returns (``DeformConv2dFunction``: ``if ctx.device == 'npu'``), or
  a test of ``.is_cuda`` / ``IS_CUDA_AVAILABLE`` / ``x.device.type == 'cuda'`` with a pure-PyTorch path for every
  other tensor (``MultiScaleDeformableAttention``: ``multi_scale_deformable_attn_pytorch``; ``upfirdn2d``:
  ``_upfirdn2d_ref``). The C++ scan reads only
  ``csrc/pytorch/npu``; these names run on an NPU without it;
- every other name (pure Python like ``point_sample``, or ops with an NPU kernel like ``PSAMask``) is not.

    python tools/build_mmcv_ops.py [--extract SDIST] [--check]
"""
from __future__ import annotations

import argparse
import ast
import csv
import datetime
import hashlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the same JSON layout and --check as the other packaged files
from build_transfer_to_npu import REPO, render, update  # noqa: E402

FACTS = REPO / "rules_data" / "sources" / "mmcv" / "mmcv-2.1.0_ops.json"
OUT = REPO / "src" / "flake8_ascend" / "data" / "mmcv_ops.json"
GENERATOR = "tools/build_mmcv_ops.py"
VERSION = "2.1.0"


def _kernels(tips: str) -> str:
    """``...; kernels: CPU, CUDA, NPU`` -> "CPU, CUDA, NPU" ("none": host code only; the third_party mode's
    cuda_op.csv Tips)."""
    return tips.rsplit("kernels:", 1)[-1].strip()


def _names_npu(node: ast.AST) -> bool:
    """A comparison with the string ``'npu'`` (``ctx.device == 'npu'``, ``x.device.type in ('npu', 'mlu')``)."""
    return any(isinstance(n, ast.Constant) and n.value == "npu" for c in ast.walk(node) if isinstance(c, ast.Compare)
               for n in ast.walk(c))


def _cuda_type(node: ast.AST) -> bool:
    """``input.device.type == 'cuda'`` (upfirdn2d.py:112): a tensor's device type compared with ``'cuda'``."""
    return isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq) and any(
        isinstance(side, ast.Constant) and side.value == "cuda" for side in (node.left, *node.comparators)) and any(
        isinstance(side, ast.Attribute) and side.attr == "type" for side in (node.left, *node.comparators))


def _asks_cuda(node: ast.AST) -> bool:
    """``x.is_cuda``, ``IS_CUDA_AVAILABLE`` or ``x.device.type == 'cuda'`` in a test."""
    return any((isinstance(n, ast.Attribute) and n.attr == "is_cuda") or (isinstance(n, ast.Name) and n.id ==
               "IS_CUDA_AVAILABLE") or _cuda_type(n) for n in ast.walk(node))


def _python_paths(tree: ast.AST) -> List[str]:
    """Lines where the Python code leaves the CUDA kernel: ``npu:L`` (a branch for NPU tensors that calls an
    ``*npu*`` function or returns), ``not-cuda:L`` (a CUDA test with another path: an ``else``, a negated test,
    or a returning body followed by more code)."""
    paths = []
    for block in ast.walk(tree):
        for field in ("body", "orelse"):
            statements = getattr(block, field, None)
            if not isinstance(statements, list):
                continue
            for i, node in enumerate(statements):
                if not isinstance(node, ast.If):
                    continue
                body = [n for s in node.body for n in ast.walk(s)]
                leaves = any(isinstance(n, ast.Return) for n in body)
                if _names_npu(node.test) and (leaves or any(
                        isinstance(n, ast.Call) and "npu" in ast.unparse(n.func) for n in body)):
                    paths.append(f"npu:{node.lineno}")
                elif _asks_cuda(node.test) and (node.orelse or isinstance(node.test, ast.UnaryOp) or (
                        leaves and i + 1 < len(statements))):
                    paths.append(f"not-cuda:{node.lineno}")
    return paths


def _module_facts(path: Path, siblings: set) -> dict:
    """Top-level functions, classes and assignments of one ``mmcv/ops`` module with the sibling imports each
    uses and the Python paths (``_python_paths``) in what it references.

    ``uses`` follows references inside the module (``PointsSampler`` -> ``DFPSSampler`` ->
    ``furthest_point_sample``), so a pure-Python helper beside a CUDA op (``GroupAll``) stays apart from it.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: Dict[str, str] = {}  # local name -> "module.name" of a sibling
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module \
                and node.module.split(".")[0] in siblings:
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module.split('.')[0]}.{alias.name}"
    nodes = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    defs = {name: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} for name, node in nodes.items()}
    for node in tree.body:  # deform_conv2d = DeformConv2dFunction.apply
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defs.setdefault(node.targets[0].id, {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)})
    facts = {}
    for name in defs:
        seen, pending = {name}, [name]
        while pending:
            for ref in defs[pending.pop()]:
                if ref in defs and ref not in seen:
                    seen.add(ref)
                    pending.append(ref)
        facts[name] = {"uses": sorted({imported[ref] for n in seen for ref in defs[n] if ref in imported}),
                       "paths": sorted({p for n in seen if n in nodes for p in _python_paths(nodes[n])},
                                       key=lambda p: int(p.split(":")[1]))}
    return facts


def extract(sdist: Path) -> dict:
    """The facts of one unpacked sdist (the folder holding ``mmcv/``)."""
    sys.path.insert(0, str(REPO / "src"))
    from flake8_ascend import cli

    ops_dir = sdist / "mmcv" / "ops"
    exports: Dict[str, str] = {}  # name mmcv.ops exports -> "module.name"
    for node in ast.walk(ast.parse((ops_dir / "__init__.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                exports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    siblings = {path.stem for path in ops_dir.glob("*.py")} - {"__init__"}
    uses = {module: _module_facts(ops_dir / f"{module}.py", siblings) for module in sorted(siblings)}
    with tempfile.TemporaryDirectory() as out:
        err = io.StringIO()
        code = cli.main(["-q", "-m", "third_party", "-i", str(sdist), "-o", out, "--jedi-seconds", "0"],
                        out=io.StringIO(), err=err)
        if code != 0:
            raise SystemExit(f"third_party mode failed: {err.getvalue().strip()}")
        with open(Path(out) / f"{sdist.name}_analysis" / "cuda_op.csv", newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))[1:]
    reached: Dict[str, Dict[str, str]] = {}
    for op, affected, tips, _chain in rows:
        for name in affected.splitlines():
            reached.setdefault(name, {})[op] = _kernels(tips)
    archive = next((sdist.parent.parent / "dist").glob("mmcv-*.tar.gz"), None)
    return {
        "source": f"mmcv {VERSION} sdist"
                  + (f" ({archive.name}, sha256 {hashlib.sha256(archive.read_bytes()).hexdigest()})" if archive else ""),
        "extracted": datetime.date.today().isoformat(),
        "method": "flake8-ascend third_party mode (cuda_op.csv: operators, kernels, affected names) on the sdist; "
                  "exports from mmcv/ops/__init__.py; top-level names (with the operators reached under their exported names too) and the sibling imports they use from "
                  "mmcv/ops/<module>.py; paths: the lines where their Python code leaves the CUDA kernel (npu: a "
                  "branch for NPU tensors, not-cuda: a pure-PyTorch path for tensors not on CUDA)",
        "exports": dict(sorted(exports.items())),
        "modules": {module: {name: {"ops": dict(sorted({**reached.get(f"mmcv.ops.{module}.{name}", {}), **{
            op: kernels for alias, key in exports.items() if key == f"{module}.{name}"
            for op, kernels in reached.get(f"mmcv.ops.{alias}", {}).items()}}.items())),
                                    **found} for name, found in names.items()}
                    for module, names in uses.items()},
    }


def _cuda_only_ops(ops: Dict[str, str]) -> List[str]:
    """The operators with a CUDA kernel and no NPU one (kernels: "CPU, CUDA, NPU")."""
    listed = {op: {k.strip() for k in kernels.split(",")} for op, kernels in ops.items()}
    return sorted(op for op, kernels in listed.items() if "CUDA" in kernels and "NPU" not in kernels)


def build(facts: dict) -> dict:
    """``module.name`` and exported names -> the CUDA-only operators they reach (only CUDA-only names listed)."""
    entries = {f"{module}.{name}": entry for module, names in facts["modules"].items() for name, entry in names.items()}
    # a name whose Python code leaves the CUDA kernel runs on an NPU, whatever its operators' kernels
    direct = {key: [] if entry["paths"] else _cuda_only_ops(entry["ops"]) for key, entry in entries.items()}
    cuda_only: Dict[str, List[str]] = {}
    for key, entry in entries.items():
        if direct[key]:
            cuda_only[key] = direct[key]
        elif not entry["ops"] and not entry["paths"]:
            through = {op for used in entry["uses"] for op in direct.get(used, ())}
            if through:
                cuda_only[key] = sorted(through)
    for name, key in facts["exports"].items():
        if key in cuda_only:
            cuda_only[name] = cuda_only[key]
    cuda_only = {key: ", ".join(ops) for key, ops in cuda_only.items()}
    known = set(entries) | set(facts["exports"])
    return {
        "generator": GENERATOR,
        "source": f"rules_data/sources/mmcv/{FACTS.name}: {facts['source']}",
        "version": VERSION,
        "cuda_only": dict(sorted(cuda_only.items())),
        "not_cuda_only": sorted(known - set(cuda_only)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract", metavar="SDIST", type=Path,
                        help="the unpacked mmcv-2.1.0 sdist folder: rewrite the facts file first")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed data file is out of date")
    args = parser.parse_args(argv)
    if args.extract:
        FACTS.parent.mkdir(parents=True, exist_ok=True)
        FACTS.write_text(render(extract(args.extract.resolve())), encoding="utf-8")
        print(f"wrote {FACTS.relative_to(REPO)}")
    text = render(build(json.loads(FACTS.read_text(encoding="utf-8"))))
    return update(text, OUT, GENERATOR, args.check)


if __name__ == "__main__":
    sys.exit(main())
