"""ASC601-ASC606: torch calls whose NPU results can differ from a GPU run (overflow, inf/nan, determinism)."""
from __future__ import annotations

import ast
from typing import ClassVar, FrozenSet

from ..calls import MISSING, argument, callee, integer, is_constant, last_names
from ..registry import Rule
from ..semantic.values import NUMBER
from ..detect.fused import attention_fallback
from ..detect.training import last_name, source_text
from ._sources import ADVICE_TABLE, ASCEND_API_DOCS, OFFICIAL_ADVICE
from .affinity_calls import transposed_last_two
from ..walk import walk_tree

_DETERMINISTIC_LASTS = last_names("torch.use_deterministic_algorithms")


class _CallAdvice(Rule):
    """Advice on calls of ``apis`` (qualified names) and of ``methods`` on known tensors."""

    node_types = (ast.Call,)
    apis: ClassVar[FrozenSet[str]] = frozenset()
    methods: ClassVar[FrozenSet[str]] = frozenset()
    lasts: ClassVar[FrozenSet[str]] = frozenset()  # last components of ``apis`` (set per subclass)
    tips = ""

    def check(self, node, ctx) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr not in self.methods and func.attr not in self.lasts:
            return
        api = ctx.chain(func)
        if api is None and isinstance(func, ast.Attribute) and func.attr in self.methods and ctx.is_tensor(func.value):
            api = f"torch.Tensor.{func.attr}"
        elif api not in self.apis:
            return
        if not self.stays_quiet(node, ctx):
            ctx.report(node, self.code, self.message(api), api=api, tips=self.tips)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.lasts = last_names(*cls.apis)

    def stays_quiet(self, node: ast.Call, ctx) -> bool:
        """Does the advice not apply here (another code's finding already, a backward that never runs)?"""
        return False

    @staticmethod
    def host_side(node: ast.Call, ctx) -> bool:
        """The tensor the call works on (receiver or first argument) lives on the CPU or is a constant table."""
        func = node.func
        operand = node.args[0] if ctx.chain(func) is not None and node.args else getattr(func, "value", None)
        if operand is None:
            return False
        value = ctx.values.of(operand)
        return value.tensor and value.const or ctx.values.on_host(operand)

    def message(self, api: str) -> str:
        raise NotImplementedError


class BaddbmmOverflow(_CallAdvice):
    code = "ASC601"
    summary = "torch.baddbmm, which may overflow on NPU"
    trigger_words = ("baddbmm",)
    apis = frozenset({"torch.baddbmm"})
    methods = frozenset({"baddbmm", "baddbmm_"})
    tips = "use torch.bmm(batch1, batch2), then scale and add the input"
    why = (
        "Ascend's migration advice warns that the NPU kernel of `baddbmm` (beta * input + alpha * batch1 @ "
        "batch2) may overflow during the computation, giving inf where the GPU gives finite values, and "
        "advises computing the batched product and the addition as two ops."
    )
    example = "scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=scale)"
    use_instead = ("`scores = torch.bmm(q, k.transpose(1, 2)) * scale + bias` instead of "
                   "`torch.baddbmm(bias, q, k.mT, alpha=scale)`.")
    source = f"{OFFICIAL_ADVICE} api_precision_dict; {ADVICE_TABLE}"
    fires = [
        ("import torch\ny = torch.baddbmm(m, a, b)\n", 2),
        ("import torch\nm = torch.zeros(2, 3, 5)\ny = m.baddbmm(a, b)\n", 3),
    ]
    passes = ["import torch\ny = torch.bmm(a, b) + m\n", "y = m.baddbmm(a, b)\n"]

    def message(self, api: str) -> str:
        return f"{api} can overflow on NPU during the computation (use torch.bmm and add separately) [overflow risk]"


_CLIP_TOKENS = (
    "import torch.nn as nn\n\nclass CLIPTextEncoder(nn.Module):\n    def __init__(self, total_vocab_size, embed_dims):\n"
    "        self.token_embedding = nn.Embedding(total_vocab_size, embed_dims)\n\n    def forward(self, text):\n"
    "        device = self.token_embedding.weight.device\n        return self.token_embedding(text.to(device))\n"
)


_LITGPT_GPT = (
    "import torch.nn as nn\n\nclass GPT(nn.Module):\n    def __init__(self, config):\n        self.transformer = nn.ModuleDict(\n"
    "            dict(wte=nn.Embedding(config.padded_vocab_size, config.n_embd)))\n"
)
_MARK_ONLY = (
    "\n\ndef mark_only_lora_as_trainable(model, bias='none'):\n    for n, p in model.named_parameters():\n"
    "        if not ({keep}):\n            p.requires_grad = False\n"
)


