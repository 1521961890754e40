"""ATen-level interception shared by the overflow (``overflow``) and operator (``ops``) detectors.

``AtenDetector`` extends ``hook.LoopDetector`` with a ``TorchDispatchMode``
(torch >= 1.13) that sees every ATen operator the recorded iterations run,
forward and backward, below autograd: ``F.linear`` arrives as ``aten::t`` and
``aten::addmm``, ``loss.backward()`` as the backward kernels.  The mode exists
only while a recorded iteration runs; other iterations cost one generator step.

Call sites: an operator issued by Python code is attributed to the first frame
outside torch and this package (the project's line, or a library's such as
torchvision's), followed by the project frames around it.  A backward operator
has no Python caller of its own, so the forward operator's site is stored on
the autograd node its output got (``grad_fn.metadata``) and read back from the
node that runs it (``torch._C._current_autograd_node``, torch >= 1.13).

Settings come, first match wins, from keyword arguments of ``start()``,
environment variables, ``settings.json`` beside this module (written by
``ascend-analyse``), then the defaults.  Standard library and torch only.
"""
import json
import os
import sys
import sysconfig

from .hook import PACKAGE_DIR, STACK_DEPTH, LoopDetector, log

MAX_FRAMES = 200  # frames walked to find the issuing line (nn.Module calls nest deeply)
IGNORED = ("profiler.",)  # record_function markers (optimizers, DataLoader): instrumentation, not computation
SITE_KEY = "msft_site"  # the key of a forward call site in an autograd node's metadata
SETTINGS_FILE = os.path.join(PACKAGE_DIR, "settings.json")


def load_settings(section):
    """The ``section`` of settings.json beside this module ({} without one)."""
    try:
        with open(SETTINGS_FILE, encoding="utf-8") as handle:
            value = json.load(handle).get(section, {})
    except (OSError, ValueError, AttributeError):
        return {}
    return value if isinstance(value, dict) else {}


def setting(given, section, key, env, default, convert):
    """``given[key]``, else the environment variable ``env``, else settings.json, else ``default``; converted.

    A bad value in the environment or settings.json is logged and skipped: it must not stop a training run.
    """
    if given.get(key) is not None:
        return convert(given[key])  # the caller's own argument: a bad one is the caller's error
    for where, raw in ((env, os.environ.get(env)), ("settings.json " + key, section.get(key))):
        if raw is None or raw == "":
            continue
        try:
            return convert(raw)
        except (TypeError, ValueError):
            log("ignoring %s=%r: not a valid value" % (where, raw))
    return default


def flag(value):
    """A yes/no setting: True, 1, "1", "yes", "true", "on"."""
    return value is True or str(value).strip().lower() in ("1", "yes", "true", "on")


