"""Facts from the other modules of the linted file's package (semantic/project.py): who calls a function whose
``device='cuda'`` default would otherwise be reported (issue 27: values that cross a file boundary)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from flake8_ascend import cli, engine
from flake8_ascend.config import Config
from flake8_ascend.data import default_version
from flake8_ascend.semantic import project

# easyocr 1.7.2 DBNet/DBNet.py:20-28 and detection_db.py:127: the only caller passes the device
NET = """\
class DBNet:
    def __init__(self, backbone="resnet18", device='cuda', verbose=0):
        self.device = device


def get_autocast(precision, device_type='cuda'):
    return precision, device_type
"""
CALLER = """\
from .net import DBNet, get_autocast


def get_detector(device):
    return DBNet(backbone="resnet18", device=device), get_autocast("amp", device_type=device)
"""


def _package(tmp_path: Path, caller: str = CALLER, init: bool = True) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    if init:
        (package / "__init__.py").write_text("")
    (package / "net.py").write_text(NET)
    (package / "detection.py").write_text(caller)
    return package


def _codes(root: Path, rel: str, code: str):
    """The lines of ``code``'s findings in the module ``rel`` of the project folder ``root``."""
    source = (root / rel).read_text()
    config = Config(default_version(), root=str(root))
    return [f.line for f in engine.lint(ast.parse(source), source.splitlines(keepends=True), rel, config)
            if f.code == code]


def _lint(root: Path, rel: str):
    return [(line, "ASC202") for line in _codes(root, rel, "ASC202")]


def test_a_default_every_caller_in_the_package_overrides_is_silent(tmp_path):
    _package(tmp_path)
    assert _lint(tmp_path, "pkg/net.py") == []


@pytest.mark.parametrize("caller,expected", [
    # near misses: a caller that relies on the default (the other function's caller passes it)
    (CALLER.replace(", device=device)", ")"), [(2, "ASC202")]),
    # a call of the module's own function of the same name, not of the import
    ("def DBNet(device=None):\n    return device\n\n\ndef get_autocast(p, device_type=None):\n    return p\n\n\n"
     "def get_detector(device):\n    return DBNet(device=device), get_autocast('amp', device_type=device)\n",
     [(2, "ASC202"), (6, "ASC202")]),
    # no caller in the package: its users call it
    ("def get_detector(device):\n    return device\n", [(2, "ASC202"), (6, "ASC202")]),
])
def test_near_miss_a_default_some_call_may_rely_on_is_reported(tmp_path, caller, expected):
    _package(tmp_path, caller)
    assert _lint(tmp_path, "pkg/net.py") == expected


# mmyolo 0.6.0 .mim/tools/analysis_tools/optimize_anchors.py:125-137, 206-216: a base class built only through
# subclasses that hand their ``**kwargs`` to ``super().__init__``, here built in another module
OPTIMIZERS = """\
class BaseOptimizer:
    def __init__(self, dataset, device='cuda:0'):
        self.device = device


class KMeansOptimizer(BaseOptimizer):
    def __init__(self, iters, **kwargs):
        super().__init__(**kwargs)
"""


BUILT = ("from .net import KMeansOptimizer\n\n\ndef main(args, data):\n"
         "    return KMeansOptimizer(10, dataset=data{passed})\n")


@pytest.mark.parametrize("caller,init,expected", [
    (BUILT.format(passed=", device=args.device"), "", []),
    # near misses: a construction of the subclass that leaves the device out; a subclass of the package's public
    # interface, whose users build it as they like
    (BUILT.format(passed=""), "", [(2, "ASC202")]),
    (BUILT.format(passed=", device=args.device"), "from .net import KMeansOptimizer\n", [(2, "ASC202")]),
])
def test_a_base_class_default_every_construction_of_its_subclasses_overrides(tmp_path, caller, init, expected):
    package = _package(tmp_path, caller)
    (package / "net.py").write_text(OPTIMIZERS)
    (package / "__init__.py").write_text(init)
    assert _lint(tmp_path, "pkg/net.py") == expected


FAST = OPTIMIZERS + """

class FastOptimizer(KMeansOptimizer):
    def __init__(self, **kwargs):
        super().__init__(1, **kwargs)
"""


@pytest.mark.parametrize("passed,expected", [
    (", device=args.device", []),
    # near miss: the subclass of the subclass is built without the device
    ("", [(2, "ASC202")]),
])
def test_subclasses_of_subclasses_are_followed(tmp_path, passed, expected):
    package = _package(tmp_path, BUILT.format(passed=", device=args.device").replace(
        "import KMeansOptimizer", "import FastOptimizer, KMeansOptimizer") + f"\n\ndef fast(args):\n"
        f"    return FastOptimizer(dataset=None{passed})\n")
    (package / "net.py").write_text(FAST)
    assert _lint(tmp_path, "pkg/net.py") == expected


def test_near_miss_a_module_in_no_package_has_no_known_callers(tmp_path):
    _package(tmp_path, init=False)
    assert _lint(tmp_path, "pkg/net.py") == [(2, "ASC202"), (6, "ASC202")]


