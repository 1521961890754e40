#!/usr/bin/env python3
"""Build src/flake8_ascend/data/transfer_to_npu.json: what ``torch_npu.contrib.transfer_to_npu`` maps.

Reads the transfer_to_npu section of ``rules_data/sources/cuda/cuda_to_npu_facts.json`` (facts read out of
the torch_npu 2.13.0 wheel's ``contrib/transfer_to_npu.py``) and writes the names the CUDA rules stay quiet
about in a file that imports transfer_to_npu:

- ``patched``: modules patched as a whole (``torch.cuda.amp`` -> ``torch_npu.npu.amp``): every name below them;
- ``replaced``: single names it replaces (``torch.Tensor.cuda`` -> ``torch.Tensor.npu``);
- ``backend_functions``: calls whose ``'nccl'`` backend argument it rewrites to ``'hccl'``.

The keyword arguments whose ``'cuda'`` devices it rewrites are per version (``device_kwargs_list``).

``torch.cuda.<name>`` for every name of ``torch_npu.npu.__all__`` is mapped too; that list is per version
(``npu_all`` in the version files). Comparisons with ``'cuda'`` or ``'nccl'`` are never rewritten. Keys of
the facts file that describe no name mapping (disabled ``torch.jit.script``, device-argument rewriting of
functions the rules do not report) are left out by name below; a key missing from the facts stops the build.
Pure standard library, deterministic, offline.

    python tools/build_transfer_to_npu.py [--check]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
FACTS = REPO / "rules_data" / "sources" / "cuda" / "cuda_to_npu_facts.json"
OUT = REPO / "src" / "flake8_ascend" / "data" / "transfer_to_npu.json"
GENERATOR = "tools/build_transfer_to_npu.py"
SECTION_PREFIX = "transfer_to_npu ("
MODULE = "torch_npu.contrib.transfer_to_npu"
# keys of whole_module_patches whose names all map (the third, torch.profiler, is reported by no rule)
PATCHED_KEYS = ("torch.cuda.amp / amp.autocast_mode / amp.common / amp.grad_scaler / torch.cuda.random",
                "torch.profiler.profile/schedule/tensorboard_trace_handler/ProfilerAction/ProfilerActivity.CUDA")
# keys of direct_replacements that replace a name with its NPU counterpart
REPLACED_KEYS = ("torch.Tensor.cuda", "torch.Tensor.is_cuda", "torch.nn.Module.cuda", "torch.cuda.DoubleTensor",
                 "torch.cuda.CUDAGraph", "torch.cuda.default_generators", "torch.distributed.is_nccl_available",
                 "torch.distributed.ProcessGroupNCCL", "torch.storage.TypedStorage.is_cuda",
                 "torch.Generator / torch.Event", "torch.cuda.memory._record_memory_history/_snapshot/_dump_snapshot")
BACKEND_KEY = "torch.distributed.init_process_group backend"


def expand(key: str) -> List[str]:
    """The qualified names a facts key spells: ``a.b / b2`` (relative to ``a``), ``a.b/c`` (``a.b``, ``a.c``)."""
    names: List[str] = []
    root = ""
    for part in (p.strip() for p in key.split(" / ")):
        if not part.startswith("torch"):
            part = f"{root}.{part}"
        root = part.split(".")[0] + "." + part.split(".")[1] if part.count(".") > 1 else part.split(".")[0]
        first, *others = part.split("/")
        names.append(first)
        stem = first.rsplit(".", 1)[0]
        names += [f"{stem}.{other}" for other in others]
    return names


def section(facts: dict, prefix: str) -> Tuple[str, dict]:
    """(key, value) of the one section of the facts whose key starts with ``prefix``."""
    keys = [key for key in facts if key.startswith(prefix)]
    if len(keys) != 1:
        raise SystemExit(f"{FACTS}: expected one '{prefix}...' section, found {len(keys)}")
    return keys[0], facts[keys[0]]


def build(facts: dict) -> dict:
    section_key, transfer = section(facts, SECTION_PREFIX)
    patches, replacements = transfer["whole_module_patches"], transfer["direct_replacements"]
    missing = [k for k in PATCHED_KEYS if k not in patches] + [
        k for k in (*REPLACED_KEYS, BACKEND_KEY) if k not in replacements]
    if missing:
        raise SystemExit(f"{FACTS}: keys not found: {'; '.join(missing)}")
    replaced: Dict[str, str] = {}
    for key in REPLACED_KEYS:
        for name in expand(key):
            replaced[name] = replacements[key]
    return {
        "generator": GENERATOR,
        "source": f"rules_data/sources/cuda/cuda_to_npu_facts.json: {section_key}",
        "module": MODULE,
        "patched": sorted(name for key in PATCHED_KEYS for name in expand(key)),
        "replaced": dict(sorted(replaced.items())),
        "backend_functions": [BACKEND_KEY.split()[0]],
    }


def render(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def write_or_check(argv, description: str, text: str, out: Path, generator: str) -> int:
    """The command line of a tool whose only option is ``--check`` (shared by the tools that build a packaged
    file from the CUDA facts): ``update`` with it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    return update(text, out, generator, parser.parse_args(argv).check)


def update(text: str, out: Path, generator: str, check: bool) -> int:
    """Write ``text`` to ``out``, or with ``check`` return 1 when the committed file differs."""
    if check:
        if not out.is_file() or out.read_text(encoding="utf-8") != text:
            print(f"{out.relative_to(REPO)} is out of date: run {generator}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out.relative_to(REPO)}")
    return 0


def main(argv=None) -> int:
    text = render(build(json.loads(FACTS.read_text(encoding="utf-8"))))
    return write_or_check(argv, __doc__.splitlines()[0], text, OUT, GENERATOR)


if __name__ == "__main__":
    sys.exit(main())
