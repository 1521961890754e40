#!/usr/bin/env python3
"""Build the linter's per-version rule data from the facts in rules_data/sources/.

Pure standard library, deterministic, no network.  Writes src/flake8_ascend/data/torch_npu-<V>.json
for every supported torch_npu version plus src/flake8_ascend/data/index.json, deciding each API from
its table row, the ATen ops tools/trace_torch_apis.py traced and V's NPU kernels (the rules:
rules_data/README.md), and writes the log to rules_data/build_log.txt (repaired and duplicate rows, and
per version how many APIs each kind of decision or disagreement touched).

    python tools/build_rules_data.py [--sources DIR] [--out DIR] [--log FILE] [--quiet]
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
from flake8_ascend.data import version_key  # noqa: E402
SOURCES = REPO / "rules_data" / "sources"
OUT = REPO / "src" / "flake8_ascend" / "data"
GENERATOR = "tools/build_rules_data.py"
DEFAULT_VERSION = "2.13.0"

# Per version: its support tables, earlier ones taking precedence where two list the same API.
TABLES = {
    "1.11.0": ["official_tool/1.11.0.tsv"],
    "2.1.0": ["official_tool/2.1.tsv"],
    "2.2.0": ["official_tool/2.2.tsv"],
    "2.3.1": ["official_tool/2.3.tsv"],
    "2.4.0": ["official_tool/2.4.tsv"],
    "2.5.1": ["official_tool/2.5.tsv"],
    "2.6.0": ["official_tool/2.6.tsv"],
    "2.7.1": ["docs/2.7.1.tsv", "official_tool/2.7.tsv"],
    "2.8.0": ["official_tool/2.8.tsv"],
    "2.9.0": ["docs/2.9.0.tsv"],
    "2.10.0": ["docs/2.10.0.tsv"],
    "2.11.0": ["docs/2.11.0.tsv"],
    "2.12.0": ["docs/2.12.0.tsv"],
    "2.13.0": ["docs/2.13.0.tsv"],
}
NO_WHEEL = {"1.11.0", "2.2.0"}  # torch_npu never published these wheels on the package index
ATEN_TSV = "aten/aten_support_torch2.13.0_npu2.13.0.tsv"
TRACE_JSON = "aten/traced_apis_torch2.13.0.json"  # written by tools/trace_torch_apis.py
TRACED_TORCH = "2.13."  # the torch release traced, and the torch_npu versions that run on it
LOG = REPO / "rules_data" / "build_log.txt"
KERNEL_SECTIONS = ("supported", "symint", "autograd")  # `custom` is npu::, `quant` quantized-only
COMPOSITE_STOCK = {"math kernel", "default backend kernel"}  # the TSV's stock PrivateUse1 kernel column
OTHER_BACKENDS = {"unsupported_cuda_only", "unsupported_other_backend_only"}
BLOCKING = {"fallback", "unsupported"}  # op statuses that keep an API off the NPU
NAMESPACES = {"linalg_": "torch.linalg.", "fft_": "torch.fft.", "special_": "torch.special."}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
STATUS_RANK = {"supported": 0, "partial": 1, "unsupported": 2}  # most permissive first
NOTES = (
    f"Decided from the table rows, the ATen ops of {TRACE_JSON} and this version's NPU kernels "
    "(rules_data/README.md, decision rules); 'official' keeps the table rows the evidence overrides. "
    f"The composite and structured classification is that of torch 2.13 ({ATEN_TSV}) for every version."
)


# ---------------------------------------------------------------- text cleaning


def clean_note(text: str) -> str:
    """One line of plain text: <br> -> '; ', HTML tags and markdown backticks/escapes removed."""
    if "<" in text or "\\" in text:
        text = re.sub(r"\s*>\s*<font[^>]*>.*?</font>\s*$", "", text)  # the next doc heading, leaked in
        text = re.sub(r"<br\s*/?>", "; ", text, flags=re.I)
        text = re.sub(r"<sup>(.*?)</sup>", r"^\1", text, flags=re.I)
        text = re.sub(r"<[^>]*>", "", text)
        text = re.sub(r"\\([\\`*_<>|\[\]])", r"\1", text)
    text = " ".join(text.replace("`", "").split()).strip("; ")
    return "" if text == "-" else text


def clean_name(raw: str) -> str:
    """An API name without markdown escapes, leaked `abstract`/`static` keywords, trailing prose or a doubled
    ``torch.torch.`` prefix (the docs spell ``torch.torch.default_generator``)."""
    if raw.startswith("torch.torch."):
        raw = raw[len("torch."):]
    if IDENTIFIER.fullmatch(raw):
        return raw
    name = re.sub(r"\.(?:abstract|static|classmethod) ", ".", raw.replace("\\_", "_"))
    match = IDENTIFIER.match(name)
    return match.group(0).rstrip(".") if match else ""


# ---------------------------------------------------------------- support tables


def read_tsv(path: Path) -> list[dict[str, str]]:
    """Rows of a tab-separated file with a header line (no quoting)."""
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def table_row(row: dict[str, str], method: str) -> list[str]:
    """[status, note, method] of an official_tool row (api/status/limit_note) or a docs row."""
    if method == "official_tool":
        ok, note = row["status"] == "supported", clean_note(row["limit_note"])
    else:
        ok, note = row["supported_any_hw"] == "True", clean_note(row["limit"])
    status = "unsupported" if not ok else "partial" if note else "supported"
    return [status, note, method]


def read_table(sources: Path, rel: str, log: list[str]) -> dict[str, list[str]]:
    """One support table as {api: [status, note, method]}; a duplicate keeps its most permissive row."""
    method = rel.split("/")[0]
    table: dict[str, list[str]] = {}
    repaired, duplicates = [], []
    for row in read_tsv(sources / rel):
        api = clean_name(row["api"])
        if not api:
            log.append(f"{rel}: skipped a row without an API name: {row['api'][:60]!r}")
            continue
        if api != row["api"]:
            repaired.append(f"{row['api'][:60]!r} -> {api!r}")
        entry = table_row(row, method)
        if api in table:
            duplicates.append(api)
            if STATUS_RANK[entry[0]] >= STATUS_RANK[table[api][0]]:
                continue
        table[api] = entry
    if repaired:
        log.append(f"{rel}: repaired {len(repaired)} API names, e.g. {'; '.join(repaired[:3])}")
    if duplicates:
        log.append(f"{rel}: {len(duplicates)} APIs listed twice, kept the most permissive row: {duplicates}")
    return table


def merge_tables(version: str, tables: list[dict[str, list[str]]], log: list[str]) -> dict[str, list[str]]:
    """Merge a version's tables, earlier ones first; log status disagreements where two list an API."""
    merged: dict[str, list[str]] = {}
    for table in reversed(tables):
        merged.update(table)
    if len(tables) == 2:
        first, second = tables
        both = sorted(set(first) & set(second))
        differ = [api for api in both if first[api][0] != second[api][0]]
        hard = [api for api in differ if "unsupported" in (first[api][0], second[api][0])]
        log.append(
            f"{version}: {len(both)} APIs in both tables, {len(differ)} with a different status, "
            f"{len(hard)} of them supported vs unsupported (the first table is kept), e.g. "
            + "; ".join(f"{api} {first[api][0]}/{second[api][0]}" for api in hard[:5])
        )
    return merged