def test_both_front_ends_read_the_package(tmp_path):
    _package(tmp_path)
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "pkg"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert flake8.returncode == 0, flake8.stdout + flake8.stderr
    out = tmp_path / "out"
    assert cli.main(["-i", str(tmp_path / "pkg"), "-o", str(out), "-m", "torch_apis"]) == 0
    rows = (out / "pkg_analysis" / "cuda_op_list.csv").read_text().splitlines()
    assert rows == ["File,Api,Start Line,End Line,Tips"]


def test_a_package_too_large_is_not_read(tmp_path, monkeypatch):
    _package(tmp_path)
    monkeypatch.setattr(project, "MAX_MODULES", 1)
    project._modules.cache_clear()
    assert project.calls_elsewhere(str(tmp_path / "pkg" / "net.py"), "DBNet") == []


def test_a_call_of_another_modules_function_of_the_same_name_is_no_caller(tmp_path):
    # unsloth 2026.10.9: many modules define and call their own ``install``
    package = _package(tmp_path)
    (package / "other.py").write_text("def get_autocast(precision):\n    return precision\n")
    (package / "tools.py").write_text("from .other import get_autocast\n\n\ndef run():\n    return get_autocast('amp')\n")
    assert _lint(tmp_path, "pkg/net.py") == []


@pytest.mark.parametrize("caller", [
    # through the subpackage that re-exports it, and through the module (the top-level package's re-export would
    # make them public: test_near_miss_a_public_default_is_reported_whatever_the_package_passes)
    "from pkg.models import DBNet, get_autocast\n\n\ndef get_detector(device):\n"
    "    return DBNet(device=device), get_autocast('amp', device_type=device)\n",
    "from .models import net\n\n\ndef get_detector(device):\n"
    "    return net.DBNet(device=device), net.get_autocast('amp', device_type=device)\n",
])
def test_callers_through_the_package_or_the_module_count(tmp_path, caller):
    package = _package(tmp_path, caller)
    (package / "models").mkdir()
    (package / "net.py").rename(package / "models" / "net.py")
    (package / "models" / "__init__.py").write_text("from .net import DBNet, get_autocast\n")
    assert _lint(tmp_path, "pkg/models/net.py") == []


def test_a_folder_without_init_inside_a_package_belongs_to_it(tmp_path):
    # easyocr 1.7.2: easyocr/DBNet/ has no __init__.py; detection_db.py imports from .DBNet.DBNet
    package = _package(tmp_path, CALLER.replace("from .net import", "from .models.net import"))
    (package / "models").mkdir()
    (package / "net.py").rename(package / "models" / "net.py")
    assert _lint(tmp_path, "pkg/models/net.py") == []


# mmdet3d 1.4.0 task_modules/anchor/anchor_3d_generator.py:92 and dense_heads/anchor3d_head.py:239: a method its class
# never calls, whose device default every call of a method so named in the package overrides
GENERATOR = """\
class RangeGenerator:
    def grid_anchors(self, featmap_sizes, device='cuda'):
        return featmap_sizes, device
"""
HEAD = """\
class Head:
    def get_anchors(self, featmap_sizes, device):
        return self.prior_generator.grid_anchors(featmap_sizes, device=device)
"""


def _generator_package(tmp_path: Path, anchor: str, head: str) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "anchor.py").write_text(anchor)
    (package / "head.py").write_text(head)


@pytest.mark.parametrize("head,expected", [
    (HEAD, []),
    (HEAD.replace("featmap_sizes, device=device)", "featmap_sizes, device)"), []),  # by position
    # near misses: a call elsewhere that relies on the default; a call of a method of that name on another object
    # (its class is not known: it may be this one); no call of it in the package
    (HEAD.replace(", device=device)", ")"), [(2, "ASC202")]),
    (HEAD + "\n\ndef sizes(table):\n    return table.grid_anchors('all')\n", [(2, "ASC202")]),
    ("class Head:\n    pass\n", [(2, "ASC202")]),
])
def test_a_method_default_every_call_of_that_method_name_overrides_is_silent(tmp_path, head, expected):
    _generator_package(tmp_path, GENERATOR, head)
    assert _lint(tmp_path, "pkg/anchor.py") == expected


# mmdet3d 1.4.0 anchor_3d_generator.py:266: AlignedAnchor3DRangeGenerator.anchors_single_range, called by the base
# class; diffusers 0.42.1 pipeline_cosmos3_omni.py:763: a ``prepare_latents`` its own class calls with the device,
# whatever other pipelines' ``prepare_latents`` are given
ALIGNED = """\
class RangeGenerator:
    def grid_anchors(self, sizes, device):
        return [self.single_range(size, device=device) for size in sizes]

    def single_range(self, size, device='cuda'):
        return size


class Aligned(RangeGenerator):
    def single_range(self, size, device='cuda'):
        return size
"""


@pytest.mark.parametrize("anchor,expected", [
    (ALIGNED, []),
    # near miss: a call in the file that relies on the default (the base class keeps its own calls, which pass it)
    (ALIGNED + "\n\ndef first(gen):\n    return gen.single_range(1)\n", [(10, "ASC202")]),
])
def test_the_nearest_calls_of_a_method_decide(tmp_path, anchor, expected):
    _generator_package(tmp_path, anchor, "def sizes(gen):\n    return gen.single_range(1)\n")
    assert _lint(tmp_path, "pkg/anchor.py") == expected


