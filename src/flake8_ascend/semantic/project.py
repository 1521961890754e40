"""The linted file's project: the other modules of its top-level package, for the facts one file cannot show.

Who calls a function is such a fact: a ``device='cuda'`` default that every caller in the project overrides never
picks the device (easyocr 1.7.2 ``DBNet(..., device=device)`` in detection_db.py for DBNet/DBNet.py's default; mmdet3d
1.4.0 ``self.prior_generator.grid_anchors(..., device=device)`` in four heads for Anchor3DRangeGenerator's).
The modules are read as text and parsed, never imported or run, on the first question a file asks; their texts are
kept for the rest of the process (a flake8 worker lints many files of one package), only the last parsed trees and
the class outlines ``resolve_class`` reads. A package of more than ``MAX_MODULES``
modules, a module of more than ``MAX_BYTES`` and a link are not read: the question then finds nothing, as if
the file stood alone.
"""
from __future__ import annotations

import ast
import os
import re
from collections import OrderedDict
from functools import lru_cache
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple

from ..walk import walk_tree

MAX_MODULES = 3000
MAX_BYTES = 2_000_000
# parsed modules kept for the next questions: files rarely ask about a module another file asked about before them
# (deepspeed 0.19.8, ultralytics 8.4.190, mmdet 3.1.0: 25-46 modules parsed, none again beyond the last 8), and a tree
# held for the rest of the process makes every full collection of the garbage collector walk it again
MAX_TREES = 8


def package_of(path: str) -> Optional[str]:
    """The outermost package folder (each folder up to it has an ``__init__.py``) holding the module at ``path``, or
    None for a module in no package (a script: its callers are not known). The module's own folder may lack the
    ``__init__.py`` where its parent is a package (easyocr 1.7.2 ``easyocr/DBNet/``, imported by path)."""
    return _package_of_folder(os.path.dirname(os.path.abspath(path)))


@lru_cache(maxsize=1024)
def _package_of_folder(folder: str) -> Optional[str]:
    """``package_of`` a module in ``folder``, looked up once per process, as the package's texts are read once: every
    import of every linted module asks (``local_module``; yolov5 7.0.14: 671 questions, each a few file lookups)."""
    if not os.path.isfile(os.path.join(folder, "__init__.py")):
        folder = os.path.dirname(folder)
    top = None
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        top, parent = folder, os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return top


@lru_cache(maxsize=8)
def _modules(package: str) -> Dict[str, str]:
    """path -> text of every module below ``package``, in path order; empty for a package too large to read."""
    paths: List[str] = []
    for folder, folders, files in os.walk(package):
        folders[:] = sorted(f for f in folders if not f.startswith(".") and f != "__pycache__")
        paths += [os.path.join(folder, name) for name in sorted(files) if name.endswith(".py")]
        if len(paths) > MAX_MODULES:
            return {}
    return {path: text for path, text in ((path, _read(path)) for path in paths) if text is not None}


def _read(path: str) -> Optional[str]:
    """The text of the module at ``path``; None for a link, a module over ``MAX_BYTES`` or one that cannot be read."""
    try:
        if not _small_file(path):
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _small_file(path: str) -> bool:
    """A file read at all: no link (it may lead out of the project), at most ``MAX_BYTES``; raises OSError."""
    return not os.path.islink(path) and os.path.getsize(path) <= MAX_BYTES


_trees: "OrderedDict[str, Optional[ast.Module]]" = OrderedDict()  # the last MAX_TREES parsed, the newest last
# per parsed module: its import statements, its calls by the name called (``f(...)``, ``x.f(...)``), each with its
# place in walk order (``walk_tree``), and its classes and functions: one walk per module serves every question about
# its callers
_Index = Tuple[List[ast.stmt], Dict[str, List[Tuple[int, ast.Call]]], List[ast.AST]]
_indexes: Dict[str, _Index] = {}
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_statements: Dict[str, List[str]] = {}  # path -> its import statements' texts (``_import_statements``)
# an import statement's text, parenthesised names included: ``from .net import (\n    DBNet,\n)``
_IMPORTS = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)", re.M)


def _import_statements(path: str, text: str) -> List[str]:
    """The import statements of the module at ``path`` as written, found once per process: a name defined in many
    modules (transformers' ``eager_attention_forward``, ``rotate_half``) has each of them ask."""
    found = _statements.get(path)
    if found is None:
        found = _statements[path] = [statement.group(0) for statement in _IMPORTS.finditer(text)]
    return found


def _tree(path: str, text: str) -> Optional[ast.Module]:
    if path in _trees:
        _trees.move_to_end(path)
        return _trees[path]
    tree = _trees[path] = _parse(text)
    if len(_trees) > MAX_TREES:
        _indexes.pop(_trees.popitem(last=False)[0], None)  # a module's index goes with its tree
    return tree


