#!/usr/bin/env python3
"""Trace the public torch API surface to the ATen ops it dispatches, with torch itself (CPU).

For every public torch function, ``torch.Tensor`` method, ``torch.nn.functional`` function and
``torch.nn`` module it can run on a small sample, record the ATen ops dispatched forward and backward
(``TorchDispatchMode``), so that tools/build_rules_data.py can decide each API per torch_npu version from
that version's NPU kernels.  Samples, in order of preference:

1. ``OpInfo`` (torch.testing._internal.common_methods_invocations: op_db and the foreach dbs): the first
   few sample inputs of the first float32-capable dtype, for the function, method, in-place and alias
   variants the OpInfo names.
2. ``ModuleInfo`` (common_modules.module_db): the first few constructor/forward inputs, float32, training.
3. Small hand-written samples (``HAND``): jit helpers, grad-mode context managers, containers, nn.init,
   nn.utils (and its rnn padding/packing helpers), fft.fftfreq/rfftfreq (they take a length, not a
   tensor), optimizers, a few private functions user code calls (``torch._assert_async``), the
   tensorboard ``SummaryWriter`` (needs the tensorboard package; untraced without it).
4. A generic probe for the rest: a Tensor method or attribute is evaluated on a float32 [4, 4] tensor
   with no arguments; a torch/functional/linalg/fft/special function is called with that one tensor;
   a getter (``is_*``, ``get_*``) with no arguments.  What raises is recorded as untraced with the error.

APIs that dispatch no ATen op are ``kernel_free``: exception classes and context-manager classes by their
type, everything else because its traced sample dispatched nothing.  Output (sorted, compact JSON):
rules_data/sources/aten/traced_apis_torch<version>.json with ``meta`` (torch version, counts, method),
``apis`` ({api: {"forward": [ops], "backward": [ops], "sample": how}}), ``kernel_free``
({api: why}) and ``untraced`` ({api: why}).  Each API gets at most ``--seconds`` (default 3) of wall time.

Needs torch, numpy and expecttest (the test helpers import them); never run by the linter.

    python tools/trace_torch_apis.py [--out FILE] [--seconds S] [--samples N]
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import io
import itertools
import json
import re
import signal
import sys
import tempfile
import types
import warnings
from pathlib import Path

import torch
import torch.utils.mobile_optimizer
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "rules_data" / "sources" / "aten" / f"traced_apis_torch{torch.__version__.split('+')[0]}.json"
GENERATOR = "tools/trace_torch_apis.py"
NAMESPACES = {  # module -> the prefix the rule data uses; the surface the probe enumerates
    "torch": torch,
    "torch.nn.functional": torch.nn.functional,
    "torch.linalg": torch.linalg,
    "torch.fft": torch.fft,
    "torch.special": torch.special,
    "torch.nn.init": torch.nn.init,
    "torch.nn.utils": torch.nn.utils,
    "torch.jit": torch.jit,
    "torch.autograd": torch.autograd,
    "torch.onnx": torch.onnx,
}
GETTER = re.compile(r"^(is_|get_|are_|has_)")
# Never probed: changes global state, reads/writes files or processes, or waits.
NO_PROBE = re.compile(r"^(set_|save|load|use_|manual_seed|seed$|compile|export|from_file|fork|wait|sync|"
                      r"_)|(^|\.)(cuda|backward|register_)")


class Timeout(Exception):
    """An API ran past its time budget."""


class Recorder(TorchDispatchMode):
    """Records the name (``add.Tensor``; other namespaces keep ``ns::``) of every op dispatched."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()
        self.loose: set[str] = set()  # the ops dispatched outside every decomposed composite (Composites)

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        name = func.name()
        name = name[len("aten::"):] if name.startswith("aten::") else name
        self.ops.add(name)
        self.loose.add(name)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise Timeout in the main thread after ``seconds``."""
    def expire(signum, frame):
        raise Timeout(f"ran past {seconds:g} s")
    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def tensors_in(value) -> list:
    """Every tensor inside nested tuples/lists/dicts (an op's output or a sample's inputs)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(item)]
    return []


