"""One finding per (function, code, API), and the findings of a CUDA-only branch folded into its test: the same
problem down one function is one problem to a reader; ``--fix`` still sees every site."""
from __future__ import annotations

import textwrap

from conftest import run_rules
from flake8_ascend import fix
from flake8_ascend.config import Config
from flake8_ascend.data import default_version

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


MOVES = """\
import torch
a = torch.ones(2).cuda()
b = torch.ones(2).cuda()

def f(x):
    y = x.cuda()
    return y.cuda()
"""


def test_module_level_lines_stay_apart_and_repeats_with_a_rewrite_fold_but_are_still_fixed():
    found = run_rules(MOVES, codes=["ASC202"])
    assert [f.line for f in found] == [2, 3, 6]  # module-level script lines are separate statements to change
    assert found[2].message.endswith("(again in this function on line 7)")
    assert [f.line for f in found[2].with_folded()] == [6, 7]
    fixable = fix.fixable_findings(MOVES, "m.py", Config(default_version()), ["ASC202"])
    assert [f.line for f in fixable] == [2, 3, 6, 7]  # --fix rewrites every one
    _, applied, _, changes = fix.fix_source(MOVES, fixable)
    # four rewrites, three findings of the report fixed: the repeat is part of the finding it folds into
    assert applied == 4 and [change.line for change in changes if change.code and not change.within] == [2, 3, 6]


# demucs 4.1.0 distrib.py:61-75: a 'cuda' device string and a .cuda() in one function, one hard-coded device
SHARE = """\
import pickle
import numpy as np
import torch

def share(obj=None, src=0):
    size = torch.empty(1, device='cuda', dtype=torch.long)
    if rank == src:
        dump = pickle.dumps(obj)
        size[0] = len(dump)
    torch.distributed.broadcast(size, src=src)
    if rank == src:
        buffer = torch.from_numpy(np.frombuffer(dump, dtype=np.uint8).copy()).cuda()
    else:
        buffer = torch.empty(size[0].item(), device='cuda', dtype=torch.uint8)
    torch.distributed.broadcast(buffer, src=src)
"""


def test_a_cuda_call_repeats_a_cuda_device_string_of_its_function_and_both_are_still_fixed():
    found = run_rules(SHARE, codes=["ASC202"])
    assert [f.line for f in found] == [6]
    assert found[0].message.endswith("(again in this function on lines 12, 14)")
    fixable = fix.fixable_findings(SHARE, "m.py", Config(default_version()), ["ASC202"])
    assert [f.line for f in fixable] == [6, 12, 14]


def test_near_miss_a_cuda_call_in_another_function_or_a_numbered_device_stays_apart():
    # espnet 202511 espnet2/train/gan_trainer.py:162 moved into a function of its own; 'cuda:0' names one card
    found = run_rules("""\
        import torch

        def average(metrics):
            return torch.tensor(metrics, device='cuda:0')

        def skip(turn):
            if torch.distributed.is_initialized():
                torch.distributed.broadcast(torch.rand(1).cuda(), src=0)

        def place(metrics):
            return torch.tensor(metrics, device='cuda')
        """, codes=["ASC202"])
    assert [f.line for f in found] == [4, 8, 11]


# torchtune 0.6.1 models/llama3/_parallelism.py:15-25: one module-level dict literal, one change to make
PLAN = """\
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
PLAN = {
    "tok_embeddings": RowwiseParallel(),
    "layers.*.attn.output_proj": RowwiseParallel(),
}
OTHER = RowwiseParallel()
"""


def test_repeats_inside_one_module_level_statement_fold_but_statements_stay_apart():
    found = run_rules(PLAN, codes=["ASC101"])
    assert [f.line for f in found] == [3, 6]
    assert found[0].message.endswith("(again in this statement on line 4)")


# xtuner 0.2 _lite/patches/llama.py:185-214 (a class attribute) and nemo speechlm2 salm.py:449-491: the styles of one
# plan are one problem whatever their class; parallelize_module, which applies the plan, is another
STYLES = """\
from torch.distributed.tensor.parallel import PrepareModuleInput, RowwiseParallel, parallelize_module
class Patch:
    layer_tp_plan = {
        "self_attn": PrepareModuleInput(input_layouts=(Shard(1),)),
        "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
    }

def apply(layer, mesh):
    plan = {"attn": PrepareModuleInput(), "attn.wo": RowwiseParallel()}
    parallelize_module(layer, mesh, plan)
"""


