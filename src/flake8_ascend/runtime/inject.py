"""Instrument a copy of a training project for runtime dynamic-shape detection.

``instrument_tree(source, dest)`` copies a project (a folder or one file) into
``dest`` with ``msft_dynamic_analysis/`` beside it, and rewrites the training
scripts of the copy with libcst, changing nothing else in them:

* the data loops are wrapped where they can be recognised: ``for ... in ITER:``
  becomes ``for ... in DETECTOR.start(ITER):`` when it is a whole-step loop of
  ``detect.training`` (its body runs a backward call and an optimizer step, as
  the advice rules define them), whatever ITER is, or when ITER is a DataLoader,
  a name or attribute bound to one (or spelled like one: ``train_loader``,
  ``val_dataloader``, ``train_dl``), a call of a function named like one
  (``build_train_loader()``), or ``enumerate``/``zip``/``iter``/a progress bar
  (``tqdm``, ``track``...) around one.  Evaluation loops are wrapped too: each
  wrapped loop has its own recording window, and the detectors tell training
  from evaluation at run time.  Loops nested in a wrapped loop and ``async
  for`` are left alone;
* ``from msft_dynamic_analysis.hook import DETECTOR`` (or the import of another
  detector) is appended to the first line that may hold it (the docstring, the
  last ``__future__`` import, or the first statement), so every other line keeps
  its number and the report's line numbers are the original's; scripts in
  subfolders put the analysis folder first on ``sys.path`` for that import only
  on that same line, so that a project folder or module named like the package
  beside the script cannot stand in for it, and the script's imports resolve as
  in the original.  An import of the detector already in the file (a statement,
  not a comment) is pointed at the chosen detector on its own line.

A training script is a file with a whole-step loop (``for`` or ``while``); those where no loop could be wrapped (a ``while`` loop)
still get the import and are listed so the user can wrap the loop by hand.  A
``.backward(`` elsewhere (a profiling helper) makes no training script.  The
source tree is only read.
"""
from __future__ import annotations

import ast
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..files import SKIPPED_FOLDERS, SourceError, lstat_problem, read_regular, regular_file_problem, relative
from ..calls import dotted as ast_dotted
from ..cst_names import dotted as cst_dotted
from ..detect.loader_names import says_loader
from ..detect.training import Training
from ..semantic.model import SemanticModel
from ..sources import TooComplex, check_libcst, decode, deep
from ..walk import walk_tree

PACKAGE = "msft_dynamic_analysis"
PACKAGE_SOURCE = Path(__file__).parent / PACKAGE
IMPORT_LINE = f"from {PACKAGE}.hook import DETECTOR"
REPORT_NAME = "msft_dynamic_shape_analysis_report.csv"
_WRAPPERS = frozenset({"enumerate", "zip", "iter", "islice", "track"})


@dataclass(frozen=True)
class WrappedLoop:
    path: str  # relative to the project root, "/" separators
    line: int
    header: str  # the loop's first line as written in the original


@dataclass
class Instrumented:
    """What ``instrument_source`` did to one file."""

    code: bytes
    loops: List[Tuple[int, str]]  # (line, original header) of each wrapped loop
    imports: bool  # the file imports the detector (added now or already there)
    manual: bool  # a training loop that could not be wrapped (a while loop): wrap it by hand
    shifted: bool = False  # the import needed a line of its own: later lines moved down by one


@dataclass
class Injection:
    """What ``instrument_tree`` did."""

    wrapped: List[WrappedLoop] = field(default_factory=list)
    manual: List[str] = field(default_factory=list)  # training scripts where no data loop was found
    importing: List[str] = field(default_factory=list)  # files of the copy that import the detector
    shifted: List[str] = field(default_factory=list)  # files whose lines moved down by one
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # (path, why) copied unchanged or left out
    copied: int = 0  # files written into the copy
    package: str = ""  # the input was this package's folder: the copy holds it as <dest>/<package>/


def _is_detector_start(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "start"
            and isinstance(node.func.value, cst.Name) and node.func.value.value == "DETECTOR")


