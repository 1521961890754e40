"""``ascend-analyse compare DUMP_A DUMP_B -o OUT`` (also ``-m compare -i DUMP_A --against DUMP_B``)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional

from ..offline.dump_compare import HEADER, RESULTS, CompareError, compare
from . import Job, JobError, Mode
from ..progress import plural

RESULT_NAME = "compare_result.csv"


class Compare(Mode):
    name = "compare"
    help = ("compare two tensor dumps of -m overflow (--dump-all) operator by operator: cosine similarity, max "
            "absolute and relative error, pass/warn/fail (ascend-analyse compare DUMP_A DUMP_B -o OUT)")
    reads_python = False
    outputs = (RESULT_NAME,)

    @classmethod
    def add_arguments(cls, group) -> None:
        group.add_argument("--against", metavar="DUMP_B",
                           help="the reference dump that -i is compared with (the second folder of `compare`)")

    @classmethod
    def report_name(cls, source: Path, args) -> Optional[str]:
        """``compare_<A>_vs_<B>_analysis``: a rank folder (``dump/0``) is named with its parent (``dump-0``)."""
        if not args.against:
            return None
        return f"compare_{_label(source)}_vs_{_label(Path(args.against))}_analysis"

    def run(self, job: Job):
        if not job.args.against:
            raise JobError(f"-m {self.name} needs the reference dump: ascend-analyse compare DUMP_A DUMP_B -o OUT")
        reference = Path(job.args.against).resolve()
        try:
            rows = compare(job.input, reference)
        except CompareError as error:
            raise JobError(str(error)) from None
        except OSError as error:  # an unreadable dump folder: input, not output, so exit 2
            raise JobError(f"cannot read the dump: {error.strerror or error}: {error.filename}") from None
        count = job.write_csv(RESULT_NAME, HEADER, rows)
        results = Counter(row[HEADER.index("Result")] for row in rows)
        job.tell(f"compared {job.input} (A) with {reference} (B, the reference): {plural(count, 'row')}; "
                + ", ".join(f"{name} {results[name]}" for name in RESULTS))
        return {RESULT_NAME: count}


def _label(folder: Path) -> str:
    folder = folder.resolve()
    return f"{folder.parent.name}-{folder.name}" if folder.name.isdigit() else folder.name
