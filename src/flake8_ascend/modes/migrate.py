"""``-m migrate``: a migrated copy of the project (``<name>_msft/``), the list of every change, the manual work."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Dict

from .. import report_page
from ..migrated_copy import CUDA_PREFIX, TRANSFER_IMPORTS, Migrator
from ..runtime.runtime_copy import excluded, run_command
from . import Job, Mode
from ..progress import plural

CHANGE_COLUMNS = ("File", "Line", "Code", "Before", "After")
MANUAL_COLUMNS = ("File", "Line", "Code", "Message")
CHANGES, MANUAL = "change_list.csv", "manual_work.csv"


class Migrate(Mode):
    name = "migrate"
    help = (f"a copy of the project with the CUDA code that has an NPU form rewritten (the fixes of ASC201, "
            f"ASC202, ASC204, ASC207), every rewrite in {CHANGES}, the {CUDA_PREFIX} findings left in {MANUAL}; "
            "--transfer-to-npu only adds the transfer_to_npu imports to the training entry scripts")
    outputs = ("<name>_msft/", CHANGES, MANUAL)
    formats = ("csv", "html")

    @classmethod
    def add_arguments(cls, group) -> None:
        group.add_argument("--transfer-to-npu", action="store_true",
                           help=f"instead of rewriting, add `{'` and `'.join(TRANSFER_IMPORTS)}` to the training "
                           "entry scripts (Ascend's automatic migration) and list what transfer_to_npu does not cover")

    def run(self, job: Job) -> Dict[str, int]:
        how = "transfer_to_npu imports" if job.args.transfer_to_npu else "CUDA rewrites"
        copy_name = f"{job.input.stem if job.input.is_file() else job.input.name}_msft"
        dest = job.output_path(copy_name)
        migrator = Migrator(job.config, transfer_to_npu=job.args.transfer_to_npu)
        result = migrator.tree(job.input, dest, excluded(job))
        job.log(f"migrated copy ({how}): {copy_name}/, {plural(result.copy.copied, 'file')} copied")
        if result.copy.package:
            job.log(f"{job.input.name} is a package: the copy keeps it as {copy_name}/{result.copy.package}/ so "
                    "that its imports resolve")
        for rel, reason in result.copy.skipped:
            job.log(f"{rel}: {reason}")
        for rel, change in result.changes:
            job.log(f"changed {rel}: {change}")
        for rel, reason in result.left:
            job.log(f"not rewritten {rel}: {reason}")
        if result.names_npu:
            shown = ", ".join(result.names_npu[:3]) + (", ..." if len(result.names_npu) > 3 else "")
            count = len(result.names_npu)
            files = "1 file already names" if count == 1 else f"{count} files already name"
            job.tell(f"warning: {files} the NPU ({shown}): the project may run on "
                    "the NPU through its own device option; a framework with an NPU backend should not be migrated")
        for rel in result.own_npu_cases:
            job.log(f"not rewritten {rel}: it has NPU cases of its own (an 'npu' or 'hccl' string), so its CUDA code "
                    "is the CUDA case: left for manual work")
        per_code = Counter(change.code or "import" for _, change in result.changes)
        job.log("changes per code: " + (", ".join(f"{code} {n}" for code, n in sorted(per_code.items())) or "none"))
        manual = Counter(finding.code for _, finding in result.manual)
        job.statistics.update(manual)
        job.log(f"left for manual work ({MANUAL}, lines of the copy): "
                + (", ".join(f"{code} {n}" for code, n in sorted(manual.items())) or "nothing"))
        for rel, finding in result.manual:
            job.log(f"manual: {rel}:{finding.line}: {finding.code} {finding.message}")
        if job.args.transfer_to_npu:
            entries = sorted({rel for rel, _ in result.changes})
            for rel in entries:
                job.tell(f"to run {rel}: {run_command(dest, job.target / copy_name, rel)}")
            if not entries:
                job.tell("no training entry script found (a module-level `if __name__ == '__main__':` and a training "
                        f"loop in the same file): add `{'` and `'.join(TRANSFER_IMPORTS)}` to the script that starts "
                        "training, after `import torch`")
        changes = job.write_csv(CHANGES, CHANGE_COLUMNS, (
            (rel, change.line or "NA", change.code, change.before, change.after)
            for rel, change in result.changes))
        left = job.write_csv(MANUAL, MANUAL_COLUMNS, (
            (rel, finding.line, finding.code, finding.message) for rel, finding in result.manual))
        counts = {f"{copy_name}/": result.copy.copied, CHANGES: changes, MANUAL: left}
        if job.args.format == "html":
            manual = [replace(finding, path=rel) for rel, finding in result.manual]
            page = report_page.PageInput(
                project=job.input.name, version=job.config.version, mode=self.name, root=dest, findings=manual,
                files_analysed=result.copy.copied, changes=[
                    (rel, change.line or "NA", change.code, change.before, change.after)
                    for rel, change in result.changes])
            job.output_path(report_page.PAGE_NAME).write_text(report_page.render(page), encoding="utf-8",
                                                              errors="backslashreplace")
            counts[report_page.PAGE_NAME] = len(manual)
        return counts