def _self_attribute(node) -> bool:
    """``self.<name>``."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _binding_name(ctx) -> str:
    """The name an embedding built at the checked call is stored under: ``self.<name> = ...``, ``name = ...``
    or ``dict(name=...)`` (a parameter's full name contains it), else ``""``."""
    parent = ctx.parent
    if isinstance(parent, ast.keyword):
        return parent.arg or ""
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target = parent.targets[0]
        return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return ""


def _sets_not_trainable(stmt: ast.AST, param: str) -> bool:
    """``param.requires_grad = <not True>`` or ``param.requires_grad_(<not True>)`` somewhere in ``stmt``."""
    for node in walk_tree(stmt):
        if isinstance(node, ast.Assign):
            value, targets = node.value, node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            value, targets = argument(node, "requires_grad", 0), [node.func]
            value = ast.Constant(True) if value is MISSING else value
        else:
            continue
        if not is_constant(value, True) and any(
                isinstance(t, ast.Attribute) and t.attr in ("requires_grad", "requires_grad_")
                and isinstance(t.value, ast.Name) and t.value.id == param for t in targets):
            return True
    return False


def _bulk_freezes(tree: ast.AST) -> list:
    """Statements that freeze a whole model: ``for p in m.parameters()`` / ``for n, p in m.named_parameters()``
    setting ``p.requires_grad`` to anything but True (a LoRA / adapter helper that keeps only some weights
    trainable), and ``m.requires_grad_(False)``.  Each as (model expression, statement)."""
    found = []
    for node in walk_tree(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Attribute) \
                and node.iter.func.attr in ("parameters", "named_parameters"):
            target = node.target.elts[-1] if isinstance(node.target, ast.Tuple) and node.target.elts else node.target
            if isinstance(target, ast.Name) and any(_sets_not_trainable(s, target.id) for s in node.body):
                found.append((node.iter.func.value, node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "requires_grad_" and isinstance(node.func.value, ast.Name) \
                and is_constant(argument(node, "requires_grad", 0), False):
            found.append((node.func.value, node))
    return found


def _frozen_by_model(node: ast.Call, ctx) -> bool:
    """The embedding is frozen with its whole model: by its class (``self.parameters()`` looped over or
    ``self.requires_grad_(False)``, later in the same method or in another one), or by a module-level helper of
    the file that freezes every parameter of the model it is given, keeping trainable only parameters whose
    names contain one of its string literals (``"lora_" not in n``, ``"adapter_wte" in key``): litgpt's
    ``mark_only_lora_as_trainable``."""
    freezes = ctx.memo("bulk_freezes", lambda c: _bulk_freezes(c.tree))
    if not freezes:
        return False
    cls = ctx.enclosing(ast.ClassDef)
    method = ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef)
    helpers = {stmt.name: stmt for stmt in getattr(ctx.tree, "body", ()) if isinstance(stmt, ast.FunctionDef)}
    name = _binding_name(ctx)
    for model, stmt in freezes:
        if isinstance(model, ast.Name) and model.id == "self":
            if cls is not None and _within(stmt, cls) and not (_within(stmt, method) and stmt.lineno < node.lineno):
                return True
            continue
        helper = next((h for h in helpers.values() if _within(stmt, h)), None)
        if helper is None or not isinstance(model, ast.Name) or model.id not in {
                a.arg for a in walk_tree(helper.args) if isinstance(a, ast.arg)}:
            continue
        called = {n.func.id for n in walk_tree(helper) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        kept = {c.value for h in (helper, *(helpers[n] for n in called if n in helpers)) for c in walk_tree(h)
                if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value}
        if not any(k in name for k in kept):
            return True
    return False


def _within(node: ast.AST, scope) -> bool:
    return scope is not None and scope.lineno <= node.lineno <= (scope.end_lineno or scope.lineno)


def _init_helper(func: ast.AST) -> bool:
    """mmengine's weight initialisers (``normal_init(module, ...)``, ``uniform_init``...): no forward, no backward."""
    return last_name(func).endswith("_init")


_POSITIONS = ("import torch\nimport torch.nn as nn\n\nclass LearnedPositionalEncoding(nn.Module):\n"
              "    def __init__(self, num_feats, col_num_embed=50):\n"
              "        self.col_embed = nn.Embedding(col_num_embed, num_feats)\n\n"
              "    def forward(self, mask):\n        h, w = mask.shape[-2:]\n        x = {index}\n"
              "        return self.col_embed(x)\n")


_FIXED_TABLE = ("import torch\nimport torch.nn as nn\n\nclass FixedEmbedding(nn.Module):\n    def __init__(self, c_in, d):\n"
                "        w = torch.zeros(c_in, d)\n        self.emb = nn.Embedding(c_in, d)\n"
                "        self.emb.weight = nn.Parameter(w{grad})\n\n    def forward(self, x):\n"
                "        return self.emb(x).detach()\n")


_CODEBOOK = ("import torch.nn as nn\nimport torch.nn.functional as F\n\nclass EmbeddingEMA(nn.Module):\n"
             "    def __init__(self, w):\n        self.weight = nn.Parameter(w{grad})\n\n    def reset(self, w):\n{more}"
             "        pass\n\n    def forward(self, embed_id):\n        return F.embedding(embed_id, self.weight)\n")


class EmbeddingNondeterministic(_CallAdvice):
    code = "ASC602"
    summary = "embedding whose NPU backward may not be reproducible"
    trigger_words = ("mbedding",)
    apis = frozenset({"torch.nn.Embedding", "torch.nn.Embedding.from_pretrained", "torch.nn.functional.embedding"})
    tips = "backward may be nondeterministic; enable deterministic computing when reproducibility matters"
    why = (
        "Ascend's migration advice warns that the backward of an embedding may be nondeterministic on NPU: "
        "two identical runs can produce slightly different gradients and drift apart. This matters when you "
        "compare an NPU run with a GPU run or with an earlier run."
    )
    example = "self.tok = nn.Embedding(vocab, dim)"
    use_instead = ("Nothing for ordinary training. For bit-reproducible runs call `torch.use_deterministic_algorithms(True)` "
                   "(see ASC606) and compare runs with that setting.")
    source = f"{OFFICIAL_ADVICE} api_precision_dict; {ADVICE_TABLE}"
    fires = [
        ("import torch.nn as nn\nemb = nn.Embedding(100, 16)\n", 2),
        ("import torch.nn.functional as F\ny = F.embedding(idx, w)\n", 2),
        # mmseg 1.2.2 models/text_encoder/clip_text_encoder.py:78 without its _freeze(): looked up by calling it
        (_CLIP_TOKENS, 5),
        ("import torch.nn as nn\nemb = nn.Embedding.from_pretrained(w, freeze=False)\n", 2),
        # litgpt model.py:31: the base model, trained in full (no freezing helper in the file)
        (_LITGPT_GPT, 6),
        # the helper keeps parameters named "wte" trainable: the embedding trains
        (_LITGPT_GPT + _MARK_ONLY.format(keep='"wte" in n'), 6),
        # diffusers kolors/text_encoder.py:725: a prefix encoder built after its model froze the rest
        ("import torch.nn as nn\n\nclass ChatGLM(nn.Module):\n    def __init__(self, config):\n"
         "        for param in self.parameters():\n            param.requires_grad = False\n"
         "        self.embedding = nn.Embedding(config.pre_seq_len, 128)\n\n"
         "    def forward(self, t):\n        return self.embedding(t)\n", 7),
        # near miss of a frozen table put in as the weight: a trainable one (requires_grad defaults to True)
        (_FIXED_TABLE.format(grad=""), 7),
        # near miss of a frozen codebook: another store of the attribute leaves it trainable
        (_CODEBOOK.format(grad=", requires_grad=False", more="        self.weight = nn.Parameter(w)\n"), 13),
        # a helper that freezes nothing: the loop sets requires_grad to True
        (_LITGPT_GPT + "\n\ndef unfreeze(model):\n    for p in model.parameters():\n        p.requires_grad = True\n", 6),
        # near misses of mmdet's learned positional encoding below: positions repeated over the batch, token ids
        (_POSITIONS.format(index="torch.arange(w, device=mask.device).expand(mask.shape[0], w)"), 6),
        (_POSITIONS.format(index="mask.long().sum(-1)"), 6),
    ]
    passes = [
        "from mylib import Embedding\nemb = Embedding(100, 16)\n",
        "import torch.nn as nn\nbag = nn.EmbeddingBag(10, 3)\n",
        # mmdet 3.1.0 models/detectors/dino.py:53: a learned table read only through .weight
        "import torch.nn as nn\n\nclass Dino(nn.Module):\n    def _init_layers(self):\n"
        "        self.query_embedding = nn.Embedding(self.num_queries, self.embed_dims)\n\n"
        "    def init_weights(self):\n        nn.init.xavier_uniform_(self.query_embedding.weight)\n\n"
        "    def pre_decoder(self, memory):\n        query = self.query_embedding.weight[:, None, :]\n",
        # mmdet 3.1.0 models/dense_heads/mask2former_head.py:133 and :413
        "import torch.nn as nn\n\nclass Mask2FormerHead(nn.Module):\n    def __init__(self, levels, channels):\n"
        "        self.level_embed = nn.Embedding(levels,\n                                        channels)\n\n"
        "    def forward(self, decoder_input, i):\n"
        "        level_embed = self.level_embed.weight[i].view(1, 1, -1)\n        return decoder_input + level_embed\n",
        # timm 1.0.31 layers/ml_decoder.py:111: frozen
        "import torch.nn as nn\n\nclass MLDecoder(nn.Module):\n    def __init__(self):\n"
        "        self.query_embed = nn.Embedding(100, 768)\n        self.query_embed.requires_grad_(False)\n\n"
        "    def forward(self, x):\n        return self.query_embed(self.idx) + x\n",
        "import torch.nn as nn\nemb = nn.Embedding.from_pretrained(glove)\n",  # freeze=True by default
        # mmdet 3.1.0 models/layers/msdeformattn_pixel_decoder.py:83: initialised by a helper, read via .weight
        "import torch.nn as nn\nfrom mmengine.model import normal_init\n\nclass Decoder(nn.Module):\n"
        "    def __init__(self):\n        self.level_encoding = nn.Embedding(3, 256)\n\n"
        "    def init_weights(self):\n        normal_init(self.level_encoding, mean=0, std=1)\n\n"
        "    def forward(self, i):\n        return self.level_encoding.weight[i]\n",
        # litgpt 0.5 lora.py:498 / adapter.py:40: LoRA and adapter models, whose helper freezes all but the adapters
        _LITGPT_GPT + _MARK_ONLY.format(keep='"lora_" in n'),
        _LITGPT_GPT + "\n\ndef mark_only_adapter_as_trainable(model):\n    for name, param in model.named_parameters():\n"
        "        param.requires_grad = adapter_filter(name, param)\n\n\ndef adapter_filter(key, value):\n"
        "    return 'adapter_wte' in key or 'gating_factor' in key\n",
        # a fixed sinusoidal table put in as a frozen weight (pypots 1.5 nn/modules/transformer/embedding.py:115-116,
        # neuralforecast 3.0.2 common/_modules.py:494-495)
        _FIXED_TABLE.format(grad=", requires_grad=False"),
        # a codebook updated by a moving average, looked up functionally (mmselfsup 1.0.0 vector_quantizer.py:108-123)
        _CODEBOOK.format(grad=", requires_grad=False", more=""),
        # diffusers t5_film_transformer.py:70
        "import torch.nn as nn\n\nclass T5Film(nn.Module):\n    def __init__(self, n, d):\n"
        "        self.position_encoding = nn.Embedding(n, d)\n        self.position_encoding.weight.requires_grad = False\n\n"
        "    def forward(self, p):\n        return self.position_encoding(p)\n",
        # a text encoder frozen as a whole (diffusers kolors/text_encoder.py:779, the embedding built before)
        "import torch.nn as nn\n\nclass Encoder(nn.Module):\n    def __init__(self):\n"
        "        self.tok = nn.Embedding(100, 16)\n        for param in self.parameters():\n"
        "            param.requires_grad = False\n\n    def forward(self, t):\n        return self.tok(t)\n",
        "import torch.nn as nn\n\nclass Encoder(nn.Module):\n    def __init__(self):\n"
        "        self.tok = nn.Embedding(100, 16)\n        self.requires_grad_(False)\n",
        # mmdet 3.1.0 models/layers/positional_encoding.py:132: one lookup of each row
        _POSITIONS.format(index="torch.arange(w, device=mask.device)"),
        _POSITIONS.format(index="torch.arange(w).to(mask.device)"),
    ]

    def message(self, api: str) -> str:
        return f"{api} backward may give slightly different gradients from run to run on NPU [nondeterministic]"

    def stays_quiet(self, node: ast.Call, ctx) -> bool:
        """No embedding backward runs: frozen (``from_pretrained`` freezes by default; ``requires_grad_(False)``
        or ``.weight.requires_grad = False`` on it, or a ``nn.Parameter(..., requires_grad=False)`` as its weight or
        as the table ``F.embedding`` looks up; its whole model frozen, see ``_frozen_by_model``), or a
        ``self.<name>`` table its class never calls, only reads through ``.weight`` (mmdet's DETR queries)."""
        if ctx.chain(node.func) == "torch.nn.Embedding.from_pretrained":
            freeze = argument(node, "freeze", 1)
            return freeze is MISSING or is_constant(freeze, True)
        if _frozen_by_model(node, ctx):
            return True
        cls = ctx.enclosing(ast.ClassDef)
        weight = argument(node, "weight", 1) if ctx.chain(node.func) == "torch.nn.functional.embedding" else None
        if cls is not None and _self_attribute(weight) and _frozen_attribute(cls, weight.attr, ctx):
            return True  # a lookup in a frozen table of the class
        target = ctx.parent.targets[0] if isinstance(ctx.parent, ast.Assign) and len(ctx.parent.targets) == 1 \
            else None
        if not (_self_attribute(target) and cls is not None):
            return False
        uses = [n for n in walk_tree(cls) if isinstance(n, ast.Attribute) and _self_attribute(n.value)
                and n.value.attr == target.attr]  # self.<name>.<something>
        frozen = any(use.attr == "requires_grad_" for use in uses) or any(
            isinstance(n, ast.Assign) and is_constant(n.value, False) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" and isinstance(t.value, ast.Attribute)
                and t.value.attr == "weight" and _self_attribute(t.value.value) and t.value.value.attr == target.attr
                for t in n.targets) for n in walk_tree(cls)) or any(  # self.<name>.weight.requires_grad = False
            isinstance(n, ast.Assign) and _frozen_parameter(n.value, ctx) and any(
                isinstance(t, ast.Attribute) and t.attr == "weight" and _self_attribute(t.value)
                and t.value.attr == target.attr for t in n.targets) for n in walk_tree(cls))
        mentions = sum(1 for n in walk_tree(cls) if _self_attribute(n) and n.attr == target.attr)
        initialised = sum(1 for n in walk_tree(cls) if isinstance(n, ast.Call) and _init_helper(n.func)
                          for arg in n.args[:1] if _self_attribute(arg) and arg.attr == target.attr)
        distinct = sum(1 for n in walk_tree(cls) if isinstance(n, ast.Call) and _self_attribute(n.func)
                       and n.func.attr == target.attr and _distinct_rows(n, ctx))
        # every mention but the assignment is self.<name>.weight, the module given to an init helper, or a lookup
        # of distinct rows
        return frozen or mentions - 1 == initialised + distinct + sum(1 for use in uses if use.attr == "weight")


def _frozen_attribute(cls: ast.ClassDef, name: str, ctx) -> bool:
    """Every ``self.<name> = ...`` of ``cls`` stores a frozen parameter (mmselfsup 1.0.0
    models/utils/vector_quantizer.py:108-123, ``EmbeddingEMA``: a codebook updated by a moving average, looked up with
    ``F.embedding(embed_id, self.weight)``)."""
    stores = [n for n in walk_tree(cls) if isinstance(n, ast.Assign) and any(
        _self_attribute(t) and t.attr == name for t in n.targets)]
    return bool(stores) and all(_frozen_parameter(n.value, ctx) for n in stores)


def _frozen_parameter(value: ast.AST, ctx) -> bool:
    """``nn.Parameter(w, requires_grad=False)``: a table put in as a weight no gradient reaches (the fixed
    sinusoidal embedding of Informer-style models, neuralforecast 3.0.2 common/_modules.py:494-495, pypots 1.5
    nn/modules/transformer/embedding.py:115-116)."""
    return isinstance(value, ast.Call) and ctx.qualname(value.func) == "torch.nn.Parameter" and \
        is_constant(argument(value, "requires_grad", 1), False)


def _distinct_rows(call: ast.Call, ctx) -> bool:
    """``self.row_embed(torch.arange(w))``, directly or through a local name (mmdet 3.1.0
    layers/positional_encoding.py:164): each row is looked up once, so its backward adds no two gradients into one
    row and has nothing to reorder.  ``torch.arange(n).expand(b, n)`` repeats rows: not distinct."""
    if len(call.args) != 1 or call.keywords:
        return False
    index = call.args[0]
    function = ctx.model.function(call)
    if function is not None and isinstance(index, ast.Name):
        index = ctx.model.flow(function).resolve(index)
    while isinstance(index, ast.Call) and isinstance(index.func, ast.Attribute) and index.func.attr == "to":
        index = index.func.value  # a move or cast keeps the rows
    return isinstance(index, ast.Call) and ctx.qualname(index.func) == "torch.arange"


_DEPTH = 8  # how many names and shape-keeping steps a shape proof follows
_RANGES = frozenset({"torch.arange", "torch.linspace", "torch.logspace", "torch.range"})
# tensor methods (and torch functions of one tensor) whose result has the shape of their input
# casts and moves that keep every value of a tensor
_CASTS = frozenset("to float double half bfloat16 type_as cpu cuda npu detach contiguous".split())
_SAME_SHAPE = _CASTS | frozenset("clone abs exp log sqrt rsqrt sin cos tanh sigmoid pow neg reciprocal square".split())
_FACTORIES = frozenset({"torch.ones", "torch.zeros", "torch.empty", "torch.rand", "torch.randn"})
_NEW_FACTORIES = frozenset({"new_ones", "new_zeros", "new_empty"})
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "norm", "prod", "amax", "amin"})  # with no dim: one number


