"""Dead code (detect/unused.py): no finding in a top-level function that no text of its project names."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from flake8_ascend import engine
from flake8_ascend.config import Config
from flake8_ascend.data import default_version
from flake8_ascend.semantic import project

# gluonts nursery/daf/tslib/engine/distributed.py:101-108: init_distributed, which nothing in gluonts calls
DEAD = """\
import torch.distributed as dist


def init_distributed(rank, world_size, port):
    dist.init_process_group(
        backend="nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        world_size=world_size,
        rank=rank,
    )
"""


def _lint(root: Path, rel: str, text: str = DEAD, marker: str = "pyproject.toml", linted_from: Path = None):
    """The (line, code) of the findings in the module ``rel`` of the project folder ``root`` (which holds
    ``marker``), written from ``text``."""
    if marker and not (root / marker).exists():
        (root / marker).mkdir() if marker.endswith("-info") else (root / marker).write_text("")
    module = root / rel
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(text)
    config = Config(default_version(), root=str(linted_from or root))
    relative = str(module.relative_to(linted_from or root))
    return [(f.line, f.code) for f in engine.lint(ast.parse(text), text.splitlines(keepends=True), relative, config)]


@pytest.mark.parametrize("marker", ["pyproject.toml", "setup.py", "setup.cfg", ".git", "pkg-0.1.dist-info",
                                    "pkg.egg-info"])
def test_a_function_nothing_in_the_project_names_is_silent(tmp_path, marker):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .engine import is_master\n")
    (tmp_path / "pkg" / "train.py").write_text("from .engine import is_master\n\nis_master()\n")
    assert _lint(tmp_path, "pkg/engine.py", marker=marker) == []


def test_near_miss_a_folder_that_says_no_project_begins_there_is_not_read(tmp_path):
    # a few files copied out of their project: their callers may be elsewhere
    assert _lint(tmp_path, "pkg/engine.py", marker="") == [(6, "ASC204")]


def test_a_private_function_nothing_names_is_silent(tmp_path):
    # torchtune training/precision.py: _set_float32_precision has no caller
    text = ("import torch\n\n\ndef _set_float32_precision(precision='high'):\n"
            "    torch.backends.cudnn.allow_tf32 = precision != 'highest'\n")
    assert _lint(tmp_path, "pkg/precision.py", text) == []


@pytest.mark.parametrize("rel,text", [
    ("pkg/launch.py", "from pkg.engine import init_distributed\n\ninit_distributed(0, 1, 29500)\n"),
    ("pkg/__init__.py", "from .engine import init_distributed\n"),  # a re-export
    ("pkg/__init__.py", "__all__ = ['init_distributed']\n"),
    ("pkg/run.py", "from . import engine\n\nengine.init_distributed(0, 1, 29500)\n"),
    # a config that names it: speechbrain's YAML, an mm* config's string, an entry point
    ("recipes/train.yaml", "setup: !name:pkg.engine.init_distributed\n"),
    ("configs/ddp.py", "launcher = dict(type='init_distributed')\n"),
    ("pyproject.toml", "[project.scripts]\nddp = 'pkg.engine:init_distributed'\n"),
    ("pkg-0.1.dist-info/entry_points.txt", "[console_scripts]\nddp = pkg.engine:init_distributed\n"),
    ("README.md", "Call `init_distributed` before training.\n"),
])
def test_near_miss_a_function_the_project_names_is_reported(tmp_path, rel, text):
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text(text)
    assert _lint(tmp_path, "pkg/engine.py") == [(6, "ASC204")]


@pytest.mark.parametrize("text", [
    DEAD + "\n\nif __name__ == '__main__':\n    init_distributed(0, 1, 29500)\n",  # the script's own main block
    DEAD + "\n\nSETUPS = {'ddp': init_distributed}\n",
    "from pkg.registry import register\n\n\n@register\n" + DEAD.split("\n\n\n", 1)[1],  # a decorator may register it
    DEAD.replace("def init_distributed", "def __getattr__"),  # Python calls a module's dunders
    DEAD + "\n\ndef setup(name):\n    return globals()[name]\n",  # looked up by a name built at run time
    # a method of a framework's subclass: the framework may call it by a name the project never spells
    "import torch.distributed as dist\nimport torch.nn as nn\n\n\nclass Launcher(nn.Module):\n"
    "    def init_distributed(self):\n        dist.init_process_group(backend='nccl')\n",
])
def test_near_miss_a_function_its_own_module_may_run_is_reported(tmp_path, text):
    findings = _lint(tmp_path, "pkg/engine.py", text)
    assert [code for _, code in findings] == ["ASC204"]


def test_near_miss_torch_hub_calls_a_hubconf_function_by_name(tmp_path):
    assert _lint(tmp_path, "hubconf.py") == [(6, "ASC204")]


def test_near_miss_a_default_runs_when_the_module_is_imported(tmp_path):
    # a default is computed when Python runs the ``def``, called or not
    text = "import torch\n\n\ndef pick(device=torch.cuda.current_device()):\n    return device\n"
    assert [code for _, code in _lint(tmp_path, "pkg/devices.py", text)] == ["ASC201"]


def test_the_project_is_the_outermost_folder_that_says_one_begins(tmp_path):
    # linting pkg/ alone, which builds an extension with its own setup.py (easyocr 1.7.2 DBNet/assets/ops/dcn/):
    # a script beside it in the repository still calls the function
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "setup.py").write_text("")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "ddp.py").write_text("from pkg.engine import init_distributed\n")
    assert _lint(tmp_path, "pkg/engine.py", linted_from=tmp_path / "pkg") == [(6, "ASC204")]


def test_a_repository_ends_the_project_where_its_git_folder_is(tmp_path):
    # a project checked out inside another repository (a dotfiles repository in the home folder): the outer one's
    # words are not this project's, however it names the function
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "notes.py").write_text("from repo.pkg.engine import init_distributed\n")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    assert _lint(tmp_path / "repo", "pkg/engine.py", marker="") == []


def test_near_miss_a_project_too_large_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(project, "MAX_PROJECT_FILES", 0)
    project._texts.cache_clear()
    project.word_count.cache_clear()
    assert _lint(tmp_path, "pkg/engine.py") == [(6, "ASC204")]
    project._texts.cache_clear()
    project.word_count.cache_clear()


def test_the_project_is_read_once(tmp_path, monkeypatch):
    project._texts.cache_clear()
    _lint(tmp_path, "pkg/engine.py")
    _lint(tmp_path, "pkg/other.py", DEAD.replace("init_distributed", "init_group"))
    assert project._texts.cache_info().misses == 1


# oumi 0.9 performance/telemetry.py:56-74: a debug flag __init__ sets to False, which nothing in the package sets
FLAG = """\
import torch


