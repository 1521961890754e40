"""ASC104: calls of third-party APIs that a ``third_party`` run found unsupported."""
from __future__ import annotations

import ast

from ..registry import Rule


class UnsupportedThirdPartyApi(Rule):
    code = "ASC104"
    summary = "call of a third-party API listed as unsupported by a third_party result file"
    node_types = (ast.Call,)
    trigger_words = ()  # the listed libraries need not mention torch
    why = (
        "A `third_party` run found that this library function (or something it calls) uses a torch API or a "
        "custom CUDA operator the NPU does not have, so calling it fails or falls back to the CPU."
    )
    example = "keep = mmcv.ops.nms(boxes, scores, 0.5)  # with --ascend-api-files full_unsupported_results.csv"
    use_instead = "Use an NPU-capable replacement for the library function, or port the operator it depends on."
    source = "the full_unsupported_results.csv files given with -api / --ascend-api-files"
    example_settings = {"third_party_apis": frozenset({"mmcv.ops.nms", "mmdet.models.ResNet.__init__"})}
    fires = [
        ("from mmcv.ops import nms\nkeep = nms(b, s, 0.5)\n", 2),
        ("import mmdet.models as M\nnet = M.ResNet(depth=50)\n", 2),
    ]
    passes = [
        "from mmcv.ops import roi_align\ny = roi_align(x, r)\n",
        "def nms(b, s, t):\n    return b\nkeep = nms(b, s, 0.5)\n",
    ]

    @classmethod
    def runs_with(cls, config) -> bool:  # nothing listed: nothing to report, and a file needs no model for it
        return bool(config.third_party_apis)

    def check(self, node: ast.Call, ctx) -> None:
        listed = ctx.config.third_party_apis
        if not listed:
            return
        qualname = ctx.qualname(node.func)
        if qualname is None:
            return
        if qualname in listed or f"{qualname}.__init__" in listed:
            ctx.report(node, self.code,
                       f"{qualname} is not supported on NPU (listed by a third_party analysis result)",
                       api=qualname, tips="listed in a third_party result file")