def _assigned(expr: ast.AST, ctx) -> ast.AST:
    """``expr``, or for a local name the single expression last assigned to it (``x = t.reshape(B, K, 1, -1)``)."""
    if not isinstance(expr, ast.Name):
        return expr
    owner = ctx.model.function(expr) or ctx.tree
    binding = ctx.model.flow(owner).binding(expr)
    return binding.value if binding is not None and binding.value is not None and binding.index is None else expr


def _method(expr: ast.AST, ctx):
    """(receiver, name, arguments) of ``t.name(...)`` or ``torch.name(t, ...)``, else None; keywords only on a
    cast (``.to(dtype=dtype)``), whose keywords leave the shape alone."""
    if not isinstance(expr, ast.Call) or any(isinstance(a, ast.Starred) for a in expr.args):
        return None
    func = expr.func
    if not isinstance(func, ast.Attribute) or (expr.keywords and func.attr not in _CASTS):
        return None
    qualname = ctx.qualname(func)
    if qualname is None:
        return func.value, func.attr, expr.args
    if qualname.startswith("torch.") and qualname.count(".") == 1 and expr.args:
        return expr.args[0], func.attr, expr.args[1:]
    return None


def _one_dim(expr: ast.AST, ctx, depth: int = 0) -> bool:
    """``expr`` is provably a 1-D tensor: a range (``torch.linspace``), or elementwise work on one with numbers
    (``torch.exp(-0.5 * (x / sigma).pow(2))``, ``pdf / pdf.sum()``)."""
    if depth > _DEPTH:
        return False
    expr = _assigned(expr, ctx)
    if isinstance(expr, ast.Call) and ctx.qualname(expr.func) in _RANGES:
        return True
    if isinstance(expr, ast.UnaryOp):
        return _one_dim(expr.operand, ctx, depth + 1)
    if isinstance(expr, ast.BinOp) and not isinstance(expr.op, ast.MatMult):
        left, right = _one_dim(expr.left, ctx, depth + 1), _one_dim(expr.right, ctx, depth + 1)
        return (left and (right or _scalar(expr.right, ctx, depth + 1))) or (right and _scalar(expr.left, ctx, depth + 1))
    call = _method(expr, ctx)
    return call is not None and call[1] in _SAME_SHAPE and _one_dim(call[0], ctx, depth + 1) and (
        call[1] != "pow" or all(_scalar(a, ctx, depth + 1) for a in call[2]))


def _size_args(args: list) -> list:
    """The sizes given to ``view``/``reshape``/``expand`` or a factory: the elements of one tuple or list
    (``(B, L)``), else the positional arguments (``B, L``)."""
    return args[0].elts if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) else args


def _sizes_given(args: list, ctx):
    """How many sizes ``args`` give; None where a starred size, or one name that may hold a whole shape, hides it."""
    if len(args) == 1 and not isinstance(args[0], (ast.Tuple, ast.List)) and integer(args[0]) is None and \
            ctx.values.of(args[0]).kind != NUMBER:
        return None
    sizes = _size_args(args)
    return None if not sizes or any(isinstance(a, ast.Starred) for a in sizes) else len(sizes)


def _rank(expr: ast.AST, ctx, depth: int = 0):
    """How many dims ``expr`` provably has, or None: as many as the sizes given to ``torch.ones/zeros/empty/rand/
    randn`` (``torch.ones((B, L), dtype=...)``), ``t.new_ones/new_zeros/new_empty`` or ``view``/``reshape``; one
    more after ``unsqueeze``; kept by shape-keeping methods and ``transpose``; 1 for a provably 1-D tensor."""
    if depth > _DEPTH:
        return None
    expr = _assigned(expr, ctx)
    if isinstance(expr, ast.Call) and isinstance(expr.func, (ast.Attribute, ast.Name)):
        qualname = ctx.qualname(expr.func)
        if qualname in _FACTORIES or (qualname is None and getattr(expr.func, "attr", "") in _NEW_FACTORIES):
            return _sizes_given(expr.args, ctx)
    call = _method(expr, ctx)
    if call is not None:
        receiver, name, args = call
        if name in ("view", "reshape"):
            return _sizes_given(args, ctx)
        if name in ("unsqueeze", "unsqueeze_"):
            rank = _rank(receiver, ctx, depth + 1)
            return rank + 1 if rank is not None else None
        if name in _SAME_SHAPE or name == "transpose":
            return _rank(receiver, ctx, depth + 1)
    return 1 if _one_dim(expr, ctx, depth + 1) else None


def _scalar(expr: ast.AST, ctx, depth: int) -> bool:
    """A Python number or a tensor reduced to one number (``pdf.sum()``)."""
    if depth > _DEPTH:
        return False
    call = _method(_assigned(expr, ctx), ctx)
    if call is not None and call[1] in _REDUCTIONS and not call[2]:
        return True
    return ctx.values.of(expr).kind == NUMBER


