"""Run a third_party analysis: summaries in a process pool, then graph, propagation and jedi.

Each file is read and parsed once in a worker, which returns a compact
``FileSummary``; the parent builds the graph from the summaries only, so
memory stays bounded by the summaries, not by ASTs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..config import Config
from ..data import load_version
from ..files import NOT_REGULAR, SourceError, collect
from ..pools import process_pool
from ..sources import deep, parse, read_source
from . import cpp_ops
from .callgraph import Symbols
from .impact import Impact, RootCause
from .jedi_calls import MAX_SECONDS, JediStats, add_jedi_edges
from .layout import ModuleFile, module_files
from .summary import CUDA_OP, UNKNOWN, FileSummary, OpTable, summarise

PARALLEL_MIN_FILES = 50

_config: Optional[Config] = None
_ops: Optional[OpTable] = None


def _init_worker(config: Config, ops: OpTable) -> None:
    global _config, _ops
    _config, _ops = config, ops


def _summarise_file(task: ModuleFile) -> FileSummary:
    try:
        source = read_source(task.path)
        tree = parse(source, str(task.path))
    except SourceError as error:
        return FileSummary(task.rel, task.module, task.is_package, error=str(error))

    def summarise_afresh() -> FileSummary:  # a retry by ``deep`` starts from an empty summary
        return summarise(tree, source.lines, FileSummary(task.rel, task.module, task.is_package), _config, _ops)

    try:
        return deep(summarise_afresh)
    except RecursionError:
        return FileSummary(task.rel, task.module, task.is_package, error="nested too deeply to analyse")


def summarise_files(tasks: Sequence[ModuleFile], config: Config, ops: OpTable,
                    jobs: Optional[int] = None) -> Iterator[FileSummary]:
    """The summaries of ``tasks`` in order, from a process pool for large inputs."""
    workers = jobs or os.cpu_count() or 1
    if len(tasks) < PARALLEL_MIN_FILES or workers == 1:
        _init_worker(config, ops)
        yield from map(_summarise_file, tasks)
        return
    load_version(config.version)  # loaded before forking, shared by the workers
    chunk = max(1, min(16, len(tasks) // (workers * 8)))
    with process_pool(workers, _init_worker, (config, ops)) as pool:
        yield from pool.map(_summarise_file, tasks, chunksize=chunk)


@dataclass
class ThirdPartyAnalysis:
    """Everything the reports are written from."""

    root: Path
    version: str
    symbols: Symbols
    impact: Impact
    cpp: cpp_ops.CppOps
    files: int
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # (relative path, why)
    jedi: Optional[JediStats] = None
    names: Dict[int, set] = field(default_factory=dict)  # node -> extra public names

    def names_of(self, node: int) -> List[str]:
        return sorted({self.symbols.graph.nodes[node].name} | self.names.get(node, set()))


def _root_causes(symbols: Symbols, cpp: cpp_ops.CppOps) -> List[RootCause]:
    found: Dict[Tuple[str, str, bool], RootCause] = {}
    tips: Dict[Tuple[str, str, bool], Tuple[str, int, str]] = {}
    for summary in symbols.modules.values():
        for key, category, api, line, tip, optional in summary.causes:
            node = symbols.node_of(summary.module, key)
            cause = found.setdefault((category, api, optional), RootCause(category, api))
            cause.sites.append((node, line))
            first = (summary.rel, line, tip)
            if (category, api, optional) not in tips or first < tips[(category, api, optional)]:
                tips[(category, api, optional)] = first
    for key, cause in found.items():
        cause.sites.sort()
        cause.tips = tips[key][2]
        if cause.category == UNKNOWN or key[2]:
            cause.blocking = False
        elif cause.category == CUDA_OP:
            op = cpp.pybind.get(cause.api) or cpp.library.get(cause.api)
            if op is None:
                cause.tips = "loaded from a compiled extension whose C++ sources are not in the tree: check its kernels"
            else:
                cause.tips = op.tips
                cause.blocking = op.unsupported
    return [found[key] for key in sorted(found)]


def analyse(root: Path, config: Config, files: Optional[Sequence[Path]] = None, env_paths: Sequence[Path] = (),
            jobs: Optional[int] = None, log: Callable[[str], None] = lambda line: None,
            advance: Callable[[], None] = lambda: None, jedi_seconds: float = MAX_SECONDS,
            scan_cpp: bool = True, scratch: Optional[Path] = None) -> ThirdPartyAnalysis:
    """Analyse the library under ``root`` (its ``.py`` files, or ``files``) for torch_npu ``config.version``.

    ``log`` receives progress lines for pytorch_analysis.txt; ``advance`` is called once per file;
    ``jedi_seconds`` is the time jedi may spend on open calls (0: none); files that could not be
    analysed are listed in the result's ``skipped``; jedi's cache lives in a temporary folder in ``scratch``
    (default: the system's temporary folder) while it runs.
    """
    root = Path(root).resolve()
    if files is None:
        found = collect(root)
        files, skipped = found.files, list(found.skipped)
    else:
        skipped = []
    cpp = cpp_ops.scan(root) if scan_cpp else cpp_ops.CppOps()
    skipped.extend(cpp.skipped)
    log(f"C++ sources: {cpp.files} files, {len(cpp.pybind)} pybind operators, {len(cpp.library)} TORCH_LIBRARY "
        f"operators, {sum(1 for op in cpp.all_ops() if op.npu_implementation)} with an NPU implementation")
    tasks = module_files(root, files)
    ops = OpTable(frozenset(cpp.pybind), frozenset(cpp.library), frozenset(cpp.modules), cpp.extension_name,
                  frozenset(t.module for t in tasks), frozenset(t.module.split(".")[0] for t in tasks))
    summaries = []
    for summary in summarise_files(tasks, config, ops, jobs):
        advance()
        if summary.error:
            skipped.append((summary.rel, summary.error))
            continue
        log(f"{summary.rel} ({summary.module}): {len(summary.defs)} functions, {len(summary.calls)} calls, "
            f"{len(summary.causes)} root-cause uses")
        summaries.append(summary)
    symbols = Symbols(summaries)
    skipped.extend((rel, "another file already provides its module name") for rel in symbols.duplicates)
    graph = symbols.link()
    log(f"call graph: {len(graph.nodes)} nodes, {graph.edges} edges, {len(symbols.classes)} classes")
    impact = Impact(graph, _root_causes(symbols, cpp))
    result = ThirdPartyAnalysis(root, config.version, symbols, impact, cpp, len(files), skipped)
    if any(why == NOT_REGULAR for _, why in skipped):  # jedi would read them when it follows an import
        stats = JediStats(left_out="the tree holds .py files that are FIFOs, sockets or devices")
    else:
        stats = add_jedi_edges(symbols, impact, root, env_paths, max_seconds=jedi_seconds, scratch=scratch)
    if stats.left_out:
        log(f"jedi: left out ({stats.left_out})")
    else:
        log(f"jedi: {stats.tried} of {stats.candidates} open calls tried in {stats.seconds:.1f} s, "
            f"{stats.edges} edges added, {stats.timeouts} timed out, {stats.failures} failed"
            + (" (budget reached)" if stats.capped else ""))
    result.jedi = stats
    result.names = symbols.public_names()
    return result
