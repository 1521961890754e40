"""ASC206: imports of CUDA-only third-party packages.

``mmcv.ops`` is decided per imported name from mmcv 2.1.0's own sources
(``data/mmcv_ops.json``, built by tools/build_mmcv_ops.py): a name is reported
only when it reaches an operator with a CUDA kernel and no NPU kernel and its
Python code has no other path on an NPU, so pure-Python helpers
(``point_sample``), ops mmcv implements for NPU (``PSAMask``, ``nms``) and ops
whose Python dispatch calls torch_npu or falls back to PyTorch
(``DeformConv2d``, ``MultiScaleDeformableAttention``) stay quiet.  Names the table does not know are
reported as before.
"""
from __future__ import annotations

import ast
from typing import FrozenSet, List

from ..data import load_mmcv_ops
from ..detect.cuda_packages import CUDA_ONLY_PACKAGES, packages_spelled
from ..registry import Rule
from ..walk import walk_tree

MMCV_OPS = "mmcv.ops"

def _cuda_only(module: str):
    for package, instead in CUDA_ONLY_PACKAGES.items():
        if module == package or module.startswith(package + "."):
            return package, instead
    return None


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


_GUARD_PREFIXES = ("has_", "_has_", "can_use", "_can_use")


def _availability_name(name: str) -> bool:
    """``is_xformers_available``, ``_CAN_USE_FLASH_ATTN_3``, ``HAS_APEX``, ``triton_available``: a name that says
    whether an optional package (or CUDA) is there."""
    name = name.lower()
    return "available" in name or name.startswith(_GUARD_PREFIXES)


def _availability_test(test: ast.expr) -> bool:
    """Does an ``if`` test ask whether something is available (a call or a flag named so, alone or and-ed)?"""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_availability_test(value) for value in test.values)
    if isinstance(test, ast.Call):
        test = test.func
    if isinstance(test, ast.Attribute):
        return _availability_name(test.attr)
    return isinstance(test, ast.Name) and _availability_name(test.id)


def _raises(block: List[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], ast.Raise)


def _after_missing_exit(parent: ast.AST, child: ast.AST) -> bool:
    """An earlier statement of ``child``'s block is ``if not <available>: return ...`` (not a raise): the import
    runs only where the package is installed, and the code does without it elsewhere (peft 0.17.1
    import_utils.py:30-33, ``if not is_bnb_available(): return False`` then ``import bitsandbytes as bnb``)."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(s is child for s in block):
            for earlier in block[:next(i for i, s in enumerate(block) if s is child)]:
                if isinstance(earlier, ast.If) and earlier.body and isinstance(
                        earlier.body[-1], (ast.Return, ast.Continue, ast.Break)) and isinstance(
                        earlier.test, ast.UnaryOp) and isinstance(earlier.test.op, ast.Not) and _availability_test(
                        earlier.test.operand):
                    return True
    return False


def _optional(node: ast.AST, ctx) -> bool:
    """An import the code does without where the package is missing, as on an NPU machine: in a ``try`` whose
    ``except ImportError`` carries on (a fallback, not a raise), in the body of an ``if`` that first asks whether
    the package is available (``if is_xformers_available(): import xformers``) and does not raise otherwise,
    or after an ``if not <available>: return``. A branch taken for a package-specific option is not optional
    here: the package is what the option needs (litgpt 0.5.13 finetune/lora.py:221, the QLoRA path)."""
    for parent, child in ctx.lineage(node):
        if isinstance(parent, ast.If) and any(s is child for s in parent.body) and _availability_test(
                parent.test) and not _raises(parent.orelse):
            return True
        if isinstance(child, ast.stmt) and _after_missing_exit(parent, child):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
        if isinstance(parent, ast.Try) and any(s is child for s in parent.body):
            for handler in parent.handlers:
                names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                caught = handler.type is None or any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS
                                                     for n in names)
                if caught and not isinstance(handler.body[-1], ast.Raise):
                    return True
    return False


def _package(node: ast.AST) -> str:
    """The CUDA-only package an import statement names ('' for none): ``mmcv.ops`` or the listed package."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return ""
        modules = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
    else:
        modules = [alias.name for alias in node.names]
    found = next((_cuda_only(m) for m in modules if _cuda_only(m)), None)
    return found[0] if found else ""