def test_the_styles_of_one_tensor_parallel_plan_fold_into_its_first():
    found = run_rules(STYLES, codes=["ASC101"])
    assert [f.line for f in found] == [4, 9, 10]
    assert found[0].message.endswith("(again in this statement on line 5)")
    assert found[1].message.endswith("(again in this function on line 9)")
    assert "parallelize_module" in found[2].message


# mmseg 1.2.2 decode_heads/stdc_head.py:50-51: two index puts of one function, each line its own "API"
THRESHOLDS = """\
import torch

def loss_by_feat(seg_logits, thr):
    targets = torch.zeros_like(seg_logits)
    targets[targets > thr] = 1
    targets[targets <= thr] = 0
    scores = seg_logits.clone()
    scores[scores < 0] *= 2
    attn = (targets @ scores.transpose(-2, -1)).softmax(dim=-1)
    return attn @ scores
"""


def test_the_index_puts_of_one_function_are_one_problem_and_all_are_still_fixed():
    found = run_rules(THRESHOLDS, codes=["ASC304"])
    puts = [f for f in found if f.problem == "boolean-mask index put"]
    assert [f.line for f in puts] == [5]
    assert puts[0].message.endswith("(again in this function on lines 6, 8)")
    assert [f.line for f in puts[0].with_folded()] == [5, 6, 8]
    # near miss: the hand-written attention is another problem of the same code and keeps its own finding
    assert [f.line for f in found if f not in puts] == [9]
    fixable = fix.fixable_findings(THRESHOLDS, "m.py", Config(default_version()), ["ASC304"])
    assert [f.line for f in fixable] == [5, 6]  # --fix rewrites both plain puts (the augmented one it leaves)


GUARDED = """\
import torch

def setup(device, rank, model):
    if device.type == 'cuda':
        torch.cuda.set_device(rank)
        model = model.cuda()
    return model
"""


def test_the_calls_of_a_cuda_only_branch_fold_into_the_finding_on_its_test():
    found = run_rules(GUARDED, codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(4, "ASC202")]
    assert "turns off there" in found[0].message
    assert found[0].message.endswith(
        "(the CUDA branch also has: ASC201 torch.cuda.set_device on line 5; ASC202 .cuda() on line 6)")
    fixable = fix.fixable_findings(GUARDED, "m.py", Config(default_version()), ["ASC201", "ASC202"])
    assert [(f.line, f.code) for f in fixable] == [(5, "ASC201"), (6, "ASC202")]


# f5-tts 1.1.22 infer/utils_infer.py:191-198: the compute capability asked after ``"cuda" in device``
CAPABILITY_AFTER_TEST = """\
import torch

def load_checkpoint(model, device, dtype=None):
    if dtype is None:
        dtype = (
            torch.float16
            if {test}
            and torch.cuda.get_device_properties(device).major >= 7
            else torch.float32
        )
    return model.to(dtype)
"""


def test_a_device_string_that_holds_cuda_is_a_cuda_test():
    found = run_rules(CAPABILITY_AFTER_TEST.format(test='"cuda" in device'), codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(7, "ASC202")]
    assert found[0].message.endswith("(the CUDA branch also has: ASC201 torch.cuda.get_device_properties on line 8)")


def test_near_miss_a_device_among_others_is_no_cuda_test():
    # a membership in a collection is True for more than CUDA: the capability keeps its own finding
    found = run_rules(CAPABILITY_AFTER_TEST.format(test='device in ("cuda", "npu")'), codes=["ASC2"])
    assert (8, "ASC201") in [(f.line, f.code) for f in found]


def test_a_branch_folds_only_into_a_code_the_front_end_shows():
    # flake8 --select ASC201: the test's ASC202 is not shown, so the call keeps its own finding
    found = run_rules(GUARDED, codes=["ASC201"])
    assert [(f.line, f.code) for f in found] == [(5, "ASC201")]


def test_a_test_hidden_by_noqa_takes_no_branch_in():
    source = GUARDED.replace("if device.type == 'cuda':", "if device.type == 'cuda':  # noqa: ASC202")
    found = run_rules(source, codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(4, "ASC202"), (5, "ASC201"), (6, "ASC202")]


