"""Runtime detectors of ``ascend-analyse -m dynamic_shape`` (flake8-ascend).

This package is copied verbatim beside the instrumented copy of a training
project.  Wrap the training data loop and run the script as usual::

    from msft_dynamic_analysis.hook import DETECTOR
    for images, labels in DETECTOR.start(train_loader):
        ...

When the loop ends (or the process exits) ``DETECTOR`` writes
``msft_dynamic_shape_analysis_report.csv`` beside this package: one row per
torch function, tensor method or ``nn.Module`` class and project line (the
line that called it, or that called into the library that did, with that
library frame) whose input or
output shapes changed between iterations of one loop, with the loops' phases
(train/eval) and every call path that reached it.  A report with only its
header means the shapes were static.  Each wrapped loop records its first 10
iterations, then one in 10 (settings ``iterations`` and ``every``, environment
``MSFT_SHAPES_ITERATIONS`` and ``MSFT_SHAPES_EVERY``).

Needs the standard library and torch >= 1.11 only, and Python >= 3.7.
Importing this module does nothing else; torch is imported when a detector
starts.  Calls are intercepted without rewriting the project's code: a
``TorchFunctionMode`` sees every torch function, tensor method and operator
(torch >= 1.13; older versions fall back to ``nn.Module`` calls only), and a
global forward hook sees every ``nn.Module`` call.  Both exist only while a
recorded iteration runs, so data loading and the code after the loop run
untouched.

``LoopDetector`` is the base the detectors of this package share: iteration
tracking around each wrapped loop, call-site capture (which line of the
project made a call, and through which library), settings, rank-aware report
names and atomic CSV writing.  A detector
subclass supplies its interception (``_install``/``_resume``/``_pause``/
``_uninstall``), ``report_name``, ``header`` and ``rows()``.
"""
import atexit
import json
import os
import sys
import threading
import time

from .cells import safe_row

PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(PACKAGE_DIR)  # the analysis folder: the instrumented project lives here
STACK_DEPTH = 5  # project frames kept per call site
MAX_FRAMES = 200  # frames walked when capturing a call stack (nn.Module calls nest deeply)
MAX_SITES = 50000  # call sites recorded before the detector stops learning new ones
MAX_SIGNATURES = 256  # distinct shape signatures remembered per call site
SETTINGS_FILE = os.path.join(PACKAGE_DIR, "settings.json")  # written by ascend-analyse
CHECKPOINT_SECONDS = 5.0  # a recording loop rewrites its report at least this often (what SIGKILL can lose)
_DETECTORS = []  # detectors whose loops started in this process: their reports are saved on SIGTERM
_WRITING = set()  # temporary report files being written: removed when SIGTERM ends the process
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


def csv_line(row):
    """One CSV record as the ``csv`` module's default dialect writes it (this package does not import ``csv``:
    a project's own ``csv.py`` beside the script would stand in for it)."""
    cells = []
    for value in row:
        text = "" if value is None else str(value)
        if any(c in text for c in ',"\r\n') or (text == "" and len(row) == 1):
            text = '"%s"' % text.replace('"', '""')
        cells.append(text)
    return ",".join(cells) + "\r\n"


def write_csv(path, header, rows):
    """Write a CSV atomically (a temporary file renamed into place), so readers never see half a report."""
    temporary = os.path.join(os.path.dirname(path), ".%s.%d.%s.tmp" % (
        os.path.basename(path), os.getpid(), "".join("%02x" % b for b in bytearray(os.urandom(4)))))
    _WRITING.add(temporary)
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as stream:
            stream.write(csv_line(header))
            for row in rows:
                stream.write(csv_line(safe_row(row)))
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    finally:
        _WRITING.discard(temporary)