class Composites(TorchFunctionMode):
    """Per torch function that binds an ATen op of its own name (``torch._weight_norm``, ``F.linear``): the ops
    dispatched inside a call of it where that op itself never reached the dispatcher, i.e. it was decomposed
    before (a CompositeImplicitAutograd op).  A backend that registers its own kernel for such an op
    (torch_npu's ``_weight_norm``) never runs that decomposition.  Outermost calls only."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder
        self.calls: dict[str, set] = {}

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        name = getattr(func, "__name__", "") or ""
        if name.startswith("__") or not hasattr(torch.ops.aten, name):
            return func(*args, **(kwargs or {}))
        recorder = self.recorder
        outer, outer_loose = recorder.ops, recorder.loose
        recorder.ops, recorder.loose = set(), set()
        try:
            return func(*args, **(kwargs or {}))
        finally:
            inside, inside_loose = recorder.ops, recorder.loose
            recorder.ops = outer | inside
            if inside and not any(op.split(".")[0] == name for op in inside):
                self.calls.setdefault(name, set()).update(inside)
                recorder.loose = outer_loose
            else:
                recorder.loose = outer_loose | inside_loose


def trace_call(run, leaves_of) -> tuple[set, set, dict, set]:
    """(forward ops, backward ops, {decomposed composite: its forward ops}, the forward ops dispatched outside
    those composites) of ``run()``; backward via autograd.grad onto the sample's leaves."""
    recorder = Recorder()
    composites = Composites(recorder)
    with recorder, composites:
        out = run()
    forward, loose, recorder.ops = recorder.ops, recorder.loose, set()
    leaves = [t for t in leaves_of() if t.requires_grad and t.is_leaf]
    outs = [t for t in tensors_in(out) if t.requires_grad and t.grad_fn is not None]
    if leaves and outs:
        seeds = [torch.ones_like(t) for t in outs]
        with recorder:
            torch.autograd.grad(outs, leaves, seeds, allow_unused=True)
    return forward, recorder.ops, composites.calls, loose


class Tracer:
    """Collects traces, kernel-free APIs and failures; the first success of an API wins."""

    def __init__(self, seconds: float, samples: int) -> None:
        self.seconds = seconds
        self.samples = samples
        self.apis: dict[str, dict] = {}
        self.kernel_free: dict[str, str] = {}
        self.untraced: dict[str, str] = {}

    def done(self, api: str) -> bool:
        return api in self.apis or api in self.kernel_free

    def record(self, api: str, how: str, calls, own: str = "") -> None:
        """Trace ``calls`` ((run, leaves) pairs) as samples of ``api``; union over the samples.

        ``own`` is the ATen op the API is named after (OpInfo's aten_name): a backend kernel for it runs
        before any decomposition the CPU trace shows.
        """
        if self.done(api):
            return
        forward, backward, composite, loose, errors, ran = set(), set(), {}, set(), [], 0
        try:
            with time_limit(self.seconds), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for run, leaves in calls:
                    torch.manual_seed(0)  # a random sample (trunc_normal_'s rejection loop) takes one path
                    try:
                        f, b, c, out = trace_call(run, leaves)
                    except Timeout:
                        raise
                    except Exception as error:  # a sample the op rejects: try the next one
                        errors.append(f"{type(error).__name__}: {' '.join(str(error).split())[:120]}")
                        continue
                    forward |= f
                    backward |= b
                    loose |= out
                    for name, ops in c.items():
                        composite.setdefault(name, set()).update(ops)
                    ran += 1
        except Timeout as error:
            errors.append(str(error))
        except Exception as error:  # the sample generator itself failed
            errors.append(f"{type(error).__name__} building samples: {' '.join(str(error).split())[:120]}")
        if not ran:
            self.untraced.setdefault(api, f"{how}: {errors[0] if errors else 'no sample'}")
            return
        self.untraced.pop(api, None)
        if not forward and not backward:
            self.kernel_free[api] = f"dispatches no ATen op ({how})"
        else:
            self.apis[api] = {"forward": sorted(forward), "backward": sorted(backward), "sample": how}
            if composite:  # and which forward ops also ran outside them (a kernel for the composite excuses none)
                self.apis[api]["composite"] = {name: sorted(ops) for name, ops in sorted(composite.items())}
                self.apis[api]["outside_composites"] = sorted(loose)
            if own:
                self.apis[api]["aten"] = own