# axolotl 0.19.0: integrations/diffusion/trainer.py ``DiffusionTrainer(AxolotlTrainer)``, whose base in
# core/trainers/base.py derives from transformers' Trainer (re-exported by core/trainers/__init__.py)
TRAINER_BASE = """\
from transformers import Trainer


class Mixin:
    pass


class ProjectTrainer(Mixin, Trainer):
    pass


class Evaluator:
    pass
"""
SUBCLASS = """\
from {source} import {name}


class DiffusionTrainer({name}):
    def compute_loss(self, model, inputs, return_outputs=False):
        loss = model(**inputs).loss
        self.log({{"loss": loss.item()}})
        return loss
"""


def _trainer_package(tmp_path: Path, source: str, name: str = "ProjectTrainer") -> None:
    package = tmp_path / "pkg"
    (package / "trainers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "trainers" / "__init__.py").write_text("from .base import ProjectTrainer, Evaluator\n")
    (package / "trainers" / "base.py").write_text(TRAINER_BASE)
    (package / "diffusion.py").write_text(SUBCLASS.format(source=source, name=name))


@pytest.mark.parametrize("source", ["pkg.trainers.base", "pkg.trainers", ".trainers.base", ".trainers"])
def test_a_framework_step_method_through_a_base_class_in_another_module(tmp_path, source):
    _trainer_package(tmp_path, source)
    assert _codes(tmp_path, "pkg/diffusion.py", "ASC501") == [7]


@pytest.mark.parametrize("source,name", [
    ("pkg.trainers.base", "Evaluator"),  # a class of the package that is no Trainer
    ("pkg.trainers.base", "Mixin"),
    ("other_project.trainers", "ProjectTrainer"),  # outside the package: not read
])
def test_near_miss_a_base_class_elsewhere_that_is_no_framework_class(tmp_path, source, name):
    _trainer_package(tmp_path, source, name)
    assert _codes(tmp_path, "pkg/diffusion.py", "ASC501") == []


def test_absolute_names_of_relative_imports(tmp_path):
    _trainer_package(tmp_path, "pkg.trainers")
    here = str(tmp_path / "pkg" / "trainers" / "base.py")
    assert project.absolute(".base.Trainer", here) == "pkg.trainers.base.Trainer"
    assert project.absolute("..Trainer", here) == "pkg.Trainer"
    assert project.absolute("...Trainer", here) is None  # above the package
    assert project.absolute(".Trainer", str(tmp_path / "pkg" / "trainers" / "__init__.py")) == "pkg.trainers.Trainer"
    assert project.resolve_class(here, "pkg.trainers.ProjectTrainer") == (
        "pkg.trainers.base.ProjectTrainer", ("pkg.trainers.base.Mixin", "transformers.Trainer"))


@pytest.mark.parametrize("compat,source", [
    # a framework class the package re-exports (``from .compat import Trainer``)
    ("from transformers import Trainer\n", ".compat"),
    ("from transformers import Trainer as Trainer\n", "pkg.compat"),
])
def test_a_framework_class_the_package_re_exports(tmp_path, compat, source):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "compat.py").write_text(compat)
    (package / "diffusion.py").write_text(SUBCLASS.format(source=source, name="Trainer"))
    assert _codes(tmp_path, "pkg/diffusion.py", "ASC501") == [7]


def test_the_framework_package_itself_imports_its_class_relatively(tmp_path):
    # transformers 4.57.6 trainer_seq2seq.py: ``from .trainer import Trainer``
    package = tmp_path / "transformers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "trainer.py").write_text("class Trainer:\n    pass\n")
    (package / "trainer_seq2seq.py").write_text(SUBCLASS.format(source=".trainer", name="Trainer"))
    assert _codes(tmp_path, "transformers/trainer_seq2seq.py", "ASC501") == [7]
    (package / "trainer_seq2seq.py").write_text(SUBCLASS.format(source=".other", name="Trainer"))  # near miss
    (package / "other.py").write_text("class Trainer:\n    pass\n")
    assert _codes(tmp_path, "transformers/trainer_seq2seq.py", "ASC501") == []


CUDA_PLATFORM = "import torch\n\n\ndef current_device():\n    return torch.cuda.current_device()\n"


@pytest.mark.parametrize("name, twin", [
    ("platform_cuda.py", "platform_npu.py"),  # verl 0.9.1 plugin/platform/
    ("cuda_accelerator.py", "npu_accelerator.py"),  # deepspeed 0.19.8 accelerator/
    ("gpu_ops.py", "npu_ops.py"),
    ("nccl.py", "hccl.py"),  # ms-swift 4.6.0 ray/megatron/checkpoint_engine/
    ("CUDA_ops.py", "NPU_ops.py"),
])
def test_the_cuda_module_of_a_pair_with_an_npu_module_is_left_out(tmp_path, name, twin):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / name).write_text(CUDA_PLATFORM)
    (folder / twin).write_text("import torch\n")
    assert project.npu_counterpart(str(folder / name)) == twin
    assert _codes(tmp_path, f"pkg/{name}", "ASC201") == []


