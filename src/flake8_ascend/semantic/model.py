"""The semantic model of one file: built once, asked by every rule, independent of the engine's walk.

``SemanticModel(tree, lines)`` holds what a rule may want to know about any node of the file:

- scopes: every node maps to the scope its names are read in (``scope``), every scope to its bindings
  (``names.Scope``); ``qualname`` and ``binding`` resolve a name or an attribute chain there, ``bindings(name)``
  lists a name's bindings in every scope (an import's module and ``as`` clause included: --fix asks it);
- local flow: per function (or module) body, the assignments of each name in source order
  (``flow(owner)``, a ``flow.Flow``), and where each local name is read (``reads(owner, name)``);
- values: ``value_of(node)``, what an expression evaluates to (``values.Values``, docs/value_model.md);
- facts across functions of the file (``summaries.Summaries``): what a function returns, what its
  parameters receive at the file's call sites, what the methods of a class assign to ``self.x``.

Answers depend only on the node asked about, so a rule may ask about any node, in any order.
"""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from .flow import Flow
from .names import PARAMETER, Binding, Resolver, Scope, ScopeBuilder
from .reads import Read, reads_of
from .summaries import Summaries, enclosing_class, is_self_attribute
from .values import Value, Values
from ..calls import dotted as dotted_name
from ..walk import assign_targets, iter_children, parameter_defaults, walk_tree

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class SemanticModel:
    """Scopes, bindings, flows, values and cross-function facts of one parsed module."""

    def __init__(self, tree: ast.AST, lines: Sequence[str]) -> None:
        builder = ScopeBuilder()
        self.tree = tree
        self.lines = lines
        self.scopes: Dict[int, Scope] = builder.build(tree)
        self.module: Scope = self.scopes[id(tree)]
        # names some binding of the file gives a qualified name: a name outside it resolves to nothing
        self.imported: Set[str] = self.module.resolver.imported
        self._node_scopes = builder.node_scopes
        self._flows: Dict[int, Flow] = {}
        self._reads: Dict[int, Dict[str, List[Read]]] = {}
        self._calls = builder.calls
        self._assigned: Optional[Dict[str, List[ast.AST]]] = None
        self.summaries = Summaries(self)
        self.values = Values(self)

    # -- scopes and names -------------------------------------------------------------------------
    def scope(self, node: ast.AST) -> Scope:
        """The scope ``node``'s names are read in (a def's own name, decorators and defaults: the outer one)."""
        return self._node_scopes.get(id(node)) or self.module

    def receiver(self, function: ast.AST) -> Optional[ast.arg]:
        """The parameter a method's call sites do not pass (``self`` / ``cls``): the first positional one of a
        ``def`` in a class body that is no ``@staticmethod``; None for any other function."""
        args = function.args
        positional = args.posonlyargs + args.args
        if not positional or not self.scope(function).is_class or any(
                isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list):
            return None
        return positional[0]

    def resolver(self, scope: Scope) -> Resolver:
        """The resolver for the names of ``scope``."""
        return scope.resolver

    def may_resolve(self, node: ast.AST) -> bool:
        """Whether ``node`` can have a qualified name at all: a name or attribute chain whose root name some
        binding of the file imports (the cheap test before ``qualname``)."""
        root = node
        while root.__class__ is ast.Attribute:
            root = root.value
        return root.__class__ is ast.Name and root.id in self.imported

    def qualname(self, node: ast.AST) -> Optional[str]:
        """Fully qualified import path of a name or attribute chain read at ``node``, if it is one."""
        root = node  # ``may_resolve`` inlined: every rule asks this of every name
        while root.__class__ is ast.Attribute:
            root = root.value
        if root.__class__ is not ast.Name or root.id not in self.imported:
            return None  # what the resolver would answer, without looking up the node's scope
        return (self._node_scopes.get(id(node)) or self.module).resolver.qualname(node)

    def binding(self, name: ast.Name) -> Optional[Binding]:
        """The binding of ``name`` in force where it is read, or None (a builtin or an undefined name)."""
        return self.resolver(self.scope(name)).binding(name.id, name.lineno)

    def parameter(self, node: ast.AST) -> Optional[Tuple[ast.AST, str]]:
        """(function, name) of the parameter whose value ``node`` reads, where nothing else can bind it: a parameter
        of the enclosing ``def`` that its body never rebinds, or ``self.x`` that its class assigns once, in
        ``__init__``, from such a parameter (``self.dropout = dropout``). None otherwise."""
        if is_self_attribute(node):
            node = self.stored(node)
        if not isinstance(node, ast.Name):
            return None
        home = self.scope(node).home(node.id)
        bound = home.bindings.get(node.id, []) if home is not None else []
        if len(bound) != 1 or bound[0].kind != PARAMETER or not isinstance(home.node, _FUNCTIONS):
            return None
        return home.node, node.id

    def stored(self, node: ast.AST) -> Optional[ast.expr]:
        """The value ``self.x = value`` stores where ``node`` reads ``self.x`` and its class assigns it once, in
        ``__init__``; None otherwise."""
        cls = enclosing_class(self.scope(node)) if is_self_attribute(node) else None
        return _stored_once(cls.node, node.attr) if cls is not None else None

    def parameter_default(self, node: ast.AST) -> Optional[ast.expr]:
        """The default of the parameter ``node`` reads (``parameter``); None where it has none."""
        found = self.parameter(node)
        return parameter_defaults(found[0].args).get(found[1]) if found is not None else None

    def bindings(self, name: str) -> Iterator[Binding]:
        """Every binding of ``name`` in the file, whatever its scope."""
        for scope in self.scopes.values():
            yield from scope.bindings.get(name, ())

    def assigned(self, dotted: str) -> List[ast.AST]:
        """Every value the file assigns (``=``, annotated ``=``) to a name or attribute chain spelled ``dotted``
        (``loader``, ``self.train_loader``), in any scope: a question blind to scopes and flow, for the
        injector's guess at what a loop iterates."""
        if self._assigned is None:
            self._assigned = {}
            for scope in self.scopes.values():
                for stmt in scope.assignments:
                    for target in assign_targets(stmt):
                        spelled = dotted_name(target)
                        if spelled and stmt.value is not None:
                            self._assigned.setdefault(spelled, []).append(stmt.value)
        return self._assigned.get(dotted, [])

    def function(self, node: ast.AST) -> Optional[ast.AST]:
        """The innermost ``def`` whose body holds ``node`` (None at module level)."""
        scope: Optional[Scope] = self.scope(node)
        while scope is not None and not isinstance(scope.node, _FUNCTIONS):
            scope = scope.parent
        return scope.node if scope is not None else None

    def flow(self, owner: ast.AST) -> Flow:
        """The local assignments of a function or module body (built on first use, shared by all rules)."""
        flow = self._flows.get(id(owner))
        if flow is None:
            flow = self._flows[id(owner)] = Flow(self.scopes[id(owner)])
        return flow

    def reads(self, owner: ast.AST, name: str) -> List[Read]:
        """Every read of the local ``name`` of the function (or module) ``owner``, with its ancestors
        (``reads.Read``); the index of ``owner`` is built on first use, shared by all rules."""
        index = self._reads.get(id(owner))
        if index is None:
            index = self._reads[id(owner)] = reads_of(self.scopes[id(owner)], self._node_scopes)
        return index.get(name, [])

    def calls(self, name: str) -> List[ast.Call]:
        """Every call in the file of ``name(...)`` or ``<expr>.name(...)``, in source order."""
        return self._calls.get(name, [])

    def ancestors(self, node: ast.AST) -> List[ast.AST]:
        """The nodes enclosing ``node``, the module first; a search pruned by line, for the rare question
        about a node the engine's walk is not at (a call site in another function)."""
        line = getattr(node, "lineno", None)

        def search(current: ast.AST, path: List[ast.AST]) -> Optional[List[ast.AST]]:
            for child in iter_children(current):
                if child is node:
                    return path
                start = getattr(child, "lineno", None)
                if line is None or start is None or start <= line <= child.end_lineno:
                    found = search(child, path + [child])
                    if found is not None:
                        return found
            return None

        return search(self.tree, [self.tree]) or []

    # -- values -----------------------------------------------------------------------------------
    def value_of(self, node: ast.AST) -> Value:
        """What the expression ``node`` evaluates to."""
        return self.values.of(node)


def _stored_once(cls: ast.ClassDef, attribute: str) -> Optional[ast.expr]:
    """The value ``self.<attribute> = value`` in the ``__init__`` of ``cls`` stores, where no other statement of the
    class assigns the attribute."""
    stores = [node for node in walk_tree(cls) if isinstance(node, ast.Attribute) and node.attr == attribute
              and isinstance(node.ctx, ast.Store)]
    init = next((f for f in cls.body if isinstance(f, _FUNCTIONS) and f.name == "__init__"), None)
    if len(stores) != 1 or init is None:
        return None
    return next((n.value for n in walk_tree(init) if isinstance(n, ast.Assign) and n.targets == stores), None)
