"""Migrated copies (``ascend-analyse -m migrate``): the project rewritten for the NPU, like Ascend's GPU2Ascend.

Every ``.py`` file of the copy gets the safe rewrites the CUDA rules attach to their findings (``fix.py``);
whatever has none stays a finding.  The manual list is read again from the migrated text, so it is exactly
what ``flake8 --select ASC2`` reports on the copy.  With ``transfer_to_npu`` (Ascend's automatic migration)
nothing is rewritten: the training entry scripts get the two import lines, every other file is copied as it
is, and the manual list is what transfer_to_npu leaves, every file being read as importing it (it patches
torch for the whole process).  The copy follows the instrumented copies' layout rules
(``runtime.inject.copy_tree``): a package stays a package, links stay links, special files are left out.
"""
from __future__ import annotations

import ast
import dataclasses
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Tuple

from . import fix
from .codes import FIXABLE_CODES
from .config import Config
from .engine import Finding, lint, unsuppressed
from .files import SourceError
from .registry import all_rules
from .detect.cuda_fixes import names_npu
from .detect.transfer_to_npu import imports_transfer_to_npu
from .runtime.inject import Injection, copy_tree
from .sources import Source, deep, parse, read_source
from .detect.training import Training

CUDA_PREFIX = "ASC2"
TRANSFER_IMPORTS = ("import torch_npu", "from torch_npu.contrib import transfer_to_npu")


@dataclass
class Migration:
    """What one migration did, per file of the copy (paths relative to the copy)."""

    copy: Injection = field(default_factory=Injection)
    changes: List[Tuple[str, fix.Change]] = field(default_factory=list)
    manual: List[Tuple[str, Finding]] = field(default_factory=list)  # lines of the migrated copy
    left: List[Tuple[str, str]] = field(default_factory=list)  # rewrites that could not be applied, and why
    names_npu: List[str] = field(default_factory=list)  # files that already name the NPU ('npu', 'hccl' strings)
    own_npu_cases: List[str] = field(default_factory=list)  # of those, the ones whose CUDA code was left for that


class Migrator:
    """Copies a project with the CUDA rewrites (or the transfer_to_npu imports) applied."""

    def __init__(self, config: Config, transfer_to_npu: bool = False) -> None:
        self.transfer_to_npu = transfer_to_npu
        self.config = config
        self.after = dataclasses.replace(config, transfer_to_npu=transfer_to_npu)  # how the copy is read
        self.rules = [rule for rule in all_rules() if rule.code.startswith(CUDA_PREFIX)]
        self.fix_codes = [code for code in FIXABLE_CODES if code.startswith(CUDA_PREFIX)]
        self.result = Migration()

    def tree(self, source: Path, dest: Path, exclude: Iterable[Path] = ()) -> Migration:
        """Copy ``source`` (a folder or one file) into ``dest``, migrated."""
        self.result.copy = copy_tree(source, dest, self._file, exclude)
        return self.result

    def _file(self, path: Path, target: Path, rel: str, depth: int, copied: Injection) -> None:
        try:
            source = read_source(path)
        except SourceError as error:  # a FIFO, an unreadable or oversized file: as the instrumented copies
            copied.skipped.append((rel, f"left out: {error}"))
            return
        try:
            new = self.migrate_text(source, rel)
        except SourceError as error:  # Python cannot parse it: nothing to migrate, nothing flake8 reports
            copied.skipped.append((rel, f"copied unchanged: {error}"))
            new = source.text
        shutil.copy2(path, target)
        copied.copied += 1
        if new != source.text:
            fix.write_file(target, new)

    def migrate_text(self, source: Source, rel: str) -> str:
        """The migrated text of one file; records its changes and what is left for manual work.

        Raises SourceError when Python cannot parse the file.  A file that cannot be rewritten (not
        decodable as declared, beyond libcst's budget) stays as it is, its findings left for manual work.
        """
        tree = parse(source, rel)
        new, changes, left = source.text, [], []
        try:
            if self.transfer_to_npu:
                new = deep(self._add_transfer_imports, source, tree)
                if new != source.text:
                    changes = [fix.Change(0, "", "", line) for line in TRANSFER_IMPORTS]
            else:
                findings = fix.fixable_findings(source.text, rel, self.config, self.fix_codes)
                if findings:
                    new, _, left, changes = fix.fix_source(_rewritable(source), findings)
        except SourceError as error:
            left = [str(error)]
        migrated = source if new == source.text else Source.of(new)
        after = tree if new == source.text else ast.parse(new)
        remaining = unsuppressed(deep(lint, after, migrated.lines, rel, self.after, self.rules), migrated.lines)
        if not self.transfer_to_npu and names_npu(tree, source.lines):
            self.result.names_npu.append(rel)  # the original named the NPU: why its CUDA code stays
            if remaining:
                self.result.own_npu_cases.append(rel)
        self.result.changes += [(rel, change) for change in changes]
        self.result.left += [(rel, reason) for reason in left]
        self.result.manual += [(rel, finding) for finding in remaining]
        return new

    def _add_transfer_imports(self, source: Source, tree: ast.Module) -> str:
        """The two lines of Ascend's automatic migration, in a training entry script that lacks them."""
        if not Training(tree, source.lines).is_entry or imports_transfer_to_npu(tree, source.lines):
            return source.text
        return fix.insert_statements(fix.libcst_module(_rewritable(source)), TRANSFER_IMPORTS).code


def _rewritable(source: Source) -> str:
    """The text of a file that may be rewritten; raises SourceError for one not decoded as it declares."""
    if not source.exact:
        raise SourceError(source.note)
    return source.text
