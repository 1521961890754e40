"""Numerical overflow detection (inf/nan) per ATen operator, with optional tensor dumps.

Wrap the training data loop and run the script as usual::

    from msft_dynamic_analysis.overflow import OVERFLOW
    for images, labels in OVERFLOW.start(train_loader):
        ...

Every operator of the checked iterations, forward and backward, is looked at
after it ran: when one of its floating-point outputs holds inf or nan while
none of its inputs did (in-place operators: before they ran), it is an
overflowing operator.  The first ``max_ops`` of each iteration are written to
``msft_overflow_report.csv`` beside this package (``_rank<N>`` added in
multi-process jobs) with the iteration (0-based, over every wrapped loop), phase (forward, or backward
with its autograd node), operator, dtypes, shapes, what was non-finite and the
line of code that issued it (for backward operators: the forward line that
built the node).  A report with only its header means nothing overflowed.

Settings (``start()`` keyword, environment variable, ``settings.json`` key):

============== =========================== =====================================================
keyword        environment variable         meaning
============== =========================== =====================================================
iterations     MSFT_OVERFLOW_ITERATIONS     iterations to check: ``all`` (default), ``N`` or ``A-B``
every          MSFT_OVERFLOW_EVERY          check one iteration in K of those (1: each; default)
max_ops        MSFT_OVERFLOW_MAX_OPS        overflowing operators reported per iteration (8)
dump           MSFT_OVERFLOW_DUMP           save the tensors of the first N overflowing operators (0)
dump_all       MSFT_OVERFLOW_DUMP_ALL       save the tensors of every operator of this iteration
dump_path      MSFT_OVERFLOW_DUMP_PATH      dump folder (default: msft_overflow_dump beside this package)
============== =========================== =====================================================

Dump layout: ``{dump_path}/{step}/{rank}/{index}.{op}.{input|output}.{k}.pt``,
where ``step`` is the iteration, ``rank`` the process rank (0 alone),
``index`` the operator's position in the iteration (0-based, over every
operator run, so two runs of one script line up), ``op`` the ATen overload
(``aten.addmm.default``) and ``k`` the tensor's position among the operator's
tensor inputs or outputs.  Each file holds one tensor (``torch.save``, detached
and copied to the CPU); ``ops.csv`` in the same folder lists each dumped
operator with its phase and call site.  ``ascend-analyse compare A B -o OUT``
compares two such dumps.
"""
import math
import os

from .aten import AtenDetector, dtype_name, phase, shape_text, tensors
from .hook import ROOT, log, natural, positive, process_rank, write_csv

DUMP_HEADER = ("Index", "Op", "Phase", "Why", "Inputs", "Outputs", "File Path", "Line Number", "Call Stack")


def iteration_range(text):
    """``all`` -> None; ``5`` -> (5, 5); ``2-10`` -> (2, 10)."""
    text = str(text).strip().lower()
    if text in ("", "all"):
        return None
    first, _, last = text.partition("-")
    first = int(first)
    last = int(last) if last else first
    if first < 0 or last < first:
        raise ValueError(text)
    return first, last


def _optional_step(value):
    return None if str(value).strip().lower() in ("", "none", "off", "-1") else natural(value)


class Record(object):
    """One overflowing operator."""

    __slots__ = ("iteration", "phase", "op", "dtypes", "inputs", "outputs", "nonfinite", "site", "dump")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name, ""))


