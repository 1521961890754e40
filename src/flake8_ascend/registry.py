"""The rule registry: one ``Rule`` subclass per ASC code.

A rule names its code; the registry copies that code's row of ``codes.CODES`` (report file, level, default-off,
fixable) onto the class and refuses a code the table lacks or a class the table does not name.  A rule
declares the AST node types it looks at, the words its source must contain for it to be worth running (a cheap
pre-filter), its documentation in ruff's form and examples that must fire and must not fire; the test suite
runs every example.  Subclasses register themselves on definition, and
``all_rules()`` imports every module of ``flake8_ascend.rules``.
"""
from __future__ import annotations

from typing import ClassVar, Dict, List, Optional, Tuple, Type

from .codes import CODES, Level, Report
from .discovery import import_submodules


class Rule:
    """Base class of every rule; subclasses override ``check``."""

    code: ClassVar[str] = ""
    summary: ClassVar[str] = ""  # one line: what the code reports
    node_types: ClassVar[Tuple[type, ...]] = ()
    trigger_words: ClassVar[Tuple[str, ...]] = ("torch",)  # () means "always run"
    # Which ``Name`` / ``Attribute`` nodes reach ``check``: "every"; "outermost", each chain once at its outermost
    # node (``torch.cuda.amp`` whole, not ``torch.cuda`` inside it: a rule that asks ``ctx.chain``, which names
    # only the whole chain); "imported", outermost and rooted in a name some binding of the file imports (a rule
    # that asks only ``ctx.chain``, which is None for any other). The engine tests this once per node instead of
    # every rule calling in to learn it.
    names: ClassVar[str] = "every"
    # From the code's row of codes.CODES, set on definition:
    report: ClassVar[Report]
    level: ClassVar[Level]
    default_off: ClassVar[bool] = False
    fixable: ClassVar[bool] = False
    # Configuration advice that belongs to no line: flake8 sees it on line 1, the CSV writes NA for
    # File, Start Line and End Line.
    no_line: ClassVar[bool] = False
    # Documentation (ruff's layout), shown by --explain and the README table.
    why: ClassVar[str] = ""
    example: ClassVar[str] = ""
    use_instead: ClassVar[str] = ""
    source: ClassVar[str] = ""
    # Examples the tests run: (code that must fire on, with a 1-based line) and code that must not.
    fires: ClassVar[List[Tuple[str, int]]] = []
    passes: ClassVar[List[str]] = []
    # Config fields the examples need (e.g. third_party_apis for ASC104); None: the defaults.
    example_settings: ClassVar[Optional[dict]] = None

    _registry: ClassVar[Dict[str, Type["Rule"]]] = {}

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code:
            row = CODES.get(cls.code)
            name = f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"
            if row is None or row.rule != name:
                raise ValueError(f"{name}: codes.CODES has no row for {cls.code} naming this rule")
            if cls.code in Rule._registry and Rule._registry[cls.code] is not cls:
                raise ValueError(f"duplicate rule code {cls.code}")
            cls.report, cls.level, cls.default_off, cls.fixable = row.report, row.level, row.default_off, row.fixable
            Rule._registry[cls.code] = cls

    @classmethod
    def runs_with(cls, config) -> bool:
        """Whether the rule can report anything under ``config`` (the engine does not run it otherwise)."""
        return True

    @classmethod
    def explanation(cls) -> List[Tuple[str, str]]:
        """(title, text) of the rule's documentation, in the order ``--explain`` and the report page show it."""
        return [("Why it matters on NPU", cls.why), ("Example", cls.example), ("Fix", cls.use_instead),
                ("Source", cls.source)]

    @classmethod
    def example_settings_dict(cls) -> dict:
        return dict(cls.example_settings or {})

    def check(self, node, ctx) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def _load_rule_modules() -> None:
    import_submodules(f"{__package__}.rules")


def all_rules() -> List[Type[Rule]]:
    """Every registered rule class, sorted by code."""
    _load_rule_modules()
    return [Rule._registry[code] for code in sorted(Rule._registry)]


def rule_for(code: str) -> Type[Rule]:
    _load_rule_modules()
    return Rule._registry[code]