class TimerContext:
    def __init__(self, name):
        self.name = name
        self.cuda_synchronize: bool = False

    def __enter__(self):
        if self.cuda_synchronize:
            torch.cuda.synchronize()
        return self
"""
# mmdet 3.1.0 task_modules/assigners/center_region_assigner.py:107-114,271: a parameter stored on self
STORED = """\
import torch


class CenterRegionAssigner:
    def __init__(self, pos_scale, foreground_dominate: bool = False):
        self.pos_scale = pos_scale
        self.foreground_dominate = foreground_dominate

    def assign(self, x):
        if self.foreground_dominate:
            torch.cuda.synchronize()
        return x
"""
# oumi 0.9 core/distributed.py:610-632, set_random_seeds(seed, set_deterministic=False)
PARAMETER = """\
import torch


def set_random_seeds(seed=42, set_deterministic=False):
    torch.manual_seed(seed)
    if set_deterministic:
        torch.cuda.synchronize()
"""


CALLER = ("from pkg.engine import CenterRegionAssigner, set_random_seeds\n\nset_random_seeds(0)\n"
          "CenterRegionAssigner(0.2).assign(1)\n")


def _project(root: Path, rel: str = "pkg/train.py", other: str = CALLER) -> None:
    """A package whose train.py calls the function and builds the class (``CALLER``), then ``other`` at ``rel``."""
    for path, text in (("pkg/__init__.py", ""), ("pkg/train.py", CALLER), (rel, other)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


@pytest.mark.parametrize("text", [FLAG, STORED, PARAMETER, PARAMETER.replace("set_deterministic=False", "k=None")
                                  .replace("if set_deterministic:", "if k is not None and k < seed:")])
def test_a_branch_only_a_value_nothing_in_the_project_names_takes_is_silent(tmp_path, text):
    _project(tmp_path)
    assert _lint(tmp_path, "pkg/engine.py", text) == []


@pytest.mark.parametrize("text,rel,other", [
    # a caller or a config names it, whatever value it gives
    (FLAG, "pkg/debug.py", "def timed(t):\n    t.cuda_synchronize = True\n"),
    (STORED, "configs/retina.py", "assigner = dict(type='CenterRegionAssigner', foreground_dominate=False)\n"),
    (STORED, "pkg/.mim/configs/retina.py", "assigner = dict(foreground_dominate=True)\n"),  # mim's copy of configs
    (PARAMETER, "pkg/train.py", "from pkg.engine import set_random_seeds\n\nset_random_seeds(0, set_deterministic=x)\n"),
    # a caller passes it by position (oumi 0.9 cli/train.py:221) or may through **kwargs
    (PARAMETER, "pkg/train.py", "from pkg.engine import set_random_seeds\n\nset_random_seeds(0, cfg.deterministic)\n"),
    (PARAMETER, "pkg/train.py", "from pkg.engine import set_random_seeds\n\nset_random_seeds(**cfg)\n"),
    # a class no call builds: a registry or a user's configuration builds it (llm-foundry 0.22.0
    # callbacks/monolithic_ckpt_callback.py:44-117, ``keep_optimizers``)
    (STORED, "pkg/train.py", "from pkg.engine import CenterRegionAssigner\n\nASSIGNERS = [CenterRegionAssigner]\n\n\n"
     "def run(assigner, x):\n    return assigner.assign(x)\n"),
    # a method's parameter: its callers are not known by name (mmagic 1.2.0 disco_diffusion/guider.py:336-369,
    # ``compute_prompt_stats(..., fuzzy_prompt=False)``, a user's option)
    (STORED.replace("def assign(self, x):", "def assign(self, x, foreground_dominate=False):")
     .replace("if self.foreground_dominate:", "if foreground_dominate:"), "pkg/train.py", CALLER),
    # a default that takes the branch
    (PARAMETER.replace("set_deterministic=False", "set_deterministic=True"), "pkg/train.py", CALLER),
])
def test_near_miss_a_branch_a_caller_or_config_may_take_is_reported(tmp_path, text, rel, other):
    _project(tmp_path, rel, other)
    assert [code for _, code in _lint(tmp_path, "pkg/engine.py", text)][-1:] == ["ASC201"]


# oumi 0.9 performance/telemetry.py:192-245: TelemetryTracker.log_gpu_memory, which nothing in oumi calls
TRACKER = """\
import logging
from typing import Callable