# ---------------------------------------------------------------- ATen ops and kernels


def kernel_ops(wheel: dict) -> set[str]:
    """`name.overload` of every ATen op with an NPU kernel in a wheel's npu_native_functions*.yaml."""
    return {op for sections in wheel["yaml"].values() for s in KERNEL_SECTIONS for op in sections.get(s, [])}


def manual_kernels(aten: dict, yaml_2_13: set) -> set:
    """Ops torch_npu registers in C++ outside its yaml: classified npu_kernel by the TSV, absent from the yaml."""
    return {op for op, row in aten.items() if row["npu_class"] == "npu_kernel" and op not in yaml_2_13}


def op_status(op: str, row: dict, kernels: set) -> str:
    """kernel / composite / fallback / unsupported for one ATen overload (a TSV row) given V's kernels."""
    if op in kernels:
        return "kernel"
    delegate = row["structured_delegate"]
    if delegate:
        return "kernel" if delegate in kernels else "fallback"
    if row["stock_privateuse1_kernel"] in COMPOSITE_STOCK:
        return "composite"
    if row["npu_class"] in OTHER_BACKENDS:
        return "unsupported"
    return "fallback"


def base_verdicts(kernels: set[str], aten: dict[str, dict[str, str]]) -> dict[str, str | None]:
    """For each public ATen base name: how some overload of it runs on NPU, or None."""
    kernel_bases = {op.split(".")[0] for op in kernels}
    verdicts: dict[str, str | None] = {}
    for op, row in aten.items():
        base = op.split(".")[0]
        if base.startswith("_"):
            continue
        status = "kernel" if base in kernel_bases else op_status(op, row, kernels)
        how = {"kernel": "has an NPU kernel", "composite": "is composite"}.get(status)
        if how and verdicts.get(base) != "has an NPU kernel":
            verdicts[base] = how
        verdicts.setdefault(base, None)
    return verdicts


def python_names(base: str) -> list[str]:
    """The Python APIs an ATen base name is assumed to back."""
    for prefix, module in NAMESPACES.items():
        if base.startswith(prefix):
            return [module + base[len(prefix):]]
    return [f"torch.{base}", f"torch.Tensor.{base}", f"torch.nn.functional.{base}"]