def _iterates_loader(node: ast.AST, model: SemanticModel, depth: int = 0) -> bool:
    """Is ``node`` (a loop's iterable) a DataLoader, a name or attribute spelled like one or assigned one anywhere
    in the file, a call of a function named like one, or ``enumerate``/``zip``/a progress bar around one?"""
    if depth > 4:
        return False
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name == "DataLoader":
            return True
        if name in _WRAPPERS or "tqdm" in name.lower() or "progress" in name.lower():
            spread = [k.value for k in node.keywords if k.arg is None]  # ``**kw``: not a keyword argument either
            return any(_iterates_loader(arg.value if isinstance(arg, ast.Starred) else arg, model, depth + 1)
                       for arg in node.args + spread)
        return says_loader(name)
    spelled = ast_dotted(node)
    if spelled is None:
        return False
    return says_loader(spelled.rsplit(".", 1)[-1]) or any(
        _iterates_loader(value, model, depth + 1) for value in model.assigned(spelled))


class _LoopWrapper(cst.CSTTransformer):
    """Wraps the data loops of a module in ``DETECTOR.start(...)``."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module, step_lines: Set[int], loader_loop: Callable[[int], bool],
                 import_line: str = IMPORT_LINE) -> None:
        super().__init__()
        self.import_line = import_line
        self.imports = False  # the module imports the detector itself
        self.module = module
        self.step_lines = step_lines  # first lines of the whole-step loops (detect.training)
        self.loader_loop = loader_loop  # does the ``for`` starting on this line iterate a loader?
        self.training = False  # a loop of the module runs a training step
        self.open_loops: List[bool] = []  # for each enclosing for loop: is it a data loop?
        self.wrap: Set[int] = set()
        self.loops: List[Tuple[int, str]] = []
        self.already_wrapped = False

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _runs_training_step(self, node: cst.CSTNode) -> bool:
        return self._line(node) in self.step_lines

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        if not _imports_detector(original):
            return updated
        self.imports = True
        if self.import_line == IMPORT_LINE:
            return updated
        chosen = cst.parse_statement(self.import_line + "\n").body[0]
        return chosen.with_changes(semicolon=updated.semicolon)

    def visit_While(self, node: cst.While) -> None:
        if self._runs_training_step(node):
            self.training = True

    def visit_For(self, node: cst.For) -> None:
        data_loop = False
        steps = self._runs_training_step(node)
        self.training = self.training or steps
        if _is_detector_start(node.iter):
            self.already_wrapped = data_loop = True
        elif node.asynchronous is None and not any(self.open_loops) and (steps or self.loader_loop(self._line(node))):
            data_loop = True
            self.wrap.add(id(node))
            line = self._line(node)
            code = self.module.code_for_node
            header = " ".join(f"for {code(node.target)} in {code(node.iter)}:".split())
            header = header if len(header) <= 100 else header[:97] + "..."
            self.loops.append((line, header))
        self.open_loops.append(data_loop)

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        self.open_loops.pop()
        if id(original) not in self.wrap:
            return updated
        start = cst.Attribute(value=cst.Name("DETECTOR"), attr=cst.Name("start"))
        return updated.with_changes(iter=cst.Call(func=start, args=[cst.Arg(value=updated.iter)]))


def _import_statements(depth: int, import_line: str) -> List[cst.BaseSmallStatement]:
    text = import_line
    if depth:
        root = f'__import__("os").path.abspath(__file__ + "{"/.." * (depth + 1)}")'
        text = f'__import__("sys").path.insert(0, {root}); {text}; __import__("sys").path.remove({root})'
    return list(cst.parse_statement(text + "\n").body)


def _imports_detector(node: cst.ImportFrom) -> bool:
    """``from msft_dynamic_analysis.hook import DETECTOR``, as a statement of its own."""
    return (not node.relative and node.module is not None and cst_dotted(node.module) == f"{PACKAGE}.hook"
            and isinstance(node.names, (list, tuple)) and len(node.names) == 1
            and cst_dotted(node.names[0].name) == "DETECTOR" and node.names[0].asname is None)


def _is_docstring(line: cst.SimpleStatementLine) -> bool:
    first = line.body[0]
    return isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))


def _is_future(line: cst.SimpleStatementLine) -> bool:
    return any(isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name) and s.module.value == "__future__"
               for s in line.body)


def _add_import(module: cst.Module, depth: int, import_line: str) -> Tuple[cst.Module, bool]:
    """The module with the detector import on an existing line when possible; (module, lines shifted)."""
    body = list(module.body)
    anchor = None
    for index, statement in enumerate(body):
        if not isinstance(statement, cst.SimpleStatementLine):
            break
        if (index == 0 and _is_docstring(statement)) or _is_future(statement):
            anchor = index
        else:
            break
    if anchor is None and body and isinstance(body[0], cst.SimpleStatementLine):
        anchor = 0
    statements = _import_statements(depth, import_line)
    if anchor is None:
        return module.with_changes(body=[cst.SimpleStatementLine(body=statements), *body]), True
    line = body[anchor]
    last = line.body[-1]
    if isinstance(last.semicolon, cst.Semicolon):  # "import os;" -> "import os; from ..."
        last = last.with_changes(semicolon=cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" ")))
    body[anchor] = line.with_changes(body=[*line.body[:-1], last, *statements])
    return module.with_changes(body=body), False


def _names_in(node: ast.AST) -> Iterator[str]:
    """Every name, attribute and dotted chain spelled inside ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr
            dotted = ast_dotted(sub)
            if dotted:
                yield dotted