def _parse(text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


# per module that ``resolve_class`` read: its top-level classes (name -> bases as spelled) and its imports (``_imports``)
_outlines: Dict[str, Optional[Tuple[Dict[str, Tuple[str, ...]], Dict[str, str]]]] = {}


def _outline(path: str, text: str) -> Optional[Tuple[Dict[str, Tuple[str, ...]], Dict[str, str]]]:
    """All ``resolve_class`` reads of a module, kept instead of its tree: a parsed module held for the rest of the
    process makes every full collection of the garbage collector walk it again (deepspeed 0.19.8: the three modules
    its optimizers subclass hold 84,000 nodes, and a ``flake8 -j1`` run spent about 3 s more in collections)."""
    if len(_outlines) > MAX_MODULES:
        _outlines.clear()
    if path not in _outlines:
        tree = _trees[path] if path in _trees else _parse(text)
        classes: Dict[str, Tuple[str, ...]] = {}
        for node in tree.body if tree is not None else ():
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, tuple(_spelled(base) for base in node.bases))
        _outlines[path] = None if tree is None else (classes, _imports(tree, path))
    return _outlines[path]


def _index(path: str, tree: ast.Module) -> _Index:
    """The import statements, the calls by called name and the classes and functions of the module ``_tree`` parsed
    from ``path``."""
    found = _indexes.get(path)
    if found is None:
        imports: List[ast.stmt] = []
        calls: Dict[str, List[Tuple[int, ast.Call]]] = {}
        definitions: List[ast.AST] = []
        for order, node in enumerate(walk_tree(tree)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports.append(node)
            elif isinstance(node, _DEFINITIONS):
                definitions.append(node)
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) \
                    else None
                if called is not None:
                    calls.setdefault(called, []).append((order, node))
        found = _indexes[path] = (imports, calls, definitions)
    return found


def package_inits(path: str, spelled: Optional[Callable[[str], bool]] = None) -> List[ast.Module]:
    """The parsed ``__init__.py`` of every package above the module at ``path``, outermost first: what Python runs
    before the module (its own ``__init__`` excluded when it is one). Each is read alone, never the whole package.
    ``spelled``: only those whose text passes it, the others not parsed."""
    package = package_of(path)
    if package is None:
        return []
    here = os.path.abspath(path)
    folder, found = os.path.dirname(here), []
    while True:
        init = os.path.join(folder, "__init__.py")
        tree = _init_tree(init, spelled) if init != here else None
        if tree is not None:
            found.append(tree)
        if folder == package:
            return found[::-1]
        folder = os.path.dirname(folder)


@lru_cache(maxsize=256)
def _init_tree(init: str, spelled: Optional[Callable[[str], bool]]) -> Optional[ast.Module]:
    """Read and parsed once per process: every module of the package asks for its ``__init__``s."""
    text = _read(init)
    return None if text is None or (spelled is not None and not spelled(text)) else _tree(init, text)


def _dotted(path: str, package: str) -> str:
    """The module name of ``path`` (``easyocr.DBNet.DBNet``), from the folder above its top-level package."""
    relative = os.path.relpath(os.path.abspath(path), os.path.dirname(package))[:-len(".py")]
    parts = relative.split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _bindings(imports: List[ast.stmt], path: str, target: str, name: str) -> Tuple[Set[str], Set[str]]:
    """In the module at ``path``, whose import statements are ``imports``: the names they bind to ``target.name``
    (or to ``name`` re-exported by a package above ``target``), and the dotted spellings bound to the module
    ``target`` itself."""
    names: Set[str] = set()
    modules: Set[str] = set()
    parents = target.split(".")
    for node in imports:
        if isinstance(node, ast.ImportFrom):
            source = absolute("." * node.level + (node.module or ""), path) if node.level else node.module or ""
            if source is None:
                continue  # above the top-level package: no import Python runs
            if not node.level and source.partition(".")[0] != parents[0]:
                source = f"{parents[0]}.{source}"  # run with the package's folder on sys.path (s3prl 0.4.17
                # pretrain/mockingjay/dataset.py:20, ``from pretrain.mockingjay.task import ...``); another
                # top-level module of the same path and function is not looked for
            for alias in node.names:  # both where the module defines a function of its name (nemo 2.x ``from
                # nemo.collections.common.parts import rnn``: the module, unless the package re-exports the function)
                if alias.name == name and (source == target or target.startswith(source + ".")):
                    names.add(alias.asname or alias.name)
                if f"{source}.{alias.name}" == target:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == target:
                    modules.add(alias.asname or alias.name)
                elif alias.asname is None and parents[0] == alias.name.partition(".")[0]:
                    modules.add(target)  # ``import pkg.net`` names the module ``pkg.net``
    return names, modules