def aten_rows(version: str, kernels: set[str], aten: dict, existing: set[str]) -> dict[str, list[str]]:
    """Rows for the Python names of ATen base names, only where torch 2.13 has that name."""
    rows = {}
    for base, how in base_verdicts(kernels, aten).items():
        if how:
            entry = ["supported", f"aten::{base} {how}", "aten"]
        else:
            entry = ["unknown", f"aten::{base} has no NPU kernel in torch_npu {version} (CPU fallback)", "aten"]
        for name in python_names(base):
            if name in existing:
                rows[name] = entry
    return rows


# ---------------------------------------------------------------- traced evidence


def traced_ops(entry: dict) -> list[str]:
    """The ATen ops of a trace, forward then backward, without other namespaces (profiler::) and without
    the CPU backend's own choices, forward and backward (``_scaled_dot_product_flash_attention_for_cpu`` and its
    ``_backward``: on NPU the op above them dispatches to torch_npu's kernel instead)."""
    ops = dict.fromkeys(entry["forward"] + entry["backward"])
    return [op for op in ops if "::" not in op and not _cpu_choice(op.split(".")[0])]


def _cpu_choice(name: str) -> bool:
    return name.endswith("_for_cpu") or name.endswith("_for_cpu_backward")


def own_ops(api: str, entry: dict) -> set[str]:
    """The ATen ops an API is named after: the trace's ``aten`` and its own name (torch.linalg.inv -> linalg_inv)."""
    module, _, name = api.rpartition(".")
    prefix = {module.rstrip("."): p for p, module in NAMESPACES.items()}.get(module, "")
    return {op for op in (entry.get("aten"), prefix + name) if op}


_KERNEL_BASES: dict[int, tuple] = {}  # id(kernels) -> (kernels, their ATen base names)


def behind_npu_composites(entry: dict, kernels: set) -> set:
    """Forward ops the CPU trace saw only inside a call of a CompositeImplicitAutograd op that has an NPU
    kernel in this version (``torch._weight_norm`` -> ``_weight_norm_interface``): on the NPU the
    dispatcher runs torch_npu's kernel for that op, never the decomposition the CPU trace shows.  An op also
    seen outside such calls, in another composite, or in the backward, is not spared."""
    composite = entry.get("composite")
    if not composite:
        return set()
    held, bases = _KERNEL_BASES.get(id(kernels), (None, None))
    if held is not kernels:  # the cache holds each set it saw, so an id is never reused for another
        bases = {op.split(".")[0] for op in kernels}
        _KERNEL_BASES[id(kernels)] = (kernels, bases)
    covered = {op for name, ops in composite.items() if name in bases for op in ops}
    others = {op for name, ops in composite.items() if name not in bases for op in ops}
    return covered - others - set(entry.get("outside_composites", ())) - set(entry["backward"])


def kernel_evidence(api: str, entry: dict, kernels: set, aten: dict) -> tuple[str, list[str]]:
    """('runs' | 'falls back' | 'fails', the ops that do not run) for one traced API in one version.

    An NPU kernel for the op the API is named after (torch_npu registers some composite ops, e.g.
    ``inverse``) runs before the decomposition the CPU trace shows.  Ops torch 2.13 does not classify
    are no evidence either way.
    """
    if own_ops(api, entry) & kernels:
        return "runs", []
    spared = behind_npu_composites(entry, kernels)
    missing = [op for op in traced_ops(entry)
               if op in aten and op not in spared and op_status(op, aten[op], kernels) in BLOCKING]
    if not missing:
        return "runs", []
    fails = any(op_status(op, aten[op], kernels) == "unsupported" for op in missing)
    return ("fails" if fails else "falls back"), missing


