#!/usr/bin/env python3
"""Extract per-version facts from the official torch_npu wheels.

Downloads each wheel with ``pip download`` into a cache directory outside the repository, never
installs it, reads a few files out of it with ``zipfile`` and writes one facts file per version to
``rules_data/sources/wheels/torch_npu-<V>.json``.  Needs PyYAML (``pip install pyyaml``) and access
to the package index.

    python tools/extract_wheels.py                  # every version in VERSIONS
    python tools/extract_wheels.py 2.6.0.post5      # just one
"""
from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
from flake8_ascend.data import version_key  # noqa: E402
OUT_DIR = REPO / "rules_data" / "sources" / "wheels"
DEFAULT_CACHE = Path.home() / ".cache" / "flake8-ascend" / "wheels"

# The newest post release of each supported torch_npu version (no 1.11.0 or 2.2.0 wheel exists).
VERSIONS = [
    "2.1.0.post17", "2.3.1.post6", "2.4.0.post4", "2.5.1.post1", "2.6.0.post5", "2.7.1.post11",
    "2.8.0.post5", "2.9.0.post9", "2.10.0.post7", "2.11.0.post3", "2.12.0.post3", "2.13.0",
]
PLATFORMS = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64"]
YAML_FILES = ["npu_native_functions.yaml", "npu_native_functions_by_codegen.yaml"]
YAML_SECTIONS = ["supported", "autograd", "custom", "quant", "symint", "tocpu"]
TRANSFER_LISTS = [
    "device_kwargs_list", "torch_fn_white_list", "torch_tensor_fn_white_list",
    "torch_module_fn_white_list", "torch_cuda_fn_white_list",
]
CONTRIB_FILES = {
    "function": "torch_npu/contrib/function/__init__.py",
    "module": "torch_npu/contrib/module/__init__.py",
    "contrib": "torch_npu/contrib/__init__.py",
    "optim": "torch_npu/optim/__init__.py",
}