def _spelled(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def _spelling(path: str, spelled: Optional[Callable[[str], object]], name: str) -> Iterator[Tuple[str, str]]:
    """(path, text) of each other module of the package of the module at ``path`` whose text has
    ``name`` and passes ``spelled`` (if given): the modules worth parsing for a call."""
    package = package_of(path)
    if package is None:
        return
    here = os.path.abspath(path)
    for module, text in _modules(package).items():
        if module != here and name in text and (spelled is None or spelled(text)):
            yield module, text


_WORD_CHARACTER = re.compile(r"\w")


def _called(name: str) -> Callable[[str], bool]:
    """Does a text call ``name``: ``name(`` (spaces allowed before the parenthesis) at the start of a word? The
    pattern begins with the name itself, which ``re`` finds with a fast literal search; a leading ``\\b`` would
    make it try every position (transformers 4.57.6: 20 times slower over the modules naming
    ``eager_attention_forward``), so the word's start is checked on each match instead."""
    call = re.compile(rf"{re.escape(name)}\s*\(")

    def calls(text: str) -> bool:
        return any(not match.start() or not _WORD_CHARACTER.match(text, match.start() - 1)
                   for match in call.finditer(text))
    return calls


def calls_elsewhere(path: str, name: str) -> List[ast.Call]:
    """The calls of the module-level function or class ``name`` of the module at ``path`` in the other modules of
    its package: ``name(...)`` where the module imports it from there (or from a package above, which re-exports
    it), and ``net.name(...)`` on the imported module. Each call is as written, so a caller that passes
    ``**kwargs`` or ``*args`` is seen as one."""
    return [call for _, _, call in _calls_elsewhere(path, name)]


def callers_elsewhere(path: str, name: str, possible: Callable[[str, str], bool], method: bool = False) -> Optional[
        List[Tuple[str, List[ast.AST]]]]:
    """For each call of ``calls_elsewhere`` (``method``: of ``method_calls_elsewhere``): the calling module's path
    from the folder above the package, and the classes and functions around the call there, outermost first. None as
    soon as a module that imports the function (spells the method's call) fails ``possible(path, text)``, before it
    is parsed: the question needs callers of one kind only, and a name that many modules import (transformers'
    ``eager_attention_forward``) is then settled cheaply."""
    top = os.path.dirname(package_of(path) or "")
    found = []
    calls = _method_calls_elsewhere if method else _calls_elsewhere
    for module, tree, call in calls(path, name, lambda m, text: possible(os.path.relpath(m, top), text)):
        if tree is None:
            return None
        found.append((os.path.relpath(module, top), _around(module, tree, call)))
    return found


def _around(module: str, tree: ast.Module, call: ast.Call) -> List[ast.AST]:
    """The classes and functions of ``module`` around ``call``, outermost first."""
    around = [node for node in _index(module, tree)[2]
              if node.lineno <= call.lineno and call.end_lineno <= node.end_lineno]
    return sorted(around, key=lambda node: (node.lineno, -node.end_lineno))


def _calls_elsewhere(path: str, name: str, possible: Optional[Callable[[str, str], bool]] = None) -> Iterator[
        Tuple[str, Optional[ast.Module], Optional[ast.Call]]]:
    """(the calling module's path, its tree, the call) for each call of ``calls_elsewhere``; (path, None, None) and
    no more for a module that imports the function and fails ``possible``."""
    package = package_of(path)
    if package is None:
        return
    target = _dotted(os.path.abspath(path), package)
    imported = re.compile(rf"\b({re.escape(name)}|{re.escape(target.rpartition('.')[2])})\b")
    for module, text in _spelling(path, _called(name), name):
        if not any(imported.search(statement) for statement in _import_statements(module, text)):
            continue  # parsed only where an import names the function or its module
        if possible is not None and not possible(module, text):
            yield module, None, None
            return
        tree = _tree(module, text)
        if tree is None:
            continue
        imports, calls, _ = _index(module, tree)
        names, modules = _bindings(imports, module, target, name)
        if not names and not modules:
            continue
        here = [(order, node) for called in names for order, node in calls.get(called, ())
                if isinstance(node.func, ast.Name)]
        here += [(order, node) for order, node in calls.get(name, ()) if isinstance(node.func, ast.Attribute)
                 and _spelled(node.func.value) in modules]
        for _, node in sorted(here, key=lambda pair: pair[0]):
            yield module, tree, node


@lru_cache(maxsize=256)
def imported_elsewhere(path: str) -> bool:
    """Does another module of its package import the module at ``path`` (``from .stream_generator import ...``,
    ``from ..profilers.comm_profile import create_predictor``, ``from . import yin``, ``import pkg.yin``)? Then
    it is a library module, not a program of its own."""
    package = package_of(path)
    if package is None:
        return False
    target = _dotted(os.path.abspath(path), package)
    leaf = target.rpartition(".")[2]
    named = re.compile(rf"\b{re.escape(leaf)}\b")
    for module, text in _spelling(path, None, leaf):  # the import statements are searched, not the whole text
        if not any(named.search(statement) for statement in _import_statements(module, text)):
            continue
        tree = _tree(module, text)
        if tree is not None and any(_binds_module(node, module, target) for node in _index(module, tree)[0]):
            return True
    return False


def _binds_module(node: ast.stmt, path: str, target: str) -> bool:
    """Does the import statement ``node`` of the module at ``path`` load the module ``target``?"""
    if isinstance(node, ast.Import):
        return any(alias.name == target or alias.name.startswith(target + ".") for alias in node.names)
    source = absolute("." * node.level + (node.module or ""), path) if node.level else node.module or ""
    return source == target or any(f"{source}.{alias.name}" == target for alias in node.names)


def method_calls_elsewhere(path: str, name: str) -> List[ast.Call]:
    """The calls ``<anything>.name(...)`` in the other modules of the package of the module at ``path``: who may call
    a method ``name`` defined there. The receiver's class is not known, so these are all the calls that might be
    it (a same-named method of another class included): "every one passes the device" is then only the safer."""
    return [call for _, _, call in _method_calls_elsewhere(path, name)]


def _method_calls_elsewhere(path: str, name: str, possible: Optional[Callable[[str, str], bool]] = None) -> Iterator[
        Tuple[str, Optional[ast.Module], Optional[ast.Call]]]:
    """(the calling module's path, its tree, the call) for each call of ``method_calls_elsewhere``; (path, None,
    None) and no more for a module that spells one and fails ``possible``."""
    for module, text in _spelling(path, re.compile(rf"\.{re.escape(name)}\s*\(").search, name):
        if possible is not None and not possible(module, text):
            yield module, None, None
            return
        tree = _tree(module, text)
        if tree is not None:
            for _, node in _index(module, tree)[1].get(name, ()):
                if isinstance(node.func, ast.Attribute):
                    yield module, tree, node


def hidden_callers(path: str, name: str) -> bool:
    """May the package build or call the module-level class or function ``name`` of the module at ``path`` where
    ``calls_elsewhere`` does not list it: in a package not read (too large, or no package at all), through a
    subclass (``class Sub(Base)``: its ``super().__init__(...)`` passes what it likes), ``functools.partial``
    (``partial(Block, dropout=0.1)``) or a dotted path to the module that no import binds (``import pkg as p`` and
    ``p.nnet.rnn.LSTM(...)``)? Any class so named counts, an unrelated one included: "none" is then the safer."""
    package = package_of(path)
    if package is None or not _modules(package):
        return True
    module = re.escape(_dotted(os.path.abspath(path), package).rpartition(".")[2])
    spelled = re.escape(name)
    hidden = re.compile(rf"^[ \t]*class[ \t]+\w+[ \t]*\([^)]*\b{spelled}\b|\w\.{module}\.{spelled}\s*\(|"
                        rf"\bpartial\(\s*[\w.]*\b{spelled}\b", re.M)
    return next(_spelling(path, hidden.search, name), None) is not None


def absolute(qualname: str, path: str) -> Optional[str]:
    """``qualname`` as the module at ``path`` spells it (``.base.Trainer``), absolute (``pkg.sub.base.Trainer``);
    None where a relative name leaves the package or the module is in none."""
    if not qualname.startswith("."):
        return qualname
    package = package_of(path)
    if package is None:
        return None
    level = len(qualname) - len(qualname.lstrip("."))
    home = _dotted(os.path.abspath(path), package).split(".")
    if not path.endswith("__init__.py"):
        home = home[:-1]
    if level - 1 >= len(home):
        return None
    return ".".join(home[:len(home) - level + 1] + [qualname[level:]]).rstrip(".")


def local_module(path: str, dotted: str) -> Optional[str]:
    """The file of the module ``dotted`` (absolute, or relative with its leading dots) that an import in the module
    at ``path`` finds in its own project: a module of its package, or one beside a script (Python puts the
    script's folder first on its path); None for any other."""
    package = package_of(path)
    if package is None:
        if dotted.startswith("."):
            return None
        base = os.path.join(os.path.dirname(os.path.abspath(path)), *dotted.split("."))
    else:
        spelled = absolute(dotted, path)
        if spelled is None or spelled.partition(".")[0] != os.path.basename(package):
            return None
        base = os.path.join(os.path.dirname(package), *spelled.split("."))
    return next((found for found in (base + ".py", os.path.join(base, "__init__.py")) if os.path.isfile(found)),
                None)


def module_text(path: str) -> Optional[str]:
    """The text of a module of the project, as every question reads one (``_read``: no link, no huge file)."""
    return _read(path)


def _module_named(package: str, dotted: str) -> Optional[Tuple[str, str]]:
    """(path, text) of the module ``dotted`` of ``package`` (a module file or a package's ``__init__``)."""
    base = os.path.join(os.path.dirname(package), *dotted.split("."))
    texts = _modules(package)
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if candidate in texts:
            return candidate, texts[candidate]
    return None


def _imports(tree: ast.Module, path: str) -> Dict[str, str]:
    """Name -> absolute dotted name, for the module-level imports of a module."""
    names: Dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            source = absolute("." * node.level + (node.module or ""), path) if node.level else node.module
            for alias in node.names:
                if source and alias.name != "*":
                    names[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.partition(".")[0]] = alias.name if alias.asname else \
                    alias.name.partition(".")[0]
    return names


MAX_HOPS = 4  # re-exports followed to a class's definition


def resolve_class(path: str, qualname: str) -> Tuple[str, Tuple[str, ...]]:
    """Where the class that the module at ``path`` names ``qualname`` is defined, followed through the package's
    modules and its re-exports (``from .base import Trainer`` where base.py imports it from transformers): the
    absolute name it ends at (``transformers.Trainer``, ``pkg.trainers.base.ProjectTrainer``) and, for a class
    defined in the package, its bases as that module spells them, made absolute (axolotl 0.19.0 ``AxolotlTrainer`` in
    core/trainers/base.py, for integrations/diffusion/trainer.py). ("", ()) for a name that cannot be read."""
    return _definition(path, qualname)[:2]


def package_class(path: str, qualname: str) -> Optional[Tuple[str, ...]]:
    """The bases (absolute, ``object`` as itself) of the class that the module at ``path`` names ``qualname`` where
    its package defines it (``resolve_class``); None for a class from outside the package or one not found."""
    _, bases, found = _definition(path, qualname)
    return bases if found else None


@lru_cache(maxsize=256)
def _definition(path: str, qualname: str) -> Tuple[str, Tuple[str, ...], bool]:
    """``resolve_class``'s name and bases, and whether the package defines the class."""
    package = package_of(path)
    name = absolute(qualname, path) if package is not None else None
    if name is None:
        return "", (), False
    for _ in range(MAX_HOPS):
        if name.partition(".")[0] != os.path.basename(package):
            return name, (), False  # outside the package: the name itself
        module, _, cls = name.rpartition(".")
        found = _module_named(package, module) if module else None
        outline = _outline(*found) if found else None
        if outline is None:
            return name, (), False
        classes, imports = outline
        if cls in classes:
            return name, tuple(base for base in (_resolved(b, imports, module) for b in classes[cls]) if base), True
        if cls not in imports:
            return name, (), False
        name = imports[cls]  # re-exported: follow the import
    return name, (), False


def _resolved(spelled: str, imports: Dict[str, str], module: str) -> str:
    """A base class as spelled (``_spelled``) made an absolute dotted name: through the module's imports, or a class
    of the module (``object`` stays itself)."""
    if not spelled:
        return ""
    head, _, rest = spelled.partition(".")
    root = imports.get(head, "object" if spelled == "object" else f"{module}.{head}")
    return f"{root}.{rest}" if rest else root


# the NVIDIA word in a module name and the Ascend one its twin has
_ASCEND_WORDS = {"cuda": "npu", "gpu": "npu", "nccl": "hccl"}
_GPU_WORD = re.compile("|".join(_ASCEND_WORDS), re.IGNORECASE)


def npu_counterpart(path: str) -> Optional[str]:
    """The module beside ``path`` that its project keeps for the NPU: the same name with ``npu`` for ``cuda`` or
    ``gpu``, ``hccl`` for ``nccl`` (deepspeed 0.19.8 accelerator/cuda_accelerator.py and npu_accelerator.py, verl
    0.9.1 plugin/platform/platform_cuda.py and platform_npu.py, checkpoint_engine/nccl_checkpoint_engine.py and
    hccl_checkpoint_engine.py, llamafactory 0.9.5 cuda_fused_moe.py and npu_fused_moe.py, ms-swift 4.6.0
    ray/megatron/checkpoint_engine/nccl.py and hccl.py), or None. The package picks one of the pair by device,
    so the CUDA one never runs on an NPU. Only modules of a package: a script beside its migrated copy
    (``train_gpu.py``, ``train_npu.py``) is what its user still runs on a GPU and means to port."""
    folder, name = os.path.split(path)
    if not _GPU_WORD.search(name) or not os.path.isfile(os.path.join(folder, "__init__.py")):
        return None

    def ascend(word: "re.Match[str]") -> str:
        twin = _ASCEND_WORDS[word.group().lower()]
        return twin.upper() if word.group().isupper() else twin
    twin = _GPU_WORD.sub(ascend, name)
    return twin if os.path.isfile(os.path.join(folder, twin)) else None


def public(path: str, name: str) -> bool:
    """Is the module-level function or class ``name`` of the module at ``path`` part of its package's public
    interface: defined in a module named ``api`` (demucs 4.1.0 api.py ``Separator``), or bound by an import of the
    top-level package's ``__init__.py``? Users call it from outside, so the package's own calls do not show what
    they pass."""
    if os.path.splitext(os.path.basename(path))[0] == "api":
        return True
    package = package_of(path)
    init = os.path.join(package, "__init__.py") if package else None
    text = _modules(package).get(init) if init else None
    tree = _tree(init, text) if text and name in text else None
    return tree is not None and any(
        isinstance(node, (ast.ImportFrom, ast.Import)) and any((a.asname or a.name) == name for a in node.names)
        for node in walk_tree(tree))


# the files whose words may name a function of the project: its modules, its configs (mm* ``type='Name'``,
# speechbrain YAML ``!new:pkg.mod.Name``, setup.cfg and pyproject.toml entry points, a wheel's entry_points.txt),
# its docs, notebooks and shell scripts
_TEXT_FILES = (".py", ".pyi", ".pyx", ".yaml", ".yml", ".json", ".cfg", ".toml", ".ini", ".txt", ".md", ".rst",
               ".sh", ".ipynb")
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg")
MAX_PROJECT_FILES = 20000
# a byte that is no part of a word becomes a space: ``split`` then gives the words (a C loop, no regex)
_NOT_WORD = bytes(b if chr(b).isascii() and (chr(b).isalnum() or b == ord("_")) else 32 for b in range(256))


def words(text: bytes) -> List[bytes]:
    """The words (runs of ASCII letters, digits and ``_``) of ``text``."""
    return text.translate(_NOT_WORD).split()


@lru_cache(maxsize=1024)
def project_root(folder: str) -> Optional[str]:
    """Where the project of ``folder`` begins: the nearest folder upwards that holds ``.git`` (a repository's top;
    a dotfiles repository in the home folder above it is another project), else the outermost that holds
    pyproject.toml, setup.py, setup.cfg or a distribution's metadata (a wheel's ``*.dist-info``, an sdist's
    ``*.egg-info``; outermost, as an extension's own setup.py may sit deep inside); None where no folder does, and
    the whole project is not known."""
    found = None
    while True:
        names = _names(folder)
        if ".git" in names:
            return folder
        if any(name in _PROJECT_MARKERS or name.endswith((".dist-info", ".egg-info")) for name in names):
            found = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return found
        folder = parent


def _names(folder: str) -> List[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


@lru_cache(maxsize=1024)
def word_count(root: str, word: bytes) -> Optional[int]:
    """How often ``word`` occurs as a word (as ``words`` splits them) in the text files below ``root``; None for a
    project too large to read. A search per word asked, not a count of every word: a process asks about a handful
    of words (transformers 4.57.6: 14 over its 2,238 text files), and counting all 5 million words cost it 2.6 s
    per flake8 worker against 0.3 s for the searches."""
    texts = _texts(root)
    if texts is None:
        return None
    count = _whole_word(word)
    return sum(count(text) for text in texts if word in text)


_WORD = re.compile(rb"[A-Za-z0-9_]+")
_WORD_BYTE = re.compile(rb"[A-Za-z0-9_]")


def _whole_word(word: bytes) -> Callable[[bytes], int]:
    """How often ``word`` stands as a whole word (as ``words`` splits them) in a text. For a word of word characters
    the pattern begins with the word itself, which ``re`` finds with a fast literal search, and the byte before each
    match is checked apart: a leading lookbehind makes it try every position (mmdet 3.1.0's modules: 36 ms for
    ``device``). A match the check refuses hides no other, whose byte before would be one of the word's."""
    if not _WORD.fullmatch(word):
        pattern = re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(word) + rb"(?![A-Za-z0-9_])")
        return lambda text: len(pattern.findall(text))
    after = re.compile(re.escape(word) + rb"(?![A-Za-z0-9_])")
    return lambda text: sum(1 for match in after.finditer(text)
                            if not match.start() or not _WORD_BYTE.match(text, match.start() - 1))


@lru_cache(maxsize=1024)
def sole_binding(root: str, word: bytes) -> Optional[bytes]:
    """The one line below ``root`` that binds ``word`` in a class's body (``word: bool = False``, a field) where
    every other occurrence of the word in the project's text files reads it as an attribute (``cfg.word``, never
    assigned to): no call, configuration file, command line or document sets it. None otherwise, and for a project
    too large to read."""
    texts = _texts(root)
    if texts is None:
        return None
    spelled = re.escape(word)
    count = _whole_word(word)
    # ``.word`` not followed by ``=``, ``+=``..., nor by ``:`` and a ``=`` (``self.word: bool = True``)
    read = re.compile(rb"\." + spelled
                      + rb"(?![A-Za-z0-9_])(?![ \t]*(?:(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)|:[^\n]*=))")
    binding = re.compile(rb"^[ \t]+" + spelled + rb"[ \t]*(?::[^=\n]*)?=(?!=)[^\n]*$", re.M)
    found = []  # (text, match) of each binding
    for text in texts:
        if word in text:
            bound = list(binding.finditer(text))
            if count(text) != len(read.findall(text)) + len(bound):
                return None
            found += [(text, match) for match in bound]
    if len(found) != 1 or not _in_class_body(found[0][0], found[0][1].start()):
        return None
    return found[0][1].group()


def _in_class_body(text: bytes, start: int) -> bool:
    """Is the line at ``start`` in the body of a ``class`` (the nearest line above it indented less, comments and
    blank lines aside, opens one), not a function's local?"""
    line = text[start:start + 200]
    indent = len(line) - len(line.lstrip(b" \t"))
    for above in reversed(text[:start].splitlines()):
        stripped = above.lstrip()
        if stripped and not stripped.startswith(b"#") and len(above) - len(stripped) < indent:
            return stripped.startswith(b"class ")
    return False


@lru_cache(maxsize=2)
def _texts(root: str) -> Optional[List[bytes]]:
    """The text files below ``root`` (hidden folders but ``.mim``, ``__pycache__`` and files over ``MAX_BYTES`` left
    out: an OpenMMLab wheel ships the repository's configs and tools there, copied by its setup.py's
    ``add_mim_extension``, mmsegmentation 1.2.2 ``mmseg/.mim/configs``, and they name the values its classes are
    built with); None for a tree of more than ``MAX_PROJECT_FILES`` files of any kind (a dataset's images count: the
    walk stops there). Read once per process, on the first question."""
    texts: List[bytes] = []
    seen = 0
    for folder, folders, files in os.walk(root):
        folders[:] = [f for f in folders if (f == ".mim" or not f.startswith(".")) and f != "__pycache__"]
        seen += len(files)
        if seen > MAX_PROJECT_FILES:
            return None
        for name in files:
            if not name.endswith(_TEXT_FILES):
                continue
            path = os.path.join(folder, name)
            try:
                if not _small_file(path):
                    continue
                with open(path, "rb") as handle:
                    texts.append(handle.read())
            except OSError:
                continue
    return texts


def read_elsewhere(path: str, name: str) -> bool:
    """May a text of the project other than the module at ``path`` read its module-level name ``name``: an import
    statement that spells the name (``from .expert import device``) or star-imports the module, ``mod.name``,
    ``mod:name`` or ``getattr(mod, "name")`` (or with a name not spelled), where ``mod`` is the module's own name,
    that of a module that star-imports it (and so on), an alias an import binds to one of those, a module that
    ``import_module``/``__import__`` returns (s3prl 0.4.17 downstream/runner.py:184, whose ``expert`` module is only
    asked for ``DownstreamExpert``) or one ``sys.modules`` holds? Words are matched, not resolved, so any module so
    named counts; True for a project not read."""
    root = project_root(os.path.dirname(os.path.abspath(path)))
    texts = _texts(root) if root is not None else None
    if texts is None:
        return True
    word = re.escape(name.encode())
    whole = _whole_word(name.encode())
    names = b"|".join(re.escape(leaf.encode()) for leaf in _star_importers(path))
    bound = re.compile(rb"\bimport[ \t]+[\w.]*\b(?:%s)[ \t]+as[ \t]+(\w+)|"
                       rb"(\w+)[ \t]*=[ \t]*[\w.]*(?:\bimport_module|\b__import__)\(" % names)
    star = re.compile(rb"\b(?:%s)[ \t]+import[ \t]*\*" % names)
    for text in texts:
        spelled = name.encode() in text and whole(text) > 0
        if not spelled and b"getattr(" not in text:
            continue
        if spelled and any(whole(s) or star.search(s) for s in _IMPORT_BYTES.findall(text)):
            return True
        modules = b"|".join([names, b"sys\\.modules\\[[^\\]]*\\]",
                             *(re.escape(a or b) for a, b in bound.findall(text))])
        looked_up = rb"getattr\([ \t]*(?:%s)[ \t]*,[ \t]*(?:[\"']%s[\"']|[^\"'\s])" % (modules, word)
        read = rb"(?<![\w.])(?:%s)[ \t]*[.:][ \t]*%s\b|(?:import_module|__import__)\([^()]*\)\.%s\b" % (
            modules, word, word)
        if re.search(looked_up, text) or spelled and re.search(read, text):
            return True
    return False


def _star_importers(path: str) -> Set[str]:
    """The name of the module at ``path`` and of the modules of its package that star-import it, or one of them."""
    def leaf(module: str) -> str:
        return os.path.basename(os.path.dirname(module) if module.endswith("__init__.py") else module[:-len(".py")])
    found = {leaf(path)}
    package = package_of(path)
    modules = _modules(package) if package is not None else {}
    grew = True
    while grew:
        stars = re.compile(r"^[ \t]*from[ \t]+[\w.]*\b(?:%s)[ \t]+import[ \t]*\*" % "|".join(map(re.escape, found)),
                           re.M)
        grown = found | {leaf(module) for module, text in modules.items() if stars.search(text)}
        grew, found = grown != found, grown
    return found


_IMPORT_BYTES = re.compile(_IMPORTS.pattern.encode(), re.M)


# what a module may bind without spelling the name, besides a star import: a module ``__getattr__``, a lazy module
_OPEN_MODULE = re.compile(r"\b__getattr__\b|\bsys\.modules\b|\bglobals\(\)|\bsetattr\(|[Ll]azy")
_STAR = re.compile(r"^from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]*\*", re.M)
MAX_STARS = 4  # star imports followed from a module to the modules that bind its names


def stale_script(path: str, tree: ast.AST) -> bool:
    """Is the module at ``path`` a script (in no package) whose top-level import of its own project's package fails:
    ``from pkg.mod import name`` where the project's ``pkg/mod`` is missing (and is no module a build writes, such
    as ``_version`` or a compiled ``_ext``) or binds no ``name``? Python stops at that line, so no line of it runs:
    a tool left from an older release of its package (mmaction2 1.2.0
    ``.mim/tools/analysis_tools/benchmark.py``, ``from mmaction.datasets import build_dataloader``; mmpose 1.3.2
    ``.mim/tools/misc/keypoints2coco_without_mmdet.py``, ``from mmpose.apis import init_pose_model``, both from the
    mmcv 1.x era). Only unconditional imports count (one in a ``try`` or under an ``if`` may be meant to fail), only
    a package found on the way from the script (parsed as ``tree``) up to its project's root."""
    folder = os.path.dirname(os.path.abspath(path))
    root = project_root(folder) if package_of(path) is None else None
    if root is None:
        return False
    for statement in getattr(tree, "body", ()):
        if isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            package = _own_package(folder, root, statement.module.partition(".")[0])
            if package is not None and _lacks(package, statement.module, [a.name for a in statement.names]):
                return True
    return False


def _own_package(folder: str, root: str, name: str) -> Optional[str]:
    """The folder of the package ``name`` that the project holds above ``folder``, up to ``root``; None where a
    module so named sits beside the script (mmagic 1.2.0 ``.mim/tools/gui/utils.py``): Python finds that one first."""
    if _present(os.path.join(folder, name)):
        return None
    while True:
        candidate = os.path.join(folder, name)
        if os.path.isfile(os.path.join(candidate, "__init__.py")):
            return candidate
        if folder == root or os.path.dirname(folder) == folder:
            return None
        folder = os.path.dirname(folder)


def _present(base: str) -> bool:
    """Is there a module or package at ``base`` (a path without suffix): ``.py``, a folder, a compiled extension?"""
    folder, leaf = os.path.split(base)
    return os.path.isdir(base) or any(n == leaf + ".py" or n.startswith(leaf + ".") and n.endswith((".so", ".pyd",
                                      ".pyi")) for n in _names(folder))


def _lacks(package: str, dotted: str, names: List[str]) -> bool:
    """Does the package at ``package`` lack the module ``dotted``, or does that module bind none of some name in
    ``names``?"""
    base = os.path.join(os.path.dirname(package), *dotted.split("."))
    if not _present(base):  # gone from a folder that is there, unless the build writes it (``_version.py``, ``_C``)
        leaf = os.path.basename(base)
        return os.path.isdir(os.path.dirname(base)) and not (leaf.startswith("_") or leaf == "version")
    return any(name != "*" and _may_bind(package, base, name, MAX_STARS) is False for name in names)


@lru_cache(maxsize=1024)
def _may_bind(package: str, base: str, name: str, stars: int) -> Optional[bool]:
    """May the module at ``base`` (a path without suffix) bind ``name``: a submodule so named, the name spelled in
    its text, or bound by a module of the package it star-imports? None where that cannot be read (a compiled or
    namespace module, a module that binds names it does not spell, a star import from outside the package, too
    many star imports)."""
    if _present(os.path.join(base, name)):
        return True
    init = os.path.join(base, "__init__.py")
    source = _read(base + ".py") if os.path.isfile(base + ".py") else _read(init) if os.path.isfile(init) else None
    if source is None or _OPEN_MODULE.search(source):
        return None
    if name.encode() in words(source.encode()):
        return True
    here = init if os.path.isfile(init) else base + ".py"
    for star in _STAR.findall(source):
        source_module = absolute(star, here) if star.startswith(".") else star
        if stars == 0 or source_module is None or source_module.partition(".")[0] != os.path.basename(package):
            return None
        found = _may_bind(package, os.path.join(os.path.dirname(package), *source_module.split(".")), name,
                          stars - 1)
        if found is not False:
            return found
    return False
