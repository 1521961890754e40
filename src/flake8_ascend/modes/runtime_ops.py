"""``-m runtime_ops``: an instrumented copy of the project that reports the ATen operators the NPU lacks."""
from __future__ import annotations

from pathlib import Path

from ..data import version_key
from ..runtime.inject import PACKAGE
from ..runtime.runtime_copy import Detector, make_copy
from . import Job, JobError, Mode, positive_number

DETECTOR = Detector("ops", "OPS", "msft_runtime_ops_report.csv", "runtime_ops")
TABLES = Path(__file__).resolve().parent.parent / "runtime" / "aten_ops"


def table_versions():
    """The torch_npu versions with an op-status table (those with wheel facts), oldest first."""
    versions = [p.stem[len("aten_ops_"):] for p in TABLES.glob("aten_ops_*.json")]
    return sorted(versions, key=version_key)


class RuntimeOps(Mode):
    name = "runtime_ops"
    help = (f"copy the project with its data loops wrapped in an ATen operator recorder (run the copy to get "
            f"{DETECTOR.report}: the operators without an NPU kernel in -v VERSION, with their call sites)")
    outputs = (f"{PACKAGE}/", "the instrumented copy of the input")

    @classmethod
    def add_arguments(cls, group) -> None:
        group.add_argument("--ops-iterations", type=positive_number, default=2, metavar="N",
                           help="iterations recorded (default: 2; later ones run untouched)")
        group.add_argument("--all-ops", action="store_true",
                           help="list every operator run, not only those without an NPU kernel")

    def run(self, job: Job):
        version = job.config.version
        table = TABLES / f"aten_ops_{version}.json"
        if not table.is_file():
            raise JobError(f"no ATen kernel data for torch_npu {version} (no wheel of it was published); "
                           f"-m {self.name} knows {', '.join(table_versions())}")
        settings = {"iterations": job.args.ops_iterations, "all_ops": job.args.all_ops, "version": version}
        make_copy(job, DETECTOR, settings, {table.name: table})
        return {}
