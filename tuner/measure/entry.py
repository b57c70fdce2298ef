"""The measuring process's entry point, what a spawned process unpickles first. It imports nothing of Kernel
Tuner, so torch can be kept out of the process before Kernel Tuner is imported."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from tuner.measure.protocol import MeasureSpec

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


def process_entry(conn: Connection, spec: MeasureSpec) -> None:
    entered = time.time()
    # Kernel Tuner imports torch whenever it is installed, for torch tensors as kernel arguments; the measuring
    # process passes numpy arrays only. On the H100 machine that import took 4.3 s of every process's 5-10 s
    # start, most of a regression check's time. Here torch stays out for good, for the backends imported
    # later too (the other processes hide it from Kernel Tuner's import only: tuner/__init__.py).
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    from tuner.measure.process import live_main

    live_main(conn, spec, entered)