# ---------------------------------------------------------------- OpInfo / ModuleInfo


def opinfo_api(name: str) -> str:
    """'nn.functional.relu' -> 'torch.nn.functional.relu'; 'abs' -> 'torch.abs'; a few OpInfos are
    already spelled in full ('torch._scaled_mm', 'torch.special.gammainc')."""
    return name if name.startswith("torch.") else f"torch.{name}"


def lookup(api: str):
    """The object a dotted torch path names, or None."""
    obj = torch
    for part in api.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def exists(api: str) -> bool:
    """Whether a dotted torch path names an object."""
    return lookup(api) is not None


def defined_as(api: str) -> str:
    """Where a re-exported class or Python function is defined (torch.distributions.Beta ->
    torch.distributions.beta.Beta): the support tables may list it under that name; "" if the same."""
    obj = lookup(api)
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not module or not name:
        return ""
    where = f"{module}.{name}"
    return where if where != api and where.startswith("torch.") and "<" not in where else ""


def sample_calls(op, samples: int):
    """Lazily: the first ``samples`` OpInfo samples as (run-function factory) pairs."""
    dtypes = op.supported_dtypes("cpu")
    dtype = torch.float32 if torch.float32 in dtypes else (sorted(dtypes, key=str)[0] if dtypes else None)
    if dtype is None:
        return lambda fn, inplace=False: iter(())
    grad = op.supports_autograd and dtype.is_floating_point

    def calls(fn, inplace=False):
        for sample in itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=grad), samples):
            first = sample.input
            if inplace:  # in-place on a leaf that requires grad is an error: fresh copies, made here
                first = fresh(first)
            args = (first, *sample.args)
            yield (lambda s=sample, a=args: fn(*a, **s.kwargs)), (lambda a=args, s=sample: tensors_in([a, s.kwargs]))
    return calls


def fresh(value):
    """A detached copy of a tensor or of each tensor of a list (foreach ops take lists)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(fresh(item) for item in value)
    return value


def trace_opinfos(tracer: Tracer) -> None:
    """Function, method, in-place and alias variants of every OpInfo."""
    from torch.testing._internal import common_methods_invocations as cmi

    dbs = [cmi.op_db] + [getattr(cmi, n) for n in dir(cmi) if n.startswith("foreach_") and n.endswith("_op_db")]
    for op in (op for db in dbs for op in db):
        if op.name.startswith("__"):
            continue
        calls = sample_calls(op, tracer.samples)
        # (name, its own ATen op, function, method, in-place); an alias is its own ATen op (torch.inverse)
        variants = [(op.name, op.aten_name or "", op.op, op.method_variant, op.inplace_variant)]
        variants += [(a.name, a.name.replace(".", "_"), a.op, a.method_variant, a.inplace_variant)
                     for a in op.aliases]
        how = f"OpInfo {op.name}" + (f" ({op.variant_test_name})" if op.variant_test_name else "")
        for name, own, fn, method, inplace in variants:
            base = name.split(".")[-1]
            for api, variant in ((opinfo_api(name), fn), (f"torch.Tensor.{base}", method),
                                 (f"torch.Tensor.{base}_", inplace), (f"{opinfo_api(name)}_", inplace)):
                if variant is None or not exists(api):
                    continue
                suffix = "_" if variant is inplace and own else ""
                tracer.record(api, how, calls(variant, inplace=variant is inplace), own + suffix)


def trace_moduleinfos(tracer: Tracer) -> None:
    """Every ModuleInfo's module: construct (outside the recorder) and run forward + backward."""
    from torch.testing._internal.common_modules import module_db

    for info in module_db:
        cls = info.module_cls
        api = f"torch.nn.{cls.__name__}"
        if not exists(api):
            continue
        try:
            inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=True,
                                             training=True)[: tracer.samples]
        except Exception as error:
            tracer.untraced.setdefault(api, f"ModuleInfo: {type(error).__name__}: {' '.join(str(error).split())[:120]}")
            continue
        calls = []
        for sample in inputs:
            if sample.forward_input is None:
                continue
            try:
                module = cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
            except Exception:
                continue
            fwd = sample.forward_input
            calls.append(((lambda m=module, f=fwd: m(*f.args, **f.kwargs)),
                          (lambda m=module, f=fwd: list(m.parameters()) + tensors_in([f.args, f.kwargs]))))
        tracer.record(api, f"ModuleInfo {cls.__name__}", calls)


