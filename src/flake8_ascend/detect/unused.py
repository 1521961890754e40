"""Dead code: a top-level function that nothing in its project names never runs, so nothing in it needs porting;
nor does a branch that only a value nothing in the project names would take (``in_untaken_branch``).

Judges of the tuning corpora rejected findings in such functions in several projects (funasr 1.4.16
frontends/utils/complex_utils.py ``solve``, pytorch_tabular 1.1.1 ssl_models/common/augmentations.py ``cutmix``,
gluonts nursery/daf/tslib/engine/distributed.py ``init_distributed``, torchtune training/precision.py
``_set_float32_precision``, verl 0.9.1 utils/torch_functional.py ``get_unpad_data``). A name counts as used where
any text file of the project holds it as a word outside the function: a call, an import or re-export, ``__all__``,
a config string (mm* ``type='Name'``, speechbrain YAML ``!new:pkg.mod.name``), an entry point, a script's main
block, a comment. Classes are left alone: a library's classes are what its users build (asteroid 0.7.0
``GEVDBeamformer``, pyannote.audio ``AdaptiveVoiceActivityDetection`` have no user in their package and run), and
methods are called through objects no name shows.
"""
from __future__ import annotations

import ast
import os
from collections import Counter

from ..semantic import project
from ..semantic.summaries import enclosing_class, is_self_attribute
from ..walk import walk_tree
from .fused import UNDECIDED, untaken
from .left_default import UNKNOWN, constant, left_at_default, may_agree
from .training import source_text

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def in_unused_function(ctx, node: ast.AST) -> bool:
    """Is ``node`` (the checked node or one inside it) in the body of a top-level function of the file that no
    other text of its project names? Only an undecorated function (a decorator may register it:
    ``@MODELS.register_module()``, ``@click.command()``, ``@pytest.fixture``) with an ASCII, non-dunder name, in
    a module that does not look its functions up in ``globals()`` and is no ``hubconf.py`` (``torch.hub.load``
    calls those by name); never in its defaults or annotations, which run when the module is imported."""
    top = ctx.stack[1] if len(ctx.stack) > 1 else None
    if not isinstance(top, _FUNCTIONS):
        return False
    first = top.body[0]
    if (node.lineno, node.col_offset) < (first.lineno, first.col_offset):
        return False  # in the signature
    answers = ctx.memo("unused_functions", lambda c: {})
    found = answers.get(id(top))
    if found is None:
        found = answers[id(top)] = _unused(ctx, top)
    return found


def _unused(ctx, function: ast.FunctionDef) -> bool:
    name = function.name
    if function.decorator_list or not name.isascii() or (name.startswith("__") and name.endswith("__")):
        return False
    path = ctx.module_path()
    if path is None or os.path.basename(path) == "hubconf.py" or not os.path.isfile(path):
        return False  # a file that is not on disk is no part of the project read
    if "globals()" in source_text(ctx):
        return False
    return _named_only_in(ctx, function, name)


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
    if not _named_in_file_only_in(ctx, owner, name):
        return False  # the file itself names it elsewhere: no need to read the project
    root = ctx.project_root()
    word = name.encode()
    return root is not None and project.word_count(root, word) == _file_words(ctx)[word]


def _named_in_file_only_in(ctx, owner: ast.AST, name: str) -> bool:
    """Is every word ``name`` of the file inside ``owner``?"""
    word = name.encode()
    own = project.words("".join(ctx.lines[owner.lineno - 1:owner.end_lineno]).encode()).count(word)
    return _file_words(ctx)[word] == own


def _file_words(ctx) -> Counter:
    return ctx.memo("words", lambda c: Counter(project.words(source_text(c).encode())))