def test_near_misses_a_flag_and_the_npu_path_keep_their_findings():
    # a flag (no finding on the test) and the else branch (what the NPU runs) are not CUDA-only branches
    found = run_rules(textwrap.dedent("""\
        import torch

        def setup(use_gpu, device, rank):
            if use_gpu:
                torch.cuda.set_device(rank)
            if device.type == 'cuda':
                pass
            else:
                torch.cuda.synchronize()
        """), codes=["ASC201"])
    assert [f.line for f in found] == [5, 9]


def test_a_first_site_hidden_by_noqa_does_not_hide_the_repeat():
    source = REPEATED_SYNC.replace("print(loss.item())", "print(loss.item())  # noqa: ASC501")
    found = run_rules(source, codes=["ASC501"])
    assert [(f.line, f.message.endswith("line 9)")) for f in found] == [(8, False), (9, False)]


def test_a_test_that_asks_the_same_question_again_is_a_repeat_with_its_branch():
    # yolov5 7.0.14 utils/torch_utils.py:118-130: an assert asks first, then an if decides the device (line 121
    # judged a repeat of line 118)
    found = run_rules(textwrap.dedent("""\
        import torch

        def select_device(device):
            assert torch.cuda.is_available()
            if torch.cuda.is_available():
                arg = 'cuda:0'
            return torch.device(arg)
        """), codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(4, "ASC201")]
    assert found[0].message.endswith("(again in this function on line 5) (the CUDA branch also has: ASC202 'cuda:0' "
                                     "on line 6)")
    assert [(f.line, f.code) for f in found[0].folded] == [(5, "ASC201"), (6, "ASC202")]


# oumi 0.9 utils/verl_utils/fsdp1_rank_buffer_sync.py:34-84: the device built from 'cuda' on line 39 is tested on
# lines 43 and 82 (judged one problem); funasr 1.4.16 bin/train.py:131 and :249: a .cuda() call, then a test of the
# device a model sits on (judged right on its own)
BUFFER_SYNC = """\
import torch
import torch.distributed as dist

def sync(module):
    device = torch.device("cuda", 0) if dist.get_backend() == "gloo" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    dist.broadcast(module.weight.to(device), src=0)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
"""


def test_a_device_test_against_the_cuda_string_its_device_was_built_from_is_a_repeat():
    found = run_rules(BUFFER_SYNC, codes=["ASC202"])
    assert [f.line for f in found] == [5]
    assert "(again in this function on lines 6, 9)" in found[0].message


def test_a_device_test_after_a_cuda_call_keeps_its_own_finding():
    found = run_rules(textwrap.dedent("""\
        import torch

        def main(model, local_rank, loader):
            model = model.cuda(local_rank)
            for batch in loader:
                model(batch)
            device = next(model.parameters()).device
            if device.type == "cuda":
                with torch.cuda.device(device):
                    torch.cuda.empty_cache()
        """), codes=["ASC202"])
    assert [f.line for f in found] == [4, 8]
    assert "turns off there" in found[1].message


def test_amp_of_a_cuda_only_branch_folds_into_its_test():
    found = run_rules(textwrap.dedent("""\
        import torch

        def build(args):
            if torch.cuda.is_available():
                scaler = torch.cuda.amp.GradScaler()
            return scaler
        """), codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(4, "ASC201")]
    assert found[0].message.endswith("(the CUDA branch also has: ASC207 torch.cuda.amp.GradScaler on line 5)")


def test_the_code_after_an_early_exit_without_cuda_folds_into_that_test():
    # mmdet 3.1.0 utils/profiling.py:21-27: what follows `if not torch.cuda.is_available(): return` needs CUDA
    found = run_rules(textwrap.dedent("""\
        import torch

        def profile_time(enabled=True):
            if (not enabled) or not torch.cuda.is_available():
                return
            stream = torch.cuda.current_stream()
            start = torch.cuda.Event(enable_timing=True)
            return stream, start
        """), codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(4, "ASC201")]
    assert found[0].message.endswith(
        "(the CUDA branch also has: ASC201 torch.cuda.current_stream on line 6; ASC201 torch.cuda.Event on line 7)")


def test_near_miss_an_early_exit_that_does_not_leave_keeps_the_findings_after_it():
    found = run_rules(textwrap.dedent("""\
        import torch

        def profile_time():
            if not torch.cuda.is_available():
                print('no CUDA')
            stream = torch.cuda.current_stream()
            return stream
        """), codes=["ASC2"])
    # the test itself only prints where CUDA is missing (quiet); the call after it is not folded into it
    assert [(f.line, f.code) for f in found] == [(6, "ASC201")]
    assert "also has" not in found[0].message


