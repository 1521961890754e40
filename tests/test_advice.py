"""Precision (ASC6xx) and performance (ASC5xx) advice: the training-loop definition, edge cases of the
rules, configuration advice once per entry script, the advice CSVs of ascend-analyse, and the curated tables."""
from __future__ import annotations

import ast
import csv
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import run_rules
from flake8_ascend import cli
from flake8_ascend.registry import all_rules, rule_for
from flake8_ascend.rules.precision_amp import _TF32_SWITCHES, FP32_POLICY_APIS, FP32_POLICY_METHODS
import pytest

from flake8_ascend.detect import training
from flake8_ascend.detect.training import Training

REPO = Path(__file__).resolve().parents[1]
ADVICE = REPO / "rules_data" / "sources" / "advice"
ADVICE_CSVS = ("api_performance_advice.csv", "api_precision_advice.csv")


def lines_of(source, code):
    return [f.line for f in run_rules(source, codes=[code])]


def loops_of(source):
    """Line numbers of the loops ``Training`` counts as training loops."""
    tree = ast.parse(textwrap.dedent(source))
    info = Training(tree, textwrap.dedent(source).splitlines())
    return sorted(n.lineno for n in ast.walk(tree) if id(n) in info.loops), info


# -- what a training loop is -----------------------------------------------------------------------
def test_epoch_loop_is_not_a_training_loop_but_the_step_loop_is():
    found, info = loops_of("""
        for epoch in range(3):
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                optimizer.step()
        if __name__ == "__main__":
            pass
    """)
    assert found == [3] and info.is_entry


def test_scheduler_step_and_eval_loops_do_not_make_a_training_loop():
    found, info = loops_of("""
        for x in loader:
            out = model(x)
            scheduler.step()
        while not done:
            done = evaluate()
    """)
    assert found == [] and not info.is_entry


def test_loop_calling_a_step_function_of_the_same_file_is_a_training_loop():
    found, info = loops_of("""
        class Trainer:
            def train_step(self, batch):
                loss = self.model(batch)
                loss.backward()
                self.opt.step()
                return loss

            def fit(self, loader):
                for batch in loader:
                    self.train_step(batch)
    """)
    assert found == [10] and len(info.step_functions) == 1


def test_step_call_names():
    found, _ = loops_of("""
        while True:
            scaler.step(optimizer)
        for g in gens:
            g_opt.step()
        for b in data:
            self.optimizer.step()
        for b in data:
            stepper.step()
    """)
    assert found == [2, 4, 6]


# -- ASC501 edge cases -----------------------------------------------------------------------------
def test_host_sync_in_a_metrics_loop_nested_in_the_step_loop_fires():
    assert lines_of("""
        for x in data:
            loss, parts = f(x)
            loss.backward()
            for name, value in parts.items():
                log[name] = value.item()
    """, "ASC501") == [6]


def test_a_chain_of_host_copies_is_reported_once():
    assert lines_of("""
        for x in data:
            loss = f(x)
            loss.backward()
            arr = loss.detach().cpu().numpy()
            more = loss.to("cpu").tolist()
    """, "ASC501") == [5]  # one finding per chain; the second sync of the step folds into the first ("again on 6")


def test_periodic_else_branch_still_runs_every_step():
    assert lines_of("""
        for i, x in enumerate(data):
            loss = f(x)
            loss.backward()
            if i % 10 == 0:
                print(loss.item())
            else:
                total = loss.item()
    """, "ASC501") == [8]


def test_sync_in_a_while_test_runs_every_step():
    assert lines_of("""
        loss = start()
        while loss.item() > 0.1:
            loss = f()
            loss.backward()
    """, "ASC501") == [3]


def test_a_loss_summed_from_parts_is_a_tensor_and_formatting_it_syncs():
    # ``sum()`` of numbers would be a number; what ``.backward()`` is called on is a tensor
    assert lines_of("""
        for x in data:
            loss = sum(f(x).values())
            loss.backward()
            print("loss %.4f" % loss)
            print("step %d" % step)
            history.append(float(loss))
    """, "ASC501") == [5]  # float(loss) on line 7 is a second sync of the same step: it folds into line 5's


def test_a_periodic_guard_that_continues_leaves_the_rest_of_the_step_periodic():
    assert lines_of("""
        for i, x in enumerate(data):
            loss = f(x)
            loss.backward()
            total = loss.item()
            if i % 10:
                continue
            print(loss.item())
    """, "ASC501") == [5]  # line 5 runs before the guard; line 8 only every tenth step
    assert lines_of("""
        for i, x in enumerate(data):
            loss = f(x)
            loss.backward()
            if i % 10:
                continue
            print(loss.item())
    """, "ASC501") == []


