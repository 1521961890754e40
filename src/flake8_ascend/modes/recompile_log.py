"""``-m recompile_log``: operators a torch_npu host log shows compiled again after the warm-up iterations."""
from __future__ import annotations

from ..offline.recompile import (DEFAULT_SPLIT_FLAG, LIST_NAME, SUSPECT_COLUMNS, SUSPECTS_NAME, WARMUP, LogError,
                                 op_list_text, parse_log, suspect_rows)
from . import Job, JobError, Mode


class RecompileLog(Mode):
    name = "recompile_log"
    help = (f"split a CANN host log (INFO) at per-iteration marker lines and list the ops still compiled after "
            f"iteration {WARMUP}: dynamic-shape suspects")
    reads_python = False
    outputs = (LIST_NAME, SUSPECTS_NAME)

    @classmethod
    def add_arguments(cls, group) -> None:
        group.add_argument("--split-flag", default=DEFAULT_SPLIT_FLAG, metavar="TEXT",
                           help=f"the marker printed at the start of every iteration (default: {DEFAULT_SPLIT_FLAG})")

    def run(self, job: Job):
        if not job.input.is_file():
            raise JobError(f"-m {self.name} reads one host log file, not a folder: {job.input}")
        try:
            log = parse_log(job.input, job.args.split_flag)
        except LogError as error:
            raise JobError(str(error)) from None
        job.output_path(LIST_NAME).write_text(op_list_text(log), encoding="utf-8")
        rows = suspect_rows(log)
        job.write_csv(SUSPECTS_NAME, SUSPECT_COLUMNS, rows)
        job.log(f"iterations: {log.iterations} (split at {job.args.split_flag!r}); "
                f"ops compiled before the first one: {len(log.segments[0].compiles)}")
        for before, after in log.gaps:
            job.tell(f"warning: marker {after} follows marker {before}: markers are missing (their iterations are "
                    "counted with the one before) or repeated (several processes in one log?)")
        if log.malformed:
            job.log(f"ignored {log.malformed} 'To compile op:' lines without an op name")
        if log.iterations <= log.warmup:
            job.tell(f"only {log.iterations} iterations: run more than {log.warmup} to see which ops keep compiling")
        for op, compiles, iterations, which in rows:
            job.log(f"dynamic-shape suspect: {op} compiled {compiles} times in {iterations} iterations after "
                    f"iteration {log.warmup} (iterations {which})")
        return {LIST_NAME: log.iterations, SUSPECTS_NAME: len(rows)}
