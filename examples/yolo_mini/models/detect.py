"""Detection head post-processing."""
import torch
from torch.utils.cpp_extension import load

# A custom CUDA NMS kernel compiled at import time.
_ext = load(name="fast_nms", sources=["csrc/nms.cpp", "csrc/nms_kernel.cu"], verbose=False)


def filter_boxes(boxes, scores, score_thr):
    keep = scores > score_thr
    boxes = boxes[keep]
    idx = torch.nonzero(keep).squeeze(1)
    boxes[boxes < 0] = 0
    return boxes, idx


def top_scores(scores):
    n = int(scores.sum().item())
    return scores[:n]