def test_a_guard_that_leaves_after_the_optimizer_step_of_accumulation_is_no_period():
    assert lines_of("""
        for i, x in enumerate(data):
            loss = f(x)
            loss.backward()
            if (i + 1) % accumulation == 0:
                optimizer.step()
                continue
            print(loss.item())
    """, "ASC501") == [8]


def test_numpy_tolist_is_not_a_host_sync():
    assert lines_of("""
        import numpy as np
        for x in data:
            loss = f(x)
            loss.backward()
            ids = np.arange(3).tolist()
    """, "ASC501") == []


# -- import aliases still resolve behind the cheap name filters -----------------------------------
def test_aliased_imports_are_resolved():
    source = """
        import torch
        from torch import float64 as f8
        from torch.nn import Embedding as Emb
        from torch.utils.data import DataLoader as DL
        import gc as collector
        x = torch.zeros(3, dtype=f8)
        e = Emb(10, 4)
        loader = DL(ds, num_workers=2, pin_memory=True)
        for b in loader:
            loss = f(b)
            loss.backward()
            collector.collect()
    """
    assert [(f.code, f.line) for f in run_rules(source, codes=["ASC5", "ASC6"])] == [
        ("ASC508", 7), ("ASC602", 8), ("ASC514", 13)]


# -- configuration advice: once per entry script, on line 1 ---------------------------------------
ENTRY = """\
import torch


def train(loader):
    for x in loader:
        loss = model(x)
        loss.backward()
        optimizer.step()
    for x in loader:
        loss = model(x)
        loss.backward()


if __name__ == "__main__":
    train(make_loader())
"""


def test_configuration_advice_is_reported_once_per_entry_script_on_line_one():
    found = run_rules(ENTRY, codes=["ASC509", "ASC510"])
    assert [(f.code, f.line, f.col) for f in found] == [("ASC509", 1, 0), ("ASC510", 1, 0)]
    assert all(rule_for(code).no_line for code in ("ASC509", "ASC510"))


def test_a_library_file_with_a_training_loop_gets_no_configuration_advice():
    library = ENTRY.split("if __name__")[0]
    assert run_rules(library, codes=["ASC509", "ASC510"]) == []


def test_a_main_guard_inside_a_function_does_not_make_an_entry_script():
    nested = "def main():\n    for x in data:\n        f(x).backward()\n    if __name__ == '__main__':\n        pass\n"
    assert run_rules(nested, codes=["ASC509"]) == []


# -- no duplicate noise with the affinity codes ----------------------------------------------------
def test_advice_stays_off_the_apis_the_affinity_codes_own():
    source = """
        import torch
        import torch.nn as nn
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        sgd = torch.optim.SGD(params, foreach=True)
        layer = nn.Linear(4, 4)
        x[mask] = 0
        y = torch.reshape(x, (2, 2))
        s = torch.matmul(q, k.transpose(-2, -1))
    """
    assert run_rules(source, codes=["ASC5", "ASC6"]) == []


# -- the advice CSVs of ascend-analyse -------------------------------------------------------------
def analyse(folder: Path, out: Path, *args: str):
    stdout, stderr = io.StringIO(), io.StringIO()
    assert cli.main(["-i", str(folder), "-o", str(out), "-q", "--format", "json", *args], out=stdout, err=stderr) == 0, \
        stderr.getvalue()
    report = out / f"{folder.name}_analysis"
    tables = {}
    for name in ADVICE_CSVS:
        with (report / name).open(newline="", encoding="utf-8") as handle:
            tables[name] = list(csv.reader(handle))
    return report, tables


def test_examples_advice_rows_point_at_real_lines(tmp_path):
    examples = REPO / "examples"
    report, tables = analyse(examples, tmp_path, "--extend-select", "ASC404,ASC503,ASC509,ASC510")
    for name, rows in tables.items():
        assert rows[0] == ["File", "Start Line", "End Line", "OP", "Tips"]
        assert len(rows) > 1, f"{name} is empty on examples/"
        for file, start, end, op, tips in rows[1:]:
            assert op and tips
            text = (examples / file).read_text(encoding="utf-8").splitlines()
            if start == "NA":  # launch advice names its entry script
                assert end == "NA" and "__main__" in "".join(text)
                continue
            assert 1 <= int(start) <= int(end) <= len(text) and text[int(start) - 1].strip()
    assert {(r[0], r[3]) for r in tables["api_performance_advice.csv"] if r[1] == "NA"} >= {
        ("yolo_mini/train.py", "torch_npu.npu.set_compile_mode"), ("yolo_mini/train.py", "TASK_QUEUE_ENABLE")}
    items = json.loads((report / "findings.json").read_text(encoding="utf-8"))
    assert {i["code"] for i in items if i["report"] in ADVICE_CSVS} >= {"ASC501", "ASC503", "ASC509", "ASC608"}


