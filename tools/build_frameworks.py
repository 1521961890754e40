#!/usr/bin/env python3
"""Which training frameworks choose the device and the collective backend themselves, from their own sources.

Two steps, like tools/build_mmcv_ops.py:

``--extract ROOT...`` reads unpacked releases (a wheel or sdist folder each; ``pip download --no-deps`` and
unzip, or ``python benchmarks/corpora.py deepspeed transformers``) of the pinned versions below and writes
``rules_data/sources/frameworks/framework_facts.json``: every fact with its package, version, file and line.

- mmengine: the launchers of ``init_dist`` whose function calls ``init_process_group(backend='hccl')`` under
  ``is_npu_available()`` whatever backend it was given, and the config key the Runner passes to ``init_dist``
  (``dist_cfg``);
- mmcv 1.x (``mmcv.runner.init_dist``) the same under ``IS_NPU_AVAILABLE``, and mmdet 2.x's tools, which pass the
  config's ``dist_params`` to it (``init_dist(args.launcher, **cfg.dist_params)``): the mmcv-1.x/mmdet-2.x
  configs' ``dist_params = dict(backend='nccl')``;
- accelerate: ``PartialState`` sets ``backend = "hccl"`` under ``is_npu_available()`` without asking which
  backend it was given; transformers: ``TrainingArguments.ddp_backend`` goes to that ``PartialState``;
- deepspeed: ``init_distributed(dist_backend=None)`` asks the accelerator (``'hccl'`` on an NPU) only when no
  backend is given: an explicit ``dist_backend`` is used as it is;
- lightning: the classes exported from ``lightning`` whose ``__init__`` takes ``accelerator``, the accelerator
  names that select CUDA (the registered accelerator whose ``name()`` is ``"cuda"``) and the flags the
  connector resolves among backends with no NPU (``"gpu"``: MPS or CUDA, else an error);
- the methods a framework calls on every training step of a user's subclass: ``Trainer.training_step`` (called
  in a loop of ``Trainer._inner_training_loop``) and the ``compute_loss`` it calls, and
  ``LightningModule.training_step`` (the optimization loops call the strategy hook ``"training_step"``, which
  calls the module's). ASC501/ASC513/ASC514 count their bodies as per-step code.

Modules of other libraries that import ``torch_npu.contrib.transfer_to_npu`` themselves (MindSpeed's Megatron
adaptor) are a curated table, ``rules_data/sources/frameworks/transfer_to_npu_importers.tsv``, each row with the
line and commit it was read at.

Without ``--extract`` (offline, deterministic) the facts become ``src/flake8_ascend/data/frameworks.json``,
what ASC202/ASC204 read. ``lightning_fabric`` and ``pytorch_lightning`` publish the same modules as
``lightning.fabric`` and ``lightning.pytorch``, so their names are added for every ``lightning`` one.

``--extract`` reads the packages it finds among the roots and keeps the committed facts of the others, so one
release can be added or re-read alone (mmcv 1.7.2 has only an sdist, whose setup.py needs setuptools<70 with
``--no-build-isolation`` to download: ``pip download --no-deps --no-binary :all: --no-build-isolation``).

    python tools/build_frameworks.py [--extract ROOT...] [--check]
"""
from __future__ import annotations

import argparse
import ast
import csv
import json
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_transfer_to_npu import REPO, render, update  # noqa: E402

FACTS = REPO / "rules_data" / "sources" / "frameworks" / "framework_facts.json"
# curated: a row per module of another library that imports transfer_to_npu, with the line and commit it was read at
IMPORTERS = REPO / "rules_data" / "sources" / "frameworks" / "transfer_to_npu_importers.tsv"
OUT = REPO / "src" / "flake8_ascend" / "data" / "frameworks.json"
GENERATOR = "tools/build_frameworks.py"
PINNED = {"mmengine": "0.10.7", "accelerate": "1.12.0", "transformers": "4.57.6", "deepspeed": "0.19.8",
          "lightning": "2.6.1", "mmcv": "1.7.2", "mmdet": "2.28.2"}
MIRRORS = {"lightning.fabric": "lightning_fabric", "lightning.pytorch": "pytorch_lightning"}


