"""The library's call graph, built in the parent process from the file summaries.

Nodes are modules (their import-time code), classes, functions, methods and
the ``apply`` of every ``torch.autograd.Function`` subclass (which runs its
``forward`` and ``backward``).  Module-level aliases (``roi_align =
RoIAlignFunction.apply``) and package re-exports are further names of nodes.
Edges come from the summaries' call references, resolved across modules:
imports and relative imports, package ``__init__`` re-exports and star
imports, ``self.m()`` and ``super().m()`` through the class hierarchy, and
calls on objects whose class is known (``self.layer = Block();
self.layer(x)`` runs ``Block.forward``).  ``Class(...)`` calls the class node,
which stands for using the class: it calls its own ``__init__``, ``forward``
and ``__call__`` and its library base classes, the way constructing a torch
class the NPU lacks is already a use of it.

Only callers are stored (reverse edges): propagation runs from root causes to
the functions that reach them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .summary import FileSummary, Ref

AUTOGRAD_FUNCTIONS = frozenset({
    "torch.autograd.Function", "torch.autograd.function.Function", "torch.autograd.function.InplaceFunction",
})
_MAX_DEPTH = 24  # alias chains followed while resolving one name

Target = Tuple[str, object]  # ("node", id) | ("class", name) | ("module", name)


@dataclass
class Node:
    name: str  # canonical dotted name
    file: str  # relative path
    line: int  # the ``def`` line (1 for a module)
    kind: str  # module | class | function | apply
    cls: str = ""  # canonical name of the class a method (or nested class) belongs to

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1]


@dataclass
class ClassInfo:
    name: str
    module: str
    path: str  # inside the module
    bases: List[str]
    attrs: Dict[str, List[Ref]]
    parent: str = ""  # canonical name of the enclosing class, for a nested class


@dataclass
class Graph:
    nodes: List[Node] = field(default_factory=list)
    callers: List[Set[int]] = field(default_factory=list)
    edges: int = 0

    def add_node(self, node: Node) -> int:
        self.nodes.append(node)
        self.callers.append(set())
        return len(self.nodes) - 1

    def add_edge(self, caller: int, callee: int) -> bool:
        """True when the edge is new."""
        if caller == callee or caller in self.callers[callee]:
            return False
        self.callers[callee].add(caller)
        self.edges += 1
        return True


class Symbols:
    """Name resolution over every module of the library."""

    def __init__(self, summaries: Iterable[FileSummary]) -> None:
        self.graph = Graph()
        self.modules: Dict[str, FileSummary] = {}
        self.module_nodes: Dict[str, int] = {}
        self.defs: Dict[str, int] = {}  # canonical name -> node (functions, methods, apply)
        self.classes: Dict[str, ClassInfo] = {}
        self.class_nodes: Dict[str, int] = {}
        self.duplicates: List[str] = []  # files whose module name an earlier file already took
        self.open_calls: List[Tuple[str, int, str, int, int]] = []  # (file, caller, name, line, col) left unresolved
        self._memo: Dict[str, Optional[Target]] = {}
        self._ref_memo: Dict[Tuple[str, Ref], Optional[Target]] = {}
        self._stars: Dict[str, Dict[str, str]] = {}
        self._exports: Dict[str, frozenset] = {}
        self._mro: Dict[str, List[str]] = {}
        self._external: Dict[str, Set[str]] = {}
        for summary in summaries:
            if summary.module in self.modules:
                self.duplicates.append(summary.rel)
                continue
            self.modules[summary.module] = summary
            self._declare(summary)
        for name in list(self.classes):
            self._declare_apply(name)

    # -- declarations ---------------------------------------------------------------------
    def _declare(self, summary: FileSummary) -> None:
        module = summary.module
        self.module_nodes[module] = self.graph.add_node(Node(module, summary.rel, 1, "module"))
        for path, (line, bases) in summary.classes.items():
            parent = path.rpartition(".")[0]
            name = f"{module}.{path}"
            self.classes[name] = ClassInfo(name, module, path, bases, summary.class_attrs.get(path, {}),
                                           f"{module}.{parent}" if parent else "")
            self.class_nodes[name] = self.graph.add_node(
                Node(name, summary.rel, line, "class", f"{module}.{parent}" if parent else ""))
        for key, (line, cls) in summary.defs.items():
            name = f"{module}.{key}"
            self.defs[name] = self.graph.add_node(
                Node(name, summary.rel, line, "function", f"{module}.{cls}" if cls else ""))

    def _declare_apply(self, cls: str) -> None:
        self.mro(cls)
        name = f"{cls}.apply"
        if self._external[cls] & AUTOGRAD_FUNCTIONS and name not in self.defs:
            info = self.classes[cls]
            summary = self.modules[info.module]
            line = summary.classes[info.path][0]
            self.defs[name] = self.graph.add_node(Node(name, summary.rel, line, "apply", cls))

    # -- resolution -----------------------------------------------------------------------
    def resolve(self, dotted: str, depth: int = 0) -> Optional[Target]:
        """What an absolute dotted name denotes in the library, following re-exports."""
        if dotted in self._memo:
            return self._memo[dotted]
        self._memo[dotted] = None  # a cycle of re-exports resolves to nothing
        result = self._resolve(dotted, depth)
        self._memo[dotted] = result
        return result

    def _resolve(self, dotted: str, depth: int) -> Optional[Target]:
        if depth > _MAX_DEPTH:
            return None
        if dotted in self.defs:
            return ("node", self.defs[dotted])
        if dotted in self.classes:
            return ("class", dotted)
        head, _, last = dotted.rpartition(".")
        if head in self.modules:
            return self._in_module(head, last, depth)
        owner = self.resolve(head, depth + 1) if head else None
        if owner is not None:
            kind, value = owner
            if kind == "class":
                return self.member(value, last)
            if kind == "module":
                return self._in_module(value, last, depth)
        return ("module", dotted) if dotted in self.modules else None

    def _in_module(self, module: str, name: str, depth: int) -> Optional[Target]:
        full = f"{module}.{name}"
        if full in self.defs:
            return ("node", self.defs[full])
        if full in self.classes:
            return ("class", full)
        summary = self.modules[module]
        if name in summary.aliases:
            return self.resolve_ref(summary.aliases[name], module)
        if name in summary.imports:
            found = self.resolve(summary.imports[name], depth + 1)
            if found is not None:
                return found
        source = self._star_index(module).get(name)
        if source is not None:
            found = self.resolve(f"{source}.{name}", depth + 1)
            if found is not None:
                return found
        return ("module", full) if full in self.modules else None

    def _star_index(self, module: str) -> Dict[str, str]:
        """name -> the module a ``from x import *`` of ``module`` takes it from (the first star wins)."""
        if module not in self._stars:
            index: Dict[str, str] = {}
            for star in self.modules[module].stars:
                for name in self._exported(star):
                    index.setdefault(name, star)
            self._stars[module] = index
        return self._stars[module]

    def mro(self, cls: str) -> List[str]:
        """The library classes of ``cls``'s hierarchy, nearest first (depth-first, de-duplicated)."""
        if cls in self._mro:
            return self._mro[cls]
        self._mro[cls] = [cls]
        self._external[cls] = set()
        order, external = [cls], set()
        for base in self.classes[cls].bases:
            found = self.resolve(base)
            if found is not None and found[0] == "class":
                for ancestor in self.mro(found[1]):
                    if ancestor not in order:
                        order.append(ancestor)
                external |= self._external.get(found[1], set())
            else:
                external.add(base)
        self._mro[cls], self._external[cls] = order, external
        return order

    def member(self, cls: str, attr: str, skip_own: bool = False) -> Optional[Target]:
        """``cls.attr`` looked up through the hierarchy."""
        for ancestor in self.mro(cls)[1 if skip_own else 0:]:
            full = f"{ancestor}.{attr}"
            if full in self.defs:
                return ("node", self.defs[full])
            if full in self.classes:
                return ("class", full)
        return None

    def _called(self, cls: str) -> Optional[Target]:
        """What calling an instance runs: ``__call__``, else ``forward`` (torch.nn.Module)."""
        return self.member(cls, "__call__") or self.member(cls, "forward")

    def resolve_ref(self, ref: Ref, module: str) -> Optional[Target]:
        """What a summary reference made in ``module`` denotes (memoised; a cycle such as
        ``self.x = self.x.step()`` resolves to nothing)."""
        key = (module, ref)
        if key in self._ref_memo:
            return self._ref_memo[key]
        self._ref_memo[key] = None
        found = self._resolve_ref(ref, module)
        self._ref_memo[key] = found
        return found

    def _resolve_ref(self, ref: Ref, module: str) -> Optional[Target]:
        kind = ref[0]
        if kind == "q":
            return self.resolve(ref[1])
        if kind == "star":
            source = self._star_index(module).get(ref[1].split(".", 1)[0])
            return self.resolve(f"{source}.{ref[1]}") if source is not None else None
        if kind in ("self", "super"):
            cls = f"{module}.{ref[1]}"
            if cls not in self.classes:
                return None
            found = self.member(cls, ref[2], skip_own=kind == "super")
            if found is None and kind == "self":
                for built in self.attribute_types(cls, ref[2]):
                    found = found or self._instance_member(built, "__call__")
            return found
        if kind == "selfattr":
            cls = f"{module}.{ref[1]}"
            if cls not in self.classes:
                return None
            for built in self.attribute_types(cls, ref[2]):
                found = self._instance_member(built, ref[3])
                if found is not None:
                    return found
            return None
        if kind == "inst":
            return self._instance_member((module, ref[1]), ref[2])
        return None

    def attribute_types(self, cls: str, attr: str) -> List[Tuple[str, Ref]]:
        """(module, ref) of what ``self.attr`` was built by, in ``cls`` and its ancestors."""
        found = []
        for ancestor in self.mro(cls):
            info = self.classes[ancestor]
            found.extend((info.module, ref) for ref in info.attrs.get(attr, ()))
        return found

    def _instance_member(self, built: Tuple[str, Ref], method: str) -> Optional[Target]:
        module, ref = built
        made = self.resolve_ref(ref, module)
        if made is None or made[0] != "class":
            return None
        return self._called(made[1]) if method == "__call__" else self.member(made[1], method)

    def call_targets(self, found: Optional[Target]) -> List[int]:
        """The nodes a call of what ``found`` denotes runs (a class: its class node)."""
        if found is None:
            return []
        kind, value = found
        if kind == "node":
            return [value]
        if kind == "class":
            return [self.class_nodes[value]]
        return []

    # -- edges ----------------------------------------------------------------------------
    def link(self) -> Graph:
        """Add every call edge the summaries allow; returns the graph."""
        graph = self.graph
        for summary in self.modules.values():
            module = summary.module
            for key, ref, line, col in summary.calls:
                caller = self.node_of(module, key)
                callees = self.call_targets(self.resolve_ref(ref, module))
                for callee in callees:
                    graph.add_edge(caller, callee)
                if not callees:
                    name = ref[-1] if ref[0] != "q" else ref[1]
                    self.open_calls.append((summary.rel, caller, name.rsplit(".", 1)[-1], line, col))
        for cls, node_id in self.class_nodes.items():
            for method in ("__init__", "__call__", "forward"):
                if f"{cls}.{method}" in self.defs:
                    graph.add_edge(node_id, self.defs[f"{cls}.{method}"])
            for base in self.classes[cls].bases:
                found = self.resolve(base)
                if found is not None and found[0] == "class":
                    graph.add_edge(node_id, self.class_nodes[found[1]])
        for node_id, node in enumerate(graph.nodes):
            if node.kind == "apply":
                for method in ("forward", "backward"):
                    for callee in self.call_targets(self.member(node.cls, method)):
                        graph.add_edge(node_id, callee)
        return graph

    def node_of(self, module: str, key: str) -> int:
        if not key:
            return self.module_nodes[module]
        full = f"{module}.{key}"
        return self.defs[full] if full in self.defs else self.class_nodes[full]

    # -- the names a node is importable by ------------------------------------------------
    def public_names(self) -> Dict[int, Set[str]]:
        """Extra names of nodes: aliases and package re-exports, and for a method the same through
        every name of its class."""
        node_aliases: Dict[int, Set[str]] = {}
        class_aliases: Dict[str, Set[str]] = {}
        for summary in self.modules.values():
            names = set(summary.aliases)
            if summary.is_package:
                names |= {n for n in summary.names if not n.startswith("_")} | set(summary.all_names or ())
                names.update(self._star_index(summary.module))
            for name in sorted(names):
                full = f"{summary.module}.{name}"
                found = self.resolve(full)
                if found is None:
                    continue
                kind, value = found
                if kind == "node" and self.graph.nodes[value].name != full:
                    node_aliases.setdefault(value, set()).add(full)
                elif kind == "class" and value != full:
                    class_aliases.setdefault(value, set()).add(full)
        names_of_class: Dict[str, Set[str]] = {}

        def class_names(cls: str) -> Set[str]:
            if cls not in names_of_class:
                names_of_class[cls] = {cls}
                found = {cls} | class_aliases.get(cls, set())
                parent = self.classes[cls].parent
                if parent in self.classes:
                    last = cls.rsplit(".", 1)[-1]
                    found |= {f"{p}.{last}" for p in class_names(parent)}
                names_of_class[cls] = found
            return names_of_class[cls]

        for node_id, node in enumerate(self.graph.nodes):
            if node.kind == "class":
                extra = class_names(node.name) - {node.name}
            elif node.cls in self.classes:
                extra = {f"{c}.{node.short}" for c in class_names(node.cls)} - {node.name}
            else:
                continue
            if extra:
                node_aliases.setdefault(node_id, set()).update(extra)
        return node_aliases

    def _exported(self, module: str) -> frozenset:
        """The names ``from module import *`` binds: its ``__all__``, else its public names."""
        if module not in self.modules:
            return frozenset()
        if module not in self._exports:
            self._exports[module] = frozenset()  # an import cycle exports nothing more
            summary = self.modules[module]
            if summary.all_names is not None:
                names = set(summary.all_names)
            else:
                names = {n for n in summary.names if not n.startswith("_")}
                names.update(n for n in self._star_index(module) if not n.startswith("_"))
            self._exports[module] = frozenset(names)
        return self._exports[module]
