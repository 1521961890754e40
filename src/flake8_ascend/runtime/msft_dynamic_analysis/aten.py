"""ATen-level interception shared by the overflow (``overflow``) and operator (``ops``) detectors.

``AtenDetector`` extends ``hook.LoopDetector`` with a ``TorchDispatchMode``
(torch >= 1.13) that sees every ATen operator the recorded iterations run,
forward and backward, below autograd: ``F.linear`` arrives as ``aten::t`` and
``aten::addmm``, ``loss.backward()`` as the backward kernels.  The mode exists
only while a recorded iteration runs; other iterations cost one generator step.

Call sites: an operator issued by Python code is attributed to the innermost
project line that led to it (torch's and the standard library's frames are
looked through); when a library made the call (torchvision's ``nms``), the
library's frame is kept and named too (``hook.CallSites``).  A backward operator
has no Python caller of its own, so the forward operator's site is stored on
the autograd node its output got (``grad_fn.metadata``) and read back from the
node that runs it (``torch._C._current_autograd_node``, torch >= 1.13).

Settings come, first match wins, from keyword arguments of ``start()``,
environment variables, ``settings.json`` beside this module (written by
``ascend-analyse``), then the defaults.  Standard library and torch only.
"""
import sys

from .hook import CallersLines, LoopDetector, log

IGNORED = ("profiler.",)  # record_function markers (optimizers, DataLoader): instrumentation, not computation
SITE_KEY = "msft_site"  # the key of a forward call site in an autograd node's metadata


def dispatch_mode_base():
    """torch's TorchDispatchMode class, or None when this torch has none usable as a context manager."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return None
    return TorchDispatchMode if hasattr(TorchDispatchMode, "__enter__") else None


class AtenDetector(LoopDetector):
    """A loop detector that sees every ATen operator of the iterations it records."""

    def __init__(self):
        super(AtenDetector, self).__init__()
        self.torch = None
        self.supported = None  # None until installed: whether ATen operators can be seen
        self._mode_class = None
        self._mode = None
        self._pending = None  # (outputs, site) of the last forward operator, to label their autograd nodes
        self._current_node = None
        self._ignored = {}  # func -> whether it is left out (IGNORED namespaces)
        self._callers = CallersLines(self.sites)

    # -- interception ----------------------------------------------------------------
    def _install(self):
        if self.torch is None:
            import torch

            self.torch = torch
            self._current_node = getattr(torch._C, "_current_autograd_node", None)
            self._mode_class = self._make_mode_class()
            self.supported = self._mode_class is not None
            if not self.supported:
                log("torch %s has no TorchDispatchMode (torch >= 1.13 needed): ATen operators cannot be seen"
                    % torch.__version__)
        self._configure()

    def _make_mode_class(self):
        base = dispatch_mode_base()
        if base is None:
            return None
        detector = self

        class _AtenMode(base):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return detector._dispatch(func, args, kwargs or {})

        return _AtenMode

    def _resume(self):
        if self.supported:
            self._begin_iteration()
            mode = self._mode_class()
            mode.__enter__()
            self._mode = mode

    def _pause(self):
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
            if self._pending is not None:
                self._label_pending()
            self._end_recorded_iteration()

    def _uninstall(self):
        self._pause()

    # -- one operator ----------------------------------------------------------------
    def _dispatch(self, func, args, kwargs):
        ignored = self._ignored.get(func)
        if ignored is None:
            ignored = self._ignored[func] = str(func).startswith(IGNORED)
        if ignored:
            return func(*args, **kwargs)
        if self._pending is not None:
            self._label_pending()
        node = self._current_node() if self._current_node is not None else None
        caller = sys._getframe(2)  # the Python frame that ran the operator (a C++ warning of its kernel names it)
        if node is None:  # forward, optimizer, or Python code between
            site = self.sites.site(caller, torch_calls=True)
        else:  # AccumulateGrad and friends have no forward site: the backward() call
            self.loop.training = True
            site = node.metadata.get(SITE_KEY) or self.sites.site(caller, torch_calls=True)
        result = self.on_operator(func, args, kwargs, node, site, self._callers.at(caller))
        if node is None and site:
            self._pending = (result, site)
        return result

    def _label_pending(self):
        """Store the last forward operator's site on the autograd nodes its outputs got."""
        outputs, site = self._pending
        self._pending = None
        tensor = self.torch.Tensor
        for value in outputs if isinstance(outputs, (tuple, list)) else (outputs,):
            if isinstance(value, tensor):
                node = value.grad_fn
                if node is not None:
                    metadata = node.metadata
                    if SITE_KEY not in metadata:
                        metadata[SITE_KEY] = site

    # -- what a detector supplies ----------------------------------------------------
    def _configure(self):
        """Read the settings (once per loop)."""

    def _begin_iteration(self):
        """A recorded iteration starts."""

    def _end_recorded_iteration(self):
        """A recorded iteration ended."""

    def on_operator(self, func, args, kwargs, node, site, call):  # pragma: no cover - abstract
        """Run ``call(func, args, kwargs)`` and return its result, recording what the detector needs (``call``
        runs it from the caller's line: see ``hook.CallersLines``)."""
        raise NotImplementedError

    def save(self, quiet=False):
        if self.supported is False:
            if self._unsaved and not quiet:
                log("no %s written: nothing could be recorded" % self.report_name)
                self._unsaved = False
            return
        super(AtenDetector, self).save(quiet)


def phase(node):
    """'forward' for an operator run by Python code, 'backward (AddmmBackward0)' for one run by autograd."""
    if node is None:
        return "forward"
    try:
        return "backward (%s)" % node.name()
    except Exception:
        return "backward"


def tensors(values, tensor_type):
    """The tensors among ``values`` and inside their lists and tuples (ATen arguments nest one level)."""
    found = []
    for value in values:
        if isinstance(value, tensor_type):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(item for item in value if isinstance(item, tensor_type))
    return found


def shape_text(tensor_list):
    return ", ".join(_shape_text(t) for t in tensor_list)


def _shape_text(tensor):
    """``[2,16]``; a nested tensor, which has no single shape, as its parts': ``nested[5,8|3,8]``."""
    if tensor.is_nested:
        return "nested[%s]" % "|".join(",".join(str(int(s)) for s in part.shape) for part in tensor.unbind())
    return "[%s]" % ",".join(str(int(s)) for s in tensor.shape)


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")