class Source:
    """One unpacked release: where its package lives, its version, and parsed files with provenance."""

    def __init__(self, package: str, root: Path):
        self.package, self.dir = package, _package_dir(root, package)
        self.version = _version(root, package)
        if self.version != PINNED[package]:
            raise SystemExit(f"{root}: {package} {self.version}, expected {PINNED[package]}")

    def tree(self, relative: str) -> ast.Module:
        return ast.parse((self.dir / relative).read_text(encoding="utf-8"))

    def where(self, relative: str, node: ast.AST) -> dict:
        return {"package": self.package, "version": self.version, "file": f"{self.package}/{relative}",
                "line": node.lineno}


def _package_dir(root: Path, package: str) -> Optional[Path]:
    """``ROOT/<package>`` (a wheel, most sdists) or ``ROOT/src/<package>`` (transformers' sdist)."""
    return next((d for d in (root / package, root / "src" / package) if (d / "__init__.py").is_file()), None)


def _version(root: Path, package: str) -> str:
    """From the wheel's METADATA or the sdist's PKG-INFO."""
    for meta in list(root.glob("*.dist-info/METADATA")) + list(root.glob("**/PKG-INFO")):
        text = meta.read_text(encoding="utf-8", errors="replace")
        name = re.search(r"^Name: (.+)$", text, re.M)
        if name and name.group(1).strip().lower() == package:
            return re.search(r"^Version: (.+)$", text, re.M).group(1).strip()
    raise SystemExit(f"no metadata for {package} under {root}")


def _calls(node: ast.AST, name: str) -> Iterator[ast.Call]:
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and _last(n.func) == name:
            yield n


def _last(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _keyword(call: ast.Call, name: str) -> Optional[ast.AST]:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _npu_branches(tree: ast.AST) -> Iterator[Tuple[ast.FunctionDef, ast.If]]:
    """``if is_npu_available():`` / ``elif IS_NPU_AVAILABLE:`` branches with the function around them."""
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.If) and (any(True for _ in _calls(node.test, "is_npu_available")) or any(
                        isinstance(n, ast.Name) and n.id == "IS_NPU_AVAILABLE" for n in ast.walk(node.test))):
                    yield function, node


def _launchers(src: Source, utils: str) -> Tuple[dict, dict]:
    """The launchers of ``init_dist`` in ``utils`` (launcher -> the function it calls, and the backend that
    function initialises on an NPU whatever it was given), and those functions' NPU backends."""
    tree = src.tree(utils)
    overriding = {}
    for function, branch in _npu_branches(tree):
        for call in (c for s in branch.body for c in _calls(s, "init_process_group")):
            backend = _keyword(call, "backend")
            if isinstance(backend, ast.Constant):
                overriding[function.name] = {"backend": backend.value, **src.where(utils, backend)}
    launchers = {}
    init_dist = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "init_dist")
    for node in ast.walk(init_dist):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(
                node.test.comparators[0], ast.Constant):
            called = next((_last(c.func) for s in node.body for c in ast.walk(s) if isinstance(c, ast.Call)), "")
            launchers[node.test.comparators[0].value] = {
                "calls": called, "npu_backend": overriding.get(called, {}).get("backend"),
                **src.where(utils, node)}
    return launchers, overriding


def mmengine_facts(src: Source) -> dict:
    launchers, overriding = _launchers(src, "dist/utils.py")
    runner = "runner/runner.py"
    keys = {}
    for function in ast.walk(src.tree(runner)):
        if not isinstance(function, ast.FunctionDef):
            continue
        gets = {t.id: n.value for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
        for call in _calls(function, "init_dist"):
            for kw in call.keywords:
                got = gets.get(kw.value.id) if kw.arg is None and isinstance(kw.value, ast.Name) else None
                if isinstance(got, ast.Call) and _last(got.func) == "get" and isinstance(got.args[0], ast.Constant):
                    keys[got.args[0].value] = {"passed_to": "mmengine.dist.init_dist", **src.where(runner, call)}
    return {"launchers": launchers, "npu_backend": overriding, "config_keys": keys}


def accelerate_facts(src: Source) -> dict:
    """``backend = "hccl"`` under ``is_npu_available()``, and ``PartialState`` raising when the backend it was
    given is not the one it chose."""
    state = "state.py"
    tree = src.tree(state)
    chosen = {}
    for function, branch in _npu_branches(tree):
        for node in branch.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
                    isinstance(t, ast.Name) and t.id == "backend" for t in node.targets):
                chosen[function.name] = {"backend": node.value.value, **src.where(state, node)}
    rejects = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"):
            given = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                     and _last(n.value.func) == "pop" and isinstance(n.value.args[0], ast.Constant)
                     and n.value.args[0].value == "backend" for t in n.targets if isinstance(t, ast.Name)}
            for node in ast.walk(fn):
                if isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body) and any(
                        isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.NotEq) and
                        {_last(c.left), _last(c.comparators[0])} & given for c in ast.walk(node.test)):
                    rejects[cls.name] = src.where(state, node)
    return {"npu_backend": chosen, "rejects_other_backend": rejects}