def _ops_named(module: str, ctx) -> List[str]:
    """The ``mmcv.ops`` names the file uses as ``ops.<name>``, for ``from mmcv import ops``: decided per name as
    ``from mmcv.ops import <name>`` is.  ``getattr(ops, cfg['type'])`` (mmdet 3.1.0
    roi_extractors/base_roi_extractor.py:7) leaves the op to the configuration: nothing to decide."""
    return sorted({node.attr for node in walk_tree(ctx.tree) if isinstance(node, ast.Attribute)
                   and isinstance(node.value, ast.Name) and node.value.id == module})


def _type_checks_only(node: ast.AST, scope: ast.AST) -> bool:
    """Every use of the names the import binds, in ``scope`` (its function, or the module), is the type of an
    ``isinstance``/``issubclass`` check (``import bitsandbytes as bnb`` then ``isinstance(m, bnb.nn.Int8Params)``)."""
    bound = {(alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name != "*"}
    types = {id(n) for call in walk_tree(scope) if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
             and call.func.id in ("isinstance", "issubclass") and len(call.args) == 2 for n in walk_tree(call.args[1])}
    uses = [n for n in walk_tree(scope) if isinstance(n, ast.Name) and n.id in bound and isinstance(n.ctx, ast.Load)]
    return bool(bound) and bool(uses) and all(id(n) in types for n in uses)


def _imports_by_scope(tree: ast.AST):
    """(import statement, the function or module whose names it binds) for every import of the file."""
    pending = [(tree, tree)]
    while pending:
        owner, node = pending.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, owner
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                pending.append((child, child))
            else:
                pending.append((owner, child))


def _redundant_type_check(node: ast.AST, ctx) -> bool:
    """The import only types ``isinstance`` checks, and the file also imports the package for real use (that
    import is the finding): recognising the package's own objects breaks nothing new (diffusers 0.42.1
    bnb_quantizer.py:463 beside :487). The only import of the file stays reported: the objects it recognises are
    built elsewhere, often from a config (mmdet 3.1.0 necks/fpn_carafe.py:4, CARAFE by ``type='carafe'``)."""
    package = _package(node)
    scope = ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef) or ctx.tree
    if not package or not _type_checks_only(node, scope):
        return False
    # only imports of a package need the walks of ``_type_checks_only`` (the others' package is "")
    used = ctx.memo("cuda_packages_used", lambda c: {found for i, owner in _imports_by_scope(c.tree)
                                                     for found in (_package(i),)
                                                     if found and not _type_checks_only(i, owner)})
    return package in used


def _tested_packages(ctx) -> FrozenSet[str]:
    """The CUDA-only packages whose availability the file's ``if`` tests ask (``if is_bnb_available():``), leaving
    out a test that only raises (``if not is_bnb_available(): raise ImportError(...)``: the package is required)."""
    def build(c) -> FrozenSet[str]:
        found = set()
        for node in walk_tree(c.tree):
            if isinstance(node, (ast.If, ast.IfExp)) and not (isinstance(node, ast.If) and _raises(node.body)):
                for part in walk_tree(node.test):
                    name = part.id if isinstance(part, ast.Name) else part.attr if isinstance(
                        part, ast.Attribute) else ""
                    if name and _availability_name(name):
                        found.update(packages_spelled(name))
        return frozenset(found)
    return ctx.memo("cuda_packages_tested", build)


def _integration_module(package: str, ctx) -> bool:
    """An unconditional module-level import of ``package`` in a file that also tests whether ``package`` is
    available: a module written to be imported only where the package is installed, since without it its first
    line fails (peft 0.17.1 tuners/lora/bnb.py:19, imported only under ``is_bnb_available()`` by
    tuners/lora/model.py:340). Whatever imports it is where a run opts into the package."""
    return isinstance(ctx.parent, ast.Module) and package in _tested_packages(ctx)


