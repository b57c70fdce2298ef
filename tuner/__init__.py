"""GPU autotuning campaigns: Kernel Tuner compiles, launches, times and verifies; Optuna searches;
every measurement lands in Parquet tables under results/.

The public Python API (tuner.api): `tune`, `best`, `results`, `load_store`; `Workload` to write a workload's
Python module; `TunerError`, what bad input raises. They are imported on first use, so that `import tuner`
stays light for the measuring processes, which import it too.
"""

import importlib.util
import os
import sys
from typing import Any

__version__ = "0.1.0"

# `--device N` and nvidia-smi's `--id=N` then name the same GPU (CUDA's own default order is fastest first):
# the GPU's name files every row, so it must be the name of the GPU that measured it (provenance.gpu_info)
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def _import_kernel_tuner_without_torch() -> None:
    """Kernel Tuner imports torch whenever it is installed, for torch tensors as kernel arguments (this tool
    passes numpy arrays only). On the H100 machine that import took 4-6 s of every process's start: twice
    more in a distributed campaign's wall time (the parent, then each worker) than its search divides. So
    Kernel Tuner's modules are imported first with torch hidden; torch itself stays importable afterwards
    for what needs it (Optuna's GP sampler). Its backends, imported later, see torch again: they run in
    the measuring process, which keeps torch out for good (tuner/measure/protocol.py)."""
    if "kernel_tuner" in sys.modules or "torch" in sys.modules or importlib.util.find_spec("torch") is None:
        return  # without torch installed there is nothing to hide, and `tuner --help` need not import Kernel Tuner
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError: Kernel Tuner falls back to a placeholder
    try:
        import kernel_tuner.interface  # noqa: F401  (util, core, strategies.common)
        import kernel_tuner.searchspace  # noqa: F401
    finally:
        del sys.modules["torch"]


_import_kernel_tuner_without_torch()


__all__ = ["TunerError", "Workload", "best", "load_store", "results", "tune"]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})  # the names imported on first use too: a notebook's completion offers them


def __getattr__(name: str) -> Any:
    if name in ("tune", "best", "results", "load_store"):
        from tuner import api

        return getattr(api, name)
    if name == "Workload":
        from tuner.workloads.base import Workload

        return Workload
    if name == "TunerError":
        from tuner.errors import TunerError

        return TunerError
    raise AttributeError(f"module 'tuner' has no attribute '{name}'")