def transformers_facts(src: Source) -> dict:
    """``TrainingArguments.ddp_backend`` (its choices) and the ``PartialState(backend=self.ddp_backend)`` it feeds."""
    args = "training_args.py"
    tree = src.tree(args)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TrainingArguments")
    field = next(n for n in cls.body if isinstance(n, ast.AnnAssign) and _last(n.target) == "ddp_backend")
    choices = [c.value for c in ast.walk(field.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
               and re.fullmatch(r"[a-z]+", c.value)]
    holders = {_last(n.targets[0].value): n for n in ast.walk(cls) if isinstance(n, ast.Assign)
               and isinstance(n.targets[0], ast.Subscript) and isinstance(n.targets[0].slice, ast.Constant)
               and n.targets[0].slice.value == "backend" and _last(n.value) == "ddp_backend"}  # kwargs["backend"] = ...
    feeds = [src.where(args, holders[_last(k.value)]) for call in _calls(cls, "PartialState") for k in call.keywords
             if k.arg is None and _last(k.value) in holders]
    return {"TrainingArguments": {"keyword": "ddp_backend", "choices": choices, "field": src.where(args, field),
                                  "to_accelerate": feeds},
            "step_methods": _trainer_step_methods(src)}


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _self_calls(node: ast.AST, name: str) -> Iterator[ast.Call]:
    return (c for c in _calls(node, name) if isinstance(c.func, ast.Attribute) and _last(c.func.value) == "self")


def _trainer_step_methods(src: Source) -> dict:
    """``self.training_step(...)`` inside a loop of ``Trainer._inner_training_loop``, and the
    ``self.compute_loss(...)`` of ``Trainer.training_step``: both run on every step."""
    trainer = "trainer.py"
    cls = next(n for n in src.tree(trainer).body if isinstance(n, ast.ClassDef) and n.name == "Trainer")
    loops = [n for n in ast.walk(_method(cls, "_inner_training_loop")) if isinstance(n, (ast.For, ast.While))]
    step = next(c for loop in loops for c in _self_calls(loop, "training_step"))
    loss = next(_self_calls(_method(cls, "training_step"), "compute_loss"))
    return {"transformers.trainer.Trainer": {
        "training_step": {"called_by": "Trainer._inner_training_loop, in its step loop", **src.where(trainer, step)},
        "compute_loss": {"called_by": "Trainer.training_step", **src.where(trainer, loss)}}}


def deepspeed_facts(src: Source) -> dict:
    comm = "comm/comm.py"
    tree = src.tree(comm)
    init = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "init_distributed")
    params = init.args.args[len(init.args.args) - len(init.args.defaults):]
    default = next(d for a, d in zip(params, init.args.defaults) if a.arg == "dist_backend")
    accelerator = src.dir.parent / "accelerator" / "npu_accelerator.py"
    npu = ast.parse(accelerator.read_text(encoding="utf-8"))
    name = next(n for n in ast.walk(npu) if isinstance(n, ast.Assign) and _last(n.targets[0]) ==
                "_communication_backend_name")
    return {"init_distributed": {"keyword": "dist_backend", "default": default.value, **src.where(comm, default)},
            "npu_accelerator_backend": {"backend": name.value.value, "package": src.package, "version": src.version,
                                        "file": "accelerator/npu_accelerator.py", "line": name.lineno}}