def _trailing_ones(expr: ast.AST, ctx, depth: int = 0) -> tuple:
    """What the expression proves about the last two dims of a tensor: (dim -2 is 1, dim -1 is 1), each True only
    when the expression shows it: ``x.unsqueeze(-1)``, ``x[..., None]``, ``x.reshape(B, K, -1, 1)``,
    ``x.expand(B, -1, 1)``, and for a
    1-D ``x``, ``x[:, None]``, ``x[None, :]``, ``x.unsqueeze(0)``; also times a number (``2 * math.pi *
    t.unsqueeze(-1)``), which keeps the shape."""
    if depth > _DEPTH:
        return False, False
    expr = _assigned(expr, ctx)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        if _scalar(expr.left, ctx, depth + 1):
            return _trailing_ones(expr.right, ctx, depth + 1)
        return _trailing_ones(expr.left, ctx, depth + 1) if _scalar(expr.right, ctx, depth + 1) else (False, False)
    call = _method(expr, ctx)
    if call is not None:
        receiver, name, args = call
        if name in ("unsqueeze", "unsqueeze_") and len(args) == 1:
            dim = integer(args[0])
            if dim in (-1, -2):
                return dim == -2, dim == -1
            rank = _rank(receiver, ctx, depth + 1) if dim is not None and dim >= 0 else None
            if rank is not None and dim in (rank - 1, rank):  # the new dim lands last or second to last
                return dim == rank - 1, dim == rank
            return False, False
        if name in ("reshape", "view", "expand"):  # expand's -1 keeps a size: only a literal 1 tells
            sizes = _size_args(args)
            if len(sizes) >= 2:
                return integer(sizes[-2]) == 1, integer(sizes[-1]) == 1
            return False, False
        if name in _SAME_SHAPE:
            return _trailing_ones(receiver, ctx, depth + 1)
        return False, False
    if isinstance(expr, ast.Subscript):
        index = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        if any(isinstance(i, ast.Starred) for i in index):
            return False, False
        new = [isinstance(i, ast.Constant) and i.value is None for i in index]
        whole = [isinstance(i, ast.Slice) and i.lower is None and i.upper is None and i.step is None for i in index]
        ellipsis = [isinstance(i, ast.Constant) and i.value is Ellipsis for i in index]
        if any(ellipsis):  # x[..., None], x[..., None, :]: the dims after the ellipsis are the last ones
            after = index[ellipsis.index(True) + 1:]
            if not all(isinstance(i, ast.Slice) or (isinstance(i, ast.Constant) and i.value is None) for i in after):
                return False, False
            tail = [isinstance(i, ast.Constant) for i in after]
            return (len(tail) >= 2 and tail[-2]), (len(tail) >= 1 and tail[-1])
        if all(n or w for n, w in zip(new, whole)) and sum(whole) <= 1 and _one_dim(expr.value, ctx, depth + 1):
            dims = new if any(whole) else new + [False]  # x[None] of a 1-D x: (1, n)
            return (len(dims) >= 2 and dims[-2]), dims[-1]
    return False, False


_SMALL = 4  # a contraction over at most this many elements: a handful of products, no reduction order to speak of
_LITERAL_TENSORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor"})
# OpenCV's transform builders and the (rows, columns) of the matrix each returns
_CV2_MATRICES = {"cv2.getRotationMatrix2D": (2, 3), "cv2.getAffineTransform": (2, 3),
                 "cv2.getPerspectiveTransform": (3, 3)}


def _literal_matrix(literal: ast.AST) -> tuple:
    """(rows, columns) of a nested list literal (``[[c, -s], [s, c]]``); (None, n) of a flat one."""
    if not isinstance(literal, (ast.List, ast.Tuple)) or not literal.elts:
        return None, None
    rows = literal.elts
    if all(isinstance(r, (ast.List, ast.Tuple)) for r in rows) and len({len(r.elts) for r in rows}) == 1:
        return len(rows), len(rows[0].elts)
    return (None, len(rows)) if not any(isinstance(r, (ast.List, ast.Tuple, ast.Starred)) for r in rows) else (
        None, None)


def _broadcast(left: tuple, right: tuple) -> tuple:
    """The last two sizes of ``left <op> right`` under broadcasting: a size above 1 on either side is the
    result's (any other pairing is an error), two 1s stay 1, anything else is unknown."""
    def one(a, b):
        return next((s for s in (a, b) if s is not None and s != 1), 1 if a == b == 1 else None)
    return one(left[0], right[0]), one(left[1], right[1])


def _last_sizes(expr: ast.AST, ctx, depth: int = 0) -> tuple:
    """(size of dim -2, size of dim -1) of a tensor where the expression spells them as numbers, None where not:
    ``x.reshape(-1, 2, 2)``, ``x.view(n, 3)``, ``torch.eye(4)``, a tensor of a literal nested list
    (``torch.tensor([[c, -s], [s, c]])``, ``x.new_tensor(...)``), its ``.T`` / ``.t()`` / ``.transpose(-1, -2)``,
    ``torch.stack([a, b], dim=-2)`` (the stacked count), elementwise arithmetic (broadcasting), through local names,
    shape-keeping methods, a leading ``unsqueeze(0)`` and ``repeat(n, 1, 1)``."""
    if depth > _DEPTH:
        return None, None
    expr = _assigned(expr, ctx)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        if _scalar(expr.left, ctx, depth + 1):  # a number keeps the shape (``torch.tensor([[1, 3, 3, 1]]) / 8``)
            return _last_sizes(expr.right, ctx, depth + 1)
        if _scalar(expr.right, ctx, depth + 1):
            return _last_sizes(expr.left, ctx, depth + 1)
        return _broadcast(_last_sizes(expr.left, ctx, depth + 1), _last_sizes(expr.right, ctx, depth + 1))
    if isinstance(expr, ast.Attribute) and expr.attr in ("T", "mT"):
        rows, columns = _last_sizes(expr.value, ctx, depth + 1)
        return columns, rows
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, (ast.Attribute, ast.Name)):
        return None, None
    func, args = expr.func, expr.args
    qualname = ctx.qualname(func)
    if qualname in _LITERAL_TENSORS or (
            isinstance(func, ast.Attribute) and func.attr == "new_tensor" and qualname is None):
        if args and isinstance(args[0], ast.Call) and ctx.qualname(args[0].func) in _CV2_MATRICES:
            return _CV2_MATRICES[ctx.qualname(args[0].func)]
        return _literal_matrix(args[0]) if args else (None, None)
    if qualname == "torch.eye" and args:
        return integer(args[0]), integer(args[1] if len(args) > 1 else args[0])
    if qualname == "torch.stack" and args and isinstance(args[0], (ast.List, ast.Tuple)) and args[0].elts and \
            not any(isinstance(e, ast.Starred) for e in args[0].elts):
        return _stacked(args[0].elts, argument(expr, "dim", 1), ctx, depth)
    if not isinstance(func, ast.Attribute) or qualname is not None:
        return None, None
    if func.attr in ("reshape", "view"):  # ``reshape(*x.shape[:-1], 2, 2)``: the last two are what count
        sizes = _size_args(args)
        return (integer(sizes[-2]), integer(sizes[-1])) if len(sizes) >= 2 else (None, None)
    if (func.attr == "t" and not args) or (func.attr == "transpose" and {integer(a) for a in args} == {-1, -2}):
        rows, columns = _last_sizes(func.value, ctx, depth + 1)
        return columns, rows
    if func.attr in _SAME_SHAPE:
        return _last_sizes(func.value, ctx, depth + 1)
    if (func.attr == "unsqueeze" and len(args) == 1 and integer(args[0]) == 0) or (
            func.attr == "repeat" and len(args) >= 2 and integer(args[-1]) == integer(args[-2]) == 1):
        sizes = _last_sizes(func.value, ctx, depth + 1)  # dim -2 known: 2-D or more, whose last two dims stay
        return sizes if sizes[0] is not None else (None, None)
    return None, None


def _stacked(tensors: list, dim: ast.AST, ctx, depth: int) -> tuple:
    """The last two sizes of ``torch.stack(tensors, dim)`` for ``dim`` -1 or -2: the count of tensors becomes that
    dim; the other is the tensors' own last size (stack wants one shape)."""
    last = next((s for s in (_last_sizes(t, ctx, depth + 1)[1] for t in tensors) if s is not None), None)
    if integer(dim) == -1:
        return last, len(tensors)
    return (len(tensors), last) if integer(dim) == -2 else (None, None)


def small_contraction(left: ast.AST, right: ast.AST, ctx) -> bool:
    """``matmul(left, right)`` provably contracts over at most ``_SMALL`` elements: the last dim of ``left`` or
    the second-to-last of ``right`` is spelled as such a number (mmrotate 1.0.0rc1 distance_angle_point_coder.py:77,
    a rotation ``.reshape(-1, 2, 2)`` times offsets; h2rbox.py:82, ``grid.reshape(-1, 2).matmul(tf)``). Each output
    element sums a handful of products: nothing worth chasing from run to run."""
    columns = _last_sizes(left, ctx)[1]
    rows = _last_sizes(right, ctx)[0]
    return any(size is not None and 0 < size <= _SMALL for size in (columns, rows))


def outer_product(left: ast.AST, right: ast.AST, ctx) -> bool:
    """``matmul(left, right)`` provably contracts over a dimension of size 1: the last dim of ``left`` is 1, or
    ``right`` has two or more dims and its second-to-last is 1 (``a.unsqueeze(-1) @ b.unsqueeze(-2)``,
    ``y.reshape(B, K, -1, 1) @ x.reshape(B, K, 1, -1)``, ``k[:, None] @ k[None, :]`` of a 1-D ``k``). Each output
    element is one product: there is no sum whose order could change between runs."""
    return _trailing_ones(left, ctx)[1] or _trailing_ones(right, ctx)[0]


def _sole_value(name: ast.Name, ctx):
    """The one expression the function assigns to the local ``name``; None where it binds it twice or never
    (an ``if``/``else`` pair of values is not one value)."""
    bindings = ctx.model.flow(ctx.model.function(name) or ctx.tree).bindings.get(name.id, [])
    return bindings[0].value if len(bindings) == 1 and bindings[0].index is None else None


def _uncast(expr: ast.AST, ctx) -> ast.AST:
    """``expr`` without the dtype casts and moves that keep every value (``.float()``, ``.to(x)``)."""
    while (call := _method(expr, ctx)) is not None and call[1] in _CASTS and ctx.qualname(expr.func) is None:
        expr = call[0]
    return expr