def evidence_note(version: str, verdict: str, missing: list[str], entry: dict) -> str:
    """Why, in one line: 'aten::mode has no NPU kernel in torch_npu 2.6.0 (CPU fallback; traced: ...)'."""
    ops = ", ".join(f"aten::{op}" for op in missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    verb = "has" if len(missing) == 1 else "have"
    where = "kernels only for other backends: fails on NPU" if verdict == "fails" else "CPU fallback"
    return f"{ops} {verb} no NPU kernel in torch_npu {version} ({where}; traced: {entry['sample']})"


def kernels_note(version: str, api: str, entry: dict, kernels: set) -> str:
    """Where the evidence says the API runs: the wheel has kernels for its own op or for all its ops."""
    own = sorted(own_ops(api, entry) & kernels)
    if own:
        return f"torch_npu {version}'s wheel has an NPU kernel for aten::{own[0]}"
    ops = [f"aten::{op}" for op in traced_ops(entry) if op != "detach"]
    shown = ", ".join(ops[:4]) + (f" and {len(ops) - 4} more" if len(ops) > 4 else "")
    return f"torch_npu {version}'s wheel has NPU kernels for every ATen op it dispatches ({shown})"


KERNEL_FREE_NOTE = "needs no NPU kernel: {why}"
PROBE = "probe:"  # the trace's sample of an API that only the generic probe reached (tools/trace_torch_apis.py)
# ops whose result is no ordinary dense tensor: a sparse layout (to_sparse), another storage (share_memory_'s
# set_), an MKL-DNN, quantized or nested tensor. What later runs on such a result is what may lack NPU kernels, and
# one probe call does not show it; a probe whose ops all return dense tensors saw the whole computation.
_NEW_KIND_OF_TENSOR = re.compile(r"_?(to_sparse|set_|to_mkldnn|quantize|nested)")


def decide(version: str, api: str, table_row, trace: dict, kernels: set | None, aten: dict, later_ok: bool):
    """(row, parity row, what happened) for one API in one version, from its table row and the evidence.

    ``later_ok``: a later version's table lists the API as supported.  The parity row is the table row
    with why the evidence overrides it (for ``--official-lists``), None when the row keeps the table's
    status.  ``what`` is None when the evidence adds nothing, else the kind of decision, for the log.
    """
    free = trace["kernel_free"].get(api)
    if free is not None and "OpInfo" in free and table_row and table_row[0] == "unsupported":
        free = None  # an op whose float32 sample was a no-op (conj_physical): other dtypes dispatch it
    if free is not None and table_row and table_row[0] == "partial" and not dtype_list_only(table_row[1], ()):
        free = None  # a restriction of its arguments (profile: use_device="npu") matters without a kernel
    if free is not None:
        row = ["supported", KERNEL_FREE_NOTE.format(why=free), "kernel_free"]
        if table_row and table_row[0] != "supported":
            return row, overridden(table_row, f"kernel-free: {row[1]}"), f"table {table_row[0]}, kernel-free"
        return (table_row or row), None, None
    entry = trace["apis"].get(api)
    if entry is None or kernels is None:
        return table_row, None, None
    verdict, missing = kernel_evidence(api, entry, kernels, aten)
    if verdict == "runs":
        has = kernels_note(version, api, entry, kernels)
        if not table_row or table_row[0] != "unsupported":
            return (table_row or ["supported", "traced: runs on NPU", "traced"]), None, None  # why: the log
        # The wheel's kernels win over the table: every op the API dispatches runs on the NPU (or the op it is
        # named after has its own NPU kernel); the table row stays in `official` and the disagreement is logged.
        if later_ok:
            row = ["supported", f"listed unsupported, but {has} and a later list supports it", "traced"]
            return row, overridden(table_row, f"stale: {has} and a later list supports it"), \
                "table unsupported, kernels contradict, a later table supports it: stale"
        listed = table_row[1] or f"listed unsupported by the torch_npu {version} support table"
        if entry["sample"].startswith(PROBE) and any(map(_NEW_KIND_OF_TENSOR.match, traced_ops(entry))):
            # one argument-less call on a dense float32 tensor is too little to overrule the list for an API whose
            # result is a new kind of tensor (to_sparse: the sparse tensor's later ops are not seen); a composite of
            # dense ops (gumbel_softmax) is judged like every other trace: its kernels win
            row = ["unknown", f"{listed}, but {has}; traced by the generic probe only, and no later list supports it",
                   "traced"]
            return row, overridden(table_row, f"disputed: {has} (generic probe)"), \
                "table unsupported, only the generic probe's kernels contradict, no later table supports it: " \
                "disputed, unknown"
        row = ["supported", f"{listed}, but {has} (the kernels win; no later list supports it)", "traced"]
        return row, overridden(table_row, f"disputed: {has}"), \
            "table unsupported, kernels contradict, no later table supports it: disputed, the kernels win"
    why = evidence_note(version, verdict, missing, entry)
    if table_row is None:
        return ["unsupported", why, "traced"], None, "not listed, traced ops do not run"
    if table_row[0] == "unsupported":
        note = "; ".join(part for part in (table_row[1], why) if part)
        return [table_row[0], note, table_row[2]], None, "table unsupported, trace agrees"
    return table_row, None, f"table {table_row[0]}, traced ops do not run (table kept)"


def broad_dtypes(table_row):
    """(row, parity row, what) for a partial table row whose restriction is a dtype list only."""
    if table_row and table_row[0] == "partial" and dtype_list_only(table_row[1]):
        row = ["supported", "restriction is a dtype list only (kept in official)", "dtypes"]
        return row, overridden(table_row, ""), "table partial, a dtype list with bf16/fp16/fp32 only: supported"
    return table_row, None, None


DTYPE = r"(?:bf16|fp16|fp32|fp64|u?int(?:8|16|32|64)|bool|complex(?:64|128))"
DTYPE_CLAUSE = re.compile(rf"(?:[\w.]+仅)?支持{DTYPE}(?:[，,、]{DTYPE})*")  # "input仅支持fp16，fp32" / "支持fp16，fp32"
TRAINING_DTYPES = ("bf16", "fp16", "fp32")


def dtype_list_only(note: str, needed: tuple = TRAINING_DTYPES) -> bool:
    """A restriction that only lists supported dtypes, ``needed`` among them: with bf16, fp16 and fp32 it
    cannot matter to float training code (ASC103 would fire on every torch.cat)."""
    clauses = [c.strip() for c in re.split(r"(?:^|\s)-\s|;", note) if c.strip()]
    return bool(clauses) and all(DTYPE_CLAUSE.fullmatch(c) and all(t in c for t in needed) for c in clauses)


def overridden(table_row: list[str], why: str) -> list[str]:
    """The official row as --official-lists reports it: its own note, then why the evidence disagrees."""
    status, note, method = table_row
    return [status, "; ".join(part for part in (note, why) if part), method]


# ---------------------------------------------------------------- restriction notes -> facts (ASC103)

AUTOCAST = "advice/npu_autocast_op_lists.json"  # torch_npu's AutoCastOps.cpp policy lists
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
LITERAL = r"[A-Za-z0-9_.+-]+"
CLAUSE_SPLIT = re.compile(r"(?:^|\s)-\s|;|。")
DTYPE_FACT = re.compile(rf"(?:属性)?(?P<params>{IDENT}(?:[、,，]{IDENT})*)?(?:参数)?仅?支持(?P<output>输出)?"
                        rf"(?P<dtypes>{DTYPE}(?:(?:[，,、]|和){DTYPE})*)(?![A-Za-z0-9_])")
CONDITION = re.compile(rf"属性(?P<arg>{IDENT})(?P<neg>为|非)(?P<value>{LITERAL})时")
ARG_FACTS = (  # (pattern, rule); every group named arg/value/values/cond
    (re.compile(rf"不支持(?P<arg>{IDENT})=(?P<value>{LITERAL})(?:的)?场景"), "not"),
    (re.compile(rf"不支持(?P<arg>{IDENT})参数"), "absent"),
    (re.compile(rf"不支持(?P<arg>{IDENT})$"), "absent"),
    (re.compile(rf"(?P<arg>{IDENT})参数仅支持设置为(?P<values>{LITERAL}(?:或{LITERAL})*)"), "in"),
    (re.compile(rf"仅支持设置(?P<arg>{IDENT})为(?P<values>{LITERAL}(?:或{LITERAL})*)"), "in"),
    (re.compile(rf"在开启(?P<cond>{IDENT})计算时，(?P<arg>{IDENT})必须为None"), "none_if"),
    (re.compile(rf"(?P<arg>{IDENT})参数需大于(?P<value>-?\d+(?:\.\d+)?)"), "gt"),
    (re.compile(rf"(?P<arg>{IDENT})需设置为(?P<value>{LITERAL})"), "set_to"),
    (re.compile(rf"属性(?P<arg>{IDENT})仅支持非负值"), "ge0"),
)
SHAPE_FACTS = (
    (re.compile(r"输入最大支持(?P<n>\d+)维"), "max_rank"),
    (re.compile(r"不支持(?P<n>\d+)维度的shape"), "not_rank"),
    (re.compile(r"仅支持(?P<n>\d+)维及以上的输入"), "min_rank"),
)
NOT_ARGUMENTS = {"nan", "inf", "NaN", "scalar"}  # "不支持nan": input values, not a parameter


def literal(text: str):
    """A note's value as Python would spell it: True/False/None, numbers, else the text (``tanh``)."""
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def restriction_facts(note: str, bf16_runs: bool) -> tuple[dict, list[str]]:
    """Facts a restriction note states about a call, and the clauses that state none (hardware, switches).

    ``dtypes``: [{params, dtypes, [when]}]: the dtypes a tensor parameter (``input``, ``self``, the output
    for ``dtype``) is listed for; ``when`` [arg, value, "eq"|"ne"] where the note makes it conditional on
    another argument (``属性mode为constant时``).  bf16 is added where ``bf16_runs`` (torch_npu's autocast
    runs the op's kernel in lower precision, bf16 included).  ``args``: [{arg, rule, ...}], the argument
    constraints: ``absent`` (not supported at all), ``not`` (not that value), ``in`` (only those values),
    ``none_if`` (must be None when ``cond`` is on), ``gt`` / ``ge0`` (numeric bounds), ``set_to`` (must be
    passed, with that value: ``use_device="npu"``).  ``shape``: rank limits.
    """
    facts: dict = {"dtypes": [], "args": [], "shape": []}
    other = []
    for clause in (re.sub(r"[“”\"]", "", c).strip() for c in CLAUSE_SPLIT.split(note)):
        if not clause:
            continue
        found = False
        condition = CONDITION.search(clause)
        for match in DTYPE_FACT.finditer(clause):
            params = re.split(r"[、,，]", match["params"]) if match["params"] else ["input"]
            if match["output"]:
                params = ["dtype"]
            dtypes = sorted(set(re.findall(DTYPE, match["dtypes"])))
            if bf16_runs and "fp16" in dtypes and "bf16" not in dtypes:
                dtypes = sorted(dtypes + ["bf16"])
            fact = {"params": params, "dtypes": dtypes}
            if condition:
                fact["when"] = [condition["arg"], literal(condition["value"]),
                                "eq" if condition["neg"] == "为" else "ne"]
            facts["dtypes"].append(fact)
            found = True
        for part in re.split(r"[，,]", clause):
            part = part.strip()
            for pattern, rule in ARG_FACTS:
                match = pattern.search(part) or (rule == "none_if" and pattern.search(clause))
                if not match or match["arg"] in NOT_ARGUMENTS or re.fullmatch(DTYPE, match["arg"]):
                    continue
                fact = {"arg": match["arg"], "rule": rule}
                if "value" in match.groupdict():
                    fact["value"] = literal(match["value"])
                if "values" in match.groupdict():
                    fact["values"] = [literal(v) for v in match["values"].split("或")]
                if "cond" in match.groupdict():
                    fact["if"] = match["cond"]
                if fact not in facts["args"]:
                    facts["args"].append(fact)
                found = True
                break
            for pattern, kind in SHAPE_FACTS:
                match = pattern.search(part)
                if match:
                    facts["shape"].append({kind: int(match["n"])})
                    found = True
        if not found:
            other.append(clause)
    return {k: v for k, v in facts.items() if v}, other


def restrictions(apis: dict, official: dict, trace: dict, lower_precision: set, log_counts: Counter,
                 version: str) -> dict:
    """{api: facts} for every API whose row (or official row, for --official-lists) is partial."""
    out = {}
    for api in sorted(set(apis) | set(official)):
        row = apis.get(api) if apis.get(api, ("",))[0] == "partial" else official.get(api)
        if not row or row[0] != "partial" or not row[1]:
            continue
        entry = trace["apis"].get(api, {})
        bf16_runs = bool(lower_precision & {op.split(".")[0] for op in entry.get("forward", [])})
        facts, other = restriction_facts(row[1], bf16_runs)
        if facts:
            out[api] = facts
        kind = "restriction: facts parsed" if facts else "restriction: no fact about the call's arguments"
        count(log_counts, version, kind, api)
        if bf16_runs and any("bf16" in f["dtypes"] for f in facts.get("dtypes", ())) and "bf16" not in row[1]:
            count(log_counts, version, "restriction: bf16 added (torch_npu autocast runs its kernel in bf16)", api)
    return out


def respell_arguments(built: dict, decisions: Counter) -> None:
    """An argument a table names in ATen's plural (``不支持scale_factors``, the upsample overloads' argument)
    where another version's table names the Python keyword (``不支持scale_factor``) for the same API and rule:
    the keyword spelling wins, so the fact can match a call."""
    spellings: dict = {}
    for data in built.values():
        for api, facts in data["restrictions"].items():
            for fact in facts.get("args", ()):
                spellings.setdefault((api, fact["rule"]), set()).add(fact["arg"])
    for version, data in built.items():
        for api, facts in data["restrictions"].items():
            for fact in facts.get("args", ()):
                singular = fact["arg"][:-1]
                if fact["arg"].endswith("s") and singular in spellings[(api, fact["rule"])]:
                    fact["arg"] = singular
                    count(decisions, version, "restriction: argument spelled as another version's table does", api)


# ---------------------------------------------------------------- assembling


def load_wheels(sources: Path) -> dict[str, tuple[str, dict]]:
    """{base version: (facts file relative to sources, facts)}, the newest post release per base."""
    wheels: dict[str, tuple[str, dict]] = {}
    for path in sorted((sources / "wheels").glob("torch_npu-*.json")):
        facts = json.loads(path.read_text(encoding="utf-8"))
        base = facts["version"].partition(".post")[0]
        if base not in wheels or version_key(facts["version"]) > version_key(wheels[base][1]["version"]):
            wheels[base] = (f"wheels/{path.name}", facts)
    return wheels


def meta(version: str, sources_used: list[str], wheel: dict | None) -> dict:
    """The meta block of a version file."""
    notes = NOTES
    if wheel is None:
        notes += (" No torch_npu wheel of this version exists: no kernel evidence; npu_all, transfer_to_npu,"
                  " contrib and aten_npu_ops are empty (unknown, not 'nothing').")
    elif wheel.get("fallback"):
        notes += f" Wheel: {wheel['fallback']}."
    return {
        "version": version,
        "generator": GENERATOR,
        "sources": sources_used,
        "wheel": wheel["wheel"] if wheel else None,
        "extracted": wheel["extracted"] if wheel else None,
        "notes": notes,
    }


def absent_from_torch(version: str, api: str, trace: dict) -> bool:
    """An API of a namespace the trace enumerated in full that torch 2.13 does not have, for torch_npu
    2.13.x (which runs on torch 2.13): calling it fails on any device, it is no NPU question."""
    namespace = api.rpartition(".")[0]
    return (version.startswith(TRACED_TORCH) and namespace in trace["meta"]["namespaces"]
            and not any(api in trace[part] for part in ("apis", "kernel_free", "untraced")))


def carried_rows(version: str, tables: dict, trace: dict, decided: set, decisions: Counter) -> dict:
    """Rows of APIs that this version's table omits where the latest earlier table that lists them supports them
    (supported or partial): that row as it is (its note is the restriction ASC103 reads; the log names the table it
    comes from). A table that drops a row says nothing about the API (the 2.13.0 docs table omits
    ``all_gather_into_tensor``, which every list up to 2.12.0 supports), and a release keeps the support of the one
    before; an earlier "unsupported" is not carried, since a later release may have added the kernel (the API stays
    ``unknown``). Only where this version has no other evidence: not traced, not kernel-free, not in ``decided``
    (the ATen name mapping). Names torch 2.13 no longer has are no NPU question (``absent_from_torch``)."""
    carried = {}
    earlier = sorted((v for v in TABLES if version_key(v) < version_key(version)), key=version_key, reverse=True)
    evidence = decided | set(trace["apis"]) | set(trace["kernel_free"])
    for api in sorted(set().union(*(tables[v] for v in earlier)) - set(tables[version]) - evidence):
        if absent_from_torch(version, api, trace):
            continue
        source = next(v for v in earlier if api in tables[v])
        status, note, how = tables[source][api]
        if status not in ("supported", "partial"):
            continue
        carried[api] = [status, note, how]  # the note is the restriction (ASC103): the log says where it is from
        count(decisions, version, f"not in this table, carried from the latest earlier table, {source} ({status})",
              api)
    return carried


def count(decisions: Counter, version: str, what: str, api: str) -> None:
    """Record one decision of a kind for the log (the count per kind and the APIs it touched)."""
    decisions[(version, what)] += 1
    decisions[(version, what, api)] += 1


def build_version(version: str, tables: dict, listed_anywhere: set[str], wheel_entry, aten, manual, trace,
                  decisions: Counter, lower_precision: set) -> dict:
    """The rule data of one version; counts each decision kind into ``decisions``."""
    table = tables[version]
    apis: dict[str, list[str]] = {}
    sources_used = list(TABLES[version]) + [TRACE_JSON, AUTOCAST]
    wheel = kernels = None
    if wheel_entry:
        rel, wheel = wheel_entry
        sources_used += [rel, ATEN_TSV]
        kernels = kernel_ops(wheel) | manual
        existing = set(trace["apis"]) | set(trace["kernel_free"]) | set(trace["untraced"])
        apis.update(aten_rows(version, kernels, aten, existing))
    carried = carried_rows(version, tables, trace, set(apis), decisions)
    for api in sorted(listed_anywhere - set(table) - set(carried) - set(apis)):
        if absent_from_torch(version, api, trace):
            count(decisions, version, "not listed, and torch 2.13 has no such name: no row", api)
            continue
        apis[api] = ["unknown", f"not in the torch_npu {version} support list", "not_listed"]
    later = [v for v in TABLES if version_key(v) > version_key(version)]
    official: dict[str, list[str]] = {}
    table = dict(table)
    table.update(carried)
    for api in sorted(set(table) - set(trace["kernel_free"])):
        row, parity, what = broad_dtypes(table[api])
        if parity:  # the evidence below starts from the relaxed row
            table[api], official[api] = row, parity
            count(decisions, version, what, api)
    for api in sorted(set(table) | set(trace["apis"]) | set(trace["kernel_free"])):
        listed_as = api if api in listed_anywhere else trace["defined_as"].get(api, api)  # re-exports
        later_ok = any(tables[v].get(listed_as, ("?",))[0] in ("supported", "partial") for v in later)
        row, parity, what = decide(version, api, table.get(listed_as), trace, kernels, aten, later_ok)
        if row is None:
            continue
        apis[api] = row
        if parity:
            official[api] = parity
        if what:
            count(decisions, version, what, api)
    return {
        "meta": meta(version, sources_used, wheel),
        "apis": apis,
        "official": official,
        "restrictions": restrictions(apis, official, trace, lower_precision, decisions, version),
        "npu_all": wheel["npu_all"] if wheel else [],
        "transfer_to_npu": wheel["transfer_to_npu"] if wheel else {},
        "contrib": wheel["contrib"] if wheel else {},
        "aten_npu_ops": sorted({op.split(".")[0] for op in kernel_ops(wheel)}) if wheel else [],
    }


LOGGED_IN_FULL = ("disputed", "carried")  # kinds of decision whose every API the log names: the tables overruled
# or filled in


def decision_log(versions: list[str], decisions: Counter) -> list[str]:
    """Per version: how many APIs each kind of decision/disagreement touched, with examples (every API for
    the kinds of ``LOGGED_IN_FULL``)."""
    log = []
    for version in versions:
        kinds = sorted({key[1] for key in decisions if len(key) == 2 and key[0] == version})
        for kind in kinds:
            names = sorted(key[2] for key in decisions if len(key) == 3 and key[:2] == (version, kind))
            if any(word in kind for word in LOGGED_IN_FULL):
                log.append(f"{version}: {kind}: {len(names)}: {', '.join(names)}")
            else:
                log.append(f"{version}: {kind}: {len(names)}, e.g. {', '.join(names[:8])}")
    return log


def build_index(versions: list[str]) -> dict:
    """index.json: the versions, the default and every X.Y / X.Y.0 / X.Y.Z spelling."""
    aliases = {}
    for version in versions:
        major_minor = ".".join(version.split(".")[:2])
        for spelling in (major_minor, major_minor + ".0", version):
            aliases.setdefault(spelling, version)
    return {"versions": versions, "default": DEFAULT_VERSION, "aliases": aliases}


def dump(obj: dict) -> str:
    """Compact, sorted, deterministic JSON text."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False) + "\n"


def build(sources: Path, out: Path) -> list[str]:
    """Write every version file and index.json into out; return the log lines (rules_data/build_log.txt)."""
    log: list[str] = []
    aten = {row["aten_op"]: row for row in read_tsv(sources / ATEN_TSV)}
    tables = {v: merge_tables(v, [read_table(sources, r, log) for r in rels], log) for v, rels in TABLES.items()}
    private = {op.split(".")[0] for op in aten if op.startswith("_")}
    log.append(f"{ATEN_TSV}: skipped {len(private)} private (_x) base names for the name mapping")
    listed_anywhere = set().union(*tables.values())
    wheels = load_wheels(sources)
    trace = json.loads((sources / TRACE_JSON).read_text(encoding="utf-8"))
    log.append(f"{TRACE_JSON}: {trace['meta']['counts']}")
    unclassified = sorted({op for e in trace["apis"].values() for op in traced_ops(e) if op not in aten})
    log.append(f"{TRACE_JSON}: {len(unclassified)} traced ops torch 2.13's table does not classify (no evidence): "
               + ", ".join(unclassified))
    if "2.13.0" not in wheels:
        raise SystemExit(f"no torch_npu 2.13.0 wheel facts in {sources / 'wheels'} (the TSV's own version)")
    manual = manual_kernels(aten, kernel_ops(wheels["2.13.0"][1]))
    autocast = json.loads((sources / AUTOCAST).read_text(encoding="utf-8"))["policy_to_ops"]
    lower_precision = {op.split(".")[0] for op in autocast["lower_precision_fp"]}
    versions = sorted(TABLES, key=version_key)
    decisions: Counter = Counter()
    out.mkdir(parents=True, exist_ok=True)
    built = {}
    for version in versions:
        if version not in NO_WHEEL and version not in wheels:
            raise SystemExit(f"no wheel facts for torch_npu {version} in {sources / 'wheels'}")
        built[version] = build_version(version, tables, listed_anywhere, wheels.get(version), aten, manual, trace,
                                       decisions, lower_precision)
    respell_arguments(built, decisions)
    for version, data in built.items():
        (out / f"torch_npu-{version}.json").write_text(dump(data), encoding="utf-8")
        counts = Counter(status for status, _, _ in data["apis"].values())
        log.append(f"torch_npu-{version}.json: {len(data['apis'])} APIs {dict(sorted(counts.items()))}, "
                   f"{len(data['official'])} official rows the evidence overrides")
    log += decision_log(versions, decisions)
    (out / "index.json").write_text(dump(build_index(versions)), encoding="utf-8")
    return log


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=Path, default=SOURCES, help="facts directory (rules_data/sources)")
    parser.add_argument("--out", type=Path, default=OUT, help="output directory (src/flake8_ascend/data)")
    parser.add_argument("--log", default=str(LOG), help="log file (rules_data/build_log.txt; '' for none)")
    parser.add_argument("--quiet", action="store_true", help="do not print the log")
    args = parser.parse_args(argv)
    log = build(args.sources, args.out)
    if args.log:
        Path(args.log).write_text("\n".join(log) + "\n", encoding="utf-8")
    if not args.quiet:
        print("\n".join(log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