def lightning_facts(src: Source) -> dict:
    exported = {}
    for node in src.tree("__init__.py").body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                exported[alias.asname or alias.name] = node.module
    takers = {}
    for name, module in sorted(exported.items()):
        relative = module.replace(".", "/")[len("lightning/"):] + ".py"
        package = relative[:-3] + "/__init__.py"
        if not (src.dir / relative).is_file() and (src.dir / package).is_file():
            module = next((n.module for n in src.tree(package).body if isinstance(n, ast.ImportFrom)
                           and any(a.name == name for a in n.names)), module)  # lightning.pytorch.trainer
            relative = module.replace(".", "/")[len("lightning/"):] + ".py"
        if not (src.dir / relative).is_file():
            continue
        for cls in src.tree(relative).body:
            if isinstance(cls, ast.ClassDef) and cls.name == name:
                init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
                if init and "accelerator" in [a.arg for a in init.args.args + init.args.kwonlyargs]:
                    takers[f"lightning.{name}"] = {"module": module, **src.where(relative, init)}
    names, registered = {}, set()
    for path in sorted((src.dir / "fabric" / "accelerators").glob("*.py")):
        relative = str(path.relative_to(src.dir))
        for cls in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "name":
                    ret = next((n.value for n in ast.walk(fn) if isinstance(n, ast.Return)), None)
                    if isinstance(ret, ast.Constant):
                        registered.add(ret.value)
                        if ret.value == "cuda":
                            names["cuda"] = {"selects": cls.name, **src.where(relative, ret)}
    connector = "fabric/connector.py"
    tree = src.tree(connector)
    methods = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and _last(node.test.left) == \
                "_accelerator_flag" and isinstance(node.test.comparators[0], ast.Constant):
            flag = node.test.comparators[0].value
            chooser = next((_last(c.func) for c in ast.walk(node.body[0]) if isinstance(c, ast.Call)), "")
            if chooser not in methods:
                continue
            returns = [n.value.value for n in ast.walk(methods[chooser]) if isinstance(n, ast.Return)
                       and isinstance(n.value, ast.Constant)]
            raises = any(isinstance(n, ast.Raise) for n in ast.walk(methods[chooser]))
            if "cuda" in returns and "cpu" not in returns and raises:
                names[flag] = {"selects": " or ".join(returns) + ", else raises", "through": chooser,
                               **src.where(connector, node)}
    return {"accelerator_takers": takers, "cuda_accelerators": names, "registered": sorted(registered),
            "step_methods": _lightning_step_methods(src)}


def _lightning_step_methods(src: Source) -> dict:
    """The optimization loops call the strategy hook ``"training_step"`` per batch; the strategy's
    ``training_step`` returns ``self.lightning_module.training_step(...)``."""
    hooks = []
    for relative in ("pytorch/loops/optimization/automatic.py", "pytorch/loops/optimization/manual.py"):
        hooks += [src.where(relative, c) for c in _calls(src.tree(relative), "_call_strategy_hook")
                  if len(c.args) > 1 and isinstance(c.args[1], ast.Constant) and c.args[1].value == "training_step"]
    strategy = "pytorch/strategies/strategy.py"
    cls = next(n for n in src.tree(strategy).body if isinstance(n, ast.ClassDef) and n.name == "Strategy")
    module_call = next(c for c in _calls(_method(cls, "training_step"), "training_step")
                       if isinstance(c.func, ast.Attribute) and _last(c.func.value) == "lightning_module")
    return {"lightning.pytorch.core.module.LightningModule": {"training_step": {
        "called_by": "the optimization loops' strategy hook 'training_step', per batch", "loops": hooks,
        **src.where(strategy, module_call)}}}


def mmcv_facts(src: Source) -> dict:
    """mmcv 1.x's ``mmcv.runner.init_dist``: its launchers and the backend each initialises on an NPU."""
    launchers, overriding = _launchers(src, "runner/dist_utils.py")
    return {"launchers": launchers, "npu_backend": overriding}


