"""The framework table ASC202/ASC204 read: in sync with its facts, and each decision traced to a source line."""
from __future__ import annotations

import copy
import json

from flake8_ascend.data import load_frameworks
from conftest import load_tool


def _builder():
    return load_tool("build_frameworks")


def _facts():
    builder = _builder()
    return json.loads(builder.FACTS.read_text(encoding="utf-8"))


def test_packaged_table_matches_a_rebuild():
    assert _builder().main(["--check"]) == 0, "run tools/build_frameworks.py"


def test_mmengine_dist_cfg_is_chosen_by_the_launcher():
    table = load_frameworks()
    assert "mmengine/dist/utils.py:117" in table["backend_config_keys"]["dist_cfg"]  # backend='hccl' on an NPU
    assert "mmengine/runner/runner.py" in table["backend_config_keys"]["dist_cfg"]
    assert table["backend_chosen_on_npu"]["mmengine.dist.init_dist"]["keyword"] == "backend"


def test_a_launcher_that_keeps_the_given_backend_quiets_nothing():
    """mmengine's mpi and slurm launchers pass the given backend on: only 'pytorch' decides for itself."""
    facts = _facts()
    launchers = facts["facts"]["mmengine"]["launchers"]
    assert launchers["pytorch"]["npu_backend"] == "hccl"
    assert launchers["mpi"]["npu_backend"] is None and launchers["slurm"]["npu_backend"] is None
    changed = copy.deepcopy(facts)
    changed["facts"]["mmengine"]["launchers"]["pytorch"]["npu_backend"] = None
    built = _builder().build(changed)
    assert "dist_cfg" not in built["backend_config_keys"]
    assert "mmengine.dist.init_dist" not in built["backend_chosen_on_npu"]


def test_explicit_backends_of_accelerate_and_deepspeed_stay_findings():
    """accelerate raises for a backend other than the one it chose (state.py:197); deepspeed uses it as given."""
    table = load_frameworks()
    assert {"backend", "dist_backend", "ddp_backend"} <= set(table["backend_keywords"])
    assert "state.py:197" in table["backend_keywords"]["ddp_backend"]
    assert not any(name.startswith(("accelerate.", "transformers.", "deepspeed."))
                   for name in table["backend_chosen_on_npu"])


def test_lightning_accelerators():
    table = load_frameworks()
    assert set(table["cuda_accelerators"]) == {"cuda", "gpu"}  # not "auto", which may pick the CPU
    assert {"lightning.Fabric", "lightning.fabric.Fabric", "lightning_fabric.Fabric", "lightning.Trainer",
            "pytorch_lightning.Trainer"} <= set(table["accelerator_calls"])


def test_step_methods_are_traced_to_the_loops_that_call_them():
    """HF Trainer: training_step from its step loop, compute_loss from training_step; Lightning: training_step
    through the strategy hook. validation_step and prediction_step are no step methods."""
    table = load_frameworks()["step_methods"]
    trainer = table["transformers.Trainer"]
    assert set(trainer) == {"training_step", "compute_loss"}
    assert "transformers/trainer.py:" in trainer["compute_loss"] and "Trainer.training_step" in trainer["compute_loss"]
    for spelling in ("lightning.LightningModule", "pytorch_lightning.LightningModule",
                     "lightning.pytorch.LightningModule"):
        assert set(table[spelling]) == {"training_step"}
        assert "lightning/pytorch/strategies/strategy.py:" in table[spelling]["training_step"]
    facts = _facts()["facts"]["lightning"]["step_methods"]
    loops = facts["lightning.pytorch.core.module.LightningModule"]["training_step"]["loops"]
    assert {fact["file"] for fact in loops} == {"lightning/pytorch/loops/optimization/automatic.py",
                                                "lightning/pytorch/loops/optimization/manual.py"}


def test_mmcv_dist_params_is_chosen_by_the_launcher():
    """mmcv 1.x's pytorch launcher initialises 'hccl' under IS_NPU_AVAILABLE; mmdet 2.x's tools feed it dist_params."""
    table = load_frameworks()
    assert "mmcv/runner/dist_utils.py:66" in table["backend_config_keys"]["dist_params"]
    assert "mmdet/.mim/tools/train.py:172" in table["backend_config_keys"]["dist_params"]
    assert table["backend_chosen_on_npu"]["mmcv.runner.init_dist"]["keyword"] == "backend"
    changed = copy.deepcopy(_facts())
    changed["facts"]["mmcv"]["launchers"]["pytorch"]["npu_backend"] = None
    built = _builder().build(changed)
    assert "dist_params" not in built["backend_config_keys"] and "mmcv.runner.init_dist" not in \
        built["backend_chosen_on_npu"]
    assert "dist_cfg" in built["backend_config_keys"]  # mmengine's own fact is independent