def _one_column(index: ast.AST, ctx) -> bool:
    """The index of ``t.scatter_(1, index, 1)`` on a 2-D ``t`` has one column. It has ``t``'s two dims, so
    ``i.unsqueeze(1)`` is ``(n, 1)``, as are ``i.unsqueeze(-1)``, ``i[:, None]`` and ``i.view(-1, 1)``."""
    value = _sole_value(index, ctx) if isinstance(index, ast.Name) else index
    call = _method(value, ctx) if value is not None else None
    return value is not None and (_trailing_ones(value, ctx)[1] or (
        call is not None and call[1] == "unsqueeze" and len(call[2]) == 1 and integer(call[2][0]) == 1))


def one_hot_rows(expr: ast.AST, ctx) -> bool:
    """``expr`` holds a single 1 in each row and zeros elsewhere: ``F.one_hot(labels)`` (cast or moved), or a
    local ``torch.zeros(n, k)`` that the function, before this read, only fills by ``scatter_(1, index, 1)`` with
    a one-column index (the codebook lookup of a vector quantiser)."""
    expr = _uncast(expr, ctx)
    name = expr if isinstance(expr, ast.Name) else None
    value = _uncast(_sole_value(name, ctx), ctx) if name is not None else expr
    if not isinstance(value, ast.Call):
        return False
    if ctx.qualname(value.func) == "torch.nn.functional.one_hot":
        return True
    if name is None or ctx.qualname(value.func) != "torch.zeros" or len(value.args) != 2 or any(
            isinstance(a, ast.Starred) for a in value.args):
        return False
    owner = ctx.model.function(name) or ctx.tree
    here = (name.lineno, name.col_offset)
    fills = {id(n.func.value) for n in walk_tree(owner) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "scatter_" and len(n.args) == 3
             and not n.keywords and integer(n.args[0]) in (1, -1) and ctx.values.of(n.args[2]).kind == NUMBER
             and _one_column(n.args[1], ctx)}
    earlier = [n for n in walk_tree(owner) if isinstance(n, ast.Name) and n.id == name.id
               and isinstance(n.ctx, ast.Load) and (n.lineno, n.col_offset) < here]
    return bool(earlier) and all(id(n) in fills for n in earlier)


def diagonal_matrix(expr: ast.AST, ctx) -> bool:
    """``expr`` is ``torch.diag(v)`` of a vector or ``torch.diag_embed(v)`` (cast or moved, or a local assigned it
    once): a diagonal matrix, whose product with anything adds one non-zero product per output element, exact in any
    order (scvi-tools 1.4.2 module/_vae.py:885-886, ``b_identity = torch.diag(b)``; ``torch.matmul(b_identity, w)``).
    Not ``torch.diag`` of a ``v`` shown to have two dims or more, whose diagonal it extracts as a vector."""
    expr = _uncast(expr, ctx)
    value = _uncast(_sole_value(expr, ctx), ctx) if isinstance(expr, ast.Name) else expr
    if not (isinstance(value, ast.Call) and value.args):
        return False
    made_by = ctx.qualname(value.func)
    return made_by == "torch.diag_embed" or (made_by == "torch.diag" and len(value.args) == 1 and (
        _rank(value.args[0], ctx) or 1) == 1)


_EAGER = (
    "import torch\nfrom transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS\n"
    "def eager_attention_forward(module, query, key, value: torch.Tensor, scaling):\n"
    "    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling\n"
    "    return torch.matmul(attn_weights.softmax(dim=-1), value)\n"
    "class LlamaPreTrainedModel(PreTrainedModel):\n{supports}"
    "    _supports_flash_attn = True\n"
)

_FACTORED = (
    "import torch\nclass MHA(torch.nn.Module):\n    def _eager_attention(self, q, k, v: torch.Tensor):\n"
    "        return torch.matmul(torch.matmul(q, k.transpose(3, 2)).softmax(dim=-1), v)\n"
    "    def _sdpa_attention(self, q, k, v):\n        return torch.nn.functional.scaled_dot_product_attention(q, k, v)\n"
    "    def forward(self, q, k, v):\n        if self.attn_implementation == 'sdpa':\n"
    "            out = self._sdpa_attention(q, k, v)\n        else:  # eager\n"
    "            out = self._eager_attention(q, k, v)\n        return out\n"
)

_CLIP_METRICS = (
    "import torch\ndef evaluate(model, loader):\n    images, texts = [], []\n    for batch in loader:\n"
    "        out = model(batch)\n        images.append(out['image_features']{moved})\n"
    "        texts.append(out['text_features']{moved})\n"
    "    return get_clip_metrics(torch.cat(images), torch.cat(texts), out['logit_scale'].cpu())\n"
    "def get_clip_metrics(image_features, text_features, logit_scale):\n"
    "    return (logit_scale * image_features @ text_features.t()).detach().cpu()\n"
)


_KERNEL_BUFFER = ("import torch\n{default}_KERNELS = {{'linear': [1 / 8, 3 / 8, 3 / 8, 1 / 8]}}\n"
                  "class Downsample2d(torch.nn.Module):\n    def __init__(self, kernel='linear', device=None):\n"
                  "        super().__init__()\n        kernel_1d = torch.tensor([_KERNELS[kernel]]{device}) * 2\n"
                  "        self.register_buffer('kernel', kernel_1d.T @ kernel_1d)\n")


