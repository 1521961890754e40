"""Code that runs once per call of an inference entry point, once per object or on the way to an error, never
once per step.

A dynamic shape costs on an NPU when it comes back step after step: each new shape compiles new kernels. Code
that runs once per object or once per request brings at most one new shape each time, and the steps that follow
reuse it. The definitions:

- *Construction*: the body of an ``__init__``.
- An *error path*: the body of an ``if`` that ends in ``raise`` (the message of ``ValueError`` built from
  ``(counts == 0).nonzero().tolist()``): it runs once, and the call ends there.
- An *inference entry class* defines ``__call__`` under ``@torch.no_grad()`` or ``@torch.inference_mode()``
  (a diffusion or generation pipeline: one call builds the inputs once, then loops over the denoising steps).
- An *inference method* is a method named ``infer`` or ``inference`` under ``@torch.no_grad()`` or
  ``@torch.inference_mode()`` (mmagic's editors, coqui's TTS models): an entry point like that ``__call__``.
- Code *runs once per call* when it is in such a ``__call__`` or inference method outside its loops, or in a
  method of the entry class or a module-level function of the file whose every call site in the file runs once
  per call (a call site inside a loop of the entry point runs per step). A method nobody in the file calls is the
  entry class's public API (``encode_prompt``), called once per request like ``__call__``; a module-level function
  nobody calls is not known to be part of a pipeline. Loops inside the helpers (over the prompts of a batch) do
  not count as steps, nor, like a comprehension, does a loop of the entry point that only maps each item on its
  own: every statement rebinds the loop's own names or appends to a list (``for image_ in control_image: image_ =
  self.prepare_image(image_); images.append(image_)``). A step loop carries a state from one step to the next
  (``latents = self.step(latents, t)``).
- A *metric class* has a base named ``...Metric`` (torchmetrics and ignite ``Metric``, mmengine ``BaseMetric``):
  the evaluation loop calls its ``update``/``process`` per batch and its ``compute``/``compute_metrics`` once, on
  what the batches gathered (mmengine moves them to the CPU first). So ``compute``/``compute_metrics``, a method
  nobody in the file calls (the metric's public API) and the helpers only these reach run once per evaluation;
  ``update``, ``process``, ``iteration_completed``, ``forward`` and ``__call__`` run per batch.

``runs_once(node, ctx)``: does ``node`` run once per object, per call or per evaluation (its enclosing nodes are
the engine's walk stack)?
"""
from __future__ import annotations

import ast
from typing import Dict, Sequence

from ..semantic.model import SemanticModel
from ..walk import lineage

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_NO_GRAD = frozenset(("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
                      "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"))
_INFERENCE = frozenset(("infer", "inference"))  # the inference entry methods of mmagic's editors, coqui's models
_HOPS = 4  # call-site steps followed from a helper back to the entry point
_METRIC_ONCE = frozenset(("compute", "compute_metrics"))
_METRIC_STEP = frozenset(("update", "process", "iteration_completed", "forward", "__call__"))


