"""What a name says about a data loader (``train_loader``, ``valDl``), shared by ASC404 and the loop injector."""
from __future__ import annotations

import re
from typing import List

_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_EVAL_PREFIXES = ("val", "test", "eval")
_EVAL_WORDS = frozenset({"dev", "predict", "prediction", "infer", "inference", "valid", "validation"})


def words(text: str) -> List[str]:
    """Lower-case words of an identifier (``trainLoader``, ``val_dl`` -> ``train loader``, ``val dl``)."""
    return [w.lower() for w in _WORD.findall(text)]


def says_eval(text: str) -> bool:
    return any(w.startswith(_EVAL_PREFIXES) or w in _EVAL_WORDS for w in words(text))


def says_train(text: str) -> bool:
    return any("train" in w for w in words(text))


def says_loader(name: str) -> bool:
    return any("loader" in w or w == "dl" for w in words(name))