class MatmulNondeterministic(_CallAdvice):
    code = "ASC603"
    summary = "torch.matmul (or `@`), whose NPU result may not be reproducible (off by default)"
    node_types = (ast.Call, ast.BinOp)
    trigger_words = ("matmul", "@")
    apis = frozenset({"torch.matmul"})
    methods = frozenset({"matmul"})
    tips = "result may be nondeterministic; enable deterministic computing when reproducibility matters"
    why = (
        "Ascend's migration advice warns that `matmul` results on NPU may differ between runs. Because matmul "
        "is everywhere, this code is off by default in flake8; select it (`--extend-select ASC603`) when "
        "chasing run-to-run differences. `matmul(q, k.transpose(-2, -1))` is left to ASC303 "
        "(`matmul_transpose`), which already reports that call. An outer product whose shapes the expression shows "
        "(`a.unsqueeze(-1)` or `expand(B, -1, 1)` on the left, also times a number, `b.unsqueeze(-2)` or "
        "`reshape(..., 1, -1)` on the right, `k[:, None]` of a 1-D `k`, `m.unsqueeze(2)` of a `m = torch.ones((B, L))` "
        "whose sizes show two dims) contracts over one element: it sums nothing, so there is no order to differ, and it is not reported; "
        "nor is one whose expression spells a contraction over at most four elements (a rotation `.reshape(-1, 2, 2)`, a "
        "tensor of a literal 3x3 matrix, also times a number, or of OpenCV's 2x3 `getRotationMatrix2D`, `torch.eye(4)` repeated over a batch, `torch.stack([a, b], dim=-2)`, a "
        "`.view(-1, 3)` scaled elementwise): a handful of products leaves no run-to-run difference worth chasing; "
        "nor is a one-hot left operand (`F.one_hot(labels).float() @ w`, or a vector quantiser's `torch.zeros(n, k)` "
        "filled only by `scatter_(1, index.unsqueeze(1), 1)`): each output element adds one product to zeros, which "
        "is exact in any order (`one_hot.t() @ x` sums over the batch and is reported); so does a diagonal operand "
        "on either side (`torch.diag(v)` of a vector, `torch.diag_embed(v)`), which is not reported either; "
        "nor is a matmul of two host tensors (also of two constant tables made from literals in a function that "
        "places nothing on a device, such as a blur kernel's buffer in `__init__`, a parameter every caller in "
        "the file passes from the host, a `torch.cat` of `.cpu()` copies), nor the hand-written fallback of a "
        "module whose other branch calls "
        "`scaled_dot_product_attention` (or a method the file calls only from the branch beside one that reaches "
        "SDPA: `if self.attn_implementation == \"sdpa\": self._sdpa_attention(...) else: "
        "self._eager_attention(...)`), nor transformers' `eager_attention_forward` in a module that dispatches "
        "through `ALL_ATTENTION_FUNCTIONS` for a model that declares `_supports_sdpa = True` (SDPA is the NPU's fused "
        "attention: the fallback does not run by default). `a @ b` is "
        "the same product where one operand is known to be a tensor (a numpy `@` is not)."
    )
    example = "y = torch.matmul(a, b)"
    use_instead = "For reproducible runs call `torch.use_deterministic_algorithms(True)` (see ASC606)."
    source = f"{OFFICIAL_ADVICE} api_precision_dict; {ADVICE_TABLE}"
    fires = [
        # near misses of a small contraction: a reshape to 64 columns, a size the expression does not spell
        ("import torch\ndef project(x: torch.Tensor, w):\n    return torch.matmul(x.reshape(-1, 64), w)\n", 3),
        ("import torch\ndef gram(x: torch.Tensor, n):\n    return x.view(-1, n) @ x.view(n, -1)\n", 3),
        ("import torch\ny = torch.matmul(a, b)\n", 2),
        ("import torch\na = torch.ones(2, 2)\ny = a.matmul(a)\n", 3),
        ("import torch\ns = torch.matmul(q, k.transpose(0, 1))\n", 2),
        # near miss of a host tensor: moved to the device before the product
        ("import numpy as np\nimport torch\ndef relative(poses, device):\n"
         "    c2w = torch.from_numpy(np.stack(poses)).to(device)\n    return torch.matmul(c2w.inverse(), c2w)\n", 5),
        # near misses of an outer product: an inner product (the contraction runs over the whole last dim), and
        # unsqueezes whose place depends on a rank the expression does not show
        ("import torch\ndef score(a, b):\n    return torch.matmul(a.unsqueeze(-2), b.unsqueeze(-1))\n", 3),
        ("import torch\ndef pair(u, v):\n    return torch.matmul(u.unsqueeze(1), v.unsqueeze(0))\n", 3),
        # near miss of an expanded operand: -1 keeps the size, so the last dim is not known to be 1
        ("import torch\ndef freqs(inv_freq, position_ids: torch.Tensor):\n"
         "    inv = inv_freq[None, :, :].expand(position_ids.shape[0], -1, -1)\n"
         "    return inv @ position_ids[:, None, :].float()\n", 4),
        # the operator (anomalib 2.7.0 models/components/cluster/gmm.py:148: the M step of a GMM fit)
        ("import torch\ndef m_step(data, resp: torch.Tensor):\n    return resp.T @ data\n", 3),
        # near miss of the eager dispatch below: a model that does not declare SDPA support runs the eager function
        (_EAGER.format(supports=""), 4),
        # near misses of a diagonal operand: torch.diag of a matrix extracts its diagonal (a vector); the product of
        # two factors after the diagonal ones (peft 0.17.1 tuners/lora/layer.py:353-357, PiSSA)
        ("import torch\ndef f(m: torch.Tensor, w):\n    d = torch.diag(m.reshape(4, 4))\n    return torch.matmul(d, w)\n", 4),
        ("import torch\ndef pissa(Sr, Uhr, Vr):\n    lora_A = torch.diag(torch.sqrt(Sr)) @ Uhr\n"
         "    lora_B = Vr @ torch.diag(torch.sqrt(Sr))\n    return lora_B @ lora_A\n", 5),
        # near misses of a one-hot operand: transposed, it sums the embeddings of each class over the batch (flair
        # 0.15.1 nn/decoder.py:239-243); a zeros tensor scattered with several indices per row (topk); a name bound
        # in two branches, the other a soft distribution (pyannote.audio 3.3.2 utils/powerset.py:121-128)
        ("import torch\ndef prototypes(labels, encoded_embeddings):\n"
         "    one_hot = torch.nn.functional.one_hot(labels, num_classes=10).float()\n"
         "    return torch.matmul(one_hot.t(), encoded_embeddings)\n", 4),
        ("import torch\ndef quantize(d, weight, n_e):\n    indices = torch.topk(d, 3, dim=1).indices\n"
         "    encodings = torch.zeros(indices.shape[0], n_e, device=d.device)\n    encodings.scatter_(1, indices, 1)\n"
         "    return torch.matmul(encodings, weight)\n", 6),
        ("import torch\ndef to_multilabel(powerset, mapping, soft):\n    if soft:\n        probs = torch.exp(powerset)\n"
         "    else:\n        probs = torch.nn.functional.one_hot(torch.argmax(powerset, dim=-1), 7).float()\n"
         "    return torch.matmul(probs, mapping)\n", 7),
        # near misses of a spelled size: a stack along the batch dim, a view whose last size is not spelled, a
        # matrix from an unknown array
        ("import torch\ndef rotate(boxes: torch.Tensor, m, centers_T):\n"
         "    return torch.matmul(boxes.new_tensor(m), centers_T)\n", 3),
        # near miss of an outer product times a number: the factor may be a tensor that broadcasts it
        ("import torch\ndef project(weight, t: torch.Tensor, scale):\n    return scale * t.unsqueeze(-1) @ weight.T\n", 3),
        ("import torch\ndef mix(a, b, w: torch.Tensor):\n    return torch.matmul(torch.stack([a, b], dim=0), w)\n", 3),
        ("import torch\ndef scale(x: torch.Tensor, z, w):\n    return (x.view(3, -1) * z) @ w\n", 3),
        # near misses of a mask's outer product: unsqueeze(2) of a tensor whose rank is not shown, of a 3-D one (the
        # new dim is not last), of one built from a shape held in a name; a literal kernel times a tensor
        ("import torch\ndef pair_mask(mask: torch.Tensor):\n    m = mask.unsqueeze(2)\n    return m @ m.transpose(1, 2)\n", 4),
        ("import torch\ndef pair_mask(b, n, d, x):\n    m = torch.ones(b, n, d, device=x.device).unsqueeze(2)\n"
         "    return m @ m.transpose(2, 3)\n", 4),
        ("import torch\ndef pair_mask(shape, x):\n    m = torch.ones(shape, device=x.device).unsqueeze(2)\n"
         "    return m @ m.transpose(1, 2)\n", 4),
        ("import torch\ndef blur(w: torch.Tensor):\n    kernel_1d = torch.tensor([[1 / 8, 3 / 8, 3 / 8, 1 / 8]]) * w\n"
         "    return kernel_1d.T @ kernel_1d\n", 4),
        # near miss of the factored fallback below: the branch beside the eager method's call does not reach SDPA
        (_FACTORED.replace("scaled_dot_product_attention", "softmax"), 4),
        # near miss of the SDPA fallback below: a module with no fused branch
        ("import torch\nclass Attention(torch.nn.Module):\n    def forward(self, q, k, v: torch.Tensor):\n"
         "        attn = (q * self.scale) @ k.transpose(-2, -1)\n        return attn.softmax(dim=-1) @ v\n", 5),
        # near miss of the CPU copies below: the features are joined where the model left them
        (_CLIP_METRICS.format(moved=""), 10),
        # near misses of the constant kernel below: made on a device the caller names, or under a default device
        (_KERNEL_BUFFER.format(device=", device=device", default=""), 7),
        (_KERNEL_BUFFER.format(device="", default="torch.set_default_device('cuda')\n"), 8),
    ]
    passes = [
        # a constant kernel made from literals in ``__init__``, which places nothing on a device (k-diffusion
        # 0.1.1.post1 k_diffusion/layers.py:250-257): the product runs once, on the CPU
        _KERNEL_BUFFER.format(device="", default=""),
        # a product of features gathered as CPU copies (open_clip open_clip_train/train.py:285-317, 360-362)
        _CLIP_METRICS.format(moved=".cpu()"),
        # a contraction over two elements: a 2x2 rotation of offsets, a point grid times a literal 2x2 matrix
        # (mmrotate 1.0.0rc1 distance_angle_point_coder.py:72-77, h2rbox.py:76-82)
        "import torch\ndef decode(points, angle):\n    cos_a, sin_a = torch.cos(angle), torch.sin(angle)\n"
        "    rot = torch.cat([cos_a, sin_a, -sin_a, cos_a], dim=1).reshape(-1, 2, 2)\n"
        "    return torch.matmul(rot, points[..., None])\n",
        "import torch\ndef rotate(inputs, grid, cosa, sina):\n"
        "    tf = inputs.new_tensor([[cosa, -sina], [sina, cosa]], dtype=torch.float)\n"
        "    return grid.reshape(-1, 2).matmul(tf)\n",
        "import numpy as np\ny = np.matmul(a, b)\n",
        "y = a.matmul(b)\n",
        "import torch\ns = torch.matmul(q, k.transpose(-2, -1))\n",  # ASC303's matmul_transpose
        "import torch\nq = torch.ones(2, 2)\ns = q.matmul(k.mT)\n",
        # contractions over 4, 2, 2 and 3 elements: batched 4x4 camera matrices (mmagic 1.2.0 editors/eg3d/camera.py:
        # 459-471), offsets times a literal 4x2 (mmrotate 1.0.0rc1 structures/bbox/transforms.py:51-54), a stacked 2x2
        # rotation (transforms.py:77-80), votes viewed as (-1, 3) and scaled (mmdet3d 1.4.0 vote_fusion.py:119-122)
        "import torch\ndef cam2world(origin, n):\n    rotation = torch.eye(4, device=origin.device).unsqueeze(0).repeat(n, 1, 1)\n"
        "    translation = torch.eye(4, device=origin.device).unsqueeze(0).repeat(n, 1, 1)\n"
        "    translation[:, :3, 3] = origin\n    return translation @ rotation\n",
        "import torch\ndef corners(size_half, mu, Vt):\n"
        "    dx_dy = size_half * torch.tensor([[-1, 1], [1, 1], [1, -1], [-1, -1]], dtype=torch.float32)\n"
        "    return mu + dx_dy.matmul(Vt.transpose(1, 2))\n",
        "import torch\ndef gaussian(edge, w, diag):\n    cos_sin = edge / w\n"
        "    neg = torch.tensor([[1, -1]], dtype=torch.float32).to(cos_sin.device)\n"
        "    R = torch.stack([cos_sin * neg, cos_sin[..., [1, 0]]], dim=-2)\n    return R.matmul(diag)\n",
        "import torch\ndef votes(du, dv, z_cam, depth2img):\n"
        "    imvote = torch.cat([du, dv, torch.zeros_like(dv)], dim=-1).view(-1, 3)\n"
        "    imvote = imvote * z_cam.reshape(-1, 1)\n    return imvote @ torch.inverse(depth2img.t())\n",
        # a rotation from OpenCV, 2x3 (mmrotate 1.0.0rc1 structures/bbox/rotated_boxes.py:205-211), and an outer
        # product scaled by numbers (diffusers 0.42.1 models/transformers/transformer_minimax_music3.py:38)
        "import cv2\nimport torch\ndef rotate(boxes: torch.Tensor, center, angle, centers_T):\n"
        "    rotation_matrix = boxes.new_tensor(cv2.getRotationMatrix2D(center, -angle, 1))\n"
        "    return torch.matmul(rotation_matrix, centers_T)\n",
        "import math\nimport torch\ndef project(weight, timestep: torch.Tensor):\n"
        "    return 2.0 * math.pi * timestep.unsqueeze(-1) @ weight.T\n",
        # one-hot left operands: a vector quantiser's codebook lookup (NeMo 2.5.0 video_tokenizers/modules/
        # quantizers.py:306-309, anomalib's DSR), and F.one_hot cast to float
        "import torch\ndef quantize(z, d, weight, n_e):\n    encoding_indices = torch.argmin(d, dim=1).unsqueeze(1)\n"
        "    encodings = torch.zeros(encoding_indices.shape[0], n_e, device=z.device)\n"
        "    encodings.scatter_(1, encoding_indices, 1)\n    return torch.matmul(encodings, weight)\n",
        "import torch\nimport torch.nn.functional as F\ndef lookup(labels, table):\n"
        "    return torch.matmul(F.one_hot(labels, 10).float(), table)\n",
        # diagonal operands: one product per output element (scvi-tools 1.4.2 module/_vae.py:885-886, neuralforecast
        # 3.0.2 models/stemgnn.py:348-352, diffusers 0.42.1 models/transformers/transformer_wan_animate.py:347-348)
        "import torch\ndef get_loadings(self, b, w):\n    b_identity = torch.diag(b)\n"
        "    return torch.matmul(b_identity, w)\n",
        "import torch\ndef laplacian(degree, attention):\n    d_hat = torch.diag(1 / (torch.sqrt(degree) + 1e-7))\n"
        "    return torch.matmul(d_hat, torch.matmul(torch.diag(degree) - attention, d_hat))\n",
        "import torch\ndef decompose(motion_feat, Q):\n    return torch.matmul(torch.diag_embed(motion_feat), Q.T)\n",
        # host tensors: built from numpy and never moved (diffusers 0.42.1 pipelines/sana_wm/cam_utils.py:277-style)
        "import numpy as np\nimport torch\ndef relative(poses):\n    c2w = torch.from_numpy(np.stack(poses))\n"
        "    return torch.matmul(c2w.inverse(), c2w)\n",
        # outer products, a contraction over one element: nothing is summed (mmpose 1.3.2
        # heads/coord_cls_heads/simcc_head.py:295-299, diffusers 0.42.1 hooks/smoothed_energy_guidance_utils.py:147-153)
        "import torch\ndef predict(batch_pred_x, batch_pred_y):\n    B, K, _ = batch_pred_x.shape\n"
        "    x = batch_pred_x.reshape(B, K, 1, -1)\n    y = batch_pred_y.reshape(B, K, -1, 1)\n"
        "    batch_heatmaps = torch.matmul(y, x)\n    return batch_heatmaps\n",
        "import torch\ndef blur(query, kernel_size: int, sigma: float):\n    half = (kernel_size - 1) / 2\n"
        "    x = torch.linspace(-half, half, steps=kernel_size)\n    pdf = torch.exp(-0.5 * (x / sigma).pow(2))\n"
        "    kernel1d = pdf / pdf.sum()\n    kernel1d = kernel1d.to(query)\n"
        "    return torch.matmul(kernel1d[:, None], kernel1d[None, :])\n",
        "import torch\ndef outer(a, b):\n    return torch.matmul(a.unsqueeze(-1), b.unsqueeze(-2))\n",
        "import torch\ndef outer(a, b):\n    return a[..., None].matmul(b[..., None, :])\n",
        # one operand from numpy: the product runs on the host (diffusers 0.42.1 pipelines/sana_wm/cam_utils.py:277)
        "import torch\ndef prepare(poses_c2w, first_inv):\n    poses = torch.from_numpy(poses_c2w).float()\n"
        "    return torch.matmul(first_inv, poses[1:])\n",
        # near misses of the operator: numpy arrays, operands of unknown kind, an outer product
        "import numpy as np\nimport torch\ndef m_step(data, resp):\n    resp = np.asarray(resp)\n    return resp.T @ data\n",
        "import torch\ndef m_step(data, resp):\n    return resp.T @ data\n",
        # transformers' eager attention function, the fallback of a model that supports SDPA (transformers 4.57.6
        # models/llama/modeling_llama.py:150-174, xtuner's internlm3 copy)
        _EAGER.format(supports="    _supports_sdpa = True\n"),
        # a fallback factored into a method, called only beside the branch that reaches SDPA (darts 0.41.0
        # models/components/chronos2_submodels.py:276-398)
        _FACTORED,
        # the fallback of a module that calls scaled_dot_product_attention by default (timm 1.0.31 nest.py:99)
        "import torch\nimport torch.nn.functional as F\nclass Attention(torch.nn.Module):\n"
        "    def forward(self, q, k, v: torch.Tensor):\n        if self.fused_attn:\n"
        "            x = F.scaled_dot_product_attention(q, k, v)\n        else:\n"
        "            attn = (q * self.scale) @ k.transpose(-2, -1)\n            x = attn.softmax(dim=-1) @ v\n"
        "        return x\n",
        "import torch\ndef outer(a: torch.Tensor, b: torch.Tensor):\n    return a.unsqueeze(-1) @ b.unsqueeze(-2)\n",
        # a pairwise mask as an outer product of a (B, L) mask unsqueezed to (B, L, 1) (diffusers 0.42.1
        # models/transformers/transformer_cogview4.py:268-276 and :172-175), and a 4-tap kernel (1, 4) scaled by a
        # number, whose transpose times itself is an outer product (models/upsampling.py:337-339)
        "import torch\ndef pair_mask(batch_size, text_seq_length, image_seq_length, text_attn_mask, dtype, device):\n"
        "    mixed_attn_mask = torch.ones(\n        (batch_size, text_seq_length + image_seq_length), dtype=torch.int32, "
        "device=device\n    )\n    mixed_attn_mask[:, :text_seq_length] = text_attn_mask\n"
        "    mixed_attn_mask_input = mixed_attn_mask.unsqueeze(2).to(dtype=dtype)\n"
        "    return mixed_attn_mask_input @ mixed_attn_mask_input.transpose(1, 2)\n",
        "import torch\ndef pair_mask(batch_size, n, query):\n"
        "    mix_attn_mask = torch.ones((batch_size, n), device=query.device)\n"
        "    mix_attn_mask = mix_attn_mask.unsqueeze(2)\n    return mix_attn_mask @ mix_attn_mask.transpose(1, 2)\n",
        "import torch\ndef blur(device):\n    kernel_1d = (torch.tensor([[1 / 8, 3 / 8, 3 / 8, 1 / 8]]) * 2).to(device)\n"
        "    return kernel_1d.T @ kernel_1d\n",
        # a rotary embedding's frequencies, expanded to a last dim of 1 (diffusers 0.42.1
        # models/transformers/transformer_omnigen.py:165-173)
        "import torch\ndef freqs(inv_freq, position_ids: torch.Tensor):\n"
        "    inv = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)\n"
        "    return inv.float() @ position_ids[:, None, :].float()\n",
    ]

    def check(self, node, ctx) -> None:
        if not isinstance(node, ast.BinOp):
            super().check(node, ctx)
        elif isinstance(node.op, ast.MatMult) and (ctx.is_tensor(node.left) or ctx.is_tensor(node.right)) and \
                not self._quiet_operands(node.left, node.right, ctx) and not attention_fallback(node, ctx):
            ctx.report(node, self.code, self.message("a @ b (torch.matmul)"), api="torch.matmul", tips=self.tips)

    def stays_quiet(self, node: ast.Call, ctx) -> bool:
        """``matmul(q, k.transpose(-2, -1))`` is ASC303's (``torch_npu.contrib.function.matmul_transpose``); a
        matmul with a host tensor never runs on the NPU (torch refuses operands on two devices, so the other one
        is on the host too); an outer product sums nothing."""
        method = isinstance(node.func, ast.Attribute) and ctx.chain(node.func) is None
        operands = [node.func.value, *node.args[:1]] if method else node.args[:2]
        return len(operands) == 2 and self._quiet_operands(*operands, ctx) or attention_fallback(node, ctx)

    @staticmethod
    def _quiet_operands(left: ast.AST, right: ast.AST, ctx) -> bool:
        return transposed_last_two(right, ctx) or any(ctx.values.on_host_here(o) or ctx.values.is_array(o)
                                                      for o in (left, right)) \
            or ctx.values.host_side(left) and ctx.values.host_side(right) or outer_product(left, right, ctx) \
            or small_contraction(left, right, ctx) or one_hot_rows(left, ctx) or diagonal_matrix(left, ctx) \
            or diagonal_matrix(right, ctx)

    def message(self, api: str) -> str:
        return f"{api} results may differ slightly from run to run on NPU [nondeterministic result]"


