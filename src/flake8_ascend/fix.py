"""Autofix of the safe rewrites (``ascend-analyse --fix`` / ``--diff``, ``-m migrate``), built on libcst.

A finding is rewritten only when its rule attached a ``Rewrite`` (``rewrite.py``) to it:

* ``Kind.CALL`` ``<module>.<Name>`` (ASC303): the callee becomes ``<Name>``, arguments untouched
  (``torch.optim.AdamW(p, lr=1e-3)`` -> ``NpuFusedAdamW(p, lr=1e-3)``);
* ``Kind.INDEX_PUT`` ``<module>.<name>`` (ASC304): ``x[mask] = v`` -> ``x = <name>(x, mask, v)``;
* ``Kind.NAME`` ``<dotted>`` (ASC201, ASC207): the whole name chain becomes ``<dotted>``
  (``torch.cuda.synchronize`` -> ``torch_npu.npu.synchronize``), which needs ``import <its first name>``;
* ``Kind.METHOD`` ``<name>`` (ASC202): ``m.cuda(0)`` -> ``m.npu(0)``;
* ``Kind.STRING`` ``<text>`` (ASC202, ASC204): the string's text, quotes and prefix kept (``'cuda:0'`` -> ``'npu:0'``).

Each file gets one ``from <module> import <Name>, ...`` line per module (and one ``import torch_npu``) after
its leading imports, unless already imported; a file where such a name already means something else is
left alone.  A module-level import the rewrite left unused (``from torch.optim import AdamW`` once every
``AdamW(...)`` became ``NpuFusedAdamW(...)``) is removed, and every rewrite is listed ("line 12:
torch.optim.AdamW -> torch_npu.optim.NpuFusedAdamW").  Everything else (comments, spacing, quotes) is kept as it was.  The stdlib ``ast`` finds
the fixable findings; libcst parses only the files that have some.  A fixed file has no fixable finding
left, so a second run changes nothing.
"""
from __future__ import annotations

import ast
import difflib
import io
import os
import re
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Set, Tuple

import libcst as cst
import libcst.helpers
from libcst.metadata import MetadataWrapper, PositionProvider

from .codes import FIXABLE_CODES
from .config import Config
from .cst_names import dotted
from .data import load_cuda_fixes
from .engine import Finding, lint, unsuppressed
from .files import SourceError, relative
from .registry import rule_for
from .rewrite import Kind
from .semantic.model import SemanticModel
from .semantic.names import IMPORT
from .sources import Source, TooComplex, check_libcst, deep, parse, read_source, split_lines

Position = Tuple[int, int]


@dataclass(frozen=True)
class Change:
    """One rewrite, or an import added or removed (line 0), as change lists and logs show it."""

    line: int
    code: str
    before: str
    after: str
    # a rewrite of a site folded into a finding that is rewritten too (``Finding.folded``): part of that finding
    within: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        if not self.after:
            return f"removed the unused {self.before}"
        if not self.before:
            return f"added {self.after}"
        return f"line {self.line}: {self.before} -> {self.after}"


@dataclass
class FileFix:
    """The outcome for one file: its text before and after, and the findings left as they were."""

    path: Path
    rel: str
    old: str
    new: str
    applied: int = 0
    left: List[str] = field(default_factory=list)  # "line N: why" for fixable findings not applied
    changes: List[Change] = field(default_factory=list)  # each rewrite, and the imports added or removed

    @property
    def changed(self) -> bool:
        return self.old != self.new

    @property
    def fixed(self) -> int:
        """The findings the rewrites fix, as the reports count them: a site folded into another is part of it."""
        return sum(1 for change in self.changes if change.code and not change.within)

    def diff(self) -> str:
        return "".join(difflib.unified_diff(split_lines(self.old), split_lines(self.new),
                                            fromfile=f"a/{self.rel}", tofile=f"b/{self.rel}"))


def fixable_findings(source: str, path: str, config: Config, codes: Sequence[str] = FIXABLE_CODES) -> List[Finding]:
    """The findings of ``source`` that carry a safe rewrite (``# noqa`` respected); raises SourceError."""
    text = Source.of(source)
    tree = parse(text, path)
    rules = [rule_for(code) for code in codes]
    found = unsuppressed(deep(lint, tree, text.lines, path, config, rules), text.lines)
    return sorted(site for f in found for site in f.with_folded() if site.rewrite)


