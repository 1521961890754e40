"""flake8-ascend: find what stops PyTorch code from running well on Ascend NPUs."""

__version__ = "0.1.0"
