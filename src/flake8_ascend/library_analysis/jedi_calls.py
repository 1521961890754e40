"""Late edges from jedi, for the few calls plain resolution leaves open.

A call ``obj.method(...)`` whose receiver the summaries could not type is only
worth a jedi ``goto`` when it could change the result: some function or
class that reaches a root cause has that short name, and the caller does not
already reach everything such functions reach.  Sites are tried in file order,
one ``jedi.Script`` per file (trying rarer names first found fewer edges in
the same time on transformers), until none is left or the budget (sites and
seconds) is spent; each new edge propagates at once, which may make more sites
worth trying.

A ``goto`` costs 8-15 ms on small code but can take a minute and a gigabyte on
a large library, so each is cut off after ``PER_CALL_SECONDS`` by a
``SIGALRM`` timer (repeating, since jedi swallows ordinary exceptions and
``__del__`` ignores them); where no timer can be set (outside the main
thread) the step is left out.  ``-env`` folders are added to jedi's search
path so it can follow the library's own dependencies.  jedi's parse cache
(11-20 MB, normally under ``$HOME/.cache/jedi``) goes to a temporary folder in
``scratch`` (the run's hidden output folder), removed when the step ends.
"""
from __future__ import annotations

import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..files import relative
from .callgraph import Symbols
from .impact import Impact

MAX_SITES = 300
MAX_SECONDS = 20.0
PER_CALL_SECONDS = 2.0
FIRST_CALL_SECONDS = 10.0  # the first goto also loads jedi's view of the environment (typeshed, site-packages)


class _TimeUp(BaseException):
    """Not an Exception: jedi catches those internally, and this must get through."""


@dataclass
class JediStats:
    candidates: int = 0  # open sites whose method name matters
    tried: int = 0
    edges: int = 0
    failures: int = 0
    timeouts: int = 0
    seconds: float = 0.0
    capped: bool = False
    left_out: str = ""  # why the step did not run


def can_limit_time() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _disarm() -> None:
    while True:  # a tick may land while disarming
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        except _TimeUp:
            continue


@contextmanager
def _private_cache(scratch: Optional[Path]):
    """Point jedi's (and so parso's) cache at a temporary folder in ``scratch`` for the step."""
    import jedi

    previous = jedi.settings.cache_directory
    with tempfile.TemporaryDirectory(prefix=".jedi-cache.", dir=scratch) as cache:
        jedi.settings.cache_directory = cache
        try:
            yield
        finally:
            jedi.settings.cache_directory = previous


@contextmanager
def _alarm_handler():
    """Install the SIGALRM handler for the whole step; silence the ticks ``__del__`` methods swallow."""
    def expire(signum, frame):
        raise _TimeUp()

    def unraisable(info):
        if not isinstance(info.exc_value, _TimeUp):
            previous_hook(info)

    previous_hook = sys.unraisablehook
    previous = signal.signal(signal.SIGALRM, expire)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        _disarm()
        signal.signal(signal.SIGALRM, previous)
        sys.unraisablehook = previous_hook


def _open_sites(symbols: Symbols) -> List[Tuple[str, int, str, int, int]]:
    """(file, caller node, called name, line, column) of every call plain resolution left open."""
    sites = list(symbols.open_calls)
    for summary in symbols.modules.values():
        for key, attr, line, col in summary.sites:
            sites.append((summary.rel, symbols.node_of(summary.module, key), attr, line, col))
    sites.sort()
    return sites


class _Resolver:
    def __init__(self, symbols: Symbols, impact: Impact, root: Path, env_paths: Sequence[Path],
                 stats: JediStats) -> None:
        import jedi  # imported here: only this step needs it

        self.jedi = jedi
        self.symbols, self.impact, self.root, self.stats = symbols, impact, root, stats
        nodes = symbols.graph.nodes
        self.defined: Dict[Tuple[str, int], int] = {(n.file, n.line): i for i, n in enumerate(nodes)
                                                    if n.kind in ("function", "class")}
        self.project = jedi.Project(str(root), added_sys_path=[str(p) for p in env_paths])
        self.environment = self.project.get_environment()
        self.sites = _open_sites(symbols)
        self.tried: set = set()
        self.script, self.script_file = None, None

    def _reset(self) -> None:
        """Drop the current script and jedi's helper process, whose pipe an interruption may
        have left half-read; the next goto starts a new one."""
        self.script_file = None
        self.environment = self.jedi.create_environment(self.environment.executable, safe=False)

    def reach(self) -> Dict[str, int]:
        """short name -> union of the root causes that functions and classes of that name reach."""
        found: Dict[str, int] = {}
        masks = self.impact.masks
        for index, node in enumerate(self.symbols.graph.nodes):
            if masks[index] and node.kind in ("function", "class"):
                found[node.short] = found.get(node.short, 0) | masks[index]
        return found

    def run(self, max_sites: int, deadline: float) -> None:
        masks, stats = self.impact.masks, self.stats
        while True:
            reach = self.reach()
            batch = [i for i, site in enumerate(self.sites)
                     if i not in self.tried and site[2] in reach and reach[site[2]] & ~masks[site[1]]]
            stats.candidates = max(stats.candidates, len(self.tried) + len(batch))
            if not batch:
                return
            for index in batch:
                rel, caller, attr, line, col = self.sites[index]
                if not reach[attr] & ~masks[caller]:  # an edge found meanwhile brought it all
                    continue
                left = deadline - time.monotonic()
                if stats.tried >= max_sites or left <= 0:
                    stats.capped = True
                    return
                self.tried.add(index)
                stats.tried += 1
                per_call = FIRST_CALL_SECONDS if stats.tried == 1 else PER_CALL_SECONDS
                self.visit(rel, caller, line, col, min(per_call, left))

    def visit(self, rel: str, caller: int, line: int, col: int, seconds: float) -> None:
        stats = self.stats
        try:
            signal.setitimer(signal.ITIMER_REAL, seconds, 0.1)
            if rel != self.script_file:
                self.script = self.jedi.Script(path=str(self.root / rel), project=self.project,
                                               environment=self.environment)
                self.script_file = rel
            found = self.script.goto(line, col, follow_imports=True)
            _disarm()
        except _TimeUp:
            _disarm()
            stats.timeouts += 1
            self._reset()
            return
        except Exception as error:  # jedi fails on some code; the site stays open
            _disarm()
            stats.failures += 1
            if isinstance(error, self.jedi.InternalError):
                self._reset()
            return
        for definition in found:
            if definition.module_path is None or definition.line is None:
                continue
            target = (relative(definition.module_path, self.root), definition.line)
            if target in self.defined and self.impact.add_edge(caller, self.defined[target]):
                stats.edges += 1


def add_jedi_edges(symbols: Symbols, impact: Impact, root: Path, env_paths: Sequence[Path] = (),
                   max_sites: int = MAX_SITES, max_seconds: float = MAX_SECONDS,
                   scratch: Optional[Path] = None) -> JediStats:
    """Try the open call sites that matter with jedi, within the budget; returns what happened."""
    stats = JediStats()
    if max_sites <= 0 or max_seconds <= 0:
        stats.left_out = "no budget"
        return stats
    if not can_limit_time():
        stats.left_out = "no time limit can be set outside the main thread"
        return stats
    started = time.monotonic()
    with _private_cache(scratch), _alarm_handler():
        try:
            _Resolver(symbols, impact, root, env_paths, stats).run(max_sites, started + max_seconds)
        except _TimeUp:  # a tick that landed outside a goto: the budget is spent
            stats.capped = True
    stats.seconds = time.monotonic() - started
    return stats