def may_have_data_loop(loops: Iterable[ast.For], model: SemanticModel) -> bool:
    """A cheap superset of what ``_LoopWrapper`` wraps: a ``for`` whose iterable spells a loader, here or in
    what is assigned to the names it spells (``it = train_loader``).  libcst costs about ten times a stdlib
    parse: it runs only on the files that can have a loop to wrap."""
    known: Dict[str, bool] = {}  # name -> its assigned values spell a loader (memoised: linear, cycle-safe)

    def mentions_loader(expr: ast.AST) -> bool:
        for name in _names_in(expr):
            last = name.rsplit(".", 1)[-1]
            if last == "DataLoader" or says_loader(last) or (last == "start" and "DETECTOR" in name):
                return True
            if name not in known:
                known[name] = False  # an assignment cycle ends here
                known[name] = any(mentions_loader(v) for v in model.assigned(name))
            if known[name]:
                return True
        return False

    return any(mentions_loader(loop.iter) for loop in loops)


def _stdlib_tree(source: bytes) -> Optional[ast.AST]:
    """The stdlib tree of ``source``, or None where the stdlib parser refuses it (libcst then reports what it
    makes of the file; no loop of it counts as a training or data loop)."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None


def instrument_source(source: bytes, depth: int = 0, import_line: str = IMPORT_LINE) -> Instrumented:
    """Wrap the data loops of one file and add the detector import (``import_line``); raises
    ``libcst.ParserSyntaxError`` or ``TooComplex``.

    ``depth`` is the file's folder depth below the analysis root (0: beside ``msft_dynamic_analysis``).
    Which loops run a training step and which iterate a loader is decided on the stdlib tree and its semantic
    model; libcst only rewrites, finding those loops by their first line.
    """
    unchanged = Instrumented(source, [], False, False)
    trains = b".backward(" in source or PACKAGE.encode() in source  # may train, or already imports the package
    loader_words = b"oader" in source or b"dl" in source or b"DETECTOR" in source
    if not (trains or (b"for " in source and loader_words)):
        return unchanged
    tree = _stdlib_tree(source)
    model = SemanticModel(tree, ()) if tree is not None else None  # (no lines: its loader questions read none)
    loops = {node.lineno: node for node in walk_tree(tree) if isinstance(node, ast.For)} if tree is not None else {}
    if not trains and model is not None and not may_have_data_loop(loops.values(), model):
        return unchanged
    decoded = decode(source)
    if not decoded.exact:  # libcst would fail on it, and Python cannot run it
        raise TooComplex(decoded.note)
    check_libcst(source)
    module = cst.parse_module(source)
    step_lines = {loop.lineno for loop in Training(tree, decoded.lines).whole_step_loops()} if tree else set()

    def loader_loop(line: int) -> bool:
        return line in loops and _iterates_loader(loops[line].iter, model)

    wrapper = _LoopWrapper(module, step_lines, loader_loop, import_line)
    module = MetadataWrapper(module, unsafe_skip_copy=True).visit(wrapper)
    training = wrapper.training
    already = wrapper.imports
    shifted = False
    if (wrapper.loops or training) and not already:
        module, shifted = _add_import(module, depth, import_line)
    imports = already or bool(wrapper.loops) or training
    manual = training and not (wrapper.loops or wrapper.already_wrapped)
    return Instrumented(module.bytes, wrapper.loops, imports, manual, shifted)


def _reserved(root_level: bool, name: str) -> bool:
    """Names the analysis folder's root keeps for itself: every report and dump folder the running copy writes
    there starts with ``msft_`` (an input symlink named ``msft_overflow_dump`` would lead its writes outside)."""
    return root_level and (name in ("pytorch_analysis.txt", "dynamic_shape_hints.csv") or name.startswith("msft_"))


def _copy_link(link: Path, target: Path, source_root: Path, excluded: Set[str]) -> str:
    """Re-create a symbolic link of the input in the copy; returns why it was left out, or ""."""
    try:
        points_to = Path(os.path.realpath(link))
    except OSError as error:
        return f"symbolic link left out ({error.strerror or error})"
    if not points_to.exists():
        return "dangling symbolic link left out"
    if not (points_to.is_dir() or points_to.is_file()):
        return "symbolic link to a FIFO, socket or device left out"
    root = Path(os.path.realpath(source_root))
    inside = points_to == root or root in points_to.parents
    if inside and any(os.path.normcase(str(points_to)) == e or os.path.normcase(str(points_to)).startswith(e + os.sep)
                      for e in excluded):
        return "symbolic link into the analysis output left out"
    if inside:  # the same place in the copy, relative so that it stays inside the copy
        copy_root = target.parents[len(link.relative_to(source_root).parts) - 1]
        os.symlink(os.path.relpath(copy_root / points_to.relative_to(root), target.parent), target)
    else:  # outside the project (a data folder): the same target, absolute so that it does not dangle
        os.symlink(points_to, target)
    return ""


def _copy_file(source: Path, target: Path) -> str:
    """Copy one file that is not instrumented; returns why it was left out, or ""."""
    problem = regular_file_problem(source)
    if problem:
        return f"left out: {problem}"
    try:
        shutil.copy2(source, target)
    except (OSError, shutil.Error) as error:
        return f"left out: cannot copy ({getattr(error, 'strerror', None) or error})"
    return ""


def instrument_tree(source: Path, dest: Path, exclude: Iterable[Path] = (), import_line: str = IMPORT_LINE
                    ) -> Injection:
    """Copy ``source`` (a project folder or one file) into the folder ``dest``, instrumented with the detector
    that ``import_line`` imports as DETECTOR; see the module doc and ``copy_tree``.  Files that libcst cannot
    parse are copied unchanged and listed in ``skipped``."""

    def instrument(path: Path, target: Path, rel: str, depth: int, result: Injection) -> None:
        _instrument_file(path, target, rel, depth, result, import_line)

    result = copy_tree(source, dest, instrument, exclude)
    shutil.copytree(PACKAGE_SOURCE, dest / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return result


FileHandler = Callable[[Path, Path, str, int, Injection], None]


def copy_tree(source: Path, dest: Path, on_python: FileHandler, exclude: Iterable[Path] = ()) -> Injection:
    """Copy ``source`` (a project folder or one file) into the folder ``dest``; each ``.py`` file is written by
    ``on_python(path, target, rel, depth, result)`` (the instrumented or migrated copies share every other rule).

    A package folder (one with ``__init__.py``) is copied into ``dest/<its name>/``, so the copy keeps the
    importable layout (``import yolov5.utils``, relative imports) and runs as ``python -m yolov5.train``
    from ``dest``; any other folder's contents go straight into ``dest`` (``src/`` layouts stay as they are).
    ``dest`` is created if needed; ``exclude`` lists folders of the source to
    leave out (an output folder inside the project).  Symbolic links stay links (into the copy when they
    point inside the project), special files, virtual environments and names reserved for the reports are
    left out and listed in ``skipped``.
    """
    source, dest = Path(source), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    result = Injection()
    if source.is_file():
        on_python(source, dest / source.name, source.name, 0, result)
    else:
        excluded = {os.path.normcase(os.path.abspath(p)) for p in exclude}

        def unreadable(error: OSError) -> None:
            rel = relative(error.filename, source)
            result.skipped.append((rel, f"left out: cannot list folder ({error.strerror})"))

        result.package = source.name if (source / "__init__.py").is_file() else ""
        for folder, subfolders, names in os.walk(source, onerror=unreadable, followlinks=False):
            here = Path(folder)
            rel_folder = Path(result.package, here.relative_to(source))
            depth = len(rel_folder.parts)
            try:
                (dest / rel_folder).mkdir(parents=True, exist_ok=True)
            except OSError as error:  # a path longer than the system allows, in the copy
                result.skipped.append((rel_folder.as_posix(), f"left out: cannot copy ({error.strerror or error})"))
                subfolders[:] = []
                continue
            keep = []
            for name in sorted(subfolders):
                path = here / name
                rel = (rel_folder / name).as_posix()
                if name in SKIPPED_FOLDERS or os.path.normcase(os.path.abspath(path)) in excluded:
                    continue
                problem = lstat_problem(path)
                if problem:
                    result.skipped.append((rel, f"left out: {problem}"))
                elif _reserved(depth == 0, name):
                    result.skipped.append((rel, "name reserved for the analysis output"))
                elif path.is_symlink():
                    problem = _copy_link(path, dest / rel_folder / name, source, excluded)
                    if problem:
                        result.skipped.append((rel, problem))
                elif os.path.isfile(path / "pyvenv.cfg"):  # os.path: an unreadable folder answers False
                    result.skipped.append((rel, "virtual environment"))
                else:
                    keep.append(name)
            subfolders[:] = keep
            for name in sorted(names):
                rel = (rel_folder / name).as_posix()
                try:
                    _copy_entry(here / name, dest / rel_folder / name, rel, depth, on_python, source, excluded, result)
                except OSError as error:  # a path longer than the system allows, in the input or the copy
                    result.skipped.append((rel, f"left out: cannot copy ({error.strerror or error})"))
    return result


def _copy_entry(path: Path, target: Path, rel: str, depth: int, on_python: FileHandler, source: Path,
                excluded: Set[str], result: Injection) -> None:
    """Copy one file (or link to one) of a folder of the input; raises OSError."""
    if _reserved(depth == 0, path.name):
        result.skipped.append((rel, "name reserved for the analysis output"))
    elif path.is_symlink():
        problem = _copy_link(path, target, source, excluded)
        if problem:
            result.skipped.append((rel, problem))
        else:
            result.copied += 1
    elif path.name.endswith(".py"):
        on_python(path, target, rel, depth, result)
    else:
        problem = _copy_file(path, target)
        if problem:
            result.skipped.append((rel, problem))
        else:
            result.copied += 1


def _instrument_file(path: Path, target: Path, rel: str, depth: int, result: Injection, import_line: str) -> None:
    try:
        raw = read_regular(path)
    except SourceError as error:  # a FIFO, device or unreadable file named *.py, or one over the size cap
        result.skipped.append((rel, f"left out: {error}"))
        return
    try:
        done = deep(instrument_source, raw, depth, import_line)  # libcst's visitors recurse once or more per level
    except TooComplex as error:
        result.skipped.append((rel, f"copied unchanged: {error}"))
        shutil.copy2(path, target)
        result.copied += 1
        return
    except (cst.ParserSyntaxError, RecursionError, UnicodeDecodeError, SyntaxError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        result.skipped.append((rel, f"copied unchanged: libcst cannot parse it ({reason})"))
        shutil.copy2(path, target)
        result.copied += 1
        return
    if done.code == raw:
        shutil.copy2(path, target)
    else:
        target.write_bytes(done.code)
        shutil.copymode(path, target)
    result.copied += 1
    result.wrapped += [WrappedLoop(rel, line, header) for line, header in done.loops]
    if done.manual:
        result.manual.append(rel)
    if done.imports:
        result.importing.append(rel)
    if done.shifted:
        result.shifted.append(rel)