# ---------------------------------------------------------------- hand-written samples


def made(make, *args):
    """``make(*args)`` outside the recorder: building a sample's inputs is not part of its trace."""
    with _disable_current_modes():
        return make(*args)


def x44(grad: bool = False) -> torch.Tensor:
    """The probe tensor: float32 [4, 4], deterministic values, built outside the recorder."""
    return made(lambda: torch.linspace(-1.0, 1.0, 16).reshape(4, 4).requires_grad_(grad))


def _fn(a):
    return a


def _with(manager):
    """Enter and leave a context manager (grad mode and the like are restored on exit)."""
    def run():
        with manager():
            return None
    return run


def _step(cls):
    """One optimizer step on a [4, 4] parameter with a gradient (construction is part of the trace)."""
    return lambda: cls(_with_grad(), lr=0.01).step()


def hand_samples() -> dict:
    """{api: run} for APIs OpInfo/ModuleInfo do not cover and the generic probe cannot call."""
    nn, jit = torch.nn, torch.jit
    samples = {
        "torch.jit.ignore": lambda: jit.ignore(_fn),
        "torch.jit.unused": lambda: jit.unused(_fn),
        "torch.jit.export": lambda: jit.export(_fn),
        "torch.jit.is_scripting": jit.is_scripting,
        "torch.jit.is_tracing": jit.is_tracing,
        "torch.jit.annotate": lambda: jit.annotate(int, 1),
        "torch.jit.script_if_tracing": lambda: jit.script_if_tracing(_fn),
        "torch.jit.interface": lambda: jit.interface(type("I", (), {})),
        "torch.no_grad": _with(torch.no_grad),
        "torch.enable_grad": _with(torch.enable_grad),
        "torch.inference_mode": _with(torch.inference_mode),
        "torch.set_grad_enabled": _with(lambda: torch.set_grad_enabled(True)),
        "torch.autocast": _with(lambda: torch.autocast("cpu")),
        "torch.autograd.set_detect_anomaly": _with(lambda: torch.autograd.set_detect_anomaly(False)),
        "torch.autograd.detect_anomaly": _with(torch.autograd.detect_anomaly),
        "torch.autograd.profiler.profile": _with(torch.autograd.profiler.profile),
        "torch.autograd.profiler.record_function": _with(lambda: torch.autograd.profiler.record_function("r")),
        "torch._assert_async": lambda: torch._assert_async(made(torch.tensor, True)),
        "torch._assert": lambda: torch._assert(True, "ok"),
        "torch.is_tensor": lambda: torch.is_tensor(1),
        "torch.poisson": lambda: torch.poisson(made(lambda: x44().abs())),
        "torch.distributions.Gamma": lambda: torch.distributions.Gamma(2.0, 1.0).sample(),
        "torch.distributions.Beta": lambda: torch.distributions.Beta(*made(lambda: (x44().abs() + 1,) * 2)).sample(),
        "torch.distributions.Dirichlet": lambda: torch.distributions.Dirichlet(made(lambda: x44().abs() + 1)).sample(),
        "torch.distributions.Binomial":
            lambda: torch.distributions.Binomial(10, made(lambda: x44().sigmoid())).sample(),
        "torch.nn.RReLU": lambda: made(nn.RReLU)(x44(True)),
        "torch.nn.utils.weight_norm":
            lambda: made(lambda: nn.utils.weight_norm(nn.Conv1d(4, 4, 1)))(made(lambda: x44(True)[None])),
        "torch.nn.utils.parametrizations.weight_norm": lambda: made(
            lambda: nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 1)))(made(lambda: x44(True)[None])),
        "torch.jit.script": lambda: jit.script(_scriptable),
        "torch.utils.mobile_optimizer.optimize_for_mobile":
            lambda: torch.utils.mobile_optimizer.optimize_for_mobile(made(jit.script, _Scriptable())),
        "torch.nn.TransformerDecoder": lambda: made(_decoder)(*made(lambda: (x44(True)[None], x44(True)[None]))),
        "torch.nn.TransformerEncoder": lambda: made(_encoder)(made(lambda: x44(True)[None])),
        "torch.jit.trace": lambda: jit.trace(_scriptable, (x44(),)),
        "torch.jit.trace_module": lambda: jit.trace_module(made(_Scriptable), {"forward": (x44(),)}),
        "torch.compiler.disable": lambda: torch.compiler.disable(_fn)(1),
        "torch.compiler.assume_constant_result": lambda: torch.compiler.assume_constant_result(_fn)(1),
        "torch.utils.tensorboard.SummaryWriter": functools.partial(_summary_writer, _tensorboard_writer()),
        "torch.jit.save": lambda: jit.save(made(jit.script, _Scriptable()), io.BytesIO()),
        "torch.jit.load": lambda: jit.load(made(_saved_module)),
        "torch.save": lambda: torch.save({"w": x44()}, io.BytesIO()),
        "torch.load": lambda: torch.load(made(_saved_tensor)),
        "torch.nn.Module": lambda: nn.Module(),
        "torch.nn.Sequential": lambda: nn.Sequential(nn.Identity())(x44()),
        "torch.nn.ModuleList": lambda: nn.ModuleList([nn.Identity()]),
        "torch.nn.ModuleDict": lambda: nn.ModuleDict({"a": nn.Identity()}),
        "torch.nn.ParameterList": lambda: nn.ParameterList([made(nn.Parameter, x44())]),
        "torch.nn.ParameterDict": lambda: nn.ParameterDict({"a": made(nn.Parameter, x44())}),
        "torch.nn.Identity": lambda: nn.Identity()(x44(True)),
        "torch.nn.Flatten": lambda: nn.Flatten()(x44(True)),
        "torch.nn.Unflatten": lambda: nn.Unflatten(1, (2, 2))(x44(True)),
        "torch.nn.Parameter": lambda: nn.Parameter(x44()),
        "torch.nn.utils.clip_grad_norm_": lambda: nn.utils.clip_grad_norm_(_with_grad(), 1.0),
        "torch.nn.utils.clip_grad_value_": lambda: nn.utils.clip_grad_value_(_with_grad(), 1.0),
        "torch.nn.utils.parameters_to_vector": lambda: nn.utils.parameters_to_vector(_with_grad()),
        "torch.nn.utils.rnn.pad_sequence": lambda: nn.utils.rnn.pad_sequence(_sequences(), batch_first=True),
        "torch.nn.utils.rnn.unpad_sequence":
            lambda: nn.utils.rnn.unpad_sequence(*made(_padded), batch_first=True),
        "torch.nn.utils.rnn.pack_padded_sequence":
            lambda: nn.utils.rnn.pack_padded_sequence(*made(_padded), batch_first=True, enforce_sorted=False),
        "torch.nn.utils.rnn.pad_packed_sequence":
            lambda: nn.utils.rnn.pad_packed_sequence(made(_packed), batch_first=True),
        "torch.nn.utils.rnn.pack_sequence": lambda: nn.utils.rnn.pack_sequence(_sequences(), enforce_sorted=False),
        "torch.nn.utils.rnn.unpack_sequence": lambda: nn.utils.rnn.unpack_sequence(made(_packed)),
        "torch.fft.fftfreq": lambda: torch.fft.fftfreq(8),
        "torch.fft.rfftfreq": lambda: torch.fft.rfftfreq(8),
        "torch.Tensor.to_dense": lambda: made(lambda: x44().to_sparse()).to_dense(),
        "torch.sparse.sum": lambda: torch.sparse.sum(made(lambda: x44().to_sparse())),
        "torch.sparse_coo_tensor":
            lambda: torch.sparse_coo_tensor(*made(lambda: (torch.tensor([[0, 1]]), torch.ones(2))), (3,)),
        "torch.Tensor.backward": lambda: made(lambda: (x44(True) * 2).sum()).backward(),
        "torch.Tensor.item": lambda: made(lambda: x44()[0, 0]).item(),
    }
    for name in torch.nn.init.__all__ if hasattr(torch.nn.init, "__all__") else dir(torch.nn.init):
        fn = getattr(torch.nn.init, name, None)
        if inspect.isfunction(fn) and not name.startswith("_") and name.endswith("_"):
            samples[f"torch.nn.init.{name}"] = functools.partial(_init, fn)
    for name in dir(torch.optim):
        cls = getattr(torch.optim, name)
        if inspect.isclass(cls) and issubclass(cls, torch.optim.Optimizer) and cls is not torch.optim.Optimizer:
            samples[f"torch.optim.{name}"] = _step(cls)
    return samples


