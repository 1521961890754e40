"""Check ASC609's table: each Python spelling really dispatches to the ATen op it is mapped to.

Needs torch (a CPU build is enough: ``pip install torch==2.13.0``); not part of the test suite.
Each spelling is called once under the autograd profiler, which records every dispatcher call,
composite ones included, and the mapped op must be among them.  Exit status 1 on any mismatch.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from flake8_ascend.rules.precision_amp import FP32_POLICY_APIS, FP32_POLICY_METHODS  # noqa: E402

x = torch.rand(4, 4) * 0.5 + 0.1
y = torch.rand(4, 4) * 0.5 + 0.1
target = torch.randint(0, 4, (4,))
ones = torch.ones(4)
# Arguments that make each function valid; one-tensor functions need none.
ARGS = {
    "logsumexp": (x, 1), "renorm": (x, 2, 0, 1.0), "cdist": (x, y), "dist": (x, y), "cosine_similarity": (x, y),
    "layer_norm": (x, (4,)), "group_norm": (x.view(1, 4, 4), 2), "kl_div": (x, y),
    "binary_cross_entropy_with_logits": (x, y), "cosine_embedding_loss": (x, y, ones),
    "hinge_embedding_loss": (x, torch.ones(4, 4)), "huber_loss": (x, y), "l1_loss": (x, y),
    "margin_ranking_loss": (x[0], y[0], ones), "mse_loss": (x, y), "multi_margin_loss": (x, target),
    "multilabel_margin_loss": (x, target.repeat(4, 1)), "nll_loss": (x, target), "poisson_nll_loss": (x, y),
    "smooth_l1_loss": (x, y), "soft_margin_loss": (x, y), "triplet_margin_loss": (x, y, x + 1),
}


def _resolve(dotted: str):
    obj = {"torch": torch}[dotted.split(".")[0]]
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _ops(call) -> set:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return {event.name.split("::", 1)[1] for event in prof.events() if event.name.startswith("aten::")}


def main() -> int:
    bad = []
    for api, op in sorted(FP32_POLICY_APIS.items()):
        name = api.rsplit(".", 1)[1]
        args = ARGS.get(name, (x,))
        if op not in _ops(lambda: _resolve(api)(*args)):
            bad.append(f"{api} does not dispatch to aten::{op}")
    for method, op in sorted(FP32_POLICY_METHODS.items()):
        args = ARGS.get(method, (x,))[1:]
        if op not in _ops(lambda: getattr(x, method)(*args)):
            bad.append(f"Tensor.{method} does not dispatch to aten::{op}")
    print("\n".join(bad) or f"all {len(FP32_POLICY_APIS) + len(FP32_POLICY_METHODS)} spellings dispatch as mapped "
                            f"(torch {torch.__version__})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
