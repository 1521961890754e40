"""``third_party``: the functions of a library that cannot run on NPU, through its call graph.

A function is unsupported when its body uses a torch API the selected
torch_npu version does not support, a CUDA-side API that needs a manual
migration, or a custom C++/CUDA operator without an NPU kernel, and so is
every function that calls one, transitively.  Modules: ``cpp_ops`` (operators
in the C++ sources), ``layout`` (module names), ``summary`` and ``extensions``
(one file -> a compact summary, in workers), ``callgraph`` (names and edges
across modules), ``impact`` (propagation and chains), ``jedi_calls`` (late
edges), ``report`` (the official CSV files), ``analysis`` (the run).

Use without the command line::

    from flake8_ascend.library_analysis import analyse_library, write_reports
    result = analyse_library("mmcv-2.1.0", version="2.6.0")
    write_reports(result, "out_folder")      # the five CSV files
    rows = tables(result)["cuda_op.csv"][1]
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Sequence, Union

from ..config import Config
from ..data import resolve_version
from ..reports import write_csv
from .analysis import ThirdPartyAnalysis, analyse
from .jedi_calls import MAX_SECONDS
from .report import OUTPUTS, tables

__all__ = ["OUTPUTS", "ThirdPartyAnalysis", "analyse", "analyse_library", "tables", "write_reports"]


def analyse_library(root: Union[str, Path], version: Optional[str] = None, env_paths: Sequence[Union[str, Path]] = (),
                    jobs: Optional[int] = None, jedi_seconds: float = MAX_SECONDS) -> ThirdPartyAnalysis:
    """Analyse the library source folder ``root`` for a torch_npu version (default: the newest)."""
    config = Config(resolve_version(version))
    return analyse(Path(root), config, env_paths=[Path(p) for p in env_paths], jobs=jobs,
                   jedi_seconds=jedi_seconds)


def write_reports(result: ThirdPartyAnalysis, folder: Union[str, Path]) -> Dict[str, int]:
    """Write the CSV files into an existing ``folder``; returns {file name: data rows}."""
    counts = {}
    for name, (header, rows) in tables(result).items():
        counts[name] = write_csv(Path(folder) / name, header, rows)
    return counts
