"""Distributed helpers."""
import os

import torch
import torch.distributed as dist


def init_distributed(local_rank):
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl", init_method="env://")
    return torch.device("cuda", local_rank)


def barrier_if_needed():
    if dist.is_initialized() and dist.get_backend() == "nccl":
        torch.cuda.synchronize()
        dist.barrier()


def log_memory():
    # CUDA-only allocator statistics
    print(torch.cuda.memory_usage(), torch.cuda.list_gpu_processes())
    return os.getpid()