def test_a_flag_holding_the_cuda_answer_is_a_cuda_test():
    # diffusers 0.42.1 quantizers/nunchaku/nunchaku_quantizer.py:32-36
    found = run_rules(textwrap.dedent("""\
        import torch

        def validate_environment():
            cuda_available = torch.cuda.is_available()
            if not cuda_available:
                raise ValueError('needs a CUDA GPU')
            capability = torch.cuda.get_device_capability()
            return capability
        """), codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(4, "ASC201")]


def test_near_miss_a_flag_holding_something_else_is_no_cuda_test():
    found = run_rules(textwrap.dedent("""\
        import torch

        def validate_environment(args):
            enabled = args.gpu
            if not enabled:
                raise ValueError('disabled')
            capability = torch.cuda.get_device_capability()
            return capability
        """), codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(7, "ASC201")]


# ignite 0.5.5 distributed/comp_models/native.py:117 and :145-147: an NCCL check that only raises without CUDA,
# and the NCCL barrier's device ids
NCCL_SETUP = """\
import torch
import torch.distributed as dist

def setup(backend, ok):
    if backend == dist.Backend.NCCL and not torch.cuda.is_available():
        raise RuntimeError('Nccl backend is required but no cuda capable devices')
    dist.init_process_group(backend)
    if backend == dist.Backend.NCCL and ok:
        device_ids = [torch.cuda.current_device()]
        dist.barrier(device_ids=device_ids)
    else:
        dist.barrier()
"""


def test_the_calls_of_an_nccl_branch_fold_into_the_finding_on_its_comparison():
    # the same line's ``and`` too: the call sits after the comparison
    found = run_rules(NCCL_SETUP, codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(5, "ASC204")]
    assert found[0].message.endswith("(again in this function on line 8) (the NCCL branch also has: "
                                     "ASC201 torch.cuda.is_available on line 5; "
                                     "ASC201 torch.cuda.current_device on line 9)")
    fixable = fix.fixable_findings(NCCL_SETUP, "m.py", Config(default_version()), ["ASC201", "ASC204"])
    assert [(f.line, f.code) for f in fixable] == [(5, "ASC201"), (9, "ASC201")]  # --fix still ports both


# the backend string as yolo_mini's barrier_if_needed and a launcher's backend tests compare it
NCCL_BRANCHES = """\
import torch
import torch.distributed as dist

def barrier():
    if dist.is_initialized() and dist.get_backend() == 'nccl':
        torch.cuda.synchronize()

def place(args, rank):
    if args.dist_backend != 'nccl':
        pass
    elif args.world_size > 1:
        torch.cuda.set_device(rank)

def move(args, model):
    if args.backend == 'gloo':
        model = model.cpu()
    elif args.backend == 'nccl':
        model = model.cuda()
    return model
"""


def test_an_nccl_branch_folds_and_fix_ports_it_with_the_comparison():
    # the body of ``==`` (an ``elif`` too) and the ``else`` of ``!=``: after 'hccl' they are the NPU's branches
    found = run_rules(NCCL_BRANCHES, codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(5, "ASC204"), (9, "ASC204"), (17, "ASC204")]
    assert [f.message.split(" (the NCCL branch also has: ")[1] for f in found] == [
        "ASC201 torch.cuda.synchronize on line 6)", "ASC201 torch.cuda.set_device on line 12)",
        "ASC202 .cuda() on line 18)"]
    findings = fix.fixable_findings(NCCL_BRANCHES, "m.py", Config(default_version()), ["ASC201", "ASC202", "ASC204"])
    new, applied, left, changes = fix.fix_source(NCCL_BRANCHES, findings)
    # six rewrites, three findings of the report: the calls are part of the comparisons' findings
    assert (applied, left) == (6, []) and sum(not change.within for change in changes if change.code) == 3
    assert "'hccl'" in new and "'nccl'" not in new and "torch.cuda" not in new and ".npu()" in new
    assert run_rules(new, codes=["ASC2"]) == []


