"""Which functions each root cause reaches, and by which call chain.

A root cause is one torch API or custom operator in one category (``RootCause``);
the places that use it are its sites.  Every node holds a bit set of the root
causes it reaches; a worklist pushes a node's bits to its callers whenever
they grow, so each edge is crossed once per change, cycles included (bits only
grow).  Edges found later (by jedi) are added with ``add_edge``, which
propagates only what is new.  The chain a row shows is a shortest one, found
by a breadth-first search from the root cause's sites over callers that hold
its bit.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from .callgraph import Graph


@dataclass
class RootCause:
    category: str  # summary.UNSUPPORTED / UNKNOWN / MIGRATION / CUDA_OP
    api: str  # the torch API, CUDA API, package or operator name
    tips: str = ""
    blocking: bool = True  # makes the functions reaching it unsupported (full_unsupported_results.csv)
    sites: List[Tuple[int, int]] = field(default_factory=list)  # (node, line), sorted


class Impact:
    def __init__(self, graph: Graph, causes: List[RootCause]) -> None:
        self.graph = graph
        self.causes = causes
        self.masks: List[int] = [0] * len(graph.nodes)
        for index, cause in enumerate(causes):
            bit = 1 << index
            for node, _ in cause.sites:
                self.masks[node] |= bit
        self.blocking = sum(1 << i for i, c in enumerate(causes) if c.blocking)
        self._paths: Dict[int, Dict[int, int]] = {}
        self._propagate({node for cause in causes for node, _ in cause.sites})

    def _propagate(self, seeds: Iterable[int]) -> None:
        masks, callers = self.masks, self.graph.callers
        work = deque(seeds)
        while work:
            node = work.popleft()
            bits = masks[node]
            for caller in callers[node]:
                if bits & ~masks[caller]:
                    masks[caller] |= bits
                    work.append(caller)

    def add_edge(self, caller: int, callee: int) -> bool:
        """Add a call edge found late; propagates what it brings. True when the edge is new."""
        if not self.graph.add_edge(caller, callee):
            return False
        self._paths.clear()
        if self.masks[callee] & ~self.masks[caller]:
            self.masks[caller] |= self.masks[callee]
            self._propagate([caller])
        return True

    def affected(self, index: int) -> List[int]:
        """The nodes root cause ``index`` reaches (its sites included)."""
        return list(self._next_hops(index))

    def _next_hops(self, index: int) -> Dict[int, int]:
        """node -> the callee one step closer to the root cause (-1 at a site)."""
        if index in self._paths:
            return self._paths[index]
        bit = 1 << index
        masks, callers = self.masks, self.graph.callers
        hops: Dict[int, int] = {}
        work = deque()
        for node, _ in self.causes[index].sites:
            if node not in hops:
                hops[node] = -1
                work.append(node)
        while work:
            node = work.popleft()
            for caller in callers[node]:
                if caller not in hops and masks[caller] & bit:
                    hops[caller] = node
                    work.append(caller)
        self._paths[index] = hops
        return hops

    def chain(self, node: int, index: int) -> Tuple[List[int], Tuple[int, int]]:
        """(nodes from ``node`` to the one using the root cause, that (node, line) site)."""
        hops = self._next_hops(index)
        path = [node]
        while hops[path[-1]] != -1:
            path.append(hops[path[-1]])
        end = path[-1]
        line = min(line for site, line in self.causes[index].sites if site == end)
        return path, (end, line)

    def causes_of(self, node: int, mask: Optional[int] = None) -> List[int]:
        """Indexes of the root causes ``node`` reaches (within ``mask``)."""
        bits = self.masks[node] if mask is None else self.masks[node] & mask
        found = []
        while bits:
            low = bits & -bits
            found.append(low.bit_length() - 1)
            bits ^= low
        return found