class OncePerCall:
    """The per-file answers (functions and classes memoised by id)."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._entries: Dict[int, bool] = {}
        self._functions: Dict[int, bool] = {}

    def runs_once(self, node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
        if _error_path(node, ancestors):
            return True
        function = self.model.function(node)
        if function is None:
            return False
        if self._entry_call(function):
            return not _in_loop(ancestors, function)
        return self._once(function, 0)

    def _entry_call(self, function: ast.AST) -> bool:
        """Is ``function`` the ``__call__`` of an inference entry class, or a no_grad ``infer``/``inference``
        method?"""
        outer = self.model.scope(function)  # a def's own scope is the one it is defined in
        if function.name in _INFERENCE and outer.is_class:
            return self._no_grad(function)
        return function.name == "__call__" and outer.is_class and self._entry_class(outer.node)

    def _entry_class(self, cls: ast.ClassDef) -> bool:
        found = self._entries.get(id(cls))
        if found is None:
            found = self._entries[id(cls)] = any(
                isinstance(stmt, _FUNCTIONS) and stmt.name == "__call__" and self._no_grad(stmt) for stmt in cls.body)
        return found

    def _no_grad(self, function: ast.AST) -> bool:
        """Is ``function`` decorated with ``torch.no_grad()`` or ``torch.inference_mode()``?"""
        return any(self.model.qualname(d.func if isinstance(d, ast.Call) else d) in _NO_GRAD
                   for d in function.decorator_list)

    def _once(self, function: ast.AST, hops: int) -> bool:
        found = self._functions.get(id(function))
        if found is None:
            self._functions[id(function)] = False  # recursion guard
            found = self._functions[id(function)] = self._decide(function, hops)
        return found

    def _decide(self, function: ast.AST, hops: int) -> bool:
        scope = self.model.scope(function)
        in_class = scope.is_class
        if in_class and function.name == "__init__":
            return True
        if in_class:
            metric = _metric_class(scope.node)
            if metric and function.name in _METRIC_ONCE:
                return True  # a metric's result, once per evaluation
            if metric and function.name in _METRIC_STEP:
                return False
            if not metric and not self._entry_class(scope.node):
                return False
        elif scope is not self.model.module:
            return False  # a nested def: called from anywhere, loops included
        sites = self.model.summaries.call_sites(function)
        if not sites:
            return in_class  # a pipeline's or a metric's public method; an unused module function says nothing
        if hops >= _HOPS:
            return False
        for site in sites:
            caller = self.model.function(site)
            if caller is None:
                return False
            if self._entry_call(caller):
                if _in_loop(self.model.ancestors(site), caller):
                    return False
            elif not self._once(caller, hops + 1):
                return False
        return True


def _error_path(node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Is ``node`` in the body of an ``if`` that ends in ``raise`` (not in a def nested below that ``if``)?"""
    for parent, child in lineage(ancestors, node):
        if isinstance(parent, _FUNCTIONS + (ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(parent, ast.If) and parent.body and isinstance(parent.body[-1], ast.Raise) and any(
                child is stmt for stmt in parent.body):
            return True
    return False


def _in_loop(ancestors: Sequence[ast.AST], function: ast.AST) -> bool:
    """Is a loop of ``function`` that may carry a state among ``ancestors`` (below ``function``)?"""
    inside = False
    for node in ancestors:
        if node is function:
            inside = True
        elif inside and isinstance(node, _LOOPS) and not _maps(node):
            return True
    return False


def _maps(loop: ast.AST) -> bool:
    """Does ``loop`` only map each item on its own, as a comprehension would: a ``for`` whose every statement
    rebinds the loop's own plain names or appends to a list (diffusers 0.42.1 pipeline_stable_diffusion_3_controlnet_
    inpainting.py:1251-1264, one control image prepared per item)?"""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or loop.orelse:
        return False
    own = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    for stmt in loop.body:
        if isinstance(stmt, ast.Assign):
            if not all(isinstance(n, ast.Name) and n.id in own for t in stmt.targets
                       for n in (t.elts if isinstance(t, ast.Tuple) else [t])):
                return False
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                  and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "append"):
            return False
    return True


def _metric_class(cls: ast.ClassDef) -> bool:
    """Has ``cls`` a base named ``...Metric`` (``Metric``, ``BaseMetric``, ``torchmetrics.Metric``)?"""
    return any((base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")).endswith("Metric")
               for base in cls.bases)


def runs_once(node: ast.AST, ctx) -> bool:
    """Does ``node`` (the node the engine is checking) run once per object, per call of an inference entry point or
    per evaluation of a metric (module docstring)?  The file's answers are kept in one ``OncePerCall`` per walk."""
    return ctx.memo("once_per_call", lambda c: OncePerCall(c.model)).runs_once(node, ctx.stack)
