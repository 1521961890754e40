"""ASC404: a training ``DataLoader`` whose smaller last batch changes every shape once per epoch.

Which loaders are "for training" is a heuristic: a loader counts as one when
it shuffles (``shuffle=`` anything but ``False``/``None``), is given a
``sampler``, or its names say ``train`` (the variable or attribute it is
assigned to, its dataset argument, the dict key or keyword it is stored
under, or the enclosing function).  Names that say val/valid/test/eval/dev/
predict/infer win over all of that: evaluation loaders keep their last batch.
An explicit ``drop_last=False`` counts as a decision unless the loader
shuffles (timm's validation loader passes it with an ordered sampler).  A loader is torch's ``DataLoader``, a class of the same file that
subclasses it, or a local name bound to one of those (yolov5's
``loader = DataLoader if image_weights else InfiniteDataLoader``).
"""
from __future__ import annotations

import ast
from typing import FrozenSet, List, Optional

from ..calls import passed
from ..detect.loader_names import says_eval, says_train
from ..registry import Rule
from .value_dependent_ops import DYNAMIC_SOURCE
from ..walk import assign_targets, walk_tree

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, drop_last)
_POSITIONS = {"dataset": 0, "batch_size": 1, "shuffle": 2, "sampler": 3, "batch_sampler": 4, "drop_last": 8}
_DATALOADERS = frozenset({"torch.utils.data.DataLoader"})  # qualname() gives the canonical path of every spelling


def _argument(call: ast.Call, name: str) -> Optional[ast.AST]:
    return passed(call, name, _POSITIONS[name])


def _loader_classes(ctx) -> FrozenSet[str]:
    """Module-level classes of the file that subclass torch's DataLoader (yolov5's ``InfiniteDataLoader``)."""
    return ctx.memo("dataloader.classes", lambda c: frozenset(
        node.name for node in c.tree.body
        if isinstance(node, ast.ClassDef) and any(c.qualname(base) in _DATALOADERS for base in node.bases)))


def _is_loader(expr: ast.AST, ctx, depth: int = 0) -> bool:
    """torch's DataLoader, a subclass of it in this file, or a local name / ``a if c else b`` of those."""
    if ctx.qualname(expr) in _DATALOADERS:
        return True
    if isinstance(expr, ast.IfExp):
        return depth < 3 and _is_loader(expr.body, ctx, depth + 1) and _is_loader(expr.orelse, ctx, depth + 1)
    if not isinstance(expr, ast.Name):
        return False
    if expr.id in _loader_classes(ctx):
        return True
    owner = ctx.model.function(expr)
    binding = ctx.model.flow(owner).binding(expr) if owner is not None and depth < 3 else None
    return binding is not None and binding.value is not None and binding.index is None and _is_loader(
        binding.value, ctx, depth + 1)


_PADDING_WORDS = ("pad", "sft")  # DataCollatorWithPadding, pad_collate, get_sft_collate_fn (SFT batches pad to the longest)