def test_two_entry_scripts_give_one_configuration_row_each(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text(ENTRY, encoding="utf-8")
    (project / "finetune.py").write_text(ENTRY, encoding="utf-8")
    (project / "lib.py").write_text(ENTRY.split("if __name__")[0], encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    _, tables = analyse(project, out, "--extend-select", "ASC509,ASC510")
    na_rows = [r for r in tables["api_performance_advice.csv"][1:] if r[1] == "NA"]
    assert sorted((r[0], r[3]) for r in na_rows) == [
        ("finetune.py", "TASK_QUEUE_ENABLE"), ("finetune.py", "torch_npu.npu.set_compile_mode"),
        ("train.py", "TASK_QUEUE_ENABLE"), ("train.py", "torch_npu.npu.set_compile_mode")]
    assert tables["api_performance_advice.csv"][-len(na_rows):] == na_rows  # after the located rows


def test_launch_advice_is_off_unless_named(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text(ENTRY, encoding="utf-8")
    (tmp_path / "out").mkdir()
    _, tables = analyse(tmp_path / "proj", tmp_path / "out")
    assert all(r[1] != "NA" for r in tables["api_performance_advice.csv"][1:])
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "ASC", "train.py"], capture_output=True,
                            text=True, cwd=tmp_path / "proj", timeout=300)
    assert "ASC509" not in flake8.stdout and "ASC510" not in flake8.stdout
    named = subprocess.run([sys.executable, "-m", "flake8", "--extend-select", "ASC509", "train.py"],
                           capture_output=True, text=True, cwd=tmp_path / "proj", timeout=300)
    assert "ASC509" in named.stdout and "ASC510" not in named.stdout


# -- curated tables and the rule registry agree ----------------------------------------------------
def test_advice_codes_route_to_their_csv():
    for rule in all_rules():
        if rule.code[3] in "56":
            assert rule.report.value == ADVICE_CSVS[rule.code[3] == "6"], rule.code


def test_autocast_table_only_names_ops_of_the_npu_fp32_policy():
    policy = json.loads((ADVICE / "npu_autocast_op_lists.json").read_text(encoding="utf-8"))["policy_to_ops"]
    used = set(FP32_POLICY_APIS.values()) | set(FP32_POLICY_METHODS.values())
    assert used <= set(policy["fp32"])
    assert not used & set(policy["lower_precision_fp"])


def test_tf32_table_matches_the_curated_hf32_facts():
    with (ADVICE / "hf32_switches.tsv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert {r["cuda_switch"]: (r["npu_counterpart"], r["npu_default"] == "True") for r in rows} == _TF32_SWITCHES
    assert all(r["source"].strip() for r in rows)


def test_every_expert_advice_trigger_is_accounted_for_once():
    def read(name):
        with (ADVICE / name).open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle, delimiter="\t"))

    triggers = [r["trigger"] for r in read("expert_advice.tsv")]
    coverage = read("coverage.tsv")
    assert [r["trigger"] for r in coverage] == triggers
    codes = {rule.code for rule in all_rules()}
    for row in coverage:
        assert row["decision"].strip()
        named = [c.strip() for c in row["codes"].split(",") if c.strip() != "-"]
        assert all(c in codes and c[3] in "56" for c in named), row


@pytest.mark.parametrize("test,expected", [
    ("grad_norm is None or torch.isfinite(grad_norm)", True),
    ("torch.isfinite(a) and torch.isfinite(b)", True),
    ("not torch.isfinite(grad_norm).all()", False),
    ("torch.isnan(loss).any()", False),
    ("math.isinf(x) and verbose", False),
    # near misses: either side may be a common one
    ("torch.isfinite(a) and step > 10", None),
    ("torch.isnan(loss) or verbose", None),
    ("loss > 10", None),
    ("torch.isfinite(a) or torch.isnan(b)", None),
])
def test_the_branch_of_a_non_finite_value(test, expected):
    """Which side of an ``if`` only a NaN or an infinity takes (ASC501 leaves that skipped step alone)."""
    assert training._finite(ast.parse(test, mode="eval").body) is expected