def mmdet_facts(src: Source) -> dict:
    """mmdet 2.x's tools pass a config key to mmcv's ``init_dist`` (``init_dist(args.launcher, **cfg.dist_params)``)."""
    keys = {}
    for relative in ("tools/train.py", ".mim/tools/train.py"):
        if not (src.dir / relative).is_file():
            continue
        tree = src.tree(relative)
        imported = {a.asname or a.name: n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    for a in n.names}
        if imported.get("init_dist") != "mmcv.runner":
            continue
        for call in _calls(tree, "init_dist"):
            for kw in call.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Attribute) and _last(kw.value.value) == "cfg":
                    keys[kw.value.attr] = {"passed_to": "mmcv.runner.init_dist", **src.where(relative, call)}
        break
    return {"config_keys": keys}


EXTRACTORS = {"mmengine": mmengine_facts, "accelerate": accelerate_facts, "transformers": transformers_facts,
              "deepspeed": deepspeed_facts, "lightning": lightning_facts, "mmcv": mmcv_facts, "mmdet": mmdet_facts}


def extract(roots: List[Path], kept: Optional[dict] = None) -> dict:
    """The facts of every pinned package: read from the roots that hold it, else kept from ``kept``."""
    facts = {}
    for package, extractor in EXTRACTORS.items():
        for root in roots:
            if _package_dir(root, package):
                facts[package] = extractor(Source(package, root))
                break
        else:
            if kept is None or package not in kept.get("facts", {}) or kept["versions"].get(package) != PINNED[package]:
                raise SystemExit(f"no unpacked {package}=={PINNED[package]} among {', '.join(map(str, roots))}")
            facts[package] = kept["facts"][package]
    return {"method": "tools/build_frameworks.py --extract: the stdlib ast of each release's own Python sources",
            "versions": PINNED, "facts": facts}


def _cite(fact: dict) -> str:
    return f"{fact['package']} {fact['version']} {fact['file']}:{fact['line']}"


def _launcher_why(package: str, overriding: dict, facts: dict) -> str:
    """Why a backend given to ``package``'s init_dist is no finding: its launchers that pick 'hccl' on an NPU."""
    return (f"{package}'s launcher " + ", ".join(repr(k) for k in sorted(overriding)) + " initialises 'hccl' on an "
            "NPU whatever backend it is given (" + "; ".join(
                f"{_cite(v)}, {v['calls']}: {_cite(facts['npu_backend'][v['calls']])}" for v in overriding.values())
            + ")")