def script_name():
    """The program's entry point as a file-name part: ``train`` (``python train.py``), ``tools.eval``
    (``python tools/eval.py``), ``yolov5.train`` (``python -m yolov5.train``)."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if not name:
        filename = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else "")
        full = os.path.realpath(os.path.join(_START_DIR, filename)) if filename else ""
        root = os.path.realpath(ROOT) + os.sep
        name = full[len(root):] if full.startswith(root) else os.path.basename(full)
        name = (name[:-3] if name.endswith(".py") else name).replace(os.sep, ".")
    safe = "".join(c if c.isalnum() and c.isascii() or c in "._-" else "_" for c in name).strip(".")
    return safe or "script"


def _install_sigterm_handler():
    """Save every report when SIGTERM arrives (timeout, kill, SLURM), then do what the program would have done:
    call the handler it installed, or end killed by SIGTERM.  Only from the main thread, and not when SIGTERM is
    ignored or handled outside Python."""
    import signal  # (imported by torch already)

    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None or previous is signal.SIG_IGN or getattr(previous, "msft_saves_reports", False):
        return

    def on_sigterm(signum, frame):
        for detector in list(_DETECTORS):
            detector.save()
        if callable(previous):
            return previous(signum, frame)
        for temporary in list(_WRITING):  # a report being written when the signal came: never left behind
            try:
                os.remove(temporary)
            except OSError:
                pass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return None

    on_sigterm.msft_saves_reports = True
    signal.signal(signal.SIGTERM, on_sigterm)


def load_settings(section):
    """The ``section`` of settings.json beside this package ({} without one)."""
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


def natural(value):
    """A whole number >= 0 (a setting)."""
    number = int(value)
    if number < 0:
        raise ValueError(value)
    return number


def positive(value):
    """A whole number >= 1 (a setting)."""
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


def _library_roots():
    """sys.path folders, longest first, to name library files (torchvision/ops/boxes.py)."""
    roots = set()
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            roots.add(os.path.realpath(entry) + os.sep)
    return sorted(roots, key=len, reverse=True)


def _project_names():
    """Top-level module names the copy provides: its root's (and ``src/``'s) packages and modules."""
    names = set()
    for folder in (ROOT, os.path.join(ROOT, "src")):
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".py"):
                names.add(entry[:-3])
            elif os.path.isfile(os.path.join(folder, entry, "__init__.py")):
                names.add(entry)
    names.discard(os.path.basename(PACKAGE_DIR))
    return names


def foreign_project_modules():
    """Warn about modules named like the copy's that were imported from elsewhere (an installed original):
    their calls are not the copy's, so they are neither instrumented nor attributed."""
    names = _project_names()
    root = os.path.realpath(ROOT) + os.sep
    foreign = {}
    for name, module in list(sys.modules.items()):
        filename = getattr(module, "__file__", None)
        if filename and name.partition(".")[0] in names:
            full = os.path.realpath(filename)
            if not full.startswith(root):
                foreign[name] = full
    if foreign:
        first = sorted(foreign)[0]
        log("%d modules named like this copy's were imported from elsewhere (%s from %s): they run uninstrumented "
            "and their calls are not reported; run the copy from its root as the log of ascend-analyse says "
            "(python -m package.module)" % (len(foreign), first, foreign[first]))


PROJECT, LIBRARY, TORCH, STDLIB = "project", "library", "torch", "stdlib"


def _direct(func, args, kwargs):
    return func(*args, **kwargs)


def _never():
    return False


def compiling(torch):
    """torch's "is Dynamo tracing now" test (a constant to Dynamo), or one that always answers False."""
    compiler = getattr(torch, "compiler", None)
    return getattr(compiler, "is_compiling", None) or getattr(getattr(torch, "_dynamo", None), "is_compiling", _never)


