"""The official third_party reports, as (header, rows) per file.

- ``framework_unsupported_op.csv``: torch APIs the selected torch_npu version does not support (ASC101);
- ``unknown_op.csv``: torch APIs whose NPU support that version leaves unknown (ASC102);
- ``migration_needed_op.csv``: CUDA-side uses that need a manual migration, because
  ``transfer_to_npu`` does not take care of them: ``torch.cuda`` APIs missing from the
  version's ``torch_npu.npu`` (ASC201), custom CUDA extension builds (ASC205), CUDA-only
  packages (ASC206);
- ``cuda_op.csv``: custom C++/CUDA operators the library calls, with the devices they have
  kernels for (an operator with an NPU kernel in the tree is listed but not unsupported);
- ``full_unsupported_results.csv``: one row per file, its functions that cannot run on NPU:
  they reach an unsupported API, a migration-needed use or an operator without NPU kernel
  (unknown APIs alone do not count).  This is the file ``-api`` reads back.

In the first four, one row per root cause; ``Affected 3rd-party API`` lists every
name an affected function is importable by, one per line, and the extra ``Call
Chain`` column gives, line for line, a shortest chain from that name (through
its canonical name, when it is an alias or re-export) to the root cause.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from ..config import THIRD_PARTY_COLUMNS
from .analysis import ThirdPartyAnalysis
from .summary import CUDA_OP, MIGRATION, UNKNOWN, UNSUPPORTED

CAUSE_FILES = {
    CUDA_OP: ("cuda_op.csv", "OP Name"),
    UNSUPPORTED: ("framework_unsupported_op.csv", "Torch API"),
    MIGRATION: ("migration_needed_op.csv", "Torch API"),
    UNKNOWN: ("unknown_op.csv", "Torch API"),
}
FULL_RESULTS = "full_unsupported_results.csv"
OUTPUTS = tuple(sorted([name for name, _ in CAUSE_FILES.values()] + [FULL_RESULTS]))
EXTRA_COLUMNS = ("Tips", "Call Chain")

Table = Tuple[Sequence[str], List[List[object]]]


def _chain_text(analysis: ThirdPartyAnalysis, node: int, index: int, first: str = "") -> Tuple[str, Tuple[str, int]]:
    """("a -> b -> api (file:line)", (file, line) of the use) for ``node`` (called ``first``, if
    given) and root cause ``index``."""
    nodes = analysis.symbols.graph.nodes
    path, (end, line) = analysis.impact.chain(node, index)
    api = analysis.impact.causes[index].api
    where = (nodes[end].file, line)
    names = [nodes[n].name for n in path]
    if first and first != names[0]:  # an alias or re-export: it leads to the canonical name
        names.insert(0, first)
    return " -> ".join(names) + f" -> {api} ({where[0]}:{where[1]})", where


def cause_rows(analysis: ThirdPartyAnalysis, category: str) -> List[List[object]]:
    rows = []
    for index, cause in enumerate(analysis.impact.causes):
        if cause.category != category:
            continue
        entries = []
        for node in analysis.impact.affected(index):
            entries.extend((name, _chain_text(analysis, node, index, name)[0]) for name in analysis.names_of(node))
        entries.sort()
        rows.append([cause.api, "\n".join(name for name, _ in entries), cause.tips or "-",
                     "\n".join(chain for _, chain in entries)])
    rows.sort(key=lambda row: row[0])
    return rows


def full_rows(analysis: ThirdPartyAnalysis) -> List[List[object]]:
    impact = analysis.impact
    nodes = analysis.symbols.graph.nodes
    by_file: Dict[str, List[int]] = {}
    for node, mask in enumerate(impact.masks):
        if mask & impact.blocking:
            by_file.setdefault(nodes[node].file, []).append(node)
    rows = []
    for rel in sorted(by_file):
        names, messages, chains = set(), set(), []
        for node in sorted(by_file[rel], key=lambda n: (nodes[n].line, nodes[n].name)):
            names.update(analysis.names_of(node))
            for index in impact.causes_of(node, impact.blocking):
                chain, (file, line) = _chain_text(analysis, node, index)
                messages.add((file, line, impact.causes[index].api))
                chains.append(chain)
        message = "\n".join(f"file_path:{f}, start_line:{line}, api_name:{api}" for f, line, api in sorted(messages))
        rows.append([rel, "\n".join(sorted(names)), message, "\n".join(chains)])
    return rows


def tables(analysis: ThirdPartyAnalysis) -> Dict[str, Table]:
    """Every report file of the mode: name -> (header, rows)."""
    found: Dict[str, Table] = {}
    for category, (name, first) in CAUSE_FILES.items():
        found[name] = ((first, "Affected 3rd-party API", *EXTRA_COLUMNS), cause_rows(analysis, category))
    found[FULL_RESULTS] = ((*THIRD_PARTY_COLUMNS, "Call Chain"), full_rows(analysis))
    return {name: found[name] for name in OUTPUTS}
