"""One finding per (function, code, API): the same advice down one function is one problem to a reader."""
from __future__ import annotations

from conftest import run_rules

REPEATED_SYNC = """\
import torch

def train(model, loader, optimizer):
    for batch in loader:
        loss = model(batch)
        loss.backward()
        optimizer.step()
        print(loss.item())
        tokens = batch.sum().item()
"""


def test_a_repeat_in_one_function_folds_into_the_first_with_its_lines():
    found = run_rules(REPEATED_SYNC, codes=["ASC501"])
    assert [f.line for f in found] == [8]
    assert found[0].message.endswith("(again in this function on line 9)")


def test_the_same_advice_in_two_functions_is_two_findings():
    source = REPEATED_SYNC + REPEATED_SYNC.replace("def train", "def train_again").replace("import torch\n", "")
    found = run_rules(source, codes=["ASC501"])
    assert [f.line for f in found] == [8, 16]


def test_different_apis_in_one_function_stay_apart():
    found = run_rules("""\
        import torch

        def report():
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.ipc_collect()
        """, codes=["ASC201"])
    assert [f.line for f in found] == [4, 5]


def test_module_level_lines_and_sites_with_a_rewrite_are_each_kept():
    found = run_rules("""\
        import torch
        a = torch.ones(2).cuda()
        b = torch.ones(2).cuda()

        def f(x):
            y = x.cuda()
            return y.cuda()
        """, codes=["ASC202"])
    assert [f.line for f in found] == [2, 3, 6, 7]  # each has a rewrite --fix applies
    assert all(f.rewrite is not None for f in found)


def test_a_first_site_hidden_by_noqa_does_not_hide_the_repeat():
    source = REPEATED_SYNC.replace("print(loss.item())", "print(loss.item())  # noqa: ASC501")
    found = run_rules(source, codes=["ASC501"])
    assert [(f.line, f.message.endswith("line 9)")) for f in found] == [(8, False), (9, False)]
