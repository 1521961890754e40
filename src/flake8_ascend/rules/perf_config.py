"""ASC509, ASC510: run-time configuration a training entry script should choose.

This advice belongs to no line of code. It is reported once per *entry
script* (a module-level ``if __name__ == "__main__":`` plus a training loop,
see ``flake8_ascend.detect.training``), never once per file, on line 1 of that
script; ``ascend-analyse`` writes the script with ``NA`` for Start Line and
End Line (``Rule.no_line``).  Launch settings are advice for the report, not
a gate a correct port must pass: both codes are off unless named
(``--extend-select ASC509,ASC510``), like ASC103.
"""
from __future__ import annotations

import ast

from ..registry import Rule
from ._sources import ADVICE_TABLE, OFFICIAL_ADVICE
from ..detect.training import is_main_guard, source_text, training

_LINE_ONE = ast.Pass(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)
_ENTRY = (
    "import torch\n\ndef main():\n    for x in data:\n        loss = f(x)\n        loss.backward()\n"
    "        optimizer.step()\n\nif __name__ == '__main__':\n    main()\n"
)


class _EntryScriptAdvice(Rule):
    node_types = (ast.Module,)
    trigger_words = ("__main__",)
    no_line = True
    marker = ""  # text whose presence in the script means the setting is handled
    api = ""
    tips = ""
    message = ""

    def check(self, node, ctx) -> None:
        if self.marker not in source_text(ctx) and any(map(is_main_guard, node.body)) and training(ctx).is_entry:
            ctx.report(_LINE_ONE, self.code, self.message, api=self.api, tips=self.tips)


class CompileModeNotChosen(_EntryScriptAdvice):
    code = "ASC509"
    summary = "training entry script never chooses the NPU compile mode (torch_npu.npu.set_compile_mode)"
    marker = "set_compile_mode"
    api = "torch_npu.npu.set_compile_mode"
    tips = "set_compile_mode(jit_compile=False) for dynamic shapes, jit_compile=True for fixed shapes"
    message = ("choose the NPU compile mode in this entry script: torch_npu.npu.set_compile_mode(jit_compile=False) "
               "when input shapes change between steps, jit_compile=True when they are fixed "
               "[configuration, reported on line 1]")
    why = (
        "With `jit_compile=True` operators are compiled for each new input shape, which is fastest for fixed "
        "shapes but recompiles again and again when shapes vary; `jit_compile=False` uses precompiled binary "
        "kernels and suits dynamic shapes. The official tool always prints this advice; here it is reported once "
        "per training entry script (module-level `if __name__ == \"__main__\":` and a training loop) that does "
        "not call `set_compile_mode`, on line 1, when named (`--extend-select ASC509`: off by default, so that a "
        "correct port passes CI). With `mp.spawn`, set it inside the spawned worker."
    )
    example = _ENTRY
    use_instead = ("`torch_npu.npu.set_compile_mode(jit_compile=False)` at start-up (before the first NPU op) for "
                   "dynamic shapes.")
    source = (f"{OFFICIAL_ADVICE} performance_configuration_dict; MindStudio 8.3.0 analysis-migration tool user guide "
              f"§5.3; {ADVICE_TABLE}")
    fires = [(_ENTRY, 1)]
    passes = [
        _ENTRY.replace("import torch\n", "import torch_npu\ntorch_npu.npu.set_compile_mode(jit_compile=False)\n"),
        "import torch\n\ndef train():\n    for x in data:\n        f(x).backward()\n",
        "import torch\n\nif __name__ == '__main__':\n    model = build()\n    print(model(x).item())\n",
    ]


class TaskQueueNotSet(_EntryScriptAdvice):
    code = "ASC510"
    summary = "training entry script without TASK_QUEUE_ENABLE (the task queue level)"
    marker = "TASK_QUEUE_ENABLE"
    api = "TASK_QUEUE_ENABLE"
    tips = "export TASK_QUEUE_ENABLE=2"
    message = ("set the NPU task queue for this entry script: export TASK_QUEUE_ENABLE=2 in the launch environment "
               "(level 2 also moves more dispatch work off the training thread) [configuration, reported on line 1]")
    why = (
        "The task queue lets the Python thread hand operator launches to a second thread so that host and "
        "device overlap. Level 1 is the default; the Ascend docs recommend level 2, which moves more of the "
        "launch work off the training thread (effective in binary-kernel mode, `jit_compile=False`). The "
        "official tool always prints this advice; here it is reported once per training entry script that "
        "does not mention `TASK_QUEUE_ENABLE`, on line 1, when named (`--extend-select ASC510`: off by default, "
        "so that a correct port passes CI). If the launch shell script exports it, add `# noqa: ASC510` on line 1 "
        "or ignore the code for that file."
    )
    example = _ENTRY
    use_instead = "`export TASK_QUEUE_ENABLE=2` in the launch script (or `os.environ` before `import torch_npu`)."
    source = (f"{OFFICIAL_ADVICE} performance_configuration_dict; Ascend/pytorch docs/zh/api/environment_variable "
              f"TASK_QUEUE_ENABLE.md; {ADVICE_TABLE}")
    fires = [(_ENTRY, 1)]
    passes = [
        "import os\nos.environ['TASK_QUEUE_ENABLE'] = '2'\n" + _ENTRY,
        "import torch\n\ndef train():\n    for x in data:\n        f(x).backward()\n",
    ]
