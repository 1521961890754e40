"""Each layer imports only the layers below it (docs/architecture.md); a static check of every import."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "flake8_ascend"

# Lowest first; a module may import its own layer and the ones before it.
LAYERS = [
    {"__init__", "files", "sources", "walk", "data", "codes", "rewrite", "discovery", "pools", "progress", "calls", "config",
     "cst_names"},
    {"semantic"},
    {"detect"},
    {"registry", "engine"},
    {"rules"},
    {"fix", "reports", "report_page", "flake8_settings", "library_analysis", "runtime", "offline", "migrated_copy"},
    {"modes", "plugin"},
    {"cli"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
FRONT_ENDS = {"plugin": {"modes", "cli"}, "modes": {"plugin", "cli"}}  # same layer, never each other
HOOK_PACKAGE = "msft_dynamic_analysis"  # shipped into instrumented copies: imports nothing of the linter


def _top(dotted: str) -> str:
    """The module or subpackage of flake8_ascend that ``dotted`` lies in; "__init__" for names of the package."""
    parts = dotted.split(".")
    if len(parts) < 2 or not ((PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file()):
        return "__init__"
    return parts[1]


def _imports(path: Path):
    """(top-level part of flake8_ascend, full dotted target) of every import of the package in ``path``."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module[: -len(".__init__")]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target] if node.module else [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "flake8_ascend" or target.startswith("flake8_ascend."):
                yield _top(target), target


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if HOOK_PACKAGE not in p.parts)


def test_every_module_has_a_layer():
    assert {_top(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)) for p in MODULES} <= set(RANK)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    own = _top(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
    for top, target in _imports(path):
        assert RANK[top] <= RANK[own], f"{own} (layer {RANK[own]}) imports {target} (layer {RANK[top]})"
        assert top not in FRONT_ENDS.get(own, ()), f"{own} imports the other front end: {target}"
        if own != "rules":
            assert top != "rules", f"{own} imports a rule module ({target}); only the registry loads rules"


def test_the_hook_package_imports_nothing_of_the_linter():
    inside = f"flake8_ascend.runtime.{HOOK_PACKAGE}"
    for path in (PACKAGE / "runtime" / HOOK_PACKAGE).rglob("*.py"):
        assert all(target.startswith(inside) for _, target in _imports(path)), path
