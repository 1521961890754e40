"""Make ``torchvision`` importable beside a CPU torch whose matching torchvision wheel is a CUDA build.

Benchmark harness only: the launchers of ``bench_yolov5.py`` and
``bench_torchvision_detection.py`` import it before the program they run, and
the analysed programs never see it.  When torchvision's C++ operators load,
nothing changes.  When they cannot (the torchvision 0.28.0 wheel that matches
torch 2.13.0 links ``libc10_cuda.so``, so ``import torchvision`` fails with
``operator torchvision::nms does not exist``), ``torchvision::nms`` is defined
with a plain-torch greedy NMS kernel before torchvision is imported and
``torchvision.ops.nms`` may call it; ``roi_align`` then takes torchvision's own
pure-torch fallback.  ``STATUS`` says which happened.
"""
import sys

import torch


def greedy_nms(dets, scores, iou_threshold):
    """Greedy NMS over the pairwise IoU matrix: the boxes kept, best score first (fast enough that yolov5's NMS
    time limit, which would make its metrics depend on speed, is not reached)."""
    import numpy

    order = scores.argsort(descending=True)
    x1, y1, x2, y2 = dets[order].float().unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    width = (torch.minimum(x2[:, None], x2[None]) - torch.maximum(x1[:, None], x1[None])).clamp(min=0)
    height = (torch.minimum(y2[:, None], y2[None]) - torch.maximum(y1[:, None], y1[None])).clamp(min=0)
    inter = width * height
    over = (inter / (areas[:, None] + areas[None] - inter) > iou_threshold).numpy()
    removed = numpy.zeros(len(over), dtype=bool)
    keep = []
    for index in range(len(over)):
        if not removed[index]:
            keep.append(index)
            removed |= over[index]
    return order[torch.tensor(keep, dtype=torch.long)]


try:
    import torchvision

    torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)
    STATUS = "torchvision operators: the wheel's own"
except Exception:
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    torch.library.define("torchvision::nms", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    torch.library.define("torchvision::qnms", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    torch.library.impl("torchvision::nms", "CPU", greedy_nms)
    import torchvision
    import torchvision.ops.boxes

    torchvision.ops.boxes._assert_has_ops = lambda: None  # nms only: roi_align keeps its pure-torch fallback
    STATUS = ("torchvision operators: cannot load (%s); torchvision::nms is a plain-torch kernel"
              % torchvision.__version__)