import torch

LOGGER = logging.getLogger(__name__)


class TelemetryTracker:
    def __init__(self):
        self.gpu_memory = []

    def log_gpu_memory(self, custom_logger: Callable | None = None) -> None:
        if not torch.cuda.is_available():
            LOGGER.debug("CUDA is not available. GPU memory usage cannot be logged.")
            return

        memory_allocated = torch.cuda.memory_allocated() / 1024**2  # Convert to MiB
        memory_reserved = torch.cuda.memory_reserved() / 1024**2  # Convert to MiB
        memory_info = {"allocated": memory_allocated, "reserved": memory_reserved}

        if custom_logger:
            custom_logger(memory_info)
        else:
            self.gpu_memory.append(memory_info)

    def timer(self, name):
        return name
"""


def test_a_method_nothing_in_the_project_names_is_silent(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(
        "from .telemetry import TelemetryTracker\n\nTelemetryTracker().timer('x')\n")
    assert _lint(tmp_path, "pkg/telemetry.py", TRACKER) == []


@pytest.mark.parametrize("text,other", [
    (TRACKER, "from .telemetry import TelemetryTracker\n\nTelemetryTracker().log_gpu_memory()\n"),
    (TRACKER, "callbacks:\n  - log_gpu_memory\n"),  # a config or document that names it
    # a class of a framework, or derived from one in another module: a hook may be called by a name only the
    # framework spells
    (TRACKER.replace("class TelemetryTracker:", "class TelemetryTracker(torch.nn.Module):"), ""),
    (TRACKER.replace("import torch\n", "import torch\n\nfrom .base import Tracker\n").replace(
        "class TelemetryTracker:", "class TelemetryTracker(Tracker):"),
     "import torch\n\n\nclass Tracker(torch.nn.Module):\n    pass\n"),
    (TRACKER.replace("class TelemetryTracker:", "class TelemetryTracker(Base):").replace(
        "import torch\n", "import torch\n\n\nclass Base(torch.nn.Module):\n    pass\n"), ""),
    # a registry's decorator, a metaclass, a decorated method: each may call it by name
    (TRACKER.replace("class TelemetryTracker:", "@TRACKERS.register_module()\nclass TelemetryTracker:"), ""),
    (TRACKER.replace("class TelemetryTracker:", "class TelemetryTracker(metaclass=Registered):"), ""),
    (TRACKER.replace("    def log_gpu_memory", "    @hook\n    def log_gpu_memory"), ""),
    # a static method: a library's users call it on the class (ignite 0.5.5 metrics/accuracy.py:95,
    # ``Accuracy.get_sequence_transform``)
    (TRACKER.replace("    def log_gpu_memory(self, ", "    @staticmethod\n    def log_gpu_memory("), ""),
    # a public method of a class the package exports: its users call it (neuralprophet 0.9.0 forecaster.py:2087,
    # ``NeuralProphet.get_latest_forecast``)
    (TRACKER, "PUBLIC"),
    # its only caller runs: called by a method that is called
    (TRACKER.replace("        return name\n", "        self.log_gpu_memory()\n        return name\n"),
     "from .telemetry import TelemetryTracker\n\nTelemetryTracker().timer('x')\n"),
    # called from the main block of a program: a module nothing imports
    (TRACKER + "\n\nif __name__ == '__main__':\n    TelemetryTracker().log_gpu_memory()\n", ""),
])
def test_near_miss_a_method_that_may_run_is_reported(tmp_path, text, other):
    (tmp_path / "pkg").mkdir()
    init, other = ("from .telemetry import TelemetryTracker\n", "") if other == "PUBLIC" else ("", other)
    for name, source in (("__init__.py", init), ("train.py" if "import" in other or not other else "conf.yaml", other),
                         ("base.py", other)):
        (tmp_path / "pkg" / name).write_text(source)
    assert {code for _, code in _lint(tmp_path, "pkg/telemetry.py", text)} == {"ASC201"}


# effdet 0.4.1 object_detection/matcher.py:36-82: Match.matched_column_indices, called only by
# num_matched_columns, which nothing calls
MATCH = """\
import torch