class CallersLines(object):
    """Call a function as if from the line of a given frame, so that a warning the call raises (torch's C++
    warnings, ``warnings.warn(stacklevel=2)`` in torch's Python code) names the user's line and module, as it
    would without a detector, rather than this package's line that made the call.

    Per (code, line): a one-line function compiled with the caller's file name at the caller's line and run
    in the caller's globals.  Its code objects are registered as torch's with ``sites``, so no report names them.
    """

    def __init__(self, sites):
        self.sites = sites
        self._made = {}  # (code, line) -> function

    def at(self, frame):
        """A function ``call(func, args, kwargs)`` that runs ``func(*args, **kwargs)`` from ``frame``'s line."""
        if frame is None:
            return _direct
        code, line = frame.f_code, frame.f_lineno
        try:
            return self._made[code, line]
        except KeyError:
            pass
        if not isinstance(line, int) or line < 1 or len(self._made) >= MAX_SITES:
            return _direct
        source = "\n" * (line - 1) + "def call(func, args, kwargs): return func(*args, **kwargs)\n"
        try:
            module = compile(source, code.co_filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, MemoryError):
            return _direct
        inner = [c for c in module.co_consts if isinstance(c, type(code))][0]
        self.sites.internal(inner)
        call = self._made[code, line] = type(_direct)(inner, frame.f_globals)
        return call


class CallSites(object):
    """Which line made a call: project frames (files under ROOT, outside this package), and the library frame
    between them and torch when the call was made inside a library (torchvision.ops.nms, a timm model).

    A site is a hashable stack key ``((code, line), ...)``, innermost first: the project frames (up to
    STACK_DEPTH), preceded by the library frame that made the call when a library made it.
    """

    def __init__(self, root=ROOT):
        self.root = os.path.realpath(root) + os.sep
        self.package = PACKAGE_DIR + os.sep
        self._paths = {}  # code object -> path relative to ROOT ("/" separators), or None
        self._kinds = {}  # code object -> PROJECT, LIBRARY, TORCH (torch or this package) or STDLIB
        self._names = {}  # code object -> the file as reports show it
        self._torch = None  # torch's folder
        self._stdlib = None
        self._roots = None

    def internal(self, code):
        """Count ``code`` (this package's, though named after a project file) as torch's."""
        self._paths[code] = None
        self._kinds[code] = TORCH

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

    def kind(self, code):
        """PROJECT, LIBRARY, TORCH (torch's or this package's code) or STDLIB (cached per code object)."""
        try:
            return self._kinds[code]
        except KeyError:
            pass
        if self._torch is None:
            torch = sys.modules.get("torch")
            self._torch = os.path.dirname(os.path.realpath(torch.__file__)) + os.sep if torch else self.package
            self._stdlib = os.path.dirname(os.path.realpath(os.__file__)) + os.sep  # os: loaded at startup
        filename = code.co_filename
        if self.path(code) is not None:
            found = PROJECT
        elif filename.startswith("<"):  # <frozen importlib>, <string> from torch's codegen; <ipython-input>
            found = LIBRARY if filename.startswith("<ipython") else STDLIB
        else:
            full = os.path.realpath(filename)
            if full.startswith((self._torch, self.package)):
                found = TORCH
            elif self._stdlib is not None and full.startswith(self._stdlib) and "-packages" + os.sep not in full:
                found = STDLIB
            else:
                found = LIBRARY
        self._kinds[code] = found
        return found

    def site(self, frame, torch_calls=False, skipped=frozenset()):
        """The site of a call made by ``frame`` (see the class doc), or () when there is none to report.

        Frames of the files in ``skipped`` (the hook's own dispatch code) are left out first, then
        standard-library frames are looked through.  A frame of torch's own code first means torch made the
        call itself (inside an ``nn.Module``, an optimizer): () unless ``torch_calls``, which looks through
        torch too (ATen operators are issued by torch's Python code for the line that called it).
        """
        while frame is not None and frame.f_code.co_filename in skipped:
            frame = frame.f_back
        library = None
        for _ in range(MAX_FRAMES):
            if frame is None:
                break
            code = frame.f_code
            kind = self._kinds.get(code) or self.kind(code)
            if kind is PROJECT:
                stack = self.stack(frame)
                return stack if library is None else (library,) + stack[:STACK_DEPTH - 1]
            if kind is LIBRARY and library is None:
                library = (code, frame.f_lineno)
            elif kind is TORCH and library is None and not torch_calls:
                return ()
            frame = frame.f_back
        return (library,) if library is not None else ()

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

    def file(self, code):
        """Project-relative path, else the path below its sys.path folder, else the full path."""
        try:
            return self._names[code]
        except KeyError:
            pass
        name = self.path(code)
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
        """(file, line, "train.py:40 in main -> train.py:12 in step", library frame) of a site.

        File and line are the innermost project frame's (the line a user can change); the library frame,
        ``torchvision/ops/boxes.py:41 in nms``, is "" when the project made the call itself.
        """
        if not stack:
            return "", "", "", ""
        library = ""
        code, line = stack[0]
        if self.path(code) is None:
            library = "%s:%d in %s" % (self.file(code), line, code.co_name)
            if len(stack) == 1:  # no project frame called into the library: name the library's line
                return self.file(code), line, library, library
            stack = stack[1:]
            code, line = stack[0]
        calls = " -> ".join("%s:%d in %s" % (self.file(c), n, c.co_name) for c, n in reversed(stack))
        return self.file(code), line, calls, library


