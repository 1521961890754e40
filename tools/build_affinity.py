#!/usr/bin/env python3
"""Build src/flake8_ascend/data/affinity.json from the curated affinity table and the wheel facts.

Reads ``rules_data/sources/affinity/affinity_rules.tsv`` (hand-curated, one source per row) and
``rules_data/sources/wheels/torch_npu-<V>.json`` (facts read out of each torch_npu wheel). Every
target API must be exported by at least one wheel: ``torch_npu.contrib[.function|.module].X`` and
``torch_npu.optim.X`` by the package's ``__init__.py`` (the ``contrib`` facts), ``torch_npu.X`` by the
``custom`` section of ``npu_native_functions*.yaml`` (``torch_npu/__init__.py`` binds every
``torch.ops.npu`` op as ``torch_npu.<name>``). The minimum version of a target is the first wheel that
exports it, and every later wheel must export it too; otherwise the build stops with an error.
Pure standard library, deterministic, offline.

    python tools/build_affinity.py [--check]
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
from flake8_ascend.data import version_key  # noqa: E402
TABLE = REPO / "rules_data" / "sources" / "affinity" / "affinity_rules.tsv"
WHEELS = REPO / "rules_data" / "sources" / "wheels"
OUT = REPO / "src" / "flake8_ascend" / "data" / "affinity.json"
GENERATOR = "tools/build_affinity.py"
API_TYPES = ("class", "function", "torch", "special")
LIST_KEYS = {"class": ("base", "init", "forward"), "function": ("params", "owner"), "torch": ("fix", "needs")}
TEXT_KEYS = {"torch": ("when",)}
CONTRIB_PREFIXES = (  # target prefix -> key of the wheel facts' "contrib" map, longest first
    ("torch_npu.contrib.function.", "function", "torch_npu/contrib/function/__init__.py"),
    ("torch_npu.contrib.module.", "module", "torch_npu/contrib/module/__init__.py"),
    ("torch_npu.contrib.", "contrib", "torch_npu/contrib/__init__.py"),
    ("torch_npu.optim.", "optim", "torch_npu/optim/__init__.py"),
)
CUSTOM_OPS = "custom section of torch_npu/csrc/aten/npu_native_functions*.yaml (bound as torch_npu.<op>)"


class BuildError(Exception):
    """A table row that cannot be built; the message is one line."""


def base_version(version: str) -> str:
    """``2.1.0.post17`` -> ``2.1.0``: the spelling users select with ``-v``."""
    return version.partition(".post")[0]


def load_wheels(folder: Path) -> List[dict]:
    """The wheel facts files, oldest first."""
    wheels = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("torch_npu-*.json"))]
    if not wheels:
        raise BuildError(f"no wheel facts in {folder}")
    return sorted(wheels, key=lambda w: version_key(w["version"]))


def exported(target: str, wheel: dict) -> Optional[str]:
    """Where ``wheel`` exports ``target`` (a file or yaml section), or None."""
    for prefix, key, where in CONTRIB_PREFIXES:
        if target.startswith(prefix):
            name = target[len(prefix):]
            return where if "." not in name and name in (wheel.get("contrib") or {}).get(key, ()) else None
    if target.startswith("torch_npu.") and target.count(".") == 1:
        op = target.split(".")[1]
        for sections in wheel.get("yaml", {}).values():
            if any(o == op or o.startswith(op + ".") for o in sections.get("custom", ())):
                return CUSTOM_OPS
    return None


def availability(target: str, wheels: List[dict]) -> Tuple[str, str]:
    """(minimum torch_npu version, evidence) of a target, checking it stays exported after that."""
    found = [(w["version"], exported(target, w)) for w in wheels]
    first = next((i for i, (_, where) in enumerate(found) if where), None)
    if first is None:
        raise BuildError(f"{target} is exported by no torch_npu wheel ({found[0][0]} .. {found[-1][0]})")
    gaps = [version for version, where in found[first:] if not where]
    if gaps:
        raise BuildError(f"{target} appears in {found[first][0]} but is missing from {', '.join(gaps)}")
    return base_version(found[first][0]), found[first][1]


def parse_match(api_type: str, text: str) -> Dict[str, object]:
    """``key=a,b; key2=c`` -> {key: [a, b], key2: "c"} for the keys this api type knows."""
    fields: Dict[str, object] = {}
    if api_type == "special":
        return {"pattern": text}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, value = part.partition("=")
        if not sep:
            raise BuildError(f"match field {part!r} is not key=value")
        if key in LIST_KEYS.get(api_type, ()):
            separator = "|" if key == "base" else ","
            fields[key] = [v.strip() for v in value.split(separator) if v.strip()]
        elif key in TEXT_KEYS.get(api_type, ()):
            fields[key] = value.strip()
        else:
            raise BuildError(f"unknown match key {key!r} for api type {api_type}")
    if not set(fields.get("needs", ())) <= set(fields.get("fix", ())):
        raise BuildError("every needs= parameter must be one of fix=")
    return fields


def build(table: Path = TABLE, wheels_dir: Path = WHEELS) -> str:
    """The text of affinity.json."""
    wheels = load_wheels(wheels_dir)
    out: Dict[str, dict] = {t: {} for t in API_TYPES}
    with table.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.DictReader(handle, delimiter="\t"), 2):
            try:
                api_type = row["api_type"]
                if api_type not in API_TYPES:
                    raise BuildError(f"api_type {api_type!r} is not one of {', '.join(API_TYPES)}")
                if not row["source"].strip():
                    raise BuildError("the row has no source")
                min_version, evidence = availability(row["affinity_api"], wheels)
                deprecated = row["deprecated_from"].strip() or None
                entry = {"target": row["affinity_api"], "min_version": min_version, "deprecated_from": deprecated,
                         "evidence": evidence, "source": row["source"], **parse_match(api_type, row["match"])}
            except BuildError as error:
                raise BuildError(f"{table.name}:{number}: {error}") from None
            if api_type in ("class", "function"):
                out[api_type].setdefault(row["native"], []).append(entry)
            elif row["native"] in out[api_type]:
                raise BuildError(f"{table.name}:{number}: {row['native']} is listed twice")
            else:
                out[api_type][row["native"]] = entry
    meta = {
        "generator": GENERATOR,
        "table": TABLE.relative_to(REPO).as_posix(),
        "wheels": [w["version"] for w in wheels],
        "notes": "min_version: the first wheel exporting the target (all later wheels export it too); "
                 "a target is suggested for versions from min_version up to, not including, deprecated_from.",
    }
    return json.dumps({"meta": meta, **out}, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the packaged file is out of date")
    args = parser.parse_args(argv)
    try:
        text = build()
    except (BuildError, OSError, KeyError, ValueError) as error:
        print(f"build_affinity: error: {error}", file=sys.stderr)
        return 2
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT.relative_to(REPO)} is out of date: run python {GENERATOR}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    data = json.loads(text)
    print(f"wrote {OUT.relative_to(REPO)}: " + ", ".join(f"{len(data[t])} {t}" for t in API_TYPES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
