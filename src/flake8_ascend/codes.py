"""The one table of ASC codes: which rule reports a code, the report file it goes to, its SARIF level, whether
it is off by default and whether ``--fix`` rewrites it.

A rule class names its code and nothing else of this table (the registry copies the row onto the class), so a
code, its report and its switches are changed here and only here.  Report files and levels are enums: a
misspelt one fails when this module is imported, not when a CSV is written.  ``docs/codes.md`` is generated
from this table (``tools/gen_rule_docs.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Dict, FrozenSet, Iterable


class Report(Enum):
    """The ``ascend-analyse`` report file a code's findings go to (the official tool's names)."""

    UNSUPPORTED_API = "unsupported_api.csv"
    UNKNOWN_API = "unknown_api.csv"
    CUDA_OP_LIST = "cuda_op_list.csv"
    AFFINITY_API_CALL = "affinity_api_call.csv"
    DYNAMIC_SHAPE_HINTS = "dynamic_shape_hints.csv"
    PERFORMANCE_ADVICE = "api_performance_advice.csv"
    PRECISION_ADVICE = "api_precision_advice.csv"

    def __str__(self) -> str:
        return self.value


class Level(Enum):
    """SARIF result level: ``warning`` for code that stops a port, ``note`` for hints, advice and restrictions."""

    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True)
class Code:
    """One row of the table."""

    rule: str  # "<module of flake8_ascend.rules>.<class>" of the rule that reports the code
    report: Report
    level: Level
    default_off: bool = False  # in flake8's extended default ignore: named explicitly to be reported
    fixable: bool = False  # the rule attaches a typed ``Rewrite`` that ``--fix`` applies
    # about a tensor operation itself (its kernel, missing or restricted, its shapes, its precision on the NPU), not
    # about how a loop feeds the device or a loader is set up: moot on the samples a DataLoader's workers build on
    # the host (Context.report)
    tensor_op: bool = False


_W, _N = Level.WARNING, Level.NOTE
_PERF, _PREC, _HINTS = Report.PERFORMANCE_ADVICE, Report.PRECISION_ADVICE, Report.DYNAMIC_SHAPE_HINTS

CODES: Dict[str, Code] = {
    "ASC101": Code("api_support.UnsupportedApi", Report.UNSUPPORTED_API, _W, tensor_op=True),
    "ASC102": Code("api_support.UnknownApi", Report.UNKNOWN_API, _W, default_off=True),
    "ASC103": Code("api_support.RestrictedApi", Report.UNSUPPORTED_API, _N, default_off=True, tensor_op=True),
    "ASC104": Code("third_party_api.UnsupportedThirdPartyApi", Report.UNSUPPORTED_API, _W),
    "ASC201": Code("cuda_api.CudaApi", Report.CUDA_OP_LIST, _W, fixable=True),
    "ASC202": Code("cuda_device.HardCodedCudaDevice", Report.CUDA_OP_LIST, _W, fixable=True),
    "ASC203": Code("cuda_backend.CudaBackendSwitch", Report.CUDA_OP_LIST, _W, default_off=True),
    "ASC204": Code("nccl_backend.NcclBackend", Report.CUDA_OP_LIST, _W, fixable=True),
    "ASC205": Code("cuda_extension.CudaExtension", Report.CUDA_OP_LIST, _W),
    "ASC206": Code("cuda_packages.CudaOnlyPackage", Report.CUDA_OP_LIST, _W, default_off=True),
    "ASC207": Code("cuda_amp.CudaAmp", Report.CUDA_OP_LIST, _W, fixable=True),
    "ASC208": Code("cuda_env.CudaVisibleDevices", Report.CUDA_OP_LIST, _W, default_off=True),
    "ASC301": Code("affinity_defs.AffinityClass", Report.AFFINITY_API_CALL, _W, tensor_op=True),
    "ASC302": Code("affinity_defs.AffinityFunction", Report.AFFINITY_API_CALL, _W, tensor_op=True),
    "ASC303": Code("affinity_calls.AffinityTorchCall", Report.AFFINITY_API_CALL, _W, fixable=True, tensor_op=True),
    "ASC304": Code("affinity_patterns.AffinityPattern", Report.AFFINITY_API_CALL, _W, fixable=True, tensor_op=True),
    "ASC401": Code("value_dependent_ops.ValueDependentShape", _HINTS, _N, default_off=True, tensor_op=True),
    "ASC402": Code("mask_index.BooleanMaskRead", _HINTS, _N, default_off=True, tensor_op=True),
    "ASC403": Code("value_shapes.ShapeFromValue", _HINTS, _N, default_off=True, tensor_op=True),
    "ASC404": Code("dataloader_last_batch.DataLoaderLastBatch", _HINTS, _N, default_off=True),
    "ASC501": Code("perf_training_loop.HostSyncInTrainingLoop", _PERF, _N),
    "ASC502": Code("perf_training_loop.BlockingCopyInTrainingLoop", _PERF, _N),
    "ASC503": Code("perf_arguments.DataLoaderWithoutPinMemory", _PERF, _N, default_off=True),
    "ASC504": Code("perf_arguments.DataLoaderWithoutWorkers", _PERF, _N),
    "ASC505": Code("perf_arguments.DdpWithoutBucketSize", _PERF, _N, default_off=True),
    "ASC506": Code("perf_arguments.DdpAccumulationWithoutNoSync", _PERF, _N),
    "ASC507": Code("perf_calls.AnomalyDetectionOn", _PERF, _N),
    "ASC508": Code("perf_calls.DoublePrecisionTensor", _PERF, _N, default_off=True, tensor_op=True),
    "ASC509": Code("perf_config.CompileModeNotChosen", _PERF, _N, default_off=True),
    "ASC510": Code("perf_config.TaskQueueNotSet", _PERF, _N, default_off=True),
    "ASC511": Code("perf_calls.LaunchBlockingSet", _PERF, _N),
    "ASC512": Code("perf_calls.VerboseCannLogging", _PERF, _N),
    "ASC513": Code("perf_training_loop.EmptyCacheInTrainingLoop", _PERF, _N),
    "ASC514": Code("perf_training_loop.GcCollectInTrainingLoop", _PERF, _N),
    "ASC515": Code("perf_calls.SyncBatchNormLayers", _PERF, _N),
    "ASC601": Code("precision_calls.BaddbmmOverflow", _PREC, _N, tensor_op=True),
    "ASC602": Code("precision_calls.EmbeddingNondeterministic", _PREC, _N, default_off=True, tensor_op=True),
    "ASC603": Code("precision_calls.MatmulNondeterministic", _PREC, _N, default_off=True, tensor_op=True),
    "ASC604": Code("precision_calls.SeluHalfBackward", _PREC, _N, tensor_op=True),
    "ASC605": Code("precision_calls.InfNanHandling", _PREC, _N, tensor_op=True),
    "ASC606": Code("precision_calls.DeterministicWithoutFill", _PREC, _N),
    "ASC607": Code("precision_amp.HalfAutocastWithoutScaler", _PREC, _N),
    "ASC608": Code("precision_amp.Tf32WithoutHf32", _PREC, _N),
    "ASC609": Code("precision_amp.Fp32PolicyOpInAutocast", _PREC, _N, tensor_op=True),
    "ASC650": Code("legacy_dump.LegacyDump", _PREC, _N),
}

OPTIONAL_CODES: FrozenSet[str] = frozenset(code for code, row in CODES.items() if row.default_off)
FIXABLE_CODES = tuple(code for code, row in CODES.items() if row.fixable)


def named_optional_codes(selections: Iterable[str]) -> FrozenSet[str]:
    """Optional codes switched on by name: ``ASC103`` does, a family (``ASC``, ``ASC1``, ``ASC10``) does not, so
    advisory findings never appear because a whole family was selected."""
    return OPTIONAL_CODES & {n.strip().upper() for n in selections if n}