@pytest.mark.parametrize("twin, init", [
    (None, True), ("sub/platform_npu.py", True), ("platform_xpu.py", True),
    ("platform_npu.py", False),  # scripts: the GPU one is what its user means to port (examples/transfer_to_npu/)
])
def test_near_miss_a_cuda_module_without_an_npu_twin_beside_it_is_linted(tmp_path, twin, init):
    folder = tmp_path / "pkg"
    (folder / "sub").mkdir(parents=True)
    if init:
        (folder / "__init__.py").write_text("")
    (folder / "platform_cuda.py").write_text(CUDA_PLATFORM)
    if twin:
        (folder / twin).write_text("import torch\n")
    assert project.npu_counterpart(str(folder / "platform_cuda.py")) is None
    assert _codes(tmp_path, "pkg/platform_cuda.py", "ASC201") == [5]


@pytest.mark.parametrize("module, init", [
    ("net.py", "from .net import DBNet, get_autocast\n"),  # the top-level package re-exports them
    ("api.py", ""),  # demucs 4.1.0 api.py: the package's Python API
])
def test_near_miss_a_public_default_is_reported_whatever_the_package_passes(tmp_path, module, init):
    package = _package(tmp_path, caller=CALLER.replace(".net", "." + module[:-3]))
    (package / "net.py").rename(package / module)
    (package / "__init__.py").write_text(init)
    assert project.public(str(package / module), "DBNet")
    assert _lint(tmp_path, f"pkg/{module}") == [(2, "ASC202"), (6, "ASC202")]


# neuralforecast 3.0.2 models/gru.py:125-195: a dropout parameter that defaults to off, stored on ``self`` and
# handed to the recurrent layer (ASC103)
GRU_MODEL = """\
import torch.nn as nn


class GRU(nn.Module):
    def __init__(self, h, encoder_n_layers=2, encoder_dropout=0.0):
        super().__init__()
        self.encoder_dropout = encoder_dropout
        self.hist_encoder = nn.GRU(h, h, num_layers=encoder_n_layers, dropout=self.encoder_dropout)
"""


def _write_package(tmp_path: Path, init: str, modules: Dict[str, str]) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(init)
    for name, text in modules.items():
        (package / name).write_text(text)


def _model_package(tmp_path: Path, caller: str, init: str = "") -> None:
    _write_package(tmp_path, init, {"gru.py": GRU_MODEL, "auto.py": caller})


@pytest.mark.parametrize("caller", [
    # the package only hands the class on (neuralforecast auto.py ``cls_model=GRU``), or builds it at its default
    "from .gru import GRU\n\n\ndef auto(config):\n    return dict(cls_model=GRU, config=config)\n",
    "from .gru import GRU\n\n\ndef build(h):\n    return GRU(h, encoder_n_layers=4)\n",
    "from . import gru\n\n\ndef build(h):\n    return gru.GRU(h, encoder_dropout=0.0)\n",
])
def test_a_parameter_no_call_in_the_package_turns_on_is_off(tmp_path, caller):
    _model_package(tmp_path, caller)
    assert _codes(tmp_path, "pkg/gru.py", "ASC103") == []


@pytest.mark.parametrize("model", [
    # the file's own caller hands on its parameter, left at off (doctr 0.12.0 sar/pytorch.py: ``SAREncoder(...,
    # dropout_prob)`` in ``SAR.__init__``, whose ``dropout_prob`` defaults to 0.0)
    GRU_MODEL.replace("class GRU", "class Encoder") + "\n\nclass GRU(nn.Module):\n"
    "    def __init__(self, h, dropout_prob=0.0):\n        self.encoder = Encoder(h, encoder_dropout=dropout_prob)\n",
    # ``num_layers`` left at a default of 1: the dropout acts between no layers (sentence-transformers 5.1
    # sentence_transformer/modules/lstm.py:42)
    "import torch.nn as nn\n\n\nclass LSTM(nn.Module):\n    def __init__(self, dim, hidden_dim, num_layers: int = 1, "
    "dropout: float = 0.1):\n        self.encoder = nn.LSTM(dim, hidden_dim, num_layers=num_layers, "
    "dropout=dropout)\n",
])
def test_a_value_that_crosses_a_boundary_left_at_its_default(tmp_path, model):
    _model_package(tmp_path, "")
    (tmp_path / "pkg" / "gru.py").write_text(model)
    assert _codes(tmp_path, "pkg/gru.py", "ASC103") == []


