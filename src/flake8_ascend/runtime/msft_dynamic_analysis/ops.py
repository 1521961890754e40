"""Which ATen operators a real training step runs that the NPU lacks (CPU fallback), found on CPU or GPU.

Wrap the training data loop and run the script as usual::

    from msft_dynamic_analysis.ops import OPS
    for images, labels in OPS.start(train_loader):
        ...

The first iterations (2 by default) of each wrapped loop record every ATen
operator run, forward and backward, with the line that issued it (for backward
operators: the forward line that built the autograd node) and the loop (train
or eval); later iterations run untouched.
When the loop ends, ``msft_runtime_ops_report.csv`` is written beside this
package (``_rank<N>`` added in multi-process jobs): one row per operator,
phase and call site whose NPU status for the chosen torch_npu version is
``fallback`` (no NPU kernel: torch_npu runs it on the CPU), ``unsupported``
(kernels only for CUDA or for sparse/quantized tensors) or ``unknown`` (not in
the table: another namespace such as ``torchvision::``, or newer than torch
2.13; ``profiler::`` markers are left out; ``c10d::`` collectives count as
kernels: HCCL runs them on the NPU).  A report with only
its header means every operator has an NPU kernel or decomposes into others.
With ``all_ops`` every operator is listed, ``kernel`` and ``composite`` too.
``Dtypes`` lists the dtypes of the operator's tensor inputs (``-``: none).

A ``composite`` operator (no NPU kernel of its own, a default kernel that
calls other operators) is run through that default kernel, as the NPU would
run it, so the operators it calls are recorded too: ``huber_loss_backward``
calls ``huber_loss_backward.out``, which has no NPU kernel; such rows name
the composite operator in ``Tips``.

The statuses come from ``aten_ops_<V>.json`` beside this module (copied there
by ``ascend-analyse -m runtime_ops -v V``), generated from the torch_npu
wheel's ``npu_native_functions*.yaml`` and the torch 2.13 classification of
every ATen operator.

Settings (``start()`` keyword, environment variable, ``settings.json`` key):
``iterations`` / ``MSFT_OPS_ITERATIONS`` (iterations recorded, 2),
``all_ops`` / ``MSFT_OPS_ALL`` (list every operator, off),
``version`` / ``MSFT_OPS_VERSION`` (which table, when several are present).
"""
import glob
import json
import os
import re

from .aten import AtenDetector, dtype_name, phase, tensors
from .hook import PACKAGE_DIR, flag, log, positive

STATUSES = ("kernel", "composite", "fallback", "unsupported")
PROBLEMS = ("fallback", "unsupported", "unknown")
COLLECTIVES = ("c10d::", "_c10d_functional::", "c10d_functional::")  # run by HCCL on the NPU, not ATen kernels
TABLE_FOLDERS = (PACKAGE_DIR, os.path.join(os.path.dirname(PACKAGE_DIR), "aten_ops"))  # the copy; the source tree


def _version_key(version):
    return tuple(int(part) for part in re.findall(r"\d+", version))


def find_table(version=None):
    """(version, path) of the op-status table to use, or (None, message) when there is none."""
    found = {}
    for folder in TABLE_FOLDERS:
        for path in glob.glob(os.path.join(folder, "aten_ops_*.json")):
            found.setdefault(os.path.basename(path)[len("aten_ops_"):-len(".json")], path)
        if found and folder == PACKAGE_DIR:
            break  # tables copied beside the package win over the source tree's
    if not found:
        return None, "no aten_ops_<version>.json beside %s" % PACKAGE_DIR
    if version:
        wanted = str(version).strip()
        matches = [v for v in found if v == wanted or v.startswith(wanted + ".")]
        if len(matches) != 1:
            return None, "no table for torch_npu %s (have: %s)" % (wanted, ", ".join(sorted(found, key=_version_key)))
        return matches[0], found[matches[0]]
    newest = max(found, key=_version_key)
    return newest, found[newest]