def dispatch_mode_base():
    """torch's TorchDispatchMode class, or None when this torch has none usable as a context manager."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return None
    return TorchDispatchMode if hasattr(TorchDispatchMode, "__enter__") else None


def _library_roots():
    """sys.path folders, longest first, to name library files (torchvision/ops/boxes.py)."""
    roots = set()
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            roots.add(os.path.realpath(entry) + os.sep)
    return sorted(roots, key=len, reverse=True)


class Sites(object):
    """Who issued an operator: the first frame outside torch, this package and the standard library."""

    def __init__(self, torch, project):
        self.project = project  # hook.CallSites: project-relative paths
        skipped = [os.path.dirname(os.path.realpath(torch.__file__)) + os.sep, PACKAGE_DIR + os.sep]
        stdlib = sysconfig.get_paths().get("stdlib")
        self.stdlib = os.path.realpath(stdlib) + os.sep if stdlib else None
        self.skipped = tuple(skipped)
        self._foreign = {}  # code object -> True when the frame is torch's, ours or the standard library's
        self._names = {}  # code object -> the file as reports show it
        self._roots = None

    def foreign(self, code):
        """Whether a code object is torch's, this package's or the standard library's (cached)."""
        filename = code.co_filename
        if filename.startswith("<"):
            result = not filename.startswith("<ipython")  # <frozen importlib>, <string> from torch's codegen
        else:
            full = os.path.realpath(filename)
            result = full.startswith(self.skipped) or (
                self.stdlib is not None and full.startswith(self.stdlib) and "-packages" + os.sep not in full)
        self._foreign[code] = result
        return result

    def issuer(self, frame):
        """The (code, line) stack key of the line that issued the current call, or () when none is found."""
        known = self._foreign
        for _ in range(MAX_FRAMES):
            if frame is None:
                return ()
            code = frame.f_code
            skip = known.get(code)
            if skip is None:
                skip = self.foreign(code)
            if not skip:
                return ((code, frame.f_lineno),) + self.project.stack(frame.f_back)[:STACK_DEPTH - 1]
            frame = frame.f_back
        return ()

    def file(self, code):
        """Project-relative path, else the path below its sys.path folder, else the full path."""
        try:
            return self._names[code]
        except KeyError:
            pass
        name = self.project.path(code)
        if name is None:
            name = full = os.path.realpath(code.co_filename)
            if self._roots is None:
                self._roots = _library_roots()
            for root in self._roots:
                if full.startswith(root):
                    name = full[len(root):].replace(os.sep, "/")
                    break
        self._names[code] = name
        return name

    def describe(self, stack):
        """(file, line, "train.py:40 in main -> model.py:12 in forward") of a stack key, outermost last."""
        if not stack:
            return "", "", ""
        code, line = stack[0]
        calls = " -> ".join("%s:%d in %s" % (self.file(c), n, c.co_name) for c, n in reversed(stack))
        return self.file(code), line, calls


class AtenDetector(LoopDetector):
    """A loop detector that sees every ATen operator of the iterations it records."""

    settings_section = ""  # the section of settings.json

    def __init__(self):
        super(AtenDetector, self).__init__()
        self.torch = None
        self.supported = None  # None until installed: whether ATen operators can be seen
        self.site_finder = None
        self._mode_class = None
        self._mode = None
        self._pending = None  # (outputs, site) of the last forward operator, to label their autograd nodes
        self._current_node = None
        self._options = {}
        self._ignored = {}  # func -> whether it is left out (IGNORED namespaces)

    def start(self, loader, **options):
        """Like ``LoopDetector.start``; keyword arguments override the environment and settings.json."""
        self._options = options
        return super(AtenDetector, self).start(loader)

    def option(self, key, env, default, convert):
        return setting(self._options, load_settings(self.settings_section), key, env, default, convert)

    # -- interception ----------------------------------------------------------------
    def _install(self):
        if self.torch is None:
            import torch

            self.torch = torch
            self.site_finder = Sites(torch, self.sites)
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
        if self.supported and self.records(self.iteration):
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
        if node is None:  # forward, optimizer, or Python code between
            site = self.site_finder.issuer(sys._getframe(2))
        else:  # AccumulateGrad and friends have no forward site: the backward() call
            site = node.metadata.get(SITE_KEY) or self.site_finder.issuer(sys._getframe(2))
        result = self.on_operator(func, args, kwargs, node, site)
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

    def records(self, iteration):
        """Whether iteration ``iteration`` (0-based) is recorded."""
        return True

    def _begin_iteration(self):
        """A recorded iteration starts."""

    def _end_recorded_iteration(self):
        """A recorded iteration ended."""

    def on_operator(self, func, args, kwargs, node, site):  # pragma: no cover - abstract
        """Run ``func(*args, **kwargs)`` and return its result, recording what the detector needs."""
        raise NotImplementedError

    def save(self):
        if self.supported is False:
            if self._unsaved:
                log("no %s written: nothing could be recorded" % self.report_name)
                self._unsaved = False
            return
        super(AtenDetector, self).save()


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
    return ", ".join("[%s]" % ",".join(str(int(s)) for s in t.shape) for t in tensor_list)


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")