@torch.jit.script
class Match(object):
    def __init__(self, match_results: torch.Tensor):
        self.match_results = match_results

    def matched_column_indices(self):
        return torch.nonzero(self.match_results > -1).flatten().long()

    def num_matched_columns(self):
        return self.matched_column_indices().numel()

    def matched_column_indicator(self):
        return self.match_results >= 0
"""


def test_a_method_only_dead_code_calls_is_silent(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "assigner.py").write_text(
        "from .matcher import Match\n\n\ndef assign(m):\n    return Match(m).matched_column_indicator()\n")
    assert _lint(tmp_path, "pkg/matcher.py", MATCH) == []


# surya 0.22.1 common/rfdetr/util/misc.py:49-79, 178-212: SmoothedValue.synchronize_between_processes, called only
# by MetricLogger's method of the same name, which nothing calls
SMOOTHED = """\
import torch


class SmoothedValue(object):
    def synchronize_between_processes(self):
        t = torch.tensor([self.count, self.total], dtype=torch.float64, device="cuda")
        self.count = int(t[0].item())


class MetricLogger(object):
    def synchronize_between_processes(self):
        for meter in self.meters.values():
            meter.synchronize_between_processes()
"""


def test_a_method_only_its_namesakes_call_is_silent(tmp_path):
    assert _lint(tmp_path, "pkg/misc.py", SMOOTHED) == []


def test_near_miss_a_namesake_of_a_framework_class_keeps_it_running(tmp_path):
    text = SMOOTHED.replace("class MetricLogger(object):", "class MetricLogger(torch.nn.Module):")
    assert {code for _, code in _lint(tmp_path, "pkg/misc.py", text)} == {"ASC202", "ASC508"}


# s3prl 0.4.17 upstream/lighthubert/lighthubert/functional/sliding_attn.py:453-565: latency(), the benchmark that
# only the module's own main block runs, in a module that modules/scaling_multihead.py imports
LATENCY = """\
import torch