class OverflowDetector(AtenDetector):
    """Finds the operators whose outputs become inf/nan from finite inputs."""

    report_name = "msft_overflow_report.csv"
    header = ("Iteration", "Phase", "Op", "Dtypes", "Input Shapes", "Output Shapes", "Non-finite", "File Path",
              "Line Number", "Library Frame", "Call Stack", "Dump")
    settings_section = "overflow"

    def __init__(self):
        super(OverflowDetector, self).__init__()
        self.found = []  # Record, in the order found
        self._index = 0  # operator position within the current iteration
        self._in_iteration = 0  # overflowing operators found in the current iteration
        self._info = {}  # func -> operator_info(func)
        self._checking = False
        self._manifest = []  # rows of ops.csv for the current iteration's dump folder
        self._dumped_ops = 0
        self._folder = None
        self.window = None
        self.every = 1
        self.max_ops = 8
        self.dump = 0
        self.dump_all = None
        self.dump_path = os.path.join(ROOT, "msft_overflow_dump")

    # -- settings --------------------------------------------------------------------
    def _configure(self):
        self.window = self.option("iterations", "MSFT_OVERFLOW_ITERATIONS", None, iteration_range)
        self.every = self.option("every", "MSFT_OVERFLOW_EVERY", 1, positive)
        self.max_ops = self.option("max_ops", "MSFT_OVERFLOW_MAX_OPS", 8, natural)
        self.dump = self.option("dump", "MSFT_OVERFLOW_DUMP", 0, natural)
        self.dump_all = self.option("dump_all", "MSFT_OVERFLOW_DUMP_ALL", None, _optional_step)
        path = self.option("dump_path", "MSFT_OVERFLOW_DUMP_PATH", None, str)
        if path:
            self.dump_path = os.path.abspath(path)
        if self.dump or self.dump_all is not None:
            log("dumps go to %s" % self.dump_path)

    def records(self, iteration):
        # iterations are counted over every wrapped loop here (the report's Iteration, the dump's step)
        return self.dump_all == self.iteration or self.checks(self.iteration)

    def _begin_iteration(self):
        self._checking = self.checks(self.iteration)
        self._index = 0
        self._in_iteration = 0
        self._manifest = []
        self._folder = None

    def _end_recorded_iteration(self):
        if self._manifest:
            path = os.path.join(self._folder, "ops.csv")
            try:
                write_csv(path, DUMP_HEADER, self._manifest)
            except OSError as error:
                log("cannot write %s: %s" % (path, error))

    # -- one operator ----------------------------------------------------------------
    def checks(self, iteration):
        """Whether ``iteration`` is checked for overflow (it may be recorded only for ``dump_all``): in the
        window, and one in ``every`` from the window's start."""
        first = 0 if self.window is None else self.window[0]
        if self.window is not None and not first <= iteration <= self.window[1]:
            return False
        return (iteration - first) % self.every == 0

    def on_operator(self, func, args, kwargs, node, site, call):
        index = self._index
        self._index += 1
        dump_step = self.dump_all == self.iteration
        checking = self._checking
        try:
            info = self._info[func]
        except KeyError:
            info = self._info[func] = operator_info(func)
        written = self._targets(info, args, kwargs) if info[0] or info[1] else ()  # in-place and out= targets
        before = {}
        if written and (dump_step or (checking and self._dumped_ops < self.dump)):
            before = {id(t): t.detach().clone() for t in written}
        sums = [self._sum(t) for t in written] if checking and info[2] else ()  # as they were; read on overflow
        result = call(func, args, kwargs)
        record = None
        if checking and info[2] and self._in_iteration < self.max_ops:
            record = self._check(func, args, kwargs, result, written, sums, node, site)
        if record is not None and not dump_step and self._dumped_ops < self.dump:
            self._dumped_ops += 1
            record.dump = self._dump(index, func, node, site, args, kwargs, result, "overflow", before)
        elif dump_step:
            prefix = self._dump(index, func, node, site, args, kwargs, result, "all", before)
            if record is not None:
                record.dump = prefix
        return result

    def _check(self, func, args, kwargs, result, written, sums, node, site):
        """A Record when the operator's outputs hold inf/nan and its inputs did not, else None."""
        tensor = self.torch.Tensor
        outputs = tensors(result if isinstance(result, (tuple, list)) else (result,), tensor)
        if not any(self._nonfinite(t) for t in outputs):
            return None
        if any(s is not None and not math.isfinite(s.item()) for s in sums):
            return None  # an in-place target was not finite before (or so large that its sum overflowed)
        inputs = tensors(list(args) + list(kwargs.values()), tensor)
        targets = {id(t) for t in written}
        if _nonfinite_scalar(args, kwargs) or any(self._nonfinite(t) for t in inputs if id(t) not in targets):
            return None
        self._in_iteration += 1
        record = Record(iteration=self.iteration, phase=phase(node), op=func.name(),
                        dtypes=_dtypes(inputs, outputs), inputs=shape_text(inputs), outputs=shape_text(outputs),
                        nonfinite=_describe_nonfinite(self.torch, outputs), site=site)
        self.found.append(record)
        log("iteration %d: %s made inf/nan from finite inputs (%s)" % (self.iteration, record.op, record.phase))
        return record

    def _targets(self, info, args, kwargs):
        positions, names = info[0], info[1]
        return tensors([args[i] for i in positions if i < len(args)] + [kwargs[k] for k in names if k in kwargs],
                       self.torch.Tensor)

    def _sum(self, tensor):
        """A wide sum of a floating-point tensor (finite exactly when the tensor is, short of sum overflow)."""
        torch = self.torch
        if not (tensor.is_floating_point() or tensor.is_complex()) or tensor.layout != torch.strided:
            return None
        if tensor.is_nested:  # the fast path of nn.TransformerEncoder: no sum kernel, so sum its parts
            parts = [self._sum(part) for part in tensor.unbind()]
            parts = [part for part in parts if part is not None]
            return torch.stack(parts).sum() if parts else None
        if tensor.numel() == 0 or getattr(tensor, "is_meta", False):
            return None
        if tensor.is_complex():
            tensor = torch.view_as_real(tensor)
        return tensor.sum(dtype=torch.float64 if tensor.dtype == torch.float64 else torch.float32)

    def _nonfinite(self, tensor):
        """Whether a floating-point tensor holds inf or nan (its sum first: one reduction)."""
        total = self._sum(tensor)
        if total is None or math.isfinite(total.item()):
            return False
        if tensor.is_nested:
            return any(self._nonfinite(part) for part in tensor.unbind())
        values = self.torch.view_as_real(tensor) if tensor.is_complex() else tensor
        return not bool(self.torch.isfinite(values).all())  # the sum itself may have overflowed

    # -- dumps -----------------------------------------------------------------------
    def _dump(self, index, func, node, site, args, kwargs, result, why, before):
        """Save one operator's tensors (written arguments as they were before it ran); returns the dump prefix."""
        torch = self.torch
        rank = process_rank() or 0
        inputs = [before.get(id(t), t) for t in tensors(list(args) + list(kwargs.values()), torch.Tensor)]
        outputs = tensors(result if isinstance(result, (tuple, list)) else (result,), torch.Tensor)
        prefix = "%d.%s" % (index, func)
        try:
            if self._folder is None:
                self._folder = os.path.join(self.dump_path, str(self.iteration), str(rank))
                if not os.path.isdir(self._folder):
                    os.makedirs(self._folder)
            for role, values in (("input", inputs), ("output", outputs)):
                for k, value in enumerate(values):
                    path = os.path.join(self._folder, "%s.%s.%d.pt" % (prefix, role, k))
                    torch.save(value.detach().to("cpu", copy=True), path)
        except (OSError, RuntimeError) as error:
            log("cannot dump %s: %s" % (prefix, error))
            return ""
        path, line, calls, _ = self.sites.describe(site)
        self._manifest.append((index, func.name(), phase(node), why, shape_text(inputs), shape_text(outputs),
                               path, line, calls))
        return "%d/%d/%s" % (self.iteration, rank, prefix)

    # -- the report ------------------------------------------------------------------
    def rows(self):
        rows = []
        for record in self.found:
            path, line, calls, library = self.sites.describe(record.site)
            rows.append((record.iteration, record.phase, record.op, record.dtypes, record.inputs, record.outputs,
                         record.nonfinite, path, line, library, calls, record.dump))
        return rows

    def _saved(self, path, rows):
        if rows:
            log("%d overflowing operators over %d iterations: see %s" % (len(rows), self.iteration, path))
        else:
            log("no operator overflowed over %d iterations: %s" % (self.iteration, path))