def _char_column(lines: Sequence[str], line: int, byte_col: int) -> int:
    """ast columns count UTF-8 bytes, libcst columns count characters."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _meanings(model: SemanticModel, name: str) -> Set[str]:
    """What the file's bindings of ``name`` make of it: the module of a plain ``from <module> import <name>``,
    ``import <name>`` for a plain module import, '' for any other binding (an alias, a def, an assignment...)."""
    found = set()
    for binding in model.bindings(name):
        if binding.kind != IMPORT or binding.aliased or (binding.module or "").startswith("."):
            found.add("")
        else:
            found.add(f"import {binding.qualname}" if binding.module is None else binding.module)
    return found


def _imported_at_top(tree: ast.Module, module: str) -> bool:
    """A module-level ``import <module>`` (or ``import <module>.x``) makes the name usable everywhere."""
    return any(isinstance(node, ast.Import) and any(a.name.split(".")[0] == module and not a.asname for a in node.names)
               for node in tree.body)


_REWRITABLE_STRING = re.compile(r"(cuda|nccl)(:\d+)?", re.IGNORECASE)  # what ASC202/ASC204 report


class _Rewriter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, targets: Dict[Kind, Dict[Position, str]]) -> None:
        super().__init__()
        self.targets = targets  # kind -> position of the finding -> what it becomes
        self.methods = {new: old for old, new in load_cuda_fixes()["methods"].items()}
        self.done: Dict[Position, Tuple[str, str]] = {}  # position -> (before, after) for name/method/string
        self.replaced: Set[str] = set()  # the first name of every callee rewritten away (AdamW, torch)
        self._claimed: Dict[Position, cst.CSTNode] = {}  # the outermost name chain at each ``name`` position

    def _at(self, node: cst.CSTNode) -> Position:
        start = self.get_metadata(PositionProvider, node).start
        return start.line, start.column

    def _rewrote(self, where: Position, root: cst.CSTNode, before: str, after: str) -> None:
        self.done[where] = (before, after)
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name):
            self.replaced.add(root.value)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        where = self._at(original.func)
        new = self.targets[Kind.METHOD].get(where)
        func = updated.func
        if new and isinstance(func, cst.Attribute) and self.methods.get(new) == func.attr.value:
            self.done[where] = (f".{func.attr.value}()", f".{new}()")
            return updated.with_changes(func=func.with_changes(attr=cst.Name(new)))
        if where not in self.targets[Kind.CALL]:
            return updated
        self._rewrote(where, original.func, "", "")
        return updated.with_changes(func=cst.Name(self.targets[Kind.CALL][where]))

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        where = self._at(original)
        if where not in self.targets[Kind.INDEX_PUT] or len(updated.targets) != 1:
            return updated
        target = updated.targets[0].target
        if not isinstance(target, cst.Subscript) or len(target.slice) != 1 \
                or not isinstance(target.slice[0].slice, cst.Index):
            return updated
        self.done[where] = ("", "")
        mask = target.slice[0].slice.value
        call = cst.Call(func=cst.Name(self.targets[Kind.INDEX_PUT][where]),
                        args=[cst.Arg(target.value.deep_clone()), cst.Arg(mask), cst.Arg(updated.value)])
        return updated.with_changes(targets=[updated.targets[0].with_changes(target=target.value)], value=call)

    # ``name``: claimed on the way down (the outermost chain at the position), replaced on the way up
    def _claim(self, node: cst.CSTNode) -> None:
        where = self._at(node)
        if where in self.targets[Kind.NAME] and where not in self._claimed and dotted(node):
            self._claimed[where] = node

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._claim(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._claim(node)

    def _rename(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        where = self._at(original)
        if self._claimed.get(where) is not original:
            return updated
        new = self.targets[Kind.NAME][where]
        self._rewrote(where, original, dotted(original), new)
        return cst.parse_expression(new)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        return self._rename(original, updated)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self._rename(original, updated)

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        where = self._at(original)
        new = self.targets[Kind.STRING].get(where)
        value = original.evaluated_value
        if not new or not isinstance(value, str) or not _REWRITABLE_STRING.fullmatch(value) or "\\" in original.value:
            return updated
        opening = len(original.prefix) + len(original.quote)
        text = f"{original.value[:opening]}{new}{original.quote}"
        self.done[where] = (original.value, text)
        return updated.with_changes(value=text)


class _UnusedImports(cst.CSTTransformer):
    """Drop ``names`` from the module-level import statements (a statement left empty goes too)."""

    def __init__(self, names: Set[str]) -> None:
        super().__init__()
        self.names = names
        self.removed: List[str] = []

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return False  # only module-level imports: removing a nested one could leave its block empty

    def _keep(self, alias: cst.ImportAlias) -> bool:
        bound = alias.asname.name.value if alias.asname else cst.helpers.get_full_name_for_node(alias.name)
        if bound.split(".")[0] in self.names:
            self.removed.append(cst.helpers.get_full_name_for_node(alias.name))
            return False
        return True

    def leave_SimpleStatementLine(self, original, updated):
        body = []
        for small in updated.body:
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                kept = [alias for alias in small.names if self._keep(alias)]
                if not kept:
                    continue
                if len(kept) != len(small.names):
                    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                    small = small.with_changes(names=kept)
            body.append(small)
        if not body:
            return cst.RemoveFromParent()
        return updated.with_changes(body=body)


def _unused(code: str, candidates: Set[str]) -> Set[str]:
    """The ``candidates`` no longer read anywhere in ``code`` (nor listed in ``__all__``)."""
    tree = ast.parse(code)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    read |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return candidates - read


def _import_index(module: cst.Module) -> int:
    """Where new imports go: after the docstring and the leading import lines."""
    index = 0
    for position, statement in enumerate(module.body):
        if not isinstance(statement, cst.SimpleStatementLine):
            break
        small = statement.body
        docstring = position == 0 and len(small) == 1 and isinstance(small[0], cst.Expr) \
            and isinstance(small[0].value, (cst.SimpleString, cst.ConcatenatedString))
        if not docstring and not all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in small):
            break
        index = position + 1
    return index


def insert_statements(module_node: cst.Module, texts: Sequence[str]) -> cst.Module:
    """The module with one statement per text after its docstring and leading imports."""
    if not texts:
        return module_node
    new = [cst.parse_statement(text + module_node.default_newline, config=module_node.config_for_parsing)
           for text in texts]
    index = _import_index(module_node)
    return module_node.with_changes(body=[*module_node.body[:index], *new, *module_node.body[index:]])


def fix_source(source: str, findings: Iterable[Finding]) -> Tuple[str, int, List[str], List[Change]]:
    """(new source, number of rewrites, why the other fixable findings were left, what changed) for one file.

    Raises ``SourceError`` for a file libcst must not be given or cannot reproduce exactly (``check_libcst``;
    libcst rejects a form feed before an indented line, which Python accepts).  libcst's visitors recurse
    once or more per level: a deep file is rewritten with room for that (``sources.deep``).
    """
    return deep(_fix_source, source, list(findings))


def _fix_source(source: str, findings: List[Finding]) -> Tuple[str, int, List[str], List[Change]]:
    lines = split_lines(source)
    tree = ast.parse(source)
    model = SemanticModel(tree, lines)
    targets: Dict[Kind, Dict[Position, str]] = {kind: {} for kind in Kind}
    wanted: Dict[Position, Finding] = {}
    left: List[str] = []
    for finding in findings:
        rewrite = finding.rewrite
        root = rewrite.target.split(".")[0]
        if rewrite.imports and _meanings(model, rewrite.name) - {rewrite.module}:
            left.append(f"line {finding.line}: {rewrite.name} already names something else in this file")
            continue
        if rewrite.kind is Kind.NAME and _meanings(model, root) - {f"import {root}"}:
            left.append(f"line {finding.line}: {root} already names something else in this file")
            continue
        where = (finding.line, _char_column(lines, finding.line, finding.col))
        targets[rewrite.kind][where] = rewrite.name if rewrite.imports else rewrite.target
        wanted[where] = finding
    if not wanted:
        return source, 0, left, []
    rewriter = _Rewriter(targets)
    module_node = MetadataWrapper(libcst_module(source)).visit(rewriter)
    missed = sorted(set(wanted) - set(rewriter.done))
    left += [f"line {line}: the code there could not be rewritten" for line, _ in missed]
    imports: Dict[str, Set[str]] = {}
    changes: List[Change] = []
    within = {site for where in rewriter.done for site in wanted[where].folded}
    for where in sorted(rewriter.done):
        finding = wanted[where]
        rewrite = finding.rewrite
        if rewrite.imports:
            before, after = finding.api, rewrite.target
            if rewrite.module not in _meanings(model, rewrite.name):
                imports.setdefault(rewrite.module, set()).add(rewrite.name)
        else:
            before, after = rewriter.done[where]
        root = rewrite.target.split(".")[0]
        if rewrite.kind is Kind.NAME and not _imported_at_top(tree, root):
            imports.setdefault(root, set())
        changes.append(Change(finding.line, finding.code, before, after, finding in within))
    new_lines = [f"from {module} import {', '.join(sorted(names))}" if names else f"import {module}"
                 for module, names in sorted(imports.items(), key=lambda item: (bool(item[1]), item[0]))]
    module_node = insert_statements(module_node, new_lines)  # plain imports first
    changes += [Change(0, "", "", line) for line in new_lines]
    unused = _unused(module_node.code, rewriter.replaced)
    if unused:
        remover = _UnusedImports(unused)
        module_node = module_node.visit(remover)
        changes += [Change(0, "", f"import of {name}", "") for name in remover.removed]
    return module_node.code, len(rewriter.done), left, changes


def libcst_module(source: str) -> cst.Module:
    """libcst's tree of ``source``; raises SourceError when libcst must not or cannot handle it faithfully."""
    try:
        check_libcst(source)
        module_node = cst.parse_module(source)
    except TooComplex as error:
        raise SourceError(str(error)) from None
    except cst.ParserSyntaxError as error:
        raise SourceError(f"libcst cannot parse it ({error.message})") from None
    if module_node.code != source:
        raise SourceError("libcst would not write it back unchanged")
    return module_node


