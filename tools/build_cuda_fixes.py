#!/usr/bin/env python3
"""Build src/flake8_ascend/data/cuda_fixes.json: the rewrites ``--fix`` and ``-m migrate`` apply to CUDA code.

Reads ``rules_data/sources/cuda/cuda_to_npu_facts.json`` (the official GPU2Ascend rule tables of msFmkTransplt
and the torch_npu 2.13.0 wheel's ``contrib/transfer_to_npu.py``) and keeps only what both agree on:

- ``modules``: ``torch.cuda`` prefixes and their NPU module, from the GPU2Ascend name rules
  (``torch.cuda.synchronize`` -> ``torch_npu.npu.synchronize`` gives ``torch.cuda`` -> ``torch_npu.npu``), kept
  only where transfer_to_npu patches the same module (``torch.cuda`` by ``torch_npu.npu.__all__``, which the
  rules check per version in ``npu_all``; ``torch.cuda.amp`` as a whole);
- ``methods``: ``.cuda()`` -> ``.npu()`` (GPU2Ascend's ``cuda`` -> ``npu`` name rule; transfer_to_npu's
  ``torch.Tensor.cuda`` / ``torch.nn.Module.cuda`` replacements);
- ``strings``: exact device and backend strings (GPU2Ascend's strict string rules ``cuda`` -> ``npu``,
  ``nccl`` -> ``hccl``, ``NCCL`` -> ``HCCL`` and its ``cuda:`` prefix rule), which the rules rewrite only where
  the string reaches a device or backend argument.

A key missing from the facts stops the build.  Pure standard library, deterministic, offline.

    python tools/build_cuda_fixes.py [--check]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the same facts file, JSON layout and --check as the transfer_to_npu data
from build_transfer_to_npu import FACTS, REPO, render, section, write_or_check  # noqa: E402

OUT = REPO / "src" / "flake8_ascend" / "data" / "cuda_fixes.json"
GENERATOR = "tools/build_cuda_fixes.py"
RULES = "msFmkTransplt GPU2Ascend rules ("
TRANSFER = "transfer_to_npu ("
NAME_RULES = "pytorch_npu_patch_rules/builtin_rules_pytorch_npu.json FuncNameModifyRule (old->new)"
COMMON_RULES = "common_rules/builtin_rules.json"
PATCHED = {"torch.cuda": "torch.cuda",  # facts key of whole_module_patches that covers each module
           "torch.cuda.amp": "torch.cuda.amp / amp.autocast_mode / amp.common / amp.grad_scaler / torch.cuda.random"}
METHOD_REPLACEMENTS = ("torch.Tensor.cuda", "torch.nn.Module.cuda")


def module_prefixes(renames: Dict[str, str]) -> Dict[str, str]:
    """``torch.cuda.amp.autocast -> torch_npu.npu.amp.autocast`` gives ``torch.cuda.amp -> torch_npu.npu.amp``
    and ``torch.cuda -> torch_npu.npu``: the modules of a rename whose trailing names agree (``PATCHED`` ones)."""
    prefixes: Dict[str, str] = {}
    for old, new in renames.items():
        old_parts, new_parts = old.split("."), new.split(".")
        while len(old_parts) > 1 and len(new_parts) > 1 and old_parts[-1] == new_parts[-1]:
            old_parts, new_parts = old_parts[:-1], new_parts[:-1]
            if ".".join(old_parts) in PATCHED:
                prefixes.setdefault(".".join(old_parts), ".".join(new_parts))
    return prefixes


def build(facts: dict) -> dict:
    (_, rules), (_, transfer) = section(facts, RULES), section(facts, TRANSFER)
    common = rules.get(COMMON_RULES)
    if NAME_RULES not in rules or not common:
        raise SystemExit(f"{FACTS}: keys not found: {NAME_RULES}; {COMMON_RULES}")
    modules = module_prefixes(rules[NAME_RULES])
    patches = transfer["whole_module_patches"]
    unpatched = sorted(m for m, key in PATCHED.items() if m not in modules or key not in patches)
    if unpatched:
        raise SystemExit(f"{FACTS}: no rename or transfer_to_npu patch for {', '.join(unpatched)}")
    replacements = transfer["direct_replacements"]
    methods = {rule["old_name"]: rule["new_name"] for rule in common["FuncNameModifyRule"]}
    for key in METHOD_REPLACEMENTS:  # transfer_to_npu must replace the same method
        old, new = key.rsplit(".", 1)[1], replacements[key].rsplit(".", 1)[1]
        if methods.get(old) != new:
            raise SystemExit(f"{FACTS}: GPU2Ascend and transfer_to_npu disagree on .{old}()")
    strings = {rule["str_old"]: rule["str_new"] for rule in common["ReplaceStringRule"]
               if rule["strict"] or rule["str_old"].endswith(":")}
    return {
        "generator": GENERATOR,
        "source": "rules_data/sources/cuda/cuda_to_npu_facts.json: msFmkTransplt GPU2Ascend rule tables and "
                  "transfer_to_npu (torch_npu 2.13.0 wheel)",
        "modules": dict(sorted(modules.items())),
        "methods": dict(sorted(methods.items())),
        "strings": dict(sorted(strings.items())),
    }


def main(argv=None) -> int:
    text = render(build(json.loads(FACTS.read_text(encoding="utf-8"))))
    return write_or_check(argv, __doc__.splitlines()[0], text, OUT, GENERATOR)


if __name__ == "__main__":
    sys.exit(main())