def _defined_function(expr: ast.AST, ctx) -> Optional[ast.AST]:
    """The module-level function of this file that ``expr`` names or calls (a collate, or a factory of one)."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    if not isinstance(expr, ast.Name):
        return None
    functions = ctx.memo("dataloader.functions", lambda c: {
        node.name: node for node in c.tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))})
    return functions.get(expr.id)


def _says_padding(node: ast.AST) -> bool:
    """Does a name or attribute in ``node`` say padding (``pad_sequence``, ``F.pad``, ``DataCollatorWithPadding``)?"""
    for sub in walk_tree(node):
        name = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else ""
        if any(word in name.lower() for word in _PADDING_WORDS):
            return True
    return False


def _pads_each_batch(collate: Optional[ast.AST], ctx) -> bool:
    """Is there evidence that the collate pads every batch to its own longest sample?  Its names say so, or it is
    a function of this file (or a factory of one) whose body pads; then every batch has its own length anyway."""
    if collate is None:
        return False
    if _says_padding(collate):
        return True
    function = _defined_function(collate, ctx)
    return function is not None and _says_padding(function)


def _is_off(node: Optional[ast.AST]) -> bool:
    """Absent, or a literal ``False``/``None``/``0``."""
    return node is None or (isinstance(node, ast.Constant) and not node.value)


class DataLoaderLastBatch(Rule):
    code = "ASC404"
    summary = "training DataLoader without drop_last=True (the smaller last batch is a new shape)"
    node_types = (ast.Call,)
    trigger_words = ("DataLoader",)
    why = (
        "Unless the dataset size is a multiple of the batch size, the last batch of every epoch is smaller: "
        "every op of the forward and backward pass sees a new shape and the NPU compiles it again. Not reported "
        "where the collate pads each batch to its own longest sample (its names say pad or SFT, or it is a function "
        "of the file, or a factory of one, that pads): the shapes change every step anyway and dropping the last "
        "batch gains nothing."
    )
    example = "train_loader = DataLoader(train_set, batch_size=32, shuffle=True)"
    use_instead = ("Pass `drop_last=True` to training loaders (or pad the last batch to the full batch size); "
                   "an explicit `drop_last=False` on a loader that does not shuffle is taken as intended.")
    source = (
        "PyTorch DataLoader docs (drop_last: 'the last batch will be smaller' when the size is not divisible); "
        + DYNAMIC_SOURCE
    )
    fires = [
        ("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32, shuffle=True)\n", 2),
        ("import torch\ntrain_loader = torch.utils.data.DataLoader(ds, 16, sampler=s)\n", 2),
        # near miss of the sampler built not to shuffle: a sampler that shuffles by default
        ("from torch.utils.data import DataLoader\ndef build_dataloader(dataset):\n    return DataLoader(dataset, "
         "batch_size=batch_size, sampler=DistributedSampler(dataset, seed=0))\n", 3),
        ("from torch.utils.data import DataLoader\nfor x in DataLoader(train_set, batch_size=8):\n    pass\n", 2),
        ("from torch.utils.data import DataLoader\ndef build_train_loader(ds):\n"
         "    return DataLoader(ds, batch_size=8)\n", 3),
        ("from torch.utils.data import DataLoader\nloader = DataLoader(ds, 8, shuffle=True, drop_last=False)\n", 2),
        # yolov5 7.0.14 utils/dataloaders.py:143-146: a subclass of DataLoader chosen through a local name
        ("from torch.utils.data import DataLoader, dataloader\n\nclass InfiniteDataLoader(dataloader.DataLoader):\n"
         "    pass\n\ndef create_dataloader(dataset, batch_size, shuffle, sampler, image_weights):\n"
         "    loader = DataLoader if image_weights else InfiniteDataLoader\n"
         "    return loader(dataset, batch_size=batch_size, shuffle=shuffle and sampler is None, sampler=sampler)\n",
         8),
        ("from torch.utils.data import DataLoader\nloaders = {'train': DataLoader(ds, batch_size=4)}\n", 2),
        # yolov5 7.0.14 utils/dataloaders.py:152: a collate that stacks fixed-size images pads nothing
        ("from torch.utils.data import DataLoader\ndef collate_fn(batch):\n    return torch.stack(batch)\n"
         "train_loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=collate_fn)\n", 4),
    ]
    passes = [
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32, shuffle=True,\n"
        "                    drop_last=True)\n",
        "from torch.utils.data import DataLoader\nval_loader = DataLoader(val_set, batch_size=32, shuffle=False)\n",
        # an inferencer's prototype loader whose sampler does not shuffle (mmpretrain 1.2.0 apis/image_retrieval.py:84)
        "from torch.utils.data import DataLoader\ndef build_dataloader(dataset):\n    return DataLoader(dataset, "
        "batch_size=batch_size, sampler=DefaultSampler(dataset, shuffle=False))\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32)\n",
        "from torch.utils.data import DataLoader\ntrain_loader = DataLoader(ds, batch_sampler=bs)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8, shuffle=True, **opts)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8, shuffle=1, drop_last=a.drop)\n",
        "from torch.utils.data import DataLoader\ntest_loader = DataLoader(train_set, batch_size=8, shuffle=True)\n",
        "class DataLoader:\n    pass\nloader = DataLoader(ds, batch_size=8, shuffle=True)\n",
        # timm 1.0.31 data/naflex_loader.py:457: drop_last=False chosen explicitly (its validation branch)
        "import torch\ndef create_naflex_loader(dataset, batch_size, sampler):\n"
        "    loader = torch.utils.data.DataLoader(\n        dataset,\n        batch_size=batch_size,\n"
        "        shuffle=False,\n        sampler=sampler,\n        drop_last=False,\n    )\n",
        # litgpt 0.5 data/alpaca.py:94: the SFT collate pads to the longest sample of each batch
        "from torch.utils.data import DataLoader\ndef train_dataloader(self):\n    return DataLoader(\n"
        "        self.train_dataset, batch_size=self.batch_size, shuffle=True,\n"
        "        collate_fn=get_sft_collate_fn(max_seq_length=self.max_seq_length),\n    )\n",
        "from torch.utils.data import DataLoader\nfrom torch.nn.utils.rnn import pad_sequence\n"
        "def collate(batch):\n    return pad_sequence(batch, batch_first=True)\n"
        "train_loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=collate)\n",
        "from torch.utils.data import DataLoader\nfrom transformers import DataCollatorWithPadding\n"
        "train_loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=DataCollatorWithPadding(tok))\n",
        "import torch\nclass Loader(list):\n    pass\ndef make(ds):\n    loader = Loader if ds else list\n"
        "    return loader(ds, batch_size=8, shuffle=True)\n",
    ]

    def check(self, node, ctx) -> None:
        if not _is_loader(node.func, ctx):
            return
        if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
            return  # **options / *args may carry drop_last
        drop_last = _argument(node, "drop_last")
        if not _is_off(drop_last) or not _is_off(_argument(node, "batch_sampler")):
            return  # drop_last=True (or not literal), or a batch sampler decides the batches
        if drop_last is not None and _is_off(_argument(node, "shuffle")):
            return  # drop_last=False chosen explicitly for a loader that does not shuffle
        batch_size = _argument(node, "batch_size")
        if batch_size is None or (isinstance(batch_size, ast.Constant) and batch_size.value in (None, 1)):
            return  # unbatched, or batches of one: no smaller last batch
        if _pads_each_batch(passed(node, "collate_fn", 6), ctx):
            return  # every batch is padded to its own longest sample: its shape changes every step anyway
        reason = self._training_reason(node, ctx)
        if reason:
            ctx.report(node, self.code, f"training DataLoader without drop_last=True ({reason}): the smaller last "
                       "batch of each epoch is a new shape for every op", api="torch.utils.data.DataLoader",
                       tips="drop_last=True")

    @staticmethod
    def _training_reason(call: ast.Call, ctx) -> str:
        names = _names_around(call, ctx)
        if any(says_eval(name) for name in names):
            return ""
        if not _is_off(_argument(call, "shuffle")):
            return "it shuffles"
        sampler = _argument(call, "sampler")
        if not _is_off(sampler) and not (isinstance(sampler, ast.Call) and _is_off(_argument(sampler, "shuffle"))
                                         and _argument(sampler, "shuffle") is not None):
            return "it has a sampler"  # not one built not to shuffle (``DefaultSampler(dataset, shuffle=False)``)
        named = next((name for name in names if says_train(name)), "")
        return f"named {named!r}" if named else ""


def _names_around(call: ast.Call, ctx) -> List[str]:
    """The names a loader is known by: dataset argument, assignment target, dict key, keyword, function."""
    names = []
    dataset = _argument(call, "dataset")
    if isinstance(dataset, (ast.Name, ast.Attribute)):
        names.append(ast.unparse(dataset))
    child: ast.AST = call
    for holder in reversed(ctx.stack):
        if isinstance(holder, ast.keyword) and holder.arg:
            names.append(holder.arg)
        elif isinstance(holder, ast.Dict):
            names += [k.value for k, v in zip(holder.keys, holder.values)
                      if v is child and isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif isinstance(holder, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = assign_targets(holder)
            names += [ast.unparse(t) for t in targets]
        if isinstance(holder, ast.stmt):
            break
        child = holder
    function = ctx.enclosing(ast.FunctionDef, ast.AsyncFunctionDef)
    if function is not None:
        names.append(function.name)
    return names
