"""detect/autocast.py: which calls open an autocast region, in what dtype, and which nodes run inside one."""
import ast

import pytest

from flake8_ascend.detect.autocast import autocast_dtype, region_dtype
from probe import ask


@pytest.mark.parametrize("call,dtype", [
    ("torch.autocast('cuda')", "float16"),
    ("torch.autocast('cpu')", "bfloat16"),  # the CPU default
    ("torch.autocast(device_type='npu', dtype=torch.bfloat16)", "bfloat16"),
    ("torch.amp.autocast('cuda', torch.half)", "float16"),  # dtype passed by position
    ("torch.autocast(device)", "unknown"),  # device not a literal
    ("torch.autocast('cuda', dtype=precision)", "unknown"),
    ("torch.autocast('cuda', **options)", "unknown"),  # dtype may hide in **options
    ("torch.cuda.amp.autocast()", "float16"),  # bound to its device
    ("torch.cuda.amp.autocast(enabled=False)", None),
    ("torch.cuda.amp.autocast(False)", None),  # enabled by position
    ("contextlib.nullcontext()", None),
])
def test_autocast_dtype(call, dtype):
    source = f"import contextlib\nimport torch\nwith {call}:\n    pass\n"
    answers = ask(source, ast.With, lambda node, ctx: autocast_dtype(node.items[0].context_expr, ctx))
    assert answers == [dtype]


def test_alias_of_the_autocast_class_is_resolved():
    source = "from torch.cuda.amp import autocast as ac\nwith ac():\n    pass\n"
    assert ask(source, ast.With, lambda node, ctx: autocast_dtype(node.items[0].context_expr, ctx)) == ["float16"]


def test_region_dtype_is_the_innermost_region_of_the_same_function():
    source = """
        import torch
        before()
        with torch.autocast('cpu'):
            a()
            with torch.autocast('cuda'):
                b()
            def later():
                c()
        after()
    """
    answers = ask(source, ast.Call, lambda node, ctx: (node.func.id, region_dtype(ctx, node))
                  if isinstance(node.func, ast.Name) else None)
    expected = [("before", None), ("a", "bfloat16"), ("b", "float16"), ("c", None), ("after", None)]
    assert [a for a in answers if a] == expected