def load_table(path):
    """{op (``name.overload``, the default overload bare): status} and the fallback ops' out= delegates."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return {op: status for status in STATUSES for op in data[status]}, data.get("fallback_delegates", {})


def op_key(name):
    """``aten::sum.dim_IntList`` -> ``sum.dim_IntList``; other namespaces keep theirs (``torchvision::nms``)."""
    return name[len("aten::"):] if name.startswith("aten::") else name


def composite_kernel(torch, func):
    """The dispatch key of the default (CompositeExplicitAutograd) kernel an NPU without a kernel of its own
    would run for ``func``, or None: views (they only alias), torch without ``_op_dk``, or no such kernel."""
    if not hasattr(func, "_op_dk"):
        return None
    try:
        if any(r.alias_info is not None for r in func._schema.returns):
            return None
        for key in ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"):
            if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), key):
                return getattr(torch._C.DispatchKey, key)
    except (AttributeError, RuntimeError):
        pass
    return None


class Usage(object):
    """How often one operator ran at one call site, and with which dtypes."""

    __slots__ = ("count", "dtypes")

    def __init__(self):
        self.count = 0
        self.dtypes = set()


class OpsDetector(AtenDetector):
    """Records the ATen operators of the first iterations and reports those without an NPU kernel."""

    report_name = "msft_runtime_ops_report.csv"
    header = ("Op", "NPU Status", "Count", "Dtypes", "Phase", "Loop", "File Path", "Line Number", "Library Frame",
              "Call Stack", "Tips")
    settings_section = "runtime_ops"

    def __init__(self):
        super(OpsDetector, self).__init__()
        self.iterations = 2
        self.all_ops = False
        self.version = None
        self.status = {}
        self.delegates = {}
        self.usage = {}  # (op name, phase, loop, site, calling composite operator or "") -> Usage
        self._ops = {}  # func -> (op name, status, the dispatch key of its composite kernel or None)
        self._parents = []  # the composite operators whose default kernels are running

    def _configure(self):
        self.iterations = self.option("iterations", "MSFT_OPS_ITERATIONS", 2, positive)
        self.all_ops = self.option("all_ops", "MSFT_OPS_ALL", False, flag)
        wanted = self.option("version", "MSFT_OPS_VERSION", None, str)
        version, path = find_table(wanted)
        if version is None:
            log("cannot check operators: %s" % path)
            self.supported = False
            return
        if version != self.version:
            self.status, self.delegates = load_table(path)
            self.version = version
            self._ops.clear()
            log("NPU status of torch_npu %s (%s)" % (version, os.path.basename(path)))

    def records(self, iteration):
        return iteration < self.iterations

    def _begin_iteration(self):
        if self.loop.iterations == 0:  # this loop's window opens (each wrapped loop has its own)
            log("recording the ATen operators of the first %d iterations of the loop at %s"
                % (self.iterations, self.loop.where))

    def on_operator(self, func, args, kwargs, node, site, call):
        try:
            name, status, kernel = self._ops[func]
        except KeyError:
            name = func.name()
            status = self._status(name)
            kernel = composite_kernel(self.torch, func) if status == "composite" else None
            self._ops[func] = name, status, kernel
        if status in PROBLEMS or self.all_ops:
            self._count(name, status, args, kwargs, node, site)
        if kernel is None or name in self._parents or not self._dense(args, kwargs):
            return call(func, args, kwargs)  # (a default kernel calling its own operator, or sparse/nested tensors)
        self._parents.append(name)  # run its default kernel as the NPU would, and see the operators it calls
        try:
            with self._mode:
                return call(func._op_dk, (kernel,) + tuple(args), kwargs)
        finally:
            self._parents.pop()

    def _dense(self, args, kwargs):
        """Whether every tensor argument is a plain strided one: default kernels are written for those, and
        sparse or nested tensors have kernels of their own (SparseAdam's ``is_coalesced`` fails in the default)."""
        strided = self.torch.strided
        return all(t.layout == strided and not t.is_nested
                   for t in tensors(list(args) + list(kwargs.values()), self.torch.Tensor))

    def _count(self, name, status, args, kwargs, node, site):
        parent = self._parents[-1] if self._parents else ""
        key = (name, phase(node), self.loop, site, parent)
        usage = self.usage.get(key)
        if usage is None:
            usage = self.usage[key] = Usage()
        usage.count += 1
        for tensor in tensors(list(args) + list(kwargs.values()), self.torch.Tensor):
            usage.dtypes.add(tensor.dtype)

    def tips(self, name, status, parent):
        text = self._tips(name, status)
        if parent:
            text += "; called by %s, which has no NPU kernel of its own (composite)" % parent
        return text

    def _tips(self, name, status):
        key = op_key(name)
        if status == "fallback":
            delegate = self.delegates.get(key)
            why = " (its out= kernel %s has none)" % delegate if delegate else ""
            return ("no NPU kernel in torch_npu %s%s: torch_npu runs it on the CPU, copying its tensors; "
                    "TORCH_NPU_FALLBACK_CPU_DISABLE=1 makes it an error" % (self.version, why))
        if status == "unsupported":
            return "kernels only for CUDA or for sparse/quantized tensors: fails on NPU"
        if status == "unknown":
            return "not an ATen operator of torch 2.13: NPU support unknown"
        if status == "composite":
            return "decomposes into other operators, which run on NPU if they have kernels"
        if name.startswith(COLLECTIVES):
            return "a collective: torch_npu runs it through HCCL (init_process_group(backend=\"hccl\"))"
        return "NPU kernel in torch_npu %s" % self.version

    def rows(self):
        rows = []
        for (name, where, loop, site, parent), usage in list(self.usage.items()):
            status = self._status(name)
            path, line, calls, library = self.sites.describe(site)
            dtypes = ", ".join(sorted(dtype_name(d) for d in usage.dtypes)) or "-"
            rows.append((name, status, usage.count, dtypes, where, "%s (%s)" % (loop.phase, loop.where), path, line,
                         library, calls, self.tips(name, status, parent)))
        rows.sort(key=lambda row: (row[6], row[7] if row[7] != "" else 0, row[0], row[4], row[5], row[8], row[9]))
        return rows

    def _status(self, name):
        status = self.status.get(op_key(name))
        if status is None:
            return "kernel" if name.startswith(COLLECTIVES) else "unknown"
        return status

    def _saved(self, path, rows):
        shown = "operators" if self.all_ops else "operators without an NPU kernel"
        loops = ", ".join("%s: %d" % (loop.where, min(loop.iterations, self.iterations))
                          for loop in self.loops.values())
        if rows:
            log("%d %s (call sites) in the recorded iterations (%s): see %s" % (len(rows), shown, loops, path))
        else:
            log("no %s in the recorded iterations (%s): %s" % (shown, loops, path))


OPS = OpsDetector()