def write_file(path: Path, text: str) -> None:
    """Replace the file atomically, keeping its encoding and permissions."""
    encoding = tokenize.detect_encoding(io.BytesIO(path.read_bytes()).readline)[0]
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding=encoding, newline="") as out:
            out.write(text)
        os.chmod(temporary, path.stat().st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


class UnwritableInput(Exception):
    """``--fix`` cannot write some of the files it would rewrite; the message names the first one."""


def _writable(path: Path) -> bool:
    """Whether ``write_file`` may replace ``path``: it writes a new file into the folder and renames it."""
    return os.access(path.parent, os.W_OK | os.X_OK)


def fix_paths(paths: Sequence[Path], root: Path, config: Config, write: bool,
              codes: Sequence[str] = FIXABLE_CODES) -> Tuple[List[FileFix], List[str]]:
    """Fix every file (written only when ``write``); returns the files with fixable findings and why others
    were skipped.

    With ``write``, every file to rewrite is checked first: when one cannot be written, none is, and
    ``UnwritableInput`` says which; a write that fails all the same raises it after the others.
    """
    results: List[FileFix] = []
    problems: List[str] = []
    for path in paths:
        rel = relative(path, root)
        try:
            source = read_source(path)
            findings = fixable_findings(source.text, rel, config, codes)
            if not findings:
                continue
            if not source.exact:
                raise SourceError(source.note)
            new, applied, left, changes = fix_source(source.text, findings)
        except SourceError as error:
            problems.append(f"{rel}: {error}")
            continue
        results.append(FileFix(path, rel, source.text, new, applied, left, changes))
    if not write:
        return results, problems
    changed = [result for result in results if result.changed]
    refused = [result.rel for result in changed if not _writable(result.path)]
    if refused:
        others = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise UnwritableInput(f"--fix cannot write {refused[0]}{others}: its folder is not writable; "
                              "no file was rewritten")
    failed = []
    for result in changed:
        try:
            write_file(result.path, result.new)
        except OSError as error:
            failed.append((result.rel, error.strerror or str(error)))
    if failed:
        rel, why = failed[0]
        others = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise UnwritableInput(f"--fix could not write {rel}{others}: {why}; "
                              f"{len(changed) - len(failed)} other files were rewritten")
    return results, problems