class Loop(object):
    """One wrapped loop (its ``for`` line): its own iteration count, and whether it trains."""

    __slots__ = ("where", "iterations", "training", "checkpointed")

    def __init__(self, where):
        self.where = where  # "train.py:28"
        self.iterations = 0  # its iterations so far, over every time the loop ran
        self.training = False  # an iteration ran backward (or an optimizer step)
        self.checkpointed = False  # the report was saved when its first recording window closed

    @property
    def phase(self):
        return "train" if self.training else "eval"


class LoopDetector(object):
    """Base of the detectors: follows the iterations of the wrapped data loops and owns the report.

    Each wrapped loop (each ``for`` line running ``start()``) is followed on its own: a ``Loop`` counts
    its iterations (so recording windows are per loop) and learns its phase, ``train`` once one of its
    iterations runs backward or an optimizer step, else ``eval``.
    """

    report_name = ""  # the CSV file written at ROOT (a rank suffix is added in multi-process jobs)
    header = ()
    settings_section = ""  # its section of settings.json

    def __init__(self):
        self.sites = CallSites()
        self.iteration = 0  # iterations finished so far, over every loop this detector wrapped
        self.loop = None  # the Loop running now
        self.loops = {}  # (code, line) of a loop's for statement -> Loop
        self._options = {}
        self._active = False
        self._owner = None  # (process id, thread id) of the loop being recorded
        self._rank = None
        self._exit_hook = False
        self._unsaved = False
        self._exited = False  # the process exit closed a loop that was still inside an iteration
        self._saved_at = None  # time.time() of the last incremental save
        self._failure = None  # the last failure to write the report, logged once
        self._script = None

    def option(self, key, env, default, convert):
        return setting(self._options, load_settings(self.settings_section), key, env, default, convert)

    # -- the loop --------------------------------------------------------------------
    def start(self, loader, **options):
        """Yield the items of ``loader`` and record what every iteration does; report when the loop ends.

        Keyword arguments override the environment and settings.json.
        """
        if self._active:  # a loop nested in the recorded one: already covered
            for item in loader:
                yield item
            return
        consumer = sys._getframe(1)  # the frame running the for statement (or what iterates for it)
        self.loop = self._loop_at(consumer)
        iterator = iter(loader)  # DataLoader workers start here, before any interception exists
        self._options = options
        self._active = True
        self._owner = (os.getpid(), threading.current_thread().ident)
        if not self._exit_hook:
            atexit.register(self._at_exit)
            self._exit_hook = True
            self._script = script_name()
            _DETECTORS.append(self)
            _install_sigterm_handler()
            foreign_project_modules()
        try:
            self._install()
            while True:
                try:
                    item = next(iterator)  # fetching data is not part of the iteration's record
                except StopIteration:
                    break
                recorded = self.records(self.loop.iterations)
                if recorded:
                    self._resume()
                self._unsaved = True
                try:
                    yield item
                finally:
                    if not self._exited:
                        self._pause()
                        self._end_iteration()
                if recorded:
                    self._checkpoint()
        finally:
            if not self._exited:  # (after the process exit: the interpreter is being torn down, touch nothing)
                self._uninstall()
                self._active = False
                self.save()

    def _checkpoint(self):
        """Rewrite the report after a recorded iteration when the loop's first recording window just closed,
        or at least every CHECKPOINT_SECONDS, so that a process killed outright loses little."""
        now = time.time()
        window_closed = not self.records(self.loop.iterations) and self.loop.iterations > 0
        if window_closed and not self.loop.checkpointed or now - (self._saved_at or now) >= CHECKPOINT_SECONDS:
            self.loop.checkpointed = window_closed or self.loop.checkpointed
            self.save(quiet=True)
        if self._saved_at is None:
            self._saved_at = now

    def _loop_at(self, frame):
        """The Loop of the for statement iterating from ``frame`` (or the first project frame outwards, when a
        library iterates for it: ``tqdm(DETECTOR.start(loader))``)."""
        stack = self.sites.stack(frame)
        key = stack[0] if stack else (frame.f_code, frame.f_lineno)
        loop = self.loops.get(key)
        if loop is None:
            code, line = key
            loop = self.loops[key] = Loop("%s:%d" % (self.sites.path(code) or code.co_filename, line))
        return loop

    def _end_iteration(self):
        self.iteration += 1
        self.loop.iterations += 1
        if self._rank is None:
            self._rank = process_rank()
        self._iteration_done()

    def owns_thread(self):
        return self._owner is not None and self._owner[1] == threading.current_thread().ident

    # -- the report ------------------------------------------------------------------
    def report_path(self):
        """ROOT/report.csv; ``report_<script>.csv`` when settings say each script of the copy gets its own
        (``per_script``: ascend-analyse sets it when the copy has several scripts to run)."""
        rank = self._rank if self._rank is not None else process_rank()
        name = self.report_name
        if self.option("per_script", "MSFT_REPORT_PER_SCRIPT", False, flag):
            stem, extension = os.path.splitext(name)
            name = "%s_%s%s" % (stem, self._script or script_name(), extension)
        return os.path.join(ROOT, ranked_name(name, rank))

    def save(self, quiet=False):
        """Write the report now (the loop's end, process exit and SIGTERM call this; ``quiet``: a checkpoint
        while recording goes on).  Never raises: a report must not stop the training run."""
        if self._owner is None or self._owner[0] != os.getpid():
            return  # a forked worker: the report belongs to the process that ran the loop
        path = self.report_name
        try:
            path = self.report_path()
            rows = self.rows()
            write_csv(path, self.header, rows)
        except Exception as error:  # a full disk, a folder made read-only, a bug of this package
            message = "cannot write %s: %s: %s" % (path, type(error).__name__, error)
            if message != self._failure:  # once, not at every checkpoint
                log(message)
            self._failure = message
            return
        self._failure = None
        self._saved_at = time.time()
        if not quiet:
            self._unsaved = False
            self._saved(path, rows)

    def _at_exit(self):
        if self._active and not self._exited:
            # a loop still inside an iteration (a generator never resumed): end it now, while the interpreter
            # still works, and count that iteration; the generator's late clean-up then touches nothing
            self._exited = True
            self._pause()
            self._end_iteration()
            self._uninstall()
            self._unsaved = True
        if self._unsaved:
            self.save()

    # -- what a detector supplies ----------------------------------------------------
    def _install(self):
        """Set up interception when a loop starts (nothing may intercept before)."""

    def records(self, iteration):
        """Whether the running loop's iteration ``iteration`` (0-based, counted per loop) is recorded."""
        return True

    def _resume(self):
        """A recorded iteration begins: start recording."""

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


