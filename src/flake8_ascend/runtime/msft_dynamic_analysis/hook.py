"""Runtime detectors of ``ascend-analyse -m dynamic_shape`` (flake8-ascend).

This package is copied verbatim beside the instrumented copy of a training
project.  Wrap the training data loop and run the script as usual::

    from msft_dynamic_analysis.hook import DETECTOR
    for images, labels in DETECTOR.start(train_loader):
        ...

When the loop ends (or the process exits) ``DETECTOR`` writes
``msft_dynamic_shape_analysis_report.csv`` beside this package: one row per
call site (a line of the project calling a torch function, a tensor method or
an ``nn.Module``) whose input or output shapes changed between iterations.
A report with only its header means the shapes were static.

Needs the standard library and torch >= 1.11 only, and Python >= 3.7.
Importing this module does nothing else; torch is imported when a detector
starts.  Calls are intercepted without rewriting the project's code: a
``TorchFunctionMode`` sees every torch function, tensor method and operator
(torch >= 1.13; older versions fall back to ``nn.Module`` calls only), and a
global forward hook sees every ``nn.Module`` call.  Both exist only while an
iteration runs, so data loading and the code after the loop run untouched.

``LoopDetector`` is the base the detectors of this package share: iteration
tracking around the data loop, call-site capture (which line of the project
made a call), rank-aware report names and atomic CSV writing.  A detector
subclass supplies its interception (``_install``/``_resume``/``_pause``/
``_uninstall``), ``report_name``, ``header`` and ``rows()``.
"""
import atexit
import csv
import os
import sys
import tempfile
import threading

from .cells import safe_row

PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(PACKAGE_DIR)  # the analysis folder: the instrumented project lives here
STACK_DEPTH = 5  # project frames kept per call site
MAX_FRAMES = 64  # frames walked when capturing a call stack
MAX_SITES = 50000  # call sites recorded before the detector stops learning new ones
MAX_SIGNATURES = 256  # distinct shape signatures remembered per call site
_START_DIR = os.getcwd()  # relative code file names are relative to where the program started


def log(message):
    sys.stderr.write("[msft_dynamic_analysis] %s\n" % message)
    sys.stderr.flush()


