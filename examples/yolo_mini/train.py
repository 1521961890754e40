"""Train yolo_mini on a GPU (the CUDA way)."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from apex import amp  # noqa: F401  (legacy mixed precision)
from models.common import Conv, Focus
from utils.dist import init_distributed

torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--local-rank", type=int, default=0)
    return parser.parse_args()


def build_loader():
    images = torch.randn(64, 3, 64, 64)
    labels = torch.randint(0, 10, (64,))
    return DataLoader(TensorDataset(images, labels), batch_size=8, shuffle=True, num_workers=0)


def main():
    args = parse_args()
    device = init_distributed(args.local_rank)
    model = nn.Sequential(Focus(3, 16), Conv(16, 10, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten()).cuda()
    model = nn.DataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler()
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        for step, (images, labels) in enumerate(build_loader()):
            images, labels = images.to(device), labels.to(device)
            with torch.cuda.amp.autocast():
                loss = criterion(model(images), labels)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    torch.save(model.state_dict(), "yolo_mini.pt")
    state = torch.load("yolo_mini.pt", map_location="cuda")
    return state


if __name__ == "__main__":
    main()