def pip_download(version: str, cache: Path) -> Path:
    """Download the wheel of torch-npu==version into cache (reusing a cached one) and return its path."""
    cached = sorted(cache.glob(f"torch_npu-{version}-*.whl"))
    if cached:
        return cached[-1]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.11"]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    cmd += ["-d", str(cache), f"torch-npu=={version}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, cmd, done.stdout, done.stderr)
    found = sorted(cache.glob(f"torch_npu-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip reported success but no torch_npu-{version} wheel is in {cache}")
    return found[-1]


def previous_release(version: str) -> str | None:
    """The newest release of the same base version that is older than version, from the index."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "torch-npu"],
                         check=True, capture_output=True, text=True).stdout
    match = re.search(r"Available versions: (.*)", out)
    base = version.partition(".post")[0]
    older = [v.strip() for v in match.group(1).split(",")] if match else []
    older = [v for v in older if v.partition(".post")[0] == base and version_key(v) < version_key(version)]
    return max(older, key=version_key) if older else None


def fetch(version: str, cache: Path) -> tuple[Path, str | None]:
    """Download version, falling back to older post releases; return (wheel, note on the fallback)."""
    wanted, note = version, None
    while True:
        try:
            return pip_download(version, cache), note
        except (subprocess.CalledProcessError, FileNotFoundError) as exc:
            older = previous_release(version)
            if older is None:
                raise RuntimeError(f"no wheel for torch-npu {wanted} or an older post release") from exc
            print(f"  torch-npu=={version}: download failed, falling back to {older}", file=sys.stderr)
            note = f"requested {wanted}; downloading {version} failed, used {older}"
            version = older


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def op_name(entry) -> str:
    """`name.overload` of a yaml entry: a plain string or a dict whose `func:` may carry a signature."""
    func = entry["func"] if isinstance(entry, dict) else entry
    return str(func).split("(", 1)[0].strip()


def yaml_sections(text: str) -> dict[str, list[str]]:
    """Sorted op names per section of an npu_native_functions*.yaml file."""
    data = yaml.safe_load(text) or {}
    return {s: sorted({op_name(e) for e in data[s] or []}) for s in YAML_SECTIONS if s in data}


def literal_strings(node: ast.AST) -> list[str] | None:
    """The strings of a list/tuple literal (or a `+` of such literals); None for anything else."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = literal_strings(node.left), literal_strings(node.right)
        return None if left is None or right is None else left + right
    return None


def module_lists(source: str, names: list[str]) -> dict[str, list[str]]:
    """Module-level literal string lists bound to names, following `=`, `+=` and `.extend([...])`."""
    found: dict[str, list[str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in names:
                    value = literal_strings(node.value)
                    if value is not None:
                        found[target.id] = value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in names:
            found[node.target.id] = found.get(node.target.id, []) + (literal_strings(node.value) or [])
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if (isinstance(func, ast.Attribute) and func.attr == "extend" and isinstance(func.value, ast.Name)
                    and func.value.id in names and node.value.args):
                value = literal_strings(node.value.args[0]) or []
                found[func.value.id] = found.get(func.value.id, []) + value
    return found


def public_exports(source: str) -> list[str]:
    """Sorted public names of a package __init__: its __all__ plus names it imports from submodules."""
    names = set(module_lists(source, ["__all__"]).get("__all__", []))
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            names.update(alias.asname or alias.name for alias in node.names)
    return sorted(n for n in names if not n.startswith("_") and n != "*")


def read_text(wheel: zipfile.ZipFile, name: str) -> str | None:
    """Text of a member of the wheel, or None when it is absent."""
    try:
        return wheel.read(name).decode("utf-8")
    except KeyError:
        return None


def wheel_facts(path: Path) -> dict:
    """All facts the rule data needs from one wheel."""
    facts: dict = {"yaml": {}, "contrib": {}}
    with zipfile.ZipFile(path) as wheel:
        for name in YAML_FILES:
            text = read_text(wheel, f"torch_npu/csrc/aten/{name}")
            if text is not None:
                facts["yaml"][name] = yaml_sections(text)
        npu_init = read_text(wheel, "torch_npu/npu/__init__.py") or ""
        facts["npu_all"] = module_lists(npu_init, ["__all__"]).get("__all__", [])
        transfer = read_text(wheel, "torch_npu/contrib/transfer_to_npu.py") or ""
        facts["transfer_to_npu"] = module_lists(transfer, TRANSFER_LISTS)
        for key, member in CONTRIB_FILES.items():
            text = read_text(wheel, member)
            if text is not None:
                facts["contrib"][key] = public_exports(text)
    return facts


def extraction_date(out: Path, digest: str) -> str:
    """Today, or the date already recorded in out when it describes the same wheel."""
    if out.exists():
        previous = json.loads(out.read_text(encoding="utf-8"))
        if previous.get("sha256") == digest:
            return previous["extracted"]
    return datetime.date.today().isoformat()


def extract(version: str, cache: Path, out_dir: Path) -> tuple[Path, dict]:
    """Download one version, extract its facts and write the facts file; return (file, facts)."""
    wheel, note = fetch(version, cache)
    actual = wheel.name.split("-")[1]
    out = out_dir / f"torch_npu-{actual}.json"
    digest = sha256(wheel)
    facts = {
        "generator": "tools/extract_wheels.py",
        "version": actual,
        "requested": version,
        "fallback": note,
        "wheel": wheel.name,
        "sha256": digest,
        "extracted": extraction_date(out, digest),
        **wheel_facts(wheel),
    }
    out.write_text(json.dumps(facts, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return out, facts


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=VERSIONS, help="torch_npu versions (default: all)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="wheel cache (outside the repo)")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where the facts files go")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for version in args.versions:
        out, facts = extract(version, args.cache, args.out)
        sizes = {f: {s: len(v) for s, v in secs.items()} for f, secs in facts["yaml"].items()}
        print(f"{out.name}: {facts['wheel']}: {sizes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
