"""detect/fused.py: the hand-written fused-op patterns ASC304 reports, found through one function's locals."""
import ast

from flake8_ascend.detect.fused import (attention_fallback, attention_scores, function_patterns, module_ops,
                                        sdpa_in_other_branch)
from conftest import run_rules
from probe import ask


def _spans(source: str, detector: str):
    """(first line, last line) of every span ``Patterns.<detector>`` finds at a call or product."""
    def question(node, ctx):
        patterns = function_patterns(ctx)
        span = getattr(patterns, detector)(node) if patterns is not None else None
        return (span[0].lineno, span[1].lineno) if span else None
    return [a for a in ask(source, ast.Call, question) if a]


RMS_NORM = """
    import torch
    def norm(x, eps):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + eps)
"""


def test_rms_norm_is_followed_through_local_names():
    assert _spans(RMS_NORM, "rms_norm") == [(4, 5)]


def test_a_centred_variance_is_a_layer_norm_not_an_rms_norm():
    source = RMS_NORM.replace("x.pow(2)", "(x - x.mean(-1, keepdim=True)).pow(2)")
    assert _spans(source, "rms_norm") == []


def test_rsqrt_of_something_else_is_no_rms_norm():
    assert _spans("import torch\ndef f(x, y):\n    return x * torch.rsqrt(y)\n", "rms_norm") == []


def test_rotate_half_needs_the_two_halves_of_one_tensor():
    source = """
        import torch
        def rotate(x, y):
            x1, x2 = x.chunk(2, dim=-1)
            a = torch.cat((-x2, x1), dim=-1)
            b = torch.cat((-x2, y), dim=-1)
    """
    assert _spans(source, "rotate_half") == [(5, 5)]


def test_module_level_code_has_no_patterns():
    assert ask("import torch\ny = torch.rsqrt(x)\n", ast.Call, lambda node, ctx: function_patterns(ctx)) == [None]


def test_module_ops_come_from_init():
    source = """
        from torch import nn
        class Block(nn.Module):
            def __init__(self):
                self.act = nn.SiLU()
                self.norm = nn.LayerNorm(8)
                self.proj = nn.Linear(8, 8)
    """
    # Linear is an op of its own: SwiGLU's gate and up projections are the operands of npu_swiglu
    assert ask(source, ast.ClassDef, module_ops) == [{"act": "silu", "norm": "layer_norm", "proj": "linear"}]


ATTENTION = """
    import torch
    def attend(self, q, k, v):
        if self.fused:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            scores = q @ k.transpose(-2, -1)
            return scores.softmax(dim=-1) @ v
"""


def test_attention_scores_names_the_first_product():
    def question(node, ctx):
        return any(id(n) in attention_scores(ctx) for n in ast.walk(node))
    returns = ask(ATTENTION, ast.Return, question)
    assert returns == [False, False]  # the q @ k product is in the assignment, not in a return
    assignments = ask(ATTENTION, ast.Assign, question)
    assert assignments == [True]


def test_the_branch_beside_sdpa_is_the_fallback():
    answers = ask(ATTENTION, ast.Assign, sdpa_in_other_branch)
    assert answers == [True]
    assert ask(ATTENTION.replace("scaled_dot_product_attention", "other"), ast.Assign, sdpa_in_other_branch) \
        == [False]


# darts 0.41.0 models/components/chronos2_submodels.py:276-398: the eager path is a method of its own, called from
# the branch beside the one that reaches SDPA through another method
FACTORED = """
    import torch
    class MHA(torch.nn.Module):
        def _eager_attention(self, q, k, v):
            return torch.matmul(torch.matmul(q, k.transpose(3, 2)).softmax(dim=-1), v)
        def _sdpa_attention(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        def forward(self, q, k, v):
            if self.attn_implementation == "sdpa":
                out = self._sdpa_attention(q, k, v)
            else:  # eager
                out = self._eager_attention(q, k, v)
            return out
"""


def test_a_method_called_only_beside_sdpa_is_the_fallback():
    assert ask(FACTORED, ast.Return, attention_fallback) == [True, False, False]
    # near misses: no SDPA in the other branch; the eager method also called unconditionally
    assert ask(FACTORED.replace("scaled_dot_product_attention", "other"), ast.Return, attention_fallback) \
        == [False, False, False]
    also = FACTORED.replace("            return out", "            return out + self._eager_attention(q, k, v)")
    assert ask(also, ast.Return, attention_fallback) == [False, False, False]


