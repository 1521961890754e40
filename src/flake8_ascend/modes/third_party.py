"""``-m third_party``: a library's functions that cannot run on NPU, propagated through its call graph."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..library_analysis import MAX_SECONDS, OUTPUTS, analyse, tables
from . import Job, Mode


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds (0 or more), got {text!r}")
    return value


class ThirdParty(Mode):
    name = "third_party"
    help = ("functions of a library (-i LIB_SRC) that cannot run on NPU: unsupported torch APIs and custom "
            "CUDA operators, and every function that calls one; -env adds dependency folders for jedi")
    outputs = OUTPUTS

    @classmethod
    def add_arguments(cls, group) -> None:
        group.add_argument("--jedi-seconds", type=_seconds, default=MAX_SECONDS, metavar="S",
                           help=f"time jedi may spend on calls plain name resolution leaves open "
                           f"(default {MAX_SECONDS:g}; 0 turns jedi off)")

    def run(self, job: Job):
        job.progress.start(len(job.files))
        result = analyse(job.root, job.config, files=job.files, env_paths=[Path(p) for p in job.args.env_path],
                         jobs=job.args.jobs, log=job.log, advance=job.progress.advance,
                         jedi_seconds=job.args.jedi_seconds, scan_cpp=job.input.is_dir(), scratch=job.out_dir)
        job.progress.finish()
        for rel, reason in result.skipped:
            job.skip(rel, reason)
        return {name: job.write_csv(name, header, rows) for name, (header, rows) in tables(result).items()}
