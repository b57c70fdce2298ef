"""What a worker process unpickles when it starts: its spec and its entry point. Nothing here imports
Kernel Tuner, so the entry can keep torch out of the worker before Kernel Tuner is imported."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field


@dataclass
class WorkerSpec:
    workload: str
    size: dict
    dtype: str
    backend: str
    device: int
    cachefile: str | None
    data_seed: int = 1234
    baseline_repeats: int = 50
    iterations: int | None = None  # timed launches per evaluation (default: the space's)
    env: dict = field(default_factory=dict)


def worker_entry(conn, spec: WorkerSpec):
    entered = time.time()
    # Kernel Tuner imports torch whenever it is installed, for torch tensors as kernel arguments; a worker
    # passes numpy arrays only. On the H100 machine that import took 4.3 s of every worker's 5-10 s start,
    # most of a regression check's time. Here torch stays out for good, for the backends imported below
    # too (the other processes hide it from Kernel Tuner's import only: tuner/__init__.py).
    sys.modules.setdefault("torch", None)
    from tuner.isolation import worker_main

    worker_main(conn, spec, entered)