class CudaOnlyPackage(Rule):
    code = "ASC206"
    summary = "import of a CUDA-only third-party package (apex, flash_attn, xformers, bitsandbytes, triton, mmcv.ops...)"
    node_types = (ast.Import, ast.ImportFrom)
    trigger_words = tuple(sorted({p.split(".")[0] for p in CUDA_ONLY_PACKAGES}))
    why = (
        "These packages ship CUDA kernels; they do not install or do not run on an Ascend NPU. An import the code "
        "does without where the package is missing is not reported: in a `try` whose `except ImportError` falls "
        "back, or under an availability guard (`if is_xformers_available():`, `if HAS_APEX:`, "
        "`if torch.cuda.is_available():`, alone or and-ed, with no `raise` on the other side), after an "
        "`if not <available>: return`; nor a module-level "
        "import in a file that tests whether that package is available (a module only imported where it is); nor "
        "one whose names only serve as the type of "
        "`isinstance`/`issubclass` checks when the file also imports the package for real use (reported there)."
    )
    example = "from flash_attn import flash_attn_func"
    use_instead = ("Replace the package with its NPU counterpart named in the message. Off by default (one file does "
                   "not show whether every run imports the module or only an opt-in path does): enable with "
                   "`--extend-select ASC206`.")
    source = "rules_data/sources/cuda/cuda_api_catalog.tsv; torch_npu transfer_to_npu.py (triton disabled)"
    fires = [
        ("import apex\n", 1),
        ("from flash_attn import flash_attn_func\n", 1),
        ("from mmcv.ops import CARAFEPack\n", 1),  # mmdet 3.1.0 models/necks/fpn_carafe.py:4: no NPU kernel
        ("from mmcv.ops import nms, CARAFEPack\n", 1),
        ("from mmcv.ops.carafe import CARAFEPack\n", 1),
        ("from mmcv import ops\nlayer = ops.CARAFEPack(64)\n", 1),  # as ``from mmcv.ops import CARAFEPack``
        ("import triton.language as tl\n", 1),
        # a required import: the handler gives up instead of falling back
        ("try:\n    from apex import amp\nexcept ImportError:\n    raise ImportError('install apex')\n", 2),
        # the guard raises, the import is required; and an import in the else branch of the guard
        ("if not is_bitsandbytes_available():\n    raise ImportError('pip install bitsandbytes')\n"
         "import bitsandbytes as bnb\n", 3),
        ("if is_apex_available():\n    pass\nelse:\n    import apex\n", 4),
        # the guard's other side raises: the package is required (peft 0.17.1 utils/loftq_utils.py:192-195)
        ("def loftq_init(weight):\n    if is_bnb_available():\n        import bitsandbytes as bnb\n    else:\n"
         "        raise ValueError('bitsandbytes is not available')\n", 3),
        # a branch a package-specific option takes: what the option needs (litgpt 0.5.13 finetune/lora.py:221)
        ("def main(args):\n    if args.use_bnb_linear is not None:\n        import bitsandbytes as bnb\n", 3),
        # near misses of an integration module: the file tests another package's availability, or none
        ("import bitsandbytes as bnb\nif is_xformers_available():\n    import xformers\n", 1),
        ("import bitsandbytes as bnb\n\nclass Linear8bitLt(bnb.nn.Linear8bitLt):\n    pass\n", 1),
        # the import is used for more than a type check (diffusers 0.42.1 bnb_quantizer.py:134, judged right)
        ("def create_quantized_param(module, value):\n    import bitsandbytes as bnb\n"
         "    if isinstance(module, bnb.nn.Linear4bit):\n        return bnb.nn.Params4bit(value)\n", 2),
        # a type check is the file's only import of the package: what it recognises is built from a config
        # (mmdet 3.1.0 models/necks/fpn_carafe.py:4, upsample_cfg=dict(type='carafe'))
        ("from mmcv.ops.carafe import CARAFEPack\n\nclass FPN_CARAFE:\n    def init_weights(self):\n"
         "        for m in self.modules():\n            if isinstance(m, CARAFEPack):\n                m.init_weights()\n", 1),
    ]
    passes = ["import mmcv\n", "from mmcv.cnn import ConvModule\n", "import apexlib\n", "from . import triton\n",
              # mmdet 3.1.0 models/utils/point_sample.py:3 (pure Python) and mmseg 1.2.2
              # models/decode_heads/psa_head.py:12 (mmcv has NPU kernels for PSAMask)
              "from mmcv.ops import point_sample\n",
              "from mmcv.ops import point_sample, rel_roi_point_to_rel_img_point\n",
              "try:\n    from mmcv.ops import PSAMask\nexcept ModuleNotFoundError:\n    PSAMask = None\n",
              "from mmcv.ops import batched_nms, nms\n",
              "from mmcv import ops\nkeep = ops.nms(boxes, scores, 0.5)\n",
              "from mmcv import ops\n\ndef build_roi_layers(layer_cfg):\n    layer_cls = getattr(ops, layer_cfg.pop('type'))\n"
              "    return layer_cls(**layer_cfg)\n",
              "from mmcv.ops.merge_cells import GlobalPoolingCell, SumCell\n",
              # mmcv's Python code runs them on an NPU: deform_conv.py:104 calls torch_npu for NPU tensors,
              # multi_scale_deform_attn.py:366 takes a pure-PyTorch path off CUDA (mmdet fovea_head.py:7,
              # deformable_detr_layers.py:7)
              "from mmcv.ops import DeformConv2d\n", "from mmcv.ops import MultiScaleDeformableAttention\n",
              # upfirdn2d.py:112 runs the CUDA kernel only for ``input.device.type == 'cuda'``, else
              # ``_upfirdn2d_ref`` (mmagic 1.2.0 stylegan2/stylegan2_modules.py:8)
              "from mmcv.ops.upfirdn2d import upfirdn2d\n",
              # an optional accelerator with a fallback (timm 1.0.31 layers/fast_norm.py:14-18, utils/cuda.py:7-12)
              "try:\n    from apex.normalization.fused_layer_norm import fused_layer_norm_affine\n"
              "    has_apex = True\nexcept ImportError:\n    has_apex = False\n",
              "try:\n    from apex import amp\n    has_apex = True\nexcept (ImportError, OSError):\n    amp = None\n",
              # an availability guard: skipped where the package is not installed (diffusers 0.36 commands/env.py:110,
              # quantizers/bitsandbytes/utils.py:30)
              "def env():\n    if is_xformers_available():\n        import xformers\n        return xformers.__version__\n",
              "if is_bitsandbytes_available():\n    import bitsandbytes as bnb\n",
              "if _CAN_USE_FLASH_ATTN and torch.cuda.is_available():\n    from flash_attn import flash_attn_func\n",
              # an early return where the package is missing (peft 0.17.1 import_utils.py:29-35)
              "def is_bnb_4bit_available():\n    if not is_bnb_available():\n        return False\n"
              "    import bitsandbytes as bnb\n    return hasattr(bnb.nn, 'Linear4bit')\n",
              # a module that tests whether the package it imports is there: imported only where it is
              # (peft 0.17.1 tuners/lora/bnb.py:19-27)
              "import bitsandbytes as bnb\nimport torch\nfrom peft.import_utils import is_bnb_available\n\n"
              "if is_bnb_available():\n    class Linear8bitLt(torch.nn.Module):\n        pass\n"]

    def check(self, node, ctx) -> None:
        if _optional(node, ctx) or _redundant_type_check(node, ctx):
            return
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith(MMCV_OPS + "."):
            node_module = node.module[len(MMCV_OPS) + 1:]
            self._mmcv_names(node, [f"{node_module}.{alias.name}" for alias in node.names], ctx)
            return
        if isinstance(node, ast.ImportFrom) and node.module == MMCV_OPS and all(a.name != "*" for a in node.names):
            self._mmcv_names(node, [alias.name for alias in node.names], ctx)
            return
        if isinstance(node, ast.ImportFrom) and node.module == "mmcv" and any(a.name == "ops" for a in node.names):
            alias = next(a for a in node.names if a.name == "ops")
            self._mmcv_names(node, _ops_named(alias.asname or "ops", ctx), ctx)
            return
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif node.level:
            return
        else:
            modules = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        for module in modules:
            found = _cuda_only(module)
            if found:
                package, instead = found
                if _integration_module(package, ctx):
                    return
                ctx.report(node, self.code, f"{package} is a CUDA-only package (on NPU use {instead})",
                           api=package, tips=instead)
                return

    def _mmcv_names(self, node, keys: List[str], ctx) -> None:
        """Report the imported ``mmcv.ops`` names that are CUDA-only (or unknown to the mmcv table)."""
        table = load_mmcv_ops()
        cuda = [key for key in keys if key not in table["not_cuda_only"]]  # CUDA-only, or unknown to the table
        if not cuda:
            return
        ops = sorted({op.strip() for key in cuda for op in table["cuda_only"].get(key, "").split(",") if op.strip()})
        names = ", ".join(f"{MMCV_OPS}.{key}" for key in cuda)
        why = (f"no NPU kernel in mmcv {table['version']}: {', '.join(ops)}" if ops
               else f"not in the mmcv {table['version']} table: check its kernels")
        ctx.report(node, self.code, f"{names}: CUDA-only ({why}; port the kernel or use torch / torch_npu ops)",
                   api=names, tips=why)