class SeluHalfBackward(_CallAdvice):
    code = "ASC604"
    summary = "SELU, whose fp16 backward on NPU accumulates more error than on GPU"
    trigger_words = ("selu", "SELU")
    apis = frozenset({"torch.selu", "torch.selu_", "torch.nn.functional.selu", "torch.nn.SELU"})
    tips = "compute it as torch.ops.aten.elu(x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946)"
    why = (
        "The Ascend docs note that the float16 backward of SELU on NPU accumulates a larger error than the "
        "GPU kernel. SELU is ELU with fixed alpha and scale; the docs' workaround computes it with the ELU op."
    )
    example = "y = F.selu(x)"
    use_instead = ("Compute the forward as ELU with SELU's constants: "
                   "`torch.ops.aten.elu(x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946)`.")
    source = f"{ASCEND_API_DOCS}pytorch_2-13-0/torch-nn-functional.md (restrictions of selu); {ADVICE_TABLE}"
    fires = [
        ("import torch.nn.functional as F\ny = F.selu(x)\n", 2),
        ("import torch.nn as nn\nact = nn.SELU()\n", 2),
    ]
    passes = ["import torch.nn as nn\nact = nn.ELU()\n", "def selu(x):\n    return x\ny = selu(1)\n"]

    def message(self, api: str) -> str:
        return (f"{api} in float16 accumulates more backward error on NPU than on GPU (use aten.elu with SELU's "
                "alpha and scale) [fp16 backward precision]")