@pytest.mark.parametrize("caller, init", [
    # near misses: a caller that turns it on, or passes what only it knows (its own ``**kwargs``, a variable)
    ("from .gru import GRU\n\n\ndef build(h):\n    return GRU(h, encoder_dropout=0.1)\n", ""),
    ("from .gru import GRU\n\n\ndef build(h, **kwargs):\n    return GRU(h, **kwargs)\n", ""),
    ("from .gru import GRU\n\n\ndef build(h, p):\n    return GRU(h, 2, p)\n", ""),
    # a subclass hands its own value to ``super().__init__``; a public class is built by users
    ("from .gru import GRU\n\n\nclass Deep(GRU):\n    def __init__(self, h):\n"
     "        super().__init__(h, encoder_dropout=0.3)\n", ""),
    ("", "from .gru import GRU\n"),
    # a call through a dotted path to the module, which no import binds, or through ``partial``
    ("import pkg as p\n\n\ndef build(h):\n    return p.gru.GRU(h, encoder_dropout=0.3)\n", ""),
    ("from functools import partial\n\nfrom .gru import GRU\n\nmake = partial(GRU, encoder_dropout=0.3)\n", ""),
])
def test_near_miss_a_parameter_some_call_may_turn_on_is_reported(tmp_path, caller, init):
    _model_package(tmp_path, caller, init)
    assert _codes(tmp_path, "pkg/gru.py", "ASC103") == [8]


def test_a_module_named_as_its_function_is_imported_as_the_module(tmp_path):
    # nemo 2.x asr/modules/rnnt.py ``from nemo.collections.common.parts import rnn`` and ``rnn.rnn(...)``
    package = tmp_path / "pkg"
    (package / "parts").mkdir(parents=True)
    for init in (package / "__init__.py", package / "parts" / "__init__.py"):
        init.write_text("")
    (package / "parts" / "rnn.py").write_text("def rnn(n, proj_size=0):\n    return n\n")
    (package / "decoder.py").write_text("from pkg.parts import rnn\n\n\ndef build(n):\n    return rnn.rnn(n, 4)\n")
    calls = project.calls_elsewhere(str(package / "parts" / "rnn.py"), "rnn")
    assert [call.lineno for call in calls] == [5]


def test_near_miss_a_package_too_large_to_read_leaves_the_parameter_unknown(tmp_path, monkeypatch):
    _model_package(tmp_path, "")
    monkeypatch.setattr(project, "MAX_MODULES", 1)
    project._modules.cache_clear()
    assert _codes(tmp_path, "pkg/gru.py", "ASC103") == [8]


@pytest.mark.parametrize("model, line", [
    # near misses in the file itself: a registered class (a configuration builds it), a subclass, a ``partial``,
    # ``self.x`` assigned again
    (GRU_MODEL.replace("class GRU", "@MODELS.register_module()\nclass GRU"), 9),
    (GRU_MODEL + "\n\nclass DeepGRU(GRU):\n    pass\n", 8),
    ("from functools import partial\n" + GRU_MODEL + "\n\nmake = partial(GRU, encoder_dropout=0.3)\n", 9),
    (GRU_MODEL + "\n    def more(self):\n        self.encoder_dropout = 0.3\n", 8),
])
def test_near_miss_a_class_the_file_may_build_with_another_value_is_reported(tmp_path, model, line):
    _model_package(tmp_path, "")
    (tmp_path / "pkg" / "gru.py").write_text(model)
    assert _codes(tmp_path, "pkg/gru.py", "ASC103") == [line]


# coqui 0.27.2 utils/measures.py:1-15 and models/tacotron2.py:355: a branch under a flag that every call in the package
# leaves at its default; espnet 202511 gan_svs/uhifigan/sine_generator.py:66-101 and vits/generator.py:251: the
# ``else`` of a test of ``self.flag_for_pulse``, which the one construction leaves at False (ASC304)
MEASURES = """\
import torch


def alignment_diagonal_score(alignments, binary=False):
    maxs = alignments.max(dim=1)[0]
    if binary:
        maxs[maxs > 0] = 1
    return maxs.mean(dim=1).mean(dim=0).item()


class SineGen(torch.nn.Module):
    def __init__(self, sample_rate, flag_for_pulse=False):
        super().__init__()
        self.flag_for_pulse = flag_for_pulse

    def forward(self, rad_values, u_loc):
        if not self.flag_for_pulse:
            sines = torch.sin(torch.cumsum(rad_values, dim=1))
        else:
            tmp_cumsum = torch.cumsum(rad_values, dim=1)
            tmp_cumsum[u_loc < 1] = 0.0
            sines = torch.cos(tmp_cumsum)
        return sines
"""
_SCORES = "from .measures import SineGen, alignment_diagonal_score\n\n\ndef log(outputs, fs):\n"


def test_a_branch_the_values_every_call_passes_never_take_is_silent(tmp_path):
    _write_package(tmp_path, "", {"measures.py": MEASURES, "tacotron.py": _SCORES
                                  + "    return alignment_diagonal_score(outputs), SineGen(sample_rate=fs)\n"})
    assert _codes(tmp_path, "pkg/measures.py", "ASC304") == []


@pytest.mark.parametrize("caller, init", [
    # near misses: a call that turns the flags on; no call in the package at all (a user's configuration may build
    # it: torchgeo 0.8.1 datamodules/chesapeake.py:146, ``class_set``); a public function and class
    (_SCORES + "    return alignment_diagonal_score(outputs, binary=True), SineGen(fs, flag_for_pulse=True)\n", ""),
    ("", ""),
    (_SCORES + "    return alignment_diagonal_score(outputs), SineGen(sample_rate=fs)\n",
     "from .measures import SineGen, alignment_diagonal_score\n"),
])
def test_near_miss_a_branch_some_value_may_take_is_reported(tmp_path, caller, init):
    _write_package(tmp_path, init, {"measures.py": MEASURES, "tacotron.py": caller})
    assert _codes(tmp_path, "pkg/measures.py", "ASC304") == [7, 21]


