"""Dead code: a top-level function, or a method of a class with no framework above it, that nothing in its project
names never runs, so nothing in it needs porting; nor does a branch that only a value nothing in the project names
would take (``in_untaken_branch``); nor does a value bound to a name nothing reads matter (``never_read``).

Judges of the tuning corpora rejected findings in such functions in several projects (funasr 1.4.16
frontends/utils/complex_utils.py ``solve``, pytorch_tabular 1.1.1 ssl_models/common/augmentations.py ``cutmix``,
gluonts nursery/daf/tslib/engine/distributed.py ``init_distributed``, torchtune training/precision.py
``_set_float32_precision``, verl 0.9.1 utils/torch_functional.py ``get_unpad_data``). A name counts as used where
any text file of the project holds it as a word outside the function: a call, an import or re-export, ``__all__``,
a config string (mm* ``type='Name'``, speechbrain YAML ``!new:pkg.mod.name``), an entry point, a script's main
block, a comment; only code that never runs itself, or the self-test under the ``__main__`` of a module the
package imports, may name it. Classes are left alone: a library's classes are what its users build (asteroid 0.7.0
``GEVDBeamformer``, pyannote.audio ``AdaptiveVoiceActivityDetection`` have no user in their package and run), and so
are the methods of a class derived from a framework's, which may call them by names only it spells.
"""
from __future__ import annotations

import ast
import os
import re
from bisect import bisect_right
from collections import Counter
from itertools import accumulate
from typing import Callable, Optional, Set

from ..calls import dotted
from ..semantic import project
from ..semantic.summaries import enclosing_class, is_self_attribute
from ..walk import walk_tree
from .fused import UNDECIDED, untaken
from .left_default import UNKNOWN, constant, left_at_default, may_agree
from .training import is_main_guard, source_text

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def in_unused_function(ctx, node: ast.AST) -> bool:
    """Is ``node`` (the checked node or one inside it) in the body of a top-level function of the file, or of a
    method of one of its top-level classes, that never runs (``_dead``)? Never in its defaults or annotations, which
    run when the module or the class body runs."""
    definition = ctx.stack[1] if len(ctx.stack) > 1 else None
    cls = None
    if isinstance(definition, ast.ClassDef):
        cls, definition = definition, ctx.stack[2] if len(ctx.stack) > 2 else None
    if not isinstance(definition, _FUNCTIONS):
        return False
    first = definition.body[0]
    if (node.lineno, node.col_offset) < (first.lineno, first.col_offset):
        return False  # in the signature
    return _dead(ctx, definition, cls)


def _dead(ctx, definition: ast.FunctionDef, cls: Optional[ast.ClassDef]) -> bool:
    """Does the top-level function or method ``definition`` (of ``cls``) never run: a ``_candidate`` whose name no
    text of its project holds as a word outside code that never runs itself: its own body and those of its
    same-named candidates (SmoothedValue's and MetricLogger's ``synchronize_between_processes``, surya 0.22.1
    common/rfdetr/util/misc.py:67,209), other such functions and methods of the file (effdet 0.4.1
    object_detection/matcher.py:62 ``matched_column_indices``, called only by ``num_matched_columns`` and
    ``matched_row_indices``, which nothing calls), and the module's ``__main__`` block where other modules of its
    package import the module (s3prl 0.4.17 upstream/lighthubert/lighthubert/functional/sliding_attn.py:453
    ``latency``: the block is the module's benchmark, not a program the package runs)."""
    answers = ctx.memo("unused.dead", lambda c: {})
    found = answers.get(id(definition))
    if found is None:
        answers[id(definition)] = False  # asked again while deciding: a cycle of calls counts as running
        found = answers[id(definition)] = _candidate(ctx, definition, cls) and _named_only_where(
            ctx, definition.name, lambda line: _never_runs(ctx, line, definition.name))
    return found


def _candidate(ctx, definition: ast.FunctionDef, cls: Optional[ast.ClassDef]) -> bool:
    """May ``definition`` be dead code: an ASCII, non-dunder name, no decorator that may register it
    (``@MODELS.register_module()``, ``@click.command()``, ``@pytest.fixture``; a method's ``property`` only changes
    how it is called), a method only of a ``_plain_class``, no static or class method (called on the class
    itself, as a library's users call its helpers and factories: ignite 0.5.5 metrics/accuracy.py:95
    ``Accuracy.get_sequence_transform``) and no public method of a class of the package's public interface
    (``ctx.public``: neuralprophet 0.9.0 forecaster.py:2087 ``NeuralProphet.get_latest_forecast`` is its users'),
    in a file on disk that looks none of its names up in ``globals()`` and is no ``hubconf.py`` (``torch.hub.load``
    calls its functions by name)."""
    name = definition.name
    if not name.isascii() or (name.startswith("__") and name.endswith("__")):
        return False
    if cls is None and definition.decorator_list or cls is not None and (
            any(dotted(d) not in _PLAIN_DECORATORS for d in definition.decorator_list)
            or not _plain_class(ctx, cls, 0) or not name.startswith("_") and ctx.public(cls.name)):
        return False
    path = ctx.module_path()
    if path is None or os.path.basename(path) == "hubconf.py" or not os.path.isfile(path):
        return False  # a file that is not on disk is no part of the project read
    return "globals()" not in source_text(ctx)


