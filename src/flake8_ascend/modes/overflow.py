"""``-m overflow``: an instrumented copy of the project that reports the operators overflowing to inf/nan."""
from __future__ import annotations

import argparse

from ..runtime.inject import PACKAGE
from ..runtime.runtime_copy import Detector, make_copy
from . import Job, Mode, positive_number, whole_number

DETECTOR = Detector("overflow", "OVERFLOW", "msft_overflow_report.csv", "overflow")


def _window(text: str) -> str:
    """``all``, ``N`` or ``A-B`` (0-based iterations, A <= B), as the detector reads it."""
    first, _, last = text.partition("-")
    if text != "all" and not (first.isdigit() and (last == "" or (last.isdigit() and int(last) >= int(first)))):
        raise argparse.ArgumentTypeError(f"expected all, N or A-B (0-based iterations, A <= B), got {text!r}")
    return text


class Overflow(Mode):
    name = "overflow"
    help = (f"copy the project with its data loops wrapped in an inf/nan detector (run the copy to get "
            f"{DETECTOR.report}; --dump saves the tensors of overflowing operators)")
    outputs = (f"{PACKAGE}/", "the instrumented copy of the input")

    @classmethod
    def add_arguments(cls, group) -> None:
        group.add_argument("--dump", type=whole_number, default=0, metavar="N",
                           help="save the inputs and outputs of the first N overflowing operators (.pt files)")
        group.add_argument("--overflow-iterations", type=_window, default="all", metavar="RANGE",
                           help="iterations checked: all (default), N or A-B (0-based)")
        group.add_argument("--overflow-every", type=positive_number, default=1, metavar="K",
                           help="check one iteration in K of those (default: 1, each); K=10 brings a long run's "
                           "steady state close to the original's speed")
        group.add_argument("--dump-all", type=whole_number, default=None, metavar="STEP",
                           help="save the inputs and outputs of every operator of iteration STEP (0-based), "
                           "for ascend-analyse compare")

    def run(self, job: Job):
        settings = {"dump": job.args.dump, "iterations": job.args.overflow_iterations,
                    "every": job.args.overflow_every}
        if job.args.dump_all is not None:
            settings["dump_all"] = job.args.dump_all
        make_copy(job, DETECTOR, settings)
        if job.args.dump or job.args.dump_all is not None:
            job.tell("dumps go to msft_overflow_dump/{step}/{rank}/ in the copy's root (MSFT_OVERFLOW_DUMP_PATH "
                    "changes it); compare two with: ascend-analyse compare DUMP_A DUMP_B -o OUT")
        return {}