# mmagic 1.2.0 editors/stable_diffusion/vae.py:261-345, 384-451, 617-624: ``__init__`` computes ``self.num_heads`` from
# a parameter that both constructions set to None (not the default, 1), so the ``num_heads > 1`` branch never runs
VAE = """\
import torch
import torch.nn as nn


class AttentionBlock(nn.Module):
    def __init__(self, channels, num_head_channels=None):
        super().__init__()
        self.num_heads = channels // num_head_channels if num_head_channels is not None else 1
        self.query = nn.Linear(channels, channels)
        self.key = nn.Linear(channels, channels)

    def forward(self, x):
        query, key = self.query(x), self.key(x)
        if self.num_heads > 1:
            return torch.matmul(query, key.transpose(-1, -2))
        return torch.baddbmm(x, query, key)


class UNetMidBlock2D(nn.Module):
    def __init__(self, channels, attn_num_head_channels=1):
        super().__init__()
        self.attention = AttentionBlock(channels, num_head_channels=attn_num_head_channels)


class Encoder(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.mid_block = UNetMidBlock2D(channels, attn_num_head_channels=None)


class Decoder(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.mid_block = UNetMidBlock2D(channels, attn_num_head_channels=None)
"""


@pytest.mark.parametrize("vae, lines", [
    (VAE, []),
    # near misses: a construction that leaves the default (1 head channel: many heads), one that passes another
    # value; ``num_heads`` set again in a method
    (VAE[:VAE.rindex(", attn_num_head_channels=None")] + ")\n", [15]),
    (VAE[:VAE.rindex("None")] + "64)\n", [15]),
    (VAE.replace("        return torch.baddbmm", "        self.num_heads = 2\n        return torch.baddbmm"), [15]),
    # a constant ``__init__`` stores: another module may change it (yolov5 7.0 export.py:720, ``m.export = True``)
    (VAE.replace("channels // num_head_channels if num_head_channels is not None else 1", "1"), [15]),
])
def test_a_branch_a_value_init_computes_never_takes_is_silent(tmp_path, vae, lines):
    _write_package(tmp_path, "", {"vae.py": vae})
    assert _codes(tmp_path, "pkg/vae.py", "ASC303") == lines


# litgpt 0.5.13 config.py:87 and model.py:506-508, 1176-1206: a configuration field that no configuration sets, and
# the function only its branch calls
LITGPT_CONFIG = """\
from dataclasses import dataclass


@dataclass
class Config:
    n_head: int = 8
    rope_interleave: bool = False
"""
LITGPT_MODEL = """\
import torch


def apply_rope(x, cos, sin):
    half = x.size(-1) // 2
    x1 = x[..., :half]
    x2 = x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin


def apply_rope_interleave(x, cos, sin):
    half = x.size(-1) // 2
    x1 = x[..., :half]
    x2 = x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def forward(self, q, cos, sin):
        if self.config.rope_interleave:
            return apply_rope_interleave(q, cos, sin)
        return apply_rope(q, cos, sin)
"""


@pytest.mark.parametrize("extra, lines", [
    ({}, [8]),
    # near misses: a configuration that sets the field (a keyword, a YAML key, a store), a project that names the
    # function elsewhere (an import), a call outside the branch, a second binding of the field
    ({"pkg/configs.py": "configs = [dict(name='x', rope_interleave=True)]\n"}, [8, 16]),
    ({"configs/x.yaml": "rope_interleave: true\n"}, [8, 16]),
    ({"pkg/train.py": "def setup(config):\n    config.rope_interleave = True\n"}, [8, 16]),
    ({"pkg/train.py": "class Setup:\n    def __init__(self):\n        self.rope_interleave: bool = True\n"}, [8, 16]),
    ({"pkg/other.py": "from .model import apply_rope_interleave\n"}, [8, 16]),
    ({"pkg/model.py": LITGPT_MODEL + "\n\ndef mix(q, cos, sin):\n    return apply_rope_interleave(q, cos, sin)\n"},
     [8, 16]),
    ({"pkg/config.py": LITGPT_CONFIG + "\n\nclass Gemma(Config):\n    rope_interleave: bool = True\n"}, [8, 16]),
    # a function's local of that name, no class's field
    ({"pkg/config.py": LITGPT_CONFIG.replace("    rope_interleave: bool = False\n", "\n\ndef defaults():\n"
                                             "    rope_interleave: bool = False\n    return 0\n")}, [8, 16]),
])
def test_a_function_only_an_unset_field_calls_is_silent(tmp_path, extra, lines):
    _write_package(tmp_path, "", {"config.py": LITGPT_CONFIG, "model.py": LITGPT_MODEL})
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    for rel, text in extra.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert _codes(tmp_path, "pkg/model.py", "ASC304") == lines