_PLAIN_DECORATORS = {"property"}
_PLAIN_CLASS_DECORATORS = {"dataclasses.dataclass", "torch.jit.script", "functools.total_ordering"}


def _plain_class(ctx, cls: ast.ClassDef, depth: int) -> bool:
    """Does ``cls`` derive only from ``object`` and classes its package defines (through the file's classes and
    ``project.package_class``), undecorated and without a metaclass? A method of a subclass of ``nn.Module``, a
    Lightning, HF or mmengine class may be a hook its framework calls by a name the project never spells
    (``forward``, ``training_step``, ``on_*``, ``compute_loss``); a metaclass or a class decorator other than those
    that keep the class as it is (effdet 0.4.1 object_detection/matcher.py:36 ``@torch.jit.script``) may register it."""
    if cls.keywords or depth > project.MAX_HOPS or any(
            ctx.qualname(d) not in _PLAIN_CLASS_DECORATORS for d in cls.decorator_list):
        return False
    path = ctx.module_path()
    local = {n.name: n for n in ctx.tree.body if isinstance(n, ast.ClassDef)}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in local:
            if local[base.id] is cls or not _plain_class(ctx, local[base.id], depth + 1):
                return False
        elif not _package_class(path, ctx.qualname(base) or dotted(base) or "", depth + 1):
            return False
    return True


def _package_class(path: str, qualname: str, depth: int) -> bool:
    """Is ``qualname`` ``object``, or a class of the package whose bases are such classes?"""
    if qualname == "object":
        return True
    bases = project.package_class(path, qualname) if qualname and depth <= project.MAX_HOPS else None
    return bases is not None and all(_package_class(path, base, depth + 1) for base in bases)


def _never_runs(ctx, line: int, name: str) -> bool:
    """Is ``line`` of the file in code that never runs, for ``_dead`` asking about ``name``: a top-level function or
    a method of a top-level class that is a same-named ``_candidate`` or ``_dead``, or the ``__main__`` block of a
    module other modules of its package import?"""
    top = _statement_at(ctx, line)
    if isinstance(top, ast.ClassDef):
        cls = top
        top = next((n for n in cls.body if isinstance(n, _FUNCTIONS) and _starts(n) <= line <= n.end_lineno), None)
    else:
        cls = None
    if isinstance(top, _FUNCTIONS):
        return top.name == name and _candidate(ctx, top, cls) or _dead(ctx, top, cls)
    return top is not None and is_main_guard(top) and project.imported_elsewhere(ctx.module_path())


def _statement_at(ctx, line: int) -> Optional[ast.stmt]:
    """The top-level statement of the file that holds ``line`` (its decorators included)."""
    body = ctx.tree.body
    starts = ctx.memo("unused.starts", lambda c: [_starts(n) for n in body])
    index = bisect_right(starts, line) - 1
    return body[index] if index >= 0 and line <= body[index].end_lineno else None


def _starts(node: ast.stmt) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])


def never_read(ctx, name: ast.Name) -> bool:
    """Does nothing read the name that ``name`` binds: no line of the file (no load of any name so spelled, no
    ``global``, no string that spells it, such as ``__all__``; no ``globals()``, ``vars()``, ``locals()``, ``eval``,
    ``exec`` or module ``__getattr__``), nor, for a module-level name, another text of the project
    (``project.read_elsewhere``)? s3prl 0.4.17 downstream/enhancement_stft2/expert.py:35, ``device =
    torch.device("cuda:0" if torch.cuda.is_available() else "cpu")``, which no line of s3prl reads (the expert
    takes each tensor's own ``.device``)."""
    read = ctx.memo("unused.read", _read_names)
    if read is None or name.id in read:
        return False
    path = ctx.module_path()
    return ctx.model.function(name) is not None or path is not None and not project.read_elsewhere(path, name.id)