def sliding_attn(q, k, v):
    return q @ k.transpose(-1, -2) @ v


def latency(fn, *args, repeat=10):
    torch.cuda.synchronize()
    for _ in range(repeat):
        fn(*args)
    torch.cuda.synchronize()


if __name__ == "__main__":
    q = torch.randn(2, 8, 16)
    latency(sliding_attn, q, q, q)
"""


def test_a_function_only_the_main_block_of_an_imported_module_calls_is_silent(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "attention.py").write_text("from .sliding_attn import sliding_attn\n")
    assert _lint(tmp_path, "pkg/sliding_attn.py", LATENCY) == [(5, "ASC303")]


def test_near_miss_the_main_block_of_a_program_runs(tmp_path):
    assert _lint(tmp_path, "pkg/sliding_attn.py", LATENCY) == [(5, "ASC303"), (9, "ASC201")]


# s3prl 0.4.17 downstream/enhancement_stft2/expert.py:35, a device no line of s3prl reads; downstream/runner.py:184
# imports each expert module by its name and asks it only for DownstreamExpert
DEVICE = """\
import torch

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


class DownstreamExpert(torch.nn.Module):
    def forward(self, feats):
        return torch.zeros(3).to(feats.device)
"""
RUNNER = """\
import importlib


def get_downstream(name):
    expert = importlib.import_module(f"pkg.{name}.expert")
    return getattr(expert, "DownstreamExpert")()
"""


def test_a_module_level_name_nothing_reads_is_silent(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "runner.py").write_text(RUNNER)
    assert _lint(tmp_path, "pkg/enh/expert.py", DEVICE) == []


@pytest.mark.parametrize("text,other", [
    (DEVICE + "\n\nwindow = torch.ones(4).to(device)\n", ""),  # the module reads it (upstream/log_stft/expert.py:37)
    (DEVICE + "\n\n__all__ = ['device']\n", ""),
    (DEVICE + "\n\ndef pick(name):\n    return globals()[name]\n", ""),
    (DEVICE, "from .enh.expert import device\n"),
    (DEVICE, "from .enh.expert import (\n    DownstreamExpert,\n    device,\n)\n"),
    (DEVICE, "from .enh.expert import *\n\nx = torch.ones(2, device=device)\n"),
    (DEVICE, "from .enh import expert\n\nx = expert.device\n"),
    (DEVICE, "import pkg.enh.expert as e\n\nx = e.device\n"),
    (DEVICE, RUNNER.replace('"DownstreamExpert")()', '"device")')),
    (DEVICE, RUNNER.replace('getattr(expert, "DownstreamExpert")()', "getattr(expert, name)")),
    (DEVICE, RUNNER.replace('getattr(expert, "DownstreamExpert")()', "expert.device")),
])
def test_near_miss_a_module_level_name_that_may_be_read_is_reported(tmp_path, text, other):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "runner.py").write_text(other)
    assert {code for _, code in _lint(tmp_path, "pkg/enh/expert.py", text)} >= {"ASC201", "ASC202"}