def test_near_miss_a_field_is_unknown_without_a_project(tmp_path):
    _write_package(tmp_path, "", {"config.py": LITGPT_CONFIG, "model.py": LITGPT_MODEL})
    assert _codes(tmp_path, "pkg/model.py", "ASC304") == [8, 16]


# coqui-tts 0.27.2 tts/layers/xtts/stream_generator.py:466-473: a library module's ``__main__`` block tries the
# module out on a model of its own; gpt.py imports the module
STREAM_GENERATOR = """\
import torch


class NewGenerationMixin:
    pass


if __name__ == "__main__":
    model = build()
{reads}    model = model.to("cuda:0")
"""


def _stream_package(tmp_path: Path, importer: str, reads: str = "") -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "stream_generator.py").write_text(STREAM_GENERATOR.format(reads=reads))
    (package / "gpt.py").write_text(importer)


@pytest.mark.parametrize("importer", [
    "from .stream_generator import NewGenerationMixin\n",
    "from pkg.stream_generator import NewGenerationMixin\n",
    "from . import stream_generator\n",
    "import pkg.stream_generator\n",
])
def test_the_main_block_of_a_module_the_package_imports_is_a_self_check(tmp_path, importer):
    _stream_package(tmp_path, importer)
    assert _lint(tmp_path, "pkg/stream_generator.py") == []


@pytest.mark.parametrize("importer, reads", [
    # near misses: no module imports it (a program of the package: coqui-tts 0.27.2 bin/compute_attention_masks.py),
    # another module of the same name is imported, the block reads its command line
    ("import torch\n", ""),
    ("from .models.stream_generator import NewGenerationMixin\n", ""),
    ("from .stream_generator import NewGenerationMixin\n", "    args = parser.parse_args()\n"),
    ("from .stream_generator import NewGenerationMixin\n", "    path = sys.argv[1]\n"),
])
def test_near_miss_the_main_block_of_a_program_is_reported(tmp_path, importer, reads):
    _stream_package(tmp_path, importer, reads)
    assert _lint(tmp_path, "pkg/stream_generator.py") == [(10 + bool(reads), "ASC202")]


# coqui-tts 0.27.2 bin/train_encoder.py:37-39: a figure at the top of a program that only a print reads
TRAIN_ENCODER = "import torch\nnum_gpus = torch.cuda.device_count()\nprint(' > Number of GPUs: ', num_gpus)\n"


@pytest.mark.parametrize("importer, expected", [
    ("import torch\n", []),
    # near miss: another module imports the module, and may read the name
    ("from .train_encoder import num_gpus\n", [2]),
])
def test_a_name_at_the_top_of_a_program_only_shown(tmp_path, importer, expected):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train_encoder.py").write_text(TRAIN_ENCODER)
    (package / "trainer.py").write_text(importer)
    assert _codes(tmp_path, "pkg/train_encoder.py", "ASC201") == expected


# mmpose 1.3.2 .mim/tools/misc/keypoints2coco_without_mmdet.py: a tool of the mmpose 0.x era, whose
# ``from mmpose.apis import init_pose_model`` fails on the package it ships with
SCRIPT = "import torch\n{imports}\nmodel = build()\nmodel.cuda()\n"


def _tool_project(tmp_path: Path, imports: str, files: Dict[str, str] = None) -> Path:
    (tmp_path / "setup.py").write_text("")
    layout = {"pkg/__init__.py": "", "pkg/apis/__init__.py": "from .inference import init_model\n",
              "pkg/apis/inference.py": "def init_model(config):\n    return config\n",
              "pkg/models/__init__.py": "from .backbones import *  # noqa: F401,F403\n",
              "pkg/models/backbones.py": "__all__ = ['ResNet']\nclass ResNet:\n    pass\n",
              "tools/misc/tool.py": SCRIPT.format(imports=imports), **(files or {})}
    for rel, text in layout.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("imports", [
    "from pkg.apis import init_model, init_pose_model",  # a name the package does not bind
    "from pkg.localization import load_proposals",  # a module gone from the package (mmaction2 1.2.0)
    "from pkg.models import ResNet, TopDown",  # not bound by the module nor by what it star-imports
])
def test_a_script_whose_import_of_its_own_package_fails_is_left_out(tmp_path, imports):
    root = _tool_project(tmp_path, imports)
    assert _codes(root, "tools/misc/tool.py", "ASC202") == []


@pytest.mark.parametrize("imports, files", [
    ("from pkg.apis import init_model", {}),
    ("from pkg.models import ResNet", {}),  # bound by a module the package star-imports
    ("from pkg import apis", {}),  # a submodule
    ("try:\n    from pkg.apis import init_pose_model\nexcept ImportError:\n    pass", {}),  # may be meant to fail
    # a module beside the script is found first (mmagic 1.2.0 .mim/tools/gui/utils.py)
    ("from utils import layout2widget", {"utils/__init__.py": "", "tools/misc/utils.py": "layout2widget = 1\n"}),
    # modules that may bind names they never spell: a module __getattr__, a star import from outside the package
    ("from pkg.lazy import anything", {"pkg/lazy.py": "def __getattr__(name):\n    return name\n"}),
    ("from pkg.nn import Linear", {"pkg/nn.py": "from torch.nn import *  # noqa: F403\n"}),
    ("from pkg.fast import kernel", {"pkg/fast.cpython-311-x86_64-linux-gnu.so": ""}),  # a compiled module
    # modules a build writes, absent from a source tree: an extension not yet compiled, a generated version file
    ("from pkg._ext import kernel", {}),
    ("from pkg.version import __version__", {}),
])
def test_near_miss_a_script_whose_imports_may_work_is_linted(tmp_path, imports, files):
    root = _tool_project(tmp_path, imports, files)
    assert _codes(root, "tools/misc/tool.py", "ASC202") == [imports.count("\n") + 4]