def _read_names(ctx) -> Optional[Set[str]]:
    """The names the module may read (``never_read``); None where it may read any."""
    if re.search(r"(?<![\w.])(?:globals|vars|locals|eval|exec)\(|\b__getattr__\b", source_text(ctx)):
        return None
    read: Set[str] = set()
    for node in walk_tree(ctx.tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            read.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            read.update(node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            read.add(node.value)
    return read


def in_untaken_branch(ctx, node: ast.AST) -> bool:
    """Is ``node`` in a branch of an ``if`` of its function that the value its test reads never takes, because nothing
    in the project can give it another: ``self.x`` that ``__init__`` sets to a literal (oumi 0.9
    performance/telemetry.py:69-74, ``self.cuda_synchronize: bool = False`` guarding ``torch.cuda.synchronize()``),
    or a parameter (or ``self.x`` stored from one) that every call of its module-level function or class leaves at
    one literal (``left_at_default``, with at least one call: a class no call builds is built from configurations),
    where neither name is a word anywhere in the project outside the class or function (``word_count``: no caller,
    subclass, config file, command line or document sets it; an mm* ``.mim`` config does). ``if flag:`` with
    False, ``if k is not None`` with None, ``if p > 0`` with 0.0 (``fused.untaken``)."""
    return untaken(ctx.lineage(node), lambda e: _kept(ctx, e))


def _kept(ctx, expr: ast.AST) -> object:
    """The value ``expr`` always has (``in_untaken_branch``), else ``UNDECIDED``."""
    self_attribute = is_self_attribute(expr)
    cls = enclosing_class(ctx.model.scope(expr)) if self_attribute else None
    if not _may_keep(ctx, expr, self_attribute, cls):
        return UNDECIDED
    found, value = left_at_default(ctx, expr, called=True)
    if found:
        function, name = ctx.model.parameter(expr)
        owner = cls.node if cls is not None else function
        names = {name, expr.attr} if self_attribute else {name}
    else:
        found, value = _set_once(cls.node, expr.attr) if cls is not None else UNKNOWN
        owner, names = (cls.node, {expr.attr}) if found else (None, set())
    if found and all(_memo_named_only_in(ctx, owner, name) for name in names):
        return value
    return UNDECIDED


def _may_keep(ctx, expr: ast.AST, self_attribute: bool, cls) -> bool:
    """False where ``_kept`` would find no value, asked in the order of cost: is a way to a value open at all
    (``left_at_default``'s literal default, ``_set_once``), then is a name that must be named only inside its class
    or function so named (``_named_only_in``: the file's words, then the project's), before ``left_at_default``
    parses the modules of the package that call the function (yolov5 7.0.14 models/common.py ``if dnn:``, nine
    modules for ``DetectMultiBackend``'s callers; utils/general.py ``if deterministic``, four for ``init_seeds``)."""
    found = ctx.model.parameter(expr)
    defaulted = found is not None and may_agree(ctx, *found)
    if cls is not None:  # both of ``_kept``'s ways need ``self.<attr>`` named only in its class
        return (defaulted or _set_once(cls.node, expr.attr)[0]) and _memo_named_only_in(ctx, cls.node, expr.attr)
    return defaulted and all(_memo_named_only_in(ctx, found[0], word)
                             for word in ({found[1], expr.attr} if self_attribute else {found[1]}))


def _set_once(cls: ast.ClassDef, attribute: str):
    """(True, value) where the one statement of ``cls`` that stores ``self.<attribute>`` is in its ``__init__`` and
    stores a literal (``self.flag: bool = False``); else ``UNKNOWN``."""
    stores = [n for n in walk_tree(cls) if isinstance(n, ast.Attribute) and n.attr == attribute
              and isinstance(n.ctx, ast.Store)]
    init = next((f for f in cls.body if isinstance(f, _FUNCTIONS) and f.name == "__init__"), None)
    if len(stores) != 1 or init is None:
        return UNKNOWN
    statement = next((n for n in walk_tree(init) if isinstance(n, ast.Assign) and n.targets == stores
                      or isinstance(n, ast.AnnAssign) and n.target is stores[0]), None)
    return constant(statement.value) if statement is not None and statement.value is not None else UNKNOWN


def _memo_named_only_in(ctx, owner: ast.AST, name: str) -> bool:
    return ctx.memo(f"unused.named_only_in.{id(owner)}.{name}", lambda c: _named_only_in(c, owner, name))


def _named_only_in(ctx, owner: ast.AST, name: str) -> bool:
    """Is every word ``name`` in the project's text files inside ``owner`` (a function or class of the file)?"""
    return _named_only_where(ctx, name, lambda line: owner.lineno <= line <= owner.end_lineno)


def _named_only_where(ctx, name: str, inside: Callable[[int], bool]) -> bool:
    """Is every word ``name`` in the project's text files on a line of the file that passes ``inside``?"""
    ends = ctx.memo("unused.line_ends", lambda c: list(accumulate(len(line) for line in c.lines)))
    spelled = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")
    if not all(inside(bisect_right(ends, match.start()) + 1) for match in spelled.finditer(source_text(ctx))):
        return False  # the file itself names it elsewhere: no need to read the project
    root = ctx.project_root()
    word = name.encode()
    return root is not None and project.word_count(root, word) == _file_words(ctx)[word]


def _file_words(ctx) -> Counter:
    return ctx.memo("words", lambda c: Counter(project.words(source_text(c).encode())))
