"""The measuring process's entry point, what a spawned process unpickles first. It imports nothing of Kernel
Tuner, so torch can be kept out of the process before Kernel Tuner is imported."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tuner.measure.protocol import MeasureSpec

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


def isolated(main: Callable[[Connection, MeasureSpec], None], conn: Connection, spec: MeasureSpec) -> None:
    """A measuring process: `main` (process_entry, or a test's stand-in), deaf to Ctrl-C. A Ctrl-C reaches the
    whole process group, and the campaign, which stores what was measured and stops this process, is the one to
    act on it; here it printed a traceback and, had the campaign seen this process die first, would have stored
    the config being measured as a failure."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    main(conn, spec)


def process_entry(conn: Connection, spec: MeasureSpec) -> None:
    entered = time.time()
    # Kernel Tuner imports torch whenever it is installed, for torch tensors as kernel arguments; the measuring
    # process passes numpy arrays only. On the H100 machine that import took 4.3 s of every process's 5-10 s
    # start, most of a regression check's time. Here torch stays out for good, for the backends imported
    # later too (the other processes hide it from Kernel Tuner's import only: tuner/__init__.py).
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    from tuner.measure.process import live_main

    live_main(conn, spec, entered)