def test_near_miss_a_module_of_the_package_is_no_script(tmp_path):
    root = _tool_project(tmp_path, "", {"pkg/old.py": SCRIPT.format(imports="from pkg.apis import init_pose_model")})
    assert _codes(root, "pkg/old.py", "ASC202") == [4]


# f5-tts 1.1.22 runtime/triton_trtllm/benchmark.py:37-46, 207 and model_repo_f5_tts/f5_tts/1/model.py:32-33, 108:
# a TensorRT-LLM benchmark and the Triton model that imports its runtime from the module beside it
TRT_RUNTIME = "import tensorrt as trt\nimport torch\nfrom tensorrt_llm.runtime.session import Session\n"
TRT_MODEL = "import torch\n{imports}\nmodel = torch.nn.Linear(2, 2).cuda()\n"


def _runtime_project(tmp_path: Path, files: Dict[str, str]) -> Path:
    (tmp_path / "setup.py").write_text("")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("files, rel", [
    ({"runtime/benchmark.py": TRT_RUNTIME + "torch.cuda.set_device(0)\n"}, "runtime/benchmark.py"),
    ({"runtime/model_repo/1/f5_tts_trtllm.py": TRT_RUNTIME,
      "runtime/model_repo/1/model.py": TRT_MODEL.format(imports="from f5_tts_trtllm import F5TTS")},
     "runtime/model_repo/1/model.py"),
    # through a module of its package, relative or absolute (nemo 2.5.0 export/trt_llm/ imports tensorrt_llm)
    ({"pkg/__init__.py": "", "pkg/export/__init__.py": "", "pkg/export/trt_llm.py": TRT_RUNTIME,
      "pkg/export/run.py": TRT_MODEL.format(imports="from .trt_llm import build")}, "pkg/export/run.py"),
    ({"pkg/__init__.py": "", "pkg/export/__init__.py": "", "pkg/export/trt_llm.py": TRT_RUNTIME,
      "pkg/export/run.py": TRT_MODEL.format(imports="import pkg.export.trt_llm")}, "pkg/export/run.py"),
    # top-level imports on indented lines, which the test before parsing the module beside it must not pass over: in
    # a top-level ``with``, after a ``;`` that ends a bracketed line, on a line continued by a backslash
    *(({"pkg/__init__.py": "", "pkg/trt_llm.py": runtime,
        "pkg/run.py": TRT_MODEL.format(imports="from .trt_llm import build")}, "pkg/run.py")
      for runtime in ("import warnings\nwith warnings.catch_warnings():\n    import tensorrt_llm\n",
                      "x = (1,\n     2); import tensorrt\n", "import os, \\\n    tensorrt\n")),
])
def test_a_module_of_an_nvidia_runtime_is_left_out(tmp_path, files, rel):
    root = _runtime_project(tmp_path, files)
    assert [f for f in engine.lint(ast.parse(files[rel]), files[rel].splitlines(keepends=True), rel,
                                   Config(default_version(), root=str(root)))] == []


@pytest.mark.parametrize("files", [
    # guarded: an optional export (yolov5 7.0.14 export.py:270-278 imports tensorrt in a try inside export_engine)
    {"pkg/__init__.py": "", "pkg/model.py": TRT_MODEL.format(imports="try:\n    import tensorrt as trt\n"
                                                                     "except ImportError:\n    trt = None")},
    {"pkg/__init__.py": "", "pkg/model.py": TRT_MODEL.format(imports="def build():\n    import tensorrt as trt")},
    # a module of the package that imports the runtime only in a function
    {"pkg/__init__.py": "", "pkg/export.py": "def build():\n    import tensorrt_llm\n",
     "pkg/model.py": TRT_MODEL.format(imports="from .export import build")},
    # a module of another package, not the project's (Python finds the installed one)
    {"pkg/__init__.py": "", "other/__init__.py": "", "other/trt_llm.py": TRT_RUNTIME,
     "pkg/model.py": TRT_MODEL.format(imports="from other.trt_llm import build")},
    # the Triton python backend alone runs on any host Triton serves from
    {"pkg/__init__.py": "", "pkg/model.py": TRT_MODEL.format(imports="import triton_python_backend_utils as pb_utils")},
])
def test_near_miss_a_module_that_may_run_without_the_runtime_is_linted(tmp_path, files):
    root = _runtime_project(tmp_path, files)
    assert _codes(root, "pkg/model.py", "ASC202") == [files["pkg/model.py"].count("\n")]