def _merge(ranges, others):
    """Widen ``ranges`` (ShapeRange per argument position) by ``others``."""
    while len(ranges) < len(others):
        ranges.append(ShapeRange())
    for shape_range, other in zip(ranges, others):
        for low, high in other.bounds.values():
            shape_range.add(low)
            shape_range.add(high)


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
    """Records the tensor shapes of every torch call and module call the project makes, per iteration.

    Each loop's first ``iterations`` iterations are recorded, then one in ``every`` (0: none): the
    iterations between run untouched, which keeps a long run's steady state near the original's speed.
    """

    report_name = "msft_dynamic_shape_analysis_report.csv"
    header = ("Function Name", "File Path", "Line Number", "Phase", "Distinct Shapes", "Library Frame",
              "Call Stacks", "Input Shape Range", "Output Shape Range")
    settings_section = "dynamic_shape"

    def __init__(self):
        super(DynamicShapeDetector, self).__init__()
        self._records = {}  # (name, loop, site) -> CallSite
        self._counts = {}  # (name, loop, site) -> calls so far in this iteration
        self._names = {}  # torch callable -> report name (None: not recorded)
        self._recording = False
        self._intercepted = False
        self._torch = None
        self._backward = None  # torch.Tensor.backward: a loop whose iteration calls it trains
        self._compiling = _never  # torch.compiler.is_compiling
        self._callers = CallersLines(self.sites)
        self._mode_class = None  # a TorchFunctionMode subclass, when this torch has a working one
        self._mode = None
        self._module_hook = None
        self._register_module_hook = None
        self._optimizer_hooks = []
        self._stepping = None  # the mode set aside while one of torch's optimizers steps
        self._inside = None  # the torch module inside which the mode is set aside (see _before_module)
        self._module_pre_hook = None
        self._register_module_pre_hook = None
        self._torch_only = None  # module -> whether it and all its submodules are torch's (weak keys)
        self._current_mode = None  # torch.overrides._get_current_function_mode
        self._plain_tensors = None  # torch._C.DisableTorchFunction, where torch has it
        self._dispatch_files = frozenset()  # torch files between a project line and an intercepted call
        self._module_files = frozenset()
        self._compiled_module = None  # torch.compile's OptimizedModule class, once torch._dynamo is loaded
        self._full = False
        self.first = 10
        self.every = 10

    # -- interception ----------------------------------------------------------------
    def _install(self):
        first = self._torch is None
        if first:
            import torch

            self._torch = torch
            self._compiling = compiling(torch)
            self._backward = torch.Tensor.backward
            self._dispatch_files = _source_files(
                [getattr(torch, name, None)
                 for name in ("overrides", "_tensor", "functional", "_jit_internal", "_ops")]
                + [torch.nn.functional])
            self._plain_tensors = getattr(torch._C, "DisableTorchFunction", None)
            self._mode_class = self._working_mode_class(torch)
            self._register_module_hook = getattr(torch.nn.modules.module, "register_module_forward_hook", None)
            self._register_module_pre_hook = getattr(
                torch.nn.modules.module, "register_module_forward_pre_hook", None)
            import weakref  # (imported by torch already)

            self._torch_only = weakref.WeakKeyDictionary()
            self._current_mode = getattr(torch.overrides, "_get_current_function_mode", None)
            if self._register_module_hook is not None:
                import warnings  # (imported by torch already)

                # torch.compile's wrapper warns on every call that our global hook also sees it: it is ours
                warnings.filterwarnings("ignore", r"Using `torch\.compile\(module\)` when there are global hooks")
        # torch.compile's wrappers (torch._dynamo, imported by the first torch.compile) lie between a compiled
        # module's call and the hooks of the module it wraps, which run outside the compiled code
        dynamo = [module for name, module in list(sys.modules.items()) if name.startswith("torch._dynamo")]
        self._module_files = _source_files([self._torch.nn.modules.module] + dynamo)
        self._compiled_module = getattr(sys.modules.get("torch._dynamo.eval_frame"), "OptimizedModule", None)
        self.first = self.option("iterations", "MSFT_SHAPES_ITERATIONS", 10, natural)
        self.every = self.option("every", "MSFT_SHAPES_EVERY", 10, natural)
        optimizer = sys.modules.get("torch.optim.optimizer")  # loaded when the project uses torch.optim
        before = getattr(optimizer, "register_optimizer_step_pre_hook", None)
        after = getattr(optimizer, "register_optimizer_step_post_hook", None)
        if before is not None and after is not None:
            self._optimizer_hooks = [before(self._before_step), after(self._after_step)]
        if first:
            self._describe_interception(self._register_module_hook is not None)

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
        then = "then one in %d" % self.every if self.every else "then none"
        log("recording %s in the first %d iterations of each loop, %s; report: %s"
            % (" and ".join(seen) or "nothing", self.first, then, self.report_path()))

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

    def records(self, iteration):
        """Whether a loop's ``iteration`` (0-based) is recorded: the first ones, then one in ``every``."""
        return iteration < self.first or (self.every > 0 and (iteration - self.first) % self.every == 0)

    def _resume(self):
        if self._mode_class is not None:
            mode = self._mode_class()
            mode.__enter__()
            self._mode = mode
        if self._register_module_hook is not None:
            self._module_hook = self._register_module_hook(self._on_module)
            if self._mode is not None and None not in (self._register_module_pre_hook, self._current_mode):
                self._module_pre_hook = self._register_module_pre_hook(self._before_module)
        self._recording = True

    def _pause(self):
        self._recording = False
        mode, self._mode = self._mode, None
        if mode is not None and mode is not self._stepping and self._inside is None:
            mode.__exit__(None, None, None)  # (an optimizer step or a torch module that raised left it exited)
        self._stepping = self._inside = None
        for hook in (self._module_hook, self._module_pre_hook):
            if hook is not None:
                hook.remove()
        self._module_hook = self._module_pre_hook = None

    def _uninstall(self):
        self._pause()
        for handle in self._optimizer_hooks:
            handle.remove()
        self._optimizer_hooks = []

    def _before_step(self, optimizer, args, kwargs):
        """Set the mode aside while one of torch's own optimizers steps: none of its calls is project code."""
        if not self.owns_thread():
            return None
        self.loop.training = True
        mode = self._mode
        current = getattr(self._torch.overrides, "_get_current_function_mode", None)
        if (mode is None or current is None or self._stepping is not None
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

    def _before_module(self, module, inputs):
        """Set the mode aside while a module made of torch's modules only runs: none of its calls is project code,
        and while a mode is active torch's ``has_torch_function`` is true, which turns off the fast paths of
        ``nn.TransformerEncoder`` and ``nn.MultiheadAttention`` (their outputs would differ from the original's)."""
        if self._compiling():  # (first: Dynamo traces hooks, and must not see this detector's state)
            return None
        mode = self._mode
        if mode is None or self._inside is not None or self._stepping is not None:
            return None
        try:
            torch_only = self._torch_only[module]
        except KeyError:
            torch_only = self._torch_only[module] = all(
                type(m).__module__.startswith("torch.") for m in module.modules())
        except TypeError:  # a module that cannot be weakly referenced
            return None
        if torch_only and self.owns_thread() and self._current_mode() is mode:
            mode.__exit__(None, None, None)
            self._inside = module
        return None

    def _iteration_done(self):
        self._counts.clear()

    # -- the handlers ----------------------------------------------------------------
    def _on_function(self, func, args, kwargs):
        if self._compiling():  # Dynamo traces this handler into a compiled graph: add nothing to it
            return func(*args, **kwargs)
        if not self._recording:
            self._intercepted = True
            return func(*args, **kwargs)
        # frames: 0 this handler, 1 the mode's __torch_function__, 2 the caller (or torch's dispatch code)
        caller = sys._getframe(2)
        skipped = self._dispatch_files
        while caller is not None and caller.f_code.co_filename in skipped:
            caller = caller.f_back
        result = self._callers.at(caller)(func, args, kwargs)
        if func is self._backward:
            self.loop.training = True
        site = self.sites.site(caller)
        if not site:
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
            self._record(name, site, inputs, tensor_shapes((result,), tensor))
        return result

    def _on_module(self, module, inputs, output):
        if self._compiling():
            return None
        if module is self._inside:
            self._inside = None
            self._mode.__enter__()
        if not self._recording or not self.owns_thread():
            return None
        site = self.sites.site(sys._getframe(1), skipped=self._module_files)
        if not site:
            return None
        tensor = self._torch.Tensor
        if self._mode is not None and self._plain_tensors is not None:
            with self._plain_tensors():  # reading shapes here need not go through the mode
                shapes = tensor_shapes(inputs, tensor), tensor_shapes((output,), tensor)
        else:
            shapes = tensor_shapes(inputs, tensor), tensor_shapes((output,), tensor)
        cls = type(module)
        if cls is self._compiled_module:  # torch.compile(model): recorded as the model, at this boundary (the
            module = module._orig_mod  # model's own hooks run while torch.compiler.is_compiling() says True)
            cls = type(module)
        try:
            name = self._names[cls]
        except KeyError:
            name = self._names[cls] = module_name(module)
        self._record(name, site, shapes[0], shapes[1])
        return None

    def _record(self, name, site, inputs, outputs):
        key = (name, self.loop, site)
        occurrence = self._counts.get(key, 0)
        self._counts[key] = occurrence + 1
        record = self._records.get(key)
        if record is None:
            if len(self._records) >= MAX_SITES:
                if not self._full:
                    self._full = True
                    log("more than %d call sites: new ones are no longer recorded" % MAX_SITES)
                return
            record = self._records[key] = CallSite()
        record.add(occurrence, inputs, outputs)

    # -- the report ------------------------------------------------------------------
    def rows(self):
        """One row per function (or module class), project line and library frame (if a library made the call):
        the call paths and loops that reached it merged, most distinct shapes first."""
        merged = {}  # (name, file, line, library) -> [phases, call paths, signatures, inputs, outputs]
        for (name, loop, site), record in list(self._records.items()):
            if not record.changed or not site:
                continue
            path, line, calls, library = self.sites.describe(site)
            row = merged.get((name, path, line, library))
            if row is None:
                row = merged[(name, path, line, library)] = [set(), set(), set(), [], []]
            row[0].add(loop.phase)
            row[1].add(calls)
            row[2].update(record.seen)
            _merge(row[3], record.inputs)
            _merge(row[4], record.outputs)
        rows = [(name, path, line, ", ".join(sorted(phases)), len(signatures), library, "\n".join(sorted(calls)),
                 _ranges_text(inputs), _ranges_text(outputs))
                for (name, path, line, library), (phases, calls, signatures, inputs, outputs) in merged.items()]
        rows.sort(key=lambda row: (-row[4], row[1], row[2], row[0], row[5]))
        return rows

    def _saved(self, path, rows):
        if rows:
            log("%d call sites changed shape over %d iterations: see %s" % (len(rows), self.iteration, path))
        else:
            log("no shape changed over %d iterations (static shapes): %s" % (self.iteration, path))


DETECTOR = DynamicShapeDetector()