_INF_NAN_CHECKS = frozenset("isnan isinf isfinite isposinf isneginf nan_to_num nanmean nansum nanmedian "
                            "nanquantile".split())
_INF_NAN_CONSTANTS = frozenset(f"{m}.{c}" for m in ("math", "numpy", "torch") for c in ("inf", "nan"))
_INF_NAN_TEXT = frozenset(("inf", "-inf", "+inf", "infinity", "-infinity", "nan"))
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

# Real lines: a low-rank decomposition that checks its SVD for nan/inf (CorDA-style build_corda.py), and a
# ranking loss whose targets carry nan (``torch.isfinite(target)``); the sanitised line is the one it ships.
_SVD_CHECKED = (
    "import torch\ndef decompose(w):\n    U, S, V = torch.linalg.svd(w, full_matrices=False)\n"
    "    if torch.isnan(S).any() or torch.isinf(S).any():\n        raise Exception('nan or inf in S')\n"
    "    return U, S, V\n"
)
_RANK_LOSS = (
    "import torch\nimport torch.nn.functional as F\n\ndef rank_loss(prediction, target, left, right):\n"
    "    true_difference = target[:, right] - target[:, left]\n"
    "    defined = torch.isfinite(target[:, left]) & torch.isfinite(target[:, right])\n"
    "    orientation = {sign}\n"
    "    raw = F.softplus(-orientation * (prediction[:, right] - prediction[:, left]))\n"
    "    return (raw * defined).mean()\n"
)


class InfNanHandling(_CallAdvice):
    code = "ASC605"
    summary = "sign / linalg.svd / linalg.qr where the code deals with inf/nan, whose NPU handling differs"
    trigger_words = ("sign", "svd", "qr")
    apis = frozenset({"torch.sign", "torch.linalg.svd", "torch.linalg.qr"})
    methods = frozenset({"sign", "sign_"})
    tips = "inf/nan inputs give different results than native PyTorch"
    why = (
        "Ascend lists these ops as handling inputs that contain inf or nan differently from native PyTorch (an "
        "input that overflows can also give inf where the GPU gives nan, or an inf of the opposite sign); on "
        "finite inputs they agree. So the advice matters where inf/nan are in play: the function tests for "
        "them (`isnan`, `isinf`, `isfinite`, `nan_to_num`...) or builds them (`float('inf')`, `math.nan`, "
        "`torch.inf`). An SVD of finite predictions or the sign of a finite determinant, in a function that "
        "never deals with inf/nan, does not fire; nor does an operand sanitised by `nan_to_num` first, or a "
        "tensor on the host."
    )
    example = ("U, S, V = torch.linalg.svd(w, full_matrices=False)\n"
               "if torch.isnan(S).any() or torch.isinf(S).any():\n    raise Exception('nan or inf in S')")
    use_instead = "Sanitise inputs first (`torch.nan_to_num(x)`) or check `torch.isfinite` before the op where it matters."
    source = f"{ASCEND_API_DOCS}appendixes/inf_nan_difference_apis.md; {ADVICE_TABLE}"
    fires = [
        (_SVD_CHECKED, 3),
        (_RANK_LOSS.format(sign="torch.sign(true_difference)"), 7),
        (_RANK_LOSS.format(sign="true_difference.sign()"), 7),
        ("import torch\ns = torch.sign(x)\nok = torch.isfinite(s).all()\n", 2),
    ]
    passes = [
        "import numpy as np\ns = np.sign(x)\n", "import torch\nq = torch.quantile(x, 0.5)\n", "s = x.sign()\n",
        # a constant coordinate table holds no inf/nan (timm swin_transformer_v2.py:203)
        "import torch\nt = torch.arange(-3, 4, dtype=torch.float32) * 8\ns = torch.sign(t)\nok = torch.isinf(s)\n",
        "import torch\nx = torch.randn(3).cpu()\ns = x.sign()\nok = torch.isnan(s)\n",
        # the line the ranking loss ships: sanitised first
        _RANK_LOSS.format(sign="torch.sign(torch.nan_to_num(true_difference))"),
        # diffusers tangential_classifier_free_guidance.py:138: an SVD of finite fp32 predictions
        "import torch\ndef normalized_guidance(pred_cond, pred_uncond, guidance_scale):\n"
        "    preds = torch.stack([pred_cond, pred_uncond], dim=1).float()\n    preds = preds.flatten(2)\n"
        "    U, S, Vh = torch.linalg.svd(preds, full_matrices=False)\n    return Vh\n",
        # diffusers transformer_rfd4_proteina.py:232-234: a rotation fit; the file tests isfinite elsewhere
        "import torch\ndef load(values):\n    return torch.nan_to_num(values) * torch.isfinite(values)\n\n"
        "def align(supplied, noisy):\n    u, singular, vh = torch.linalg.svd((supplied.transpose(-1, -2) @ noisy).float())\n"
        "    signs = torch.ones_like(singular)\n    signs[..., -1] = torch.linalg.det(u @ vh).sign()\n"
        "    return (u * signs[..., None, :]) @ vh\n",
        # diffusers transformer_wan_animate.py:345: QR of a weight; timm lion.py:209: the sign of a momentum
        "import torch\ndef motion(weight, feat):\n    Q = torch.linalg.qr(weight.to(torch.float32))[0]\n    return feat @ Q.T\n",
        "import torch\ndef lion(exp_avg, grad, beta1):\n    update = exp_avg.lerp(grad, 1 - beta1).sign_()\n    return update\n",
    ]

    def message(self, api: str) -> str:
        return f"{api} handles inf/nan inputs differently on NPU (inf vs nan, sign of inf) [inf/nan semantics]"

    def stays_quiet(self, node: ast.Call, ctx) -> bool:
        if self.host_side(node, ctx):  # inf/nan come from data: none in CPU or constant tables
            return True
        func = node.func
        operand = node.args[0] if ctx.chain(func) is not None and node.args else getattr(func, "value", None)
        if operand is not None and _sanitised(operand, ctx):
            return True
        owner = ctx.model.function(node) or ctx.tree
        return not ctx.memo(f"inf_nan.{id(owner)}", lambda c: _deals_with_inf_nan(owner, c))


def _sanitised(operand: ast.AST, ctx) -> bool:
    """``torch.nan_to_num(x)`` (or a name bound to it): the op sees no inf/nan."""
    owner = ctx.model.function(operand) or ctx.tree
    operand = ctx.model.flow(owner).resolve(operand) if isinstance(operand, ast.Name) else operand
    return isinstance(operand, ast.Call) and last_name(operand.func) == "nan_to_num"


def _deals_with_inf_nan(owner: ast.AST, ctx) -> bool:
    """The body of ``owner`` (nested defs left out) tests for inf/nan or builds them."""
    stack = list(owner.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            name = last_name(node.func)
            if name in _INF_NAN_CHECKS:
                return True
            if name == "float" and ctx.qualname(node.func) is None and node.args and isinstance(
                    node.args[0], ast.Constant) and str(node.args[0].value).strip().lower() in _INF_NAN_TEXT:
                return True
        elif isinstance(node, ast.Attribute) and node.attr in ("inf", "nan") and \
                ctx.qualname(node) in _INF_NAN_CONSTANTS:
            return True
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _NESTED))
    return False


class DeterministicWithoutFill(Rule):
    code = "ASC606"
    summary = "torch.use_deterministic_algorithms(True) without fill_uninitialized_memory"
    node_types = (ast.Call,)
    trigger_words = ("use_deterministic_algorithms",)
    why = (
        "On NPU, deterministic mode does not fill uninitialised memory (`torch.empty`) by default, unlike "
        "native PyTorch, so results can still depend on leftover memory contents. Collectives need "
        "`HCCL_DETERMINISTIC=true` as well. Fires on `use_deterministic_algorithms(...)` not given a literal "
        "False when the file never mentions `fill_uninitialized_memory`."
    )
    example = "torch.use_deterministic_algorithms(True)"
    use_instead = ("Also set `torch.utils.deterministic.fill_uninitialized_memory = True` (and export "
                   "`HCCL_DETERMINISTIC=true` for distributed runs); set it once, in the main training process.")
    source = (f"{ASCEND_API_DOCS}pytorch_2-13-0/torch.md (use_deterministic_algorithms); "
              f"{ASCEND_API_DOCS}deterministic_computing_apis.md; {ADVICE_TABLE}")
    fires = [("import torch\ntorch.use_deterministic_algorithms(True)\n", 2)]
    passes = [
        "import torch\ntorch.use_deterministic_algorithms(False)\n",
        "import torch\ntorch.use_deterministic_algorithms(True)\n"
        "torch.utils.deterministic.fill_uninitialized_memory = True\n",
    ]

    def check(self, node, ctx) -> None:
        if callee(node, ctx, _DETERMINISTIC_LASTS) != "torch.use_deterministic_algorithms":
            return
        if is_constant(argument(node, "mode", 0), False) or "fill_uninitialized_memory" in source_text(ctx):
            return
        ctx.report(node, self.code, "deterministic mode on NPU leaves uninitialised memory unfilled (also set "
                   "torch.utils.deterministic.fill_uninitialized_memory = True; HCCL_DETERMINISTIC=true for "
                   "collectives) [NPU deterministic mode]", api="torch.use_deterministic_algorithms",
                   tips="also set torch.utils.deterministic.fill_uninitialized_memory=True; HCCL_DETERMINISTIC=true")
