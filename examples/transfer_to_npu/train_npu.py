"""train_gpu.py migrated to Ascend NPUs with transfer_to_npu: the same script plus two imports.

transfer_to_npu maps every CUDA use marked below (torch.cuda names, devices, AMP, 'nccl' -> 'hccl'), so
flake8 --select ASC reports nothing here. (The optimizer is Adagrad: with SGD or
AdamW, ASC303 would still suggest torch_npu's fused optimizer, a change transfer_to_npu does not make.)
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401
from torch_npu.contrib import transfer_to_npu  # noqa: F401
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--log-every", type=int, default=50)
    args = parser.parse_args()

    dist.init_process_group(backend="nccl")  # CUDA: ASC204
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)  # CUDA: ASC201
    device = torch.device("cuda", local_rank)  # CUDA: ASC202

    data = TensorDataset(torch.randn(4096, 32), torch.randint(0, 10, (4096,)))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=64, sampler=sampler, num_workers=4, pin_memory=True, drop_last=True)

    model = build_model().cuda()  # CUDA too: repeats the device above, whose ASC202 names this line
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], bucket_cap_mb=500)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.01)
    scaler = torch.cuda.amp.GradScaler()  # CUDA: ASC207
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, (inputs, targets) in enumerate(loader):
            inputs = inputs.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.cuda.amp.autocast():  # CUDA: ASC207
                loss = loss_fn(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            if step % args.log_every == 0 and local_rank == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    torch.cuda.synchronize()  # CUDA: ASC201
    print(f"peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")  # CUDA: ASC201
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
