"""Dead code: a top-level function that nothing in its project names never runs, so nothing in it needs porting.

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
    word = name.encode()
    own = project.words("".join(ctx.lines[function.lineno - 1:function.end_lineno]).encode()).count(word)
    if ctx.memo("words", lambda c: Counter(project.words(source_text(c).encode())))[word] != own:
        return False  # the file itself names it elsewhere: no need to read the project
    root = ctx.project_root()
    return root is not None and project.word_count(root, word) == own