def operator_info(func):
    """(positions, keyword-only names) of the arguments an ATen operator writes to, and whether to check it.

    Not checked: views (their outputs alias finite inputs) and operators returning uninitialised memory
    (``empty``, ``new_empty_strided``, ``resize_``...), whose garbage may read as nan.
    """
    positions, names = [], []
    name = func.name().split("::")[-1].split(".")[0]
    checked = "empty" not in name and name not in ("resize_", "resize_as_", "set_")
    try:
        schema = func._schema
        for position, argument in enumerate(schema.arguments):
            alias = argument.alias_info
            if alias is not None and alias.is_write:
                if argument.kwarg_only:
                    names.append(argument.name)
                else:
                    positions.append(position)
        returns = [r.alias_info for r in schema.returns]
        if returns and all(a is not None and not a.is_write for a in returns):
            checked = False
    except (AttributeError, RuntimeError):  # an operator without a readable schema: check it
        pass
    return tuple(positions), tuple(names), checked


def _nonfinite_scalar(args, kwargs):
    """A Python float argument that is inf or nan (``masked_fill(mask, -inf)``): the input was not finite."""
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, float) and not math.isfinite(value):
            return True
    return False


def _dtypes(inputs, outputs):
    names = lambda values: ", ".join(sorted({dtype_name(t.dtype) for t in values})) or "-"  # noqa: E731
    return "%s -> %s" % (names(inputs), names(outputs))


def _describe_nonfinite(torch, outputs):
    """``output 0: 12 inf, 0 nan of 4096``, for each output holding either."""
    parts = []
    for k, tensor in enumerate(outputs):
        if not (tensor.is_floating_point() or tensor.is_complex()) or tensor.numel() == 0:
            continue
        if tensor.is_nested:
            tensor = torch.cat([part.reshape(-1) for part in tensor.unbind()])
        values = torch.view_as_real(tensor) if tensor.is_complex() else tensor
        inf = int(torch.isinf(values).sum())
        nan = int(torch.isnan(values).sum())
        if inf or nan:
            parts.append("output %d: %d inf, %d nan of %d" % (k, inf, nan, tensor.numel()))
    return "; ".join(parts)


OVERFLOW = OverflowDetector()