def build(facts: dict) -> dict:
    """The tables ASC202/ASC204 read: each entry says why, with the line it comes from."""
    f = facts["facts"]
    mm = f["mmengine"]
    overriding = {k: v for k, v in mm["launchers"].items() if v["npu_backend"] == "hccl"}
    chosen: Dict[str, dict] = {}
    config_keys: Dict[str, str] = {}
    if overriding:
        why = _launcher_why("mmengine", overriding, mm)
        chosen["mmengine.dist.init_dist"] = {"keyword": "backend", "why": why}
        chosen["mmengine.dist.utils.init_dist"] = {"keyword": "backend", "why": why}
        config_keys = {key: f"{why}; the Runner passes this config to init_dist ({_cite(v)})"
                       for key, v in mm["config_keys"].items()}
    mc = f["mmcv"]
    overriding = {k: v for k, v in mc["launchers"].items() if v["npu_backend"] == "hccl"}
    if overriding:
        why = _launcher_why("mmcv", overriding, mc)
        chosen["mmcv.runner.init_dist"] = {"keyword": "backend", "why": why}
        chosen["mmcv.runner.dist_utils.init_dist"] = {"keyword": "backend", "why": why}
        config_keys.update({key: f"{why}; mmdet {PINNED['mmdet']}'s tools pass this config to mmcv's init_dist "
                                 f"({_cite(v)})" for key, v in f["mmdet"]["config_keys"].items()})
    acc = f["accelerate"]
    npu = next(iter(acc["npu_backend"].values()))
    ta = f["transformers"]["TrainingArguments"]
    ds = f["deepspeed"]["init_distributed"]
    keywords = {"backend": "torch.distributed.init_process_group(backend=...)",
                ds["keyword"]: f"deepspeed.init_distributed: an explicit value is used as it is; left out it asks "
                               f"the accelerator ('{f['deepspeed']['npu_accelerator_backend']['backend']}' on an NPU, "
                               f"{_cite(f['deepspeed']['npu_accelerator_backend'])}) ({_cite(ds)})",
                ta["keyword"]: f"transformers.TrainingArguments ({_cite(ta['field'])}) passes it to accelerate's "
                f"PartialState ({_cite(ta['to_accelerate'][0])}), which chooses '{npu['backend']}' on an NPU "
                f"({_cite(npu)}) and raises for any other backend it is given "
                f"({_cite(acc['rejects_other_backend']['PartialState'])})"}
    lt = f["lightning"]
    takers = {}
    for name, fact in lt["accelerator_takers"].items():
        module = fact["module"]
        for spelling in {name, f"{module}.{name.split('.')[-1]}", *(
                f"{mirror}.{name.split('.')[-1]}" for prefix, mirror in MIRRORS.items() if module.startswith(prefix)),
                *(f"{prefix}.{name.split('.')[-1]}" for prefix in MIRRORS if module.startswith(prefix))}:
            takers[spelling] = _cite(fact)
    none = "" if "npu" in lt["registered"] else (
        f"; Lightning {PINNED['lightning']} registers no NPU accelerator ({', '.join(lt['registered'])})")
    accelerators = {flag: f"Lightning's accelerator {flag!r} selects {fact['selects']} ({_cite(fact)}){none}"
                    for flag, fact in lt["cuda_accelerators"].items()}
    return {
        "generator": GENERATOR,
        "source": f"rules_data/sources/frameworks/{FACTS.name}: " + ", ".join(f"{k} {v}" for k, v in PINNED.items())
        + f"; rules_data/sources/frameworks/{IMPORTERS.name}",
        "backend_keywords": dict(sorted(keywords.items())),
        "backend_chosen_on_npu": dict(sorted(chosen.items())),
        "backend_config_keys": dict(sorted(config_keys.items())),
        "accelerator_calls": dict(sorted(takers.items())),
        "cuda_accelerators": dict(sorted(accelerators.items())),
        "step_methods": _step_methods(f),
        "transfer_to_npu_importers": _importers(),
    }


def _importers() -> Dict[str, str]:
    """Module -> why importing it runs transfer_to_npu (ASC2xx read the module as migrated), with its evidence."""
    with IMPORTERS.open(newline="", encoding="utf-8") as handle:
        return {row["module"]: f"{row['why']} ({row['evidence']})"
                for row in sorted(csv.DictReader(handle, delimiter="\t"), key=lambda row: row["module"])}


def _step_methods(f: dict) -> dict:
    """Base class (every public spelling) -> {method the framework calls on every step: why, with the line}."""
    spellings = {"transformers.trainer.Trainer": ["transformers.Trainer", "transformers.trainer.Trainer"],
                 "lightning.pytorch.core.module.LightningModule": [
                     "lightning.LightningModule", "lightning.pytorch.LightningModule",
                     "lightning.pytorch.core.LightningModule", "lightning.pytorch.core.module.LightningModule",
                     "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
                     "pytorch_lightning.core.module.LightningModule"]}
    table: Dict[str, Dict[str, str]] = {}
    for package in ("transformers", "lightning"):
        for base, methods in f[package]["step_methods"].items():
            why = {name: f"{base.split('.')[0]} calls it on every training step ({fact['called_by']}, {_cite(fact)})"
                   for name, fact in methods.items()}
            for spelling in spellings[base]:
                table[spelling] = why
    return dict(sorted(table.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract", metavar="ROOT", type=Path, nargs="+",
                        help="unpacked releases of " + ", ".join(f"{k}=={v}" for k, v in PINNED.items()))
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed data file is out of date")
    args = parser.parse_args(argv)
    if args.extract:
        FACTS.parent.mkdir(parents=True, exist_ok=True)
        kept = json.loads(FACTS.read_text(encoding="utf-8")) if FACTS.is_file() else None
        FACTS.write_text(render(extract([r.resolve() for r in args.extract], kept)), encoding="utf-8")
        print(f"wrote {FACTS.relative_to(REPO)}")
    text = render(build(json.loads(FACTS.read_text(encoding="utf-8"))))
    return update(text, OUT, GENERATOR, args.check)


if __name__ == "__main__":
    sys.exit(main())