def _tensorboard_writer():
    """tensorboard's SummaryWriter, imported before any sample runs (a slow import is no part of a sample's
    time), or a stand-in that raises why it is missing (the API is then recorded as untraced)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
        return SummaryWriter
    except ImportError as error:
        reason = error

        def missing(*_):
            raise reason
        return missing


def _summary_writer(writer_class) -> None:
    """Log a number and close: the writer itself (tensorboard's event files) dispatches nothing; a tensor
    the user logs is converted by that tensor's own ops."""
    with tempfile.TemporaryDirectory() as folder:
        writer = writer_class(folder)
        writer.add_scalar("loss", 0.5, 0)
        writer.close()


def _decoder() -> torch.nn.Module:
    layer = torch.nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    return torch.nn.TransformerDecoder(layer, 1)


def _encoder() -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)


def _scriptable(x: torch.Tensor) -> torch.Tensor:
    return x


class _Scriptable(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def _saved_module() -> io.BytesIO:
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(_Scriptable()), buffer)
    buffer.seek(0)
    return buffer


def _saved_tensor() -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save({"w": x44()}, buffer)
    buffer.seek(0)
    return buffer


def _sequences() -> list:
    """Three float32 sequences of lengths 2, 4 and 3 (feature size 4), built outside the recorder."""
    return made(lambda: [x44()[:n] for n in (2, 4, 3)])