def test_a_branch_of_nccl_folds_only_into_a_code_the_front_end_shows():
    # flake8 --select ASC201: the comparison's ASC204 is not shown, so the call keeps its own finding
    found = run_rules(NCCL_SETUP, codes=["ASC201"])
    assert [(f.line, f.code) for f in found] == [(5, "ASC201"), (9, "ASC201")]


def test_near_misses_of_an_nccl_branch_keep_their_findings():
    # another backend's branch, the else of ``==`` (an NPU run's backend is not 'nccl'), the code after the if, a
    # 'nccl' compared with a name that is no backend (no ASC204 finding), a membership test and an ``or``
    found = run_rules(textwrap.dedent("""\
        import torch

        def setup(backend, name, rank, x):
            if backend == 'gloo':
                torch.cuda.set_device(rank)
            if backend == 'nccl':
                pass
            else:
                x = x.to('cuda')
            torch.cuda.synchronize()
            if name == 'nccl':
                torch.cuda.empty_cache()
            if backend in ('nccl', 'gloo'):
                torch.cuda.current_device()
            return backend == 'nccl' or torch.cuda.is_available()
        """), codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(5, "ASC201"), (6, "ASC204"), (9, "ASC202"), (10, "ASC201"),
                                                (12, "ASC201"), (14, "ASC201"), (15, "ASC201")]
    assert found[1].message.endswith("(again in this function on lines 13, 15)")  # no branch folds into it


def test_near_miss_a_cuda_test_takes_in_only_the_lines_after_it():
    # unsloth 2026.10.9 models/rl.py:809: the call ``and``-ed after a CUDA test on its line keeps its finding (a test
    # that turns a branch off is never a repeat, so folding there would bring back the repeats it held)
    found = run_rules(textwrap.dedent("""\
        import torch

        def place(device):
            if device.type == 'cuda' and torch.cuda.is_available():
                torch.cuda.set_device(device)
        """), codes=["ASC2"])
    assert [(f.line, f.code) for f in found] == [(4, "ASC202"), (4, "ASC201")]
    assert found[0].message.endswith("(the CUDA branch also has: ASC201 torch.cuda.set_device on line 5)")


# espnet 202511 nets/pytorch_backend/rnn/encoders.py:104-125: the cell type picks an LSTM or a GRU, both built with
# the configured dropout
CELL_TYPES = """\
import torch

class RNN(torch.nn.Module):
    def __init__(self, idim, elayers, cdim, dropout, typ="blstm"):
        self.nbrnn = (
            torch.nn.LSTM(idim, cdim, elayers, batch_first=True, dropout=dropout)
            if "lstm" in typ
            else torch.nn.GRU(idim, cdim, elayers, batch_first=True, dropout=dropout)
        )

def build(idim, cdim, elayers, proj, dropout):
    return torch.nn.LSTM(idim, cdim, elayers, proj_size=proj), torch.nn.GRU(idim, cdim, elayers, dropout=dropout)
"""


def test_recurrent_layers_of_one_function_breaking_one_restriction_are_one_problem():
    found = run_rules(CELL_TYPES, codes=["ASC103"])
    assert [f.line for f in found] == [6, 12, 12]  # near miss: another restricted argument stays apart
    assert found[0].message.endswith("(again in this function on line 8)")
    assert [f.api for f in found[1:]] == ["torch.nn.LSTM", "torch.nn.GRU"]


# litgpt 0.5.13 api.py:214-241: the accelerator chosen for Fabric, and in the other branch a 'cuda' device string for
# the preprocessor (judged the same device choice)
LLM_LOAD = """\
import torch
import lightning as L

def load(distribute, tokenizer):
    if distribute == "auto":
        if torch.cuda.is_available():
            accelerator = "cuda"
        else:
            accelerator = "cpu"
        return L.Fabric(accelerator=accelerator, devices=1)
{split}    return Preprocessor(tokenizer, device="cuda" if torch.cuda.is_available() else "cpu")
"""


def test_a_lightning_accelerator_and_a_cuda_device_string_are_one_device_choice():
    found = run_rules(LLM_LOAD.format(split=""), codes=["ASC202"])
    assert [f.line for f in found] == [7]
    assert found[0].message.endswith("(again in this function on line 11)")


def test_a_lightning_accelerator_and_a_cuda_device_string_in_two_functions_are_two_findings():
    found = run_rules(LLM_LOAD.format(split="\ndef preprocess(tokenizer):\n"), codes=["ASC202"])
    assert [f.line for f in found] == [7, 13]