def process_rank():
    """This process's rank in a multi-process (DDP) job, or None when it runs alone."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank() if dist.get_world_size() > 1 else None
    except Exception:  # a half-initialised or destroyed process group
        pass
    world = os.environ.get("WORLD_SIZE", "")
    rank = os.environ.get("RANK", os.environ.get("LOCAL_RANK", ""))
    if world.isdigit() and int(world) > 1 and rank.isdigit():
        return int(rank)
    return None


def ranked_name(name, rank):
    """``report.csv`` alone, ``report_rank3.csv`` for rank 3 of a multi-process job."""
    if rank is None:
        return name
    stem, extension = os.path.splitext(name)
    return "%s_rank%d%s" % (stem, rank, extension)


def write_csv(path, header, rows):
    """Write a CSV atomically (a temporary file renamed into place), so readers never see half a report."""
    folder = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as stream:
            writer = csv.writer(stream)
            writer.writerow(header)
            writer.writerows(safe_row(row) for row in rows)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


class CallSites(object):
    """Which line of the project made a call: frames of files under ROOT, outside this package."""

    def __init__(self, root=ROOT):
        self.root = os.path.realpath(root) + os.sep
        self.package = PACKAGE_DIR + os.sep
        self._paths = {}  # code object -> path relative to ROOT ("/" separators), or None

    def path(self, code):
        """The project-relative file of a code object, or None when it is not project code."""
        try:
            return self._paths[code]
        except KeyError:
            pass
        filename = code.co_filename
        relative = None
        if not filename.startswith("<"):
            full = os.path.realpath(os.path.join(_START_DIR, filename))
            if full.startswith(self.root) and not full.startswith(self.package):
                relative = full[len(self.root):].replace(os.sep, "/")
        self._paths[code] = relative
        return relative

    def caller(self, frame, skipped_files):
        """The first frame outwards from ``frame`` not in ``skipped_files``, if it is project code."""
        while frame is not None and frame.f_code.co_filename in skipped_files:
            frame = frame.f_back
        if frame is None or self.path(frame.f_code) is None:
            return None
        return frame

    def stack(self, frame):
        """A hashable key of up to STACK_DEPTH project frames from ``frame`` outwards: ((code, line), ...)."""
        paths = self._paths
        found = []
        walked = 0
        while frame is not None and walked < MAX_FRAMES:
            code = frame.f_code
            if (paths[code] if code in paths else self.path(code)) is not None:
                found.append((code, frame.f_lineno))
                if len(found) == STACK_DEPTH:
                    break
            frame = frame.f_back
            walked += 1
        return tuple(found)

    def describe(self, stack):
        """(file, line, "train.py:40 in main -> train.py:12 in step") of a stack key, outermost first."""
        code, line = stack[0]
        calls = " -> ".join("%s:%d in %s" % (self.path(c), n, c.co_name) for c, n in reversed(stack))
        return self.path(code), line, calls


class LoopDetector(object):
    """Base of the detectors: follows the iterations of the wrapped data loop and owns the report."""

    report_name = ""  # the CSV file written at ROOT (a rank suffix is added in multi-process jobs)
    header = ()

    def __init__(self):
        self.sites = CallSites()
        self.iteration = 0  # iterations finished so far, over every loop this detector wrapped
        self._active = False
        self._owner = None  # (process id, thread id) of the loop being recorded
        self._rank = None
        self._exit_hook = False
        self._unsaved = False

    # -- the loop --------------------------------------------------------------------
    def start(self, loader):
        """Yield the items of ``loader`` and record what every iteration does; report when the loop ends."""
        if self._active:  # a loop nested in the recorded one: already covered
            for item in loader:
                yield item
            return
        iterator = iter(loader)  # DataLoader workers start here, before any interception exists
        self._active = True
        self._owner = (os.getpid(), threading.current_thread().ident)
        if not self._exit_hook:
            atexit.register(self._at_exit)
            self._exit_hook = True
        try:
            self._install()
            while True:
                try:
                    item = next(iterator)  # fetching data is not part of the iteration's record
                except StopIteration:
                    break
                self._resume()
                self._unsaved = True
                try:
                    yield item
                finally:
                    self._pause()
                    self._end_iteration()
        finally:
            self._uninstall()
            self._active = False
            self.save()

    def _end_iteration(self):
        self.iteration += 1
        if self._rank is None:
            self._rank = process_rank()
        self._iteration_done()

    def owns_thread(self):
        return self._owner is not None and self._owner[1] == threading.current_thread().ident

    # -- the report ------------------------------------------------------------------
    def report_path(self):
        rank = self._rank if self._rank is not None else process_rank()
        return os.path.join(ROOT, ranked_name(self.report_name, rank))

    def save(self):
        """Write the report now (the loop's end and process exit call this)."""
        if self._owner is None or self._owner[0] != os.getpid():
            return  # a forked worker: the report belongs to the process that ran the loop
        path = self.report_path()
        rows = self.rows()
        try:
            write_csv(path, self.header, rows)
        except OSError as error:
            log("cannot write %s: %s" % (path, error))
            return
        self._unsaved = False
        self._saved(path, rows)

    def _at_exit(self):
        if self._unsaved:
            self.save()

    # -- what a detector supplies ----------------------------------------------------
    def _install(self):
        """Set up interception when a loop starts (nothing may intercept before)."""

    def _resume(self):
        """An iteration begins: start recording."""

    def _pause(self):
        """An iteration ended (or the loop was left): stop recording."""

    def _uninstall(self):
        """The loop ended: remove every trace of interception."""

    def _iteration_done(self):
        """Per-iteration bookkeeping after ``_pause``."""

    def rows(self):
        return []

    def _saved(self, path, rows):
        log("wrote %s (%d rows)" % (path, len(rows)))


class ShapeRange(object):
    """Smallest and largest size of every dimension seen at one argument position, per rank."""

    __slots__ = ("bounds",)

    def __init__(self):
        self.bounds = {}  # number of dimensions -> (smallest shape, largest shape)

    def add(self, shape):
        known = self.bounds.get(len(shape))
        if known is None:
            self.bounds[len(shape)] = (shape, shape)
        else:
            self.bounds[len(shape)] = (tuple(map(min, known[0], shape)), tuple(map(max, known[1], shape)))

    def __str__(self):
        return "[%s]" % " | ".join("%s-%s" % bounds for _, bounds in sorted(self.bounds.items()))


class CallSite(object):
    """The shapes one call site saw: per occurrence within an iteration, and their ranges."""

    __slots__ = ("first", "seen", "changed", "inputs", "outputs")

    def __init__(self):
        self.first = {}  # n-th call within an iteration -> the signature of its first iteration
        self.seen = set()
        self.changed = False
        self.inputs = []
        self.outputs = []

    def add(self, occurrence, inputs, outputs):
        signature = (inputs, outputs)
        if self.first.setdefault(occurrence, signature) != signature:
            self.changed = True
        if signature in self.seen:
            return
        if len(self.seen) < MAX_SIGNATURES:
            self.seen.add(signature)
        _extend(self.inputs, inputs)
        _extend(self.outputs, outputs)


def _extend(ranges, shapes):
    while len(ranges) < len(shapes):
        ranges.append(ShapeRange())
    for shape_range, shape in zip(ranges, shapes):
        shape_range.add(shape)


def _ranges_text(ranges):
    return ", ".join(str(r) for r in ranges) if ranges else "None"


def _shape(tensor):
    try:
        return tuple(tensor.shape)
    except Exception:  # tensors without a plain shape (nested, some sparse layouts)
        return ()


def tensor_shapes(values, tensor_type):
    """Shapes of the tensors among ``values`` and one level inside their lists, tuples and dicts."""
    found = []
    for value in values:
        if isinstance(value, tensor_type):
            found.append(_shape(value))
        elif isinstance(value, (list, tuple, dict)):
            for item in value.values() if isinstance(value, dict) else value:
                if isinstance(item, tensor_type):
                    found.append(_shape(item))
    return tuple(found)


# Tensor queries and conversions to Python values: their shapes say nothing about kernels.
_QUERIES = frozenset(
    """size dim ndimension numel nelement element_size stride is_contiguous data_ptr item tolist numpy
    storage untyped_storage storage_offset type get_device is_floating_point is_complex is_signed
    requires_grad_ __len__ __repr__ __format__ __str__ __hash__ __bool__ __index__ __int__ __float__
    __iter__ __array__ __reduce_ex__ __deepcopy__ __setstate__ __contains__ __dir__""".split()
)
_CANONICAL = (
    ("torch._C._TensorBase.", "torch.Tensor."), ("torch._C.TensorBase.", "torch.Tensor."),
    ("torch._tensor.Tensor.", "torch.Tensor."), ("torch._C._VariableFunctions.", "torch."),
    ("torch.functional.", "torch."), ("torch._C._nn.", "torch.nn.functional."),
    ("torch._C._linalg.", "torch.linalg."), ("torch._C._fft.", "torch.fft."), ("torch._C._special.", "torch.special."),
)


def function_name(torch, func):
    """``torch.nn.functional.linear``, ``torch.Tensor.__getitem__``; None for queries and property getters."""
    resolve = getattr(torch.overrides, "resolve_name", None)
    name = None
    try:
        name = resolve(func) if resolve is not None else None
    except Exception:
        pass
    if not name:
        owner = getattr(func, "__objclass__", None)
        module = getattr(owner or func, "__module__", None) or "torch"
        qualified = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
        name = "%s.%s" % (module, qualified)
    for prefix, replacement in _CANONICAL:
        if name.startswith(prefix):
            name = replacement + name[len(prefix):]
            break
    last = name.rsplit(".", 1)[-1]
    if last in ("__get__", "__set__") or last in _QUERIES:
        return None
    return name


def module_name(module):
    """``torch.nn.Linear`` (the shortest public path) for torch's modules, ``models.yolo.Detect`` for the project's."""
    cls = type(module)
    parts = cls.__module__.split(".")
    if parts[0] == "torch":
        for end in range(1, len(parts) + 1):
            owner = sys.modules.get(".".join(parts[:end]))
            if owner is not None and getattr(owner, cls.__name__, None) is cls:
                return "%s.%s" % (".".join(parts[:end]), cls.__name__)
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _source_files(modules):
    files = set()
    for module in modules:
        filename = getattr(module, "__file__", None)
        if filename:
            files.add(filename[:-1] if filename.endswith(".pyc") else filename)
    return frozenset(files)


class DynamicShapeDetector(LoopDetector):
    """Records the tensor shapes of every torch call and module call the project makes, per iteration."""

    report_name = "msft_dynamic_shape_analysis_report.csv"
    header = ("Function Name", "File Path", "Line Number", "Call Stack", "Input Shape Range", "Output Shape Range")

    def __init__(self):
        super(DynamicShapeDetector, self).__init__()
        self._records = {}  # (name, stack) -> CallSite
        self._counts = {}  # (name, stack) -> calls so far in this iteration
        self._names = {}  # torch callable -> report name (None: not recorded)
        self._recording = False
        self._intercepted = False
        self._torch = None
        self._mode_class = None  # a TorchFunctionMode subclass, when this torch has a working one
        self._mode = None
        self._module_hook = None
        self._optimizer_hooks = []
        self._stepping = None  # the mode set aside while one of torch's optimizers steps
        self._plain_tensors = None  # torch._C.DisableTorchFunction, where torch has it
        self._dispatch_files = frozenset()  # torch files between a project line and an intercepted call
        self._module_files = frozenset()
        self._full = False

    # -- interception ----------------------------------------------------------------
    def _install(self):
        first = self._torch is None
        if first:
            import torch

            self._torch = torch
            self._dispatch_files = _source_files(
                [getattr(torch, name, None) for name in ("overrides", "_tensor", "functional", "_jit_internal")]
                + [torch.nn.functional])
            self._module_files = _source_files([torch.nn.modules.module])
            self._plain_tensors = getattr(torch._C, "DisableTorchFunction", None)
            self._mode_class = self._working_mode_class(torch)
        register = getattr(self._torch.nn.modules.module, "register_module_forward_hook", None)
        if register is not None:
            self._module_hook = register(self._on_module)
        optimizer = sys.modules.get("torch.optim.optimizer")  # loaded when the project uses torch.optim
        before = getattr(optimizer, "register_optimizer_step_pre_hook", None)
        after = getattr(optimizer, "register_optimizer_step_post_hook", None)
        if self._mode_class is not None and before is not None and after is not None:
            self._optimizer_hooks = [before(self._before_step), after(self._after_step)]
        if first:
            self._describe_interception(register is not None)

    def _describe_interception(self, modules):
        seen = []
        if self._mode_class is not None:
            seen.append("torch functions, tensor methods and operators")
        if modules:
            seen.append("nn.Module calls")
        if not seen:
            log("torch %s offers neither TorchFunctionMode nor global module hooks: nothing can be recorded"
                % self._torch.__version__)
        elif self._mode_class is None:
            log("torch %s has no usable TorchFunctionMode: recording nn.Module calls only" % self._torch.__version__)
        log("recording %s per iteration; report: %s" % (" and ".join(seen) or "nothing", self.report_path()))

    def _working_mode_class(self, torch):
        """A TorchFunctionMode subclass calling ``_on_function``, if entering one really intercepts calls."""
        base = getattr(torch.overrides, "TorchFunctionMode", None)
        if base is None:
            return None
        detector = self

        class _ShapeMode(base):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return detector._on_function(func, args, kwargs or {})

        self._intercepted = False
        try:
            mode = _ShapeMode()
            mode.__enter__()
            try:
                torch.zeros(1).add(1)
            finally:
                mode.__exit__(None, None, None)
        except Exception:  # an older mode API, or a handler that recurses
            return None
        return _ShapeMode if self._intercepted else None

    def _resume(self):
        if self._mode_class is not None:
            mode = self._mode_class()
            mode.__enter__()
            self._mode = mode
        self._recording = True

    def _pause(self):
        self._recording = False
        mode, self._mode = self._mode, None
        if mode is not None and mode is not self._stepping:  # an optimizer step that raised left it exited
            mode.__exit__(None, None, None)
        self._stepping = None

    def _uninstall(self):
        self._pause()
        if self._module_hook is not None:
            self._module_hook.remove()
            self._module_hook = None
        for handle in self._optimizer_hooks:
            handle.remove()
        self._optimizer_hooks = []

    def _before_step(self, optimizer, args, kwargs):
        """Set the mode aside while one of torch's own optimizers steps: none of its calls is project code."""
        mode = self._mode
        current = getattr(self._torch.overrides, "_get_current_function_mode", None)
        if (mode is None or current is None or not self.owns_thread() or self._stepping is not None
                or not type(optimizer).__module__.startswith("torch.")):
            return None
        if current() is mode:  # only when it is on top of the mode stack (never pop a mode of the user's)
            mode.__exit__(None, None, None)
            self._stepping = mode
        return None

    def _after_step(self, optimizer, args, kwargs):
        mode, self._stepping = self._stepping, None
        if mode is not None and mode is self._mode:
            mode.__enter__()
        return None

    def _iteration_done(self):
        self._counts.clear()

    # -- the handlers ----------------------------------------------------------------
    def _on_function(self, func, args, kwargs):
        result = func(*args, **kwargs)
        if not self._recording:
            self._intercepted = True
            return result
        # frames: 0 this handler, 1 the mode's __torch_function__, 2 the caller (or torch's dispatch code)
        frame = self.sites.caller(sys._getframe(2), self._dispatch_files)
        if frame is None:
            return result  # called by torch itself (inside an nn.Module, an optimizer, a data loader...)
        try:
            name = self._names[func]
        except KeyError:
            name = self._names[func] = function_name(self._torch, func)
        except TypeError:  # an unhashable callable
            name = function_name(self._torch, func)
        if name is not None:
            tensor = self._torch.Tensor
            inputs = tensor_shapes(args, tensor)
            if kwargs:
                inputs += tensor_shapes(kwargs.values(), tensor)
            self._record(name, frame, inputs, tensor_shapes((result,), tensor))
        return result

    def _on_module(self, module, inputs, output):
        if not self._recording or not self.owns_thread():
            return None
        frame = self.sites.caller(sys._getframe(1), self._module_files)
        if frame is None:
            return None
        tensor = self._torch.Tensor
        if self._mode is not None and self._plain_tensors is not None:
            with self._plain_tensors():  # reading shapes here need not go through the mode
                shapes = tensor_shapes(inputs, tensor), tensor_shapes((output,), tensor)
        else:
            shapes = tensor_shapes(inputs, tensor), tensor_shapes((output,), tensor)
        cls = type(module)
        try:
            name = self._names[cls]
        except KeyError:
            name = self._names[cls] = module_name(module)
        self._record(name, frame, shapes[0], shapes[1])
        return None

    def _record(self, name, frame, inputs, outputs):
        key = (name, self.sites.stack(frame))
        occurrence = self._counts.get(key, 0)
        self._counts[key] = occurrence + 1
        site = self._records.get(key)
        if site is None:
            if len(self._records) >= MAX_SITES:
                if not self._full:
                    self._full = True
                    log("more than %d call sites: new ones are no longer recorded" % MAX_SITES)
                return
            site = self._records[key] = CallSite()
        site.add(occurrence, inputs, outputs)

    # -- the report ------------------------------------------------------------------
    def rows(self):
        rows = []
        for (name, stack), site in list(self._records.items()):
            if site.changed and stack:
                path, line, calls = self.sites.describe(stack)
                rows.append((name, path, line, calls, _ranges_text(site.inputs), _ranges_text(site.outputs)))
        rows.sort(key=lambda row: (row[1], row[2], row[0], row[3]))
        return rows

    def _saved(self, path, rows):
        if rows:
            log("%d call sites changed shape over %d iterations: see %s" % (len(rows), self.iteration, path))
        else:
            log("no shape changed over %d iterations (static shapes): %s" % (self.iteration, path))


DETECTOR = DynamicShapeDetector()