def _padded() -> tuple:
    """(padded batch [3, 4, 4], int64 lengths on the CPU) of ``_sequences``, batch first."""
    return torch.nn.utils.rnn.pad_sequence(_sequences(), batch_first=True), torch.tensor([2, 4, 3])


def _packed():
    """``_sequences`` packed (a PackedSequence)."""
    return torch.nn.utils.rnn.pack_sequence(_sequences(), enforce_sorted=False)


def _init(fn):
    """An nn.init function on a fresh [4, 4] weight (sparse_ and dirac_ need their own shapes)."""
    if fn.__name__ == "dirac_":
        return fn(made(torch.zeros, 4, 4, 3))
    if fn.__name__ == "sparse_":
        return fn(x44(), 0.5)
    return fn(x44())


def _with_grad() -> list:
    """A [4, 4] parameter with a gradient, built outside the recorder."""
    def make():
        param = torch.nn.Parameter(x44())
        param.grad = torch.ones(4, 4)
        return [param]
    return made(make)


def trace_hand(tracer: Tracer) -> None:
    for api, run in sorted(hand_samples().items()):
        tracer.record(api, "hand-written sample", [(run, list)])


# ---------------------------------------------------------------- generic probe of the remaining surface


def kind_of(obj) -> str | None:
    """Why an object dispatches no kernel by its nature, or None."""
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return "exception class"
        if hasattr(obj, "__enter__") and hasattr(obj, "__exit__") and not issubclass(obj, torch.Tensor):
            return "context-manager class"
        if obj.__module__ == "torch._C" and not issubclass(obj, torch.Tensor):
            return "type object of the C++ bindings (JIT IR, dispatcher and type classes)"
    if isinstance(obj, (torch.dtype, torch.layout, torch.memory_format, torch.qscheme)):
        return f"{type(obj).__name__} constant"
    return None


def surface() -> list[tuple[str, object]]:
    """(api, object) of every public name of the namespaces and of torch.Tensor and torch.nn."""
    names = []
    for prefix, module in NAMESPACES.items():
        public = getattr(module, "__all__", None) or dir(module)
        for name in sorted(set(public) | {n for n in dir(module) if not n.startswith("_")}):
            obj = getattr(module, name, None)
            if name.startswith("_") or obj is None or isinstance(obj, types.ModuleType):
                continue
            names.append((f"{prefix}.{name}", obj))
    for name in dir(torch.Tensor):
        if not name.startswith("_"):
            names.append((f"torch.Tensor.{name}", getattr(torch.Tensor, name, None)))
    for name in dir(torch.nn):
        obj = getattr(torch.nn, name, None)
        if inspect.isclass(obj) and not name.startswith("_"):
            names.append((f"torch.nn.{name}", obj))
    return sorted(dict(names).items())


