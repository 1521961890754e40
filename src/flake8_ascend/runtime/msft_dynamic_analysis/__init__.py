"""Dynamic-shape detection for the instrumented copy of a training project (see ``hook``)."""
from .hook import DETECTOR  # noqa: F401