# surya 0.22.1 common/rfdetr/models/backbone/dinov2_with_windowed_attn.py:351-441, 594-609, 741: transformers'
# layout before 4.48, an SDPA subclass of the eager attention class in the same module, picked by
# ``config._attn_implementation`` in a model that declares ``_supports_sdpa = True``
SDPA_SUBCLASS = """
    import torch
    class SelfAttention(torch.nn.Module):
        def forward(self, q, k, v, output_attentions=False):
            return torch.matmul(torch.matmul(q, k.transpose(-1, -2)).softmax(dim=-1), v)
    class SdpaSelfAttention(SelfAttention):
        def forward(self, q, k, v, output_attentions=False):
            if output_attentions:
                return super().forward(q, k, v, output_attentions=output_attentions)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
    CLASSES = {"eager": SelfAttention, "sdpa": SdpaSelfAttention}
    class Layer(torch.nn.Module):
        def __init__(self, config):
            self.attention = CLASSES[config._attn_implementation](config)
    class PreTrainedModel:
        _supports_sdpa = True
"""


def test_a_method_a_same_module_subclass_overrides_with_sdpa_is_the_fallback():
    assert ask(SDPA_SUBCLASS, ast.Return, attention_fallback) == [True, False, False]
    # near misses: a model without _supports_sdpa; a class picked by the project's own configuration field
    # (xtuner 0.2.0 tools/model_converters/modeling_internlm2_reward/modeling_internlm2.py:701, whose
    # configuration defaults it to "eager"); the SDPA subclass in another module (here: only an import of it)
    assert ask(SDPA_SUBCLASS.replace("True", "False"), ast.Return, attention_fallback) == [False, False, False]
    assert ask(SDPA_SUBCLASS.replace("._attn_implementation", ".attn_implementation"), ast.Return,
               attention_fallback) == [False, False, False]
    start, end = SDPA_SUBCLASS.index("    class SdpaSelfAttention"), SDPA_SUBCLASS.index("    CLASSES")
    elsewhere = "    from .sdpa import SdpaSelfAttention\n" + SDPA_SUBCLASS[:start] + SDPA_SUBCLASS[end:]
    assert ask(elsewhere, ast.Return, attention_fallback) == [False]


# the same layout as surya spells it (dinov2_with_windowed_attn.py:375-441): ASC303 and ASC603 stay quiet on the
# eager forward, and report it again in a model without SDPA support
SDPA_SUBCLASS_SURYA = """
import math
import torch
from torch import nn
class SelfAttention(nn.Module):
    def forward(self, hidden_states, head_mask=None, output_attentions: bool = False):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        return (context_layer, attention_probs) if output_attentions else (context_layer,)
class SdpaSelfAttention(SelfAttention):
    def forward(self, hidden_states, head_mask=None, output_attentions: bool = False):
        if output_attentions:
            return super().forward(hidden_states=hidden_states, head_mask=head_mask, output_attentions=True)
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        context_layer = torch.nn.functional.scaled_dot_product_attention(query_layer, key_layer, value_layer, head_mask)
        return context_layer, None
ATTENTION_CLASSES = {"eager": SelfAttention, "sdpa": SdpaSelfAttention}
class Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = ATTENTION_CLASSES[config._attn_implementation](config)
class PreTrainedModel:
    _supports_sdpa = True
"""


def test_the_rules_leave_the_eager_method_of_an_sdpa_subclass_alone():
    assert run_rules(SDPA_SUBCLASS_SURYA, codes=["ASC303", "ASC304", "ASC603"]) == []
    unsupported = SDPA_SUBCLASS_SURYA.replace("_supports_sdpa = True", "_supports_sdpa = False")
    assert [(f.line, f.code) for f in run_rules(unsupported, codes=["ASC303", "ASC304", "ASC603"])] == [
        (10, "ASC303"), (14, "ASC603")]


# diffusers BasicTransformerBlock.forward: one add, then a layer norm in each of three branches; the engine
# reports the add once, not once per norm that closes the pattern.
ADD_THEN_NORMS = """
    import torch.nn as nn
    class Block(nn.Module):
        def __init__(self):
            self.norm2 = nn.LayerNorm(8)
            self.norm3 = nn.LayerNorm(8)
        def forward(self, hidden_states, attn_output, kind):
            hidden_states = attn_output + hidden_states
            if kind == "a":
                norm_hidden_states = self.norm3(hidden_states)
            elif kind == "b":
                norm_hidden_states = self.norm2(hidden_states)
            else:
                norm_hidden_states = self.norm3(hidden_states)
            return norm_hidden_states
"""


def test_one_finding_per_site_when_several_patterns_start_there(lint):
    from flake8_ascend.engine import Finding, one_per_site
    same = [Finding(3, 4, "ASC304", "m", end_line=end) for end in (9, 5, 7)]
    assert one_per_site(same) == [Finding(3, 4, "ASC304", "m", end_line=5)]
    other = Finding(3, 4, "ASC305", "m")
    assert len(one_per_site([*same, other, Finding(3, 5, "ASC304", "m")])) == 3
    found = [(f.line, f.col) for f in lint(ADD_THEN_NORMS, codes=["ASC304"])]
    assert len(found) == len(set(found))