def probe(tracer: Tracer, api: str, obj) -> None:
    """Classify or call one API not traced yet."""
    why = kind_of(obj)
    if why:
        tracer.kernel_free[api] = why
        return
    module, _, name = api.rpartition(".")
    if NO_PROBE.search(name):
        tracer.untraced.setdefault(api, "not probed: changes global state, does I/O or needs a device")
        return
    if module == "torch.Tensor":
        tracer.record(api, "probe: attribute of a float32[4,4] tensor, called with no arguments",
                      [(lambda: _tensor_attribute(name), list)])
        if _needs_an_argument(tracer, api):
            other = x44()
            tracer.record(api, "probe: method of a float32[4,4] tensor called with another one",
                          [(lambda: getattr(x44(), name)(other), list)])
    elif inspect.isclass(obj) and issubclass(obj, (torch.nn.Module, torch.optim.Optimizer)):
        tracer.untraced.setdefault(api, "no forward/step sample (neither ModuleInfo nor a hand-written one)")
    elif inspect.isclass(obj):
        tracer.record(api, "probe: constructed with no arguments", [(obj, list)])
    elif callable(obj) and GETTER.match(name):
        tracer.record(api, "probe: getter called with no arguments", [(obj, list)])
    elif callable(obj) and module in ("torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special"):
        leaf = x44(True)
        tracer.record(api, "probe: called with one float32[4,4] tensor", [(lambda: obj(leaf), lambda: [leaf])])
        if _needs_an_argument(tracer, api):
            other = x44(True)
            tracer.record(api, "probe: called with two float32[4,4] tensors",
                          [(lambda: obj(leaf, other), lambda: [leaf, other])])
    else:
        tracer.untraced.setdefault(api, "no sample input")


def _needs_an_argument(tracer: Tracer, api: str) -> bool:
    """The one-argument probe failed for want of a positional argument: drop that failure, try two."""
    if "missing 1 required positional argument" in tracer.untraced.get(api, ""):
        del tracer.untraced[api]
        return True
    return False


def _tensor_attribute(name: str):
    value = getattr(x44(), name)
    return value() if callable(value) else value


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="output JSON (rules_data/sources/aten/...)")
    parser.add_argument("--seconds", type=float, default=3.0, help="time budget per API")
    parser.add_argument("--samples", type=int, default=3, help="OpInfo/ModuleInfo samples per API")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    tracer = Tracer(args.seconds, args.samples)
    trace_call(lambda: made(lambda: (x44(True) * 2).sum()).backward(), list)  # one-time start-up of autograd and
    # the dispatch mode, which a loaded machine would otherwise charge to the first sample's time budget
    trace_hand(tracer)
    trace_opinfos(tracer)
    trace_moduleinfos(tracer)
    for api, obj in surface():
        if not tracer.done(api):
            probe(tracer, api, obj)
    for api in list(tracer.untraced):
        if tracer.done(api):
            del tracer.untraced[api]
    meta = {
        "generator": GENERATOR,
        "torch": torch.__version__,
        "method": "TorchDispatchMode on CPU, forward and autograd.grad backward; see the generator's docstring",
        "counts": {"traced": len(tracer.apis), "kernel_free": len(tracer.kernel_free),
                   "untraced": len(tracer.untraced)},
        "seconds_per_api": args.seconds,
        "samples_per_api": args.samples,
        "namespaces": sorted([*NAMESPACES, "torch.Tensor", "torch.nn"]),  # enumerated in full: the surface
    }
    defined = {api: defined_as(api) for api in [*tracer.apis, *tracer.kernel_free]}
    document = {"meta": meta, "apis": tracer.apis, "kernel_free": tracer.kernel_free, "untraced": tracer.untraced,
                "defined_as": {api: where for api, where in defined.items() if where}}
    args.out.write_text(json.dumps(document, indent=0, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.out.name}: {meta['counts']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
