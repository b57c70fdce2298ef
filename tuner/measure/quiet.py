"""No compile inside a timed window: the compile pool's processes (tuner/measure/compile_pool.py) are stopped
(SIGSTOP) while the measuring process runs a config's timed launches, and continued (SIGCONT) right after.

Each pool worker leads a process group of its own, so a signal to the group reaches the compiler's own child
processes too (g++'s cc1plus, as, ld). The measuring process stops the groups it was given, waits until each
leader is stopped, runs the timed launches and continues them, on every way out. The campaign, which made
the workers, continues them again once a request is over, whatever came of it: a measuring process that died
or hung inside a window leaves none stopped. Signals go only to processes whose parent is the campaign (the
pool's workers are its children, as is the measuring process), so a pid that is no longer a worker's is left
alone."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

STOP_WAIT_S = 0.05  # a stopped process stops within microseconds; past this, the window starts regardless
_STOPPED = frozenset("TtZX")  # /proc states of a process that runs no more: stopped, traced, zombie, dead

T = TypeVar("T")


def proc_stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and parent pid from /proc, or None where it is gone (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name, in parentheses, may hold spaces
    return fields[0], int(fields[1])


def signal_group(pid: int, sig: int) -> None:
    """`sig` to the process group `pid` leads, or to the process alone while it is not a leader yet (a worker
    makes itself one first thing, before it runs any compiler)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass  # gone: nothing to stop or continue
    except PermissionError:
        pass  # not ours (never the case for a worker): leave it


def resume(pids: Sequence[int]) -> None:
    for pid in pids:
        signal_group(pid, signal.SIGCONT)


class Pauser:
    """The measuring process's side: the worker pids of the current request, and `window()` around each timed
    part. `paused_s` adds up the time they were stopped (the pool does not count it against a compile)."""

    def __init__(self, parent: int | None = None) -> None:
        self.parent = os.getppid() if parent is None else parent
        self.pids: tuple[int, ...] = ()
        self.paused_s = 0.0
        self.windows = 0

    def watch(self, pids: Sequence[int]) -> None:
        """The pool's workers now (each request names them: a replaced worker has a new pid)."""
        mine = os.getpid()
        self.pids = tuple(p for p in pids if p != mine and (st := proc_stat(p)) is not None and st[1] == self.parent)

    def take_paused_s(self) -> float:
        seconds, self.paused_s = self.paused_s, 0.0
        return seconds

    @contextmanager
    def window(self) -> Iterator[None]:
        """Stop the workers, wait until they are, run the body, continue them (also when the body raises)."""
        if not self.pids:
            yield
            return
        pids = self.pids
        t0 = time.perf_counter()
        try:
            for pid in pids:
                signal_group(pid, signal.SIGSTOP)
            _wait_stopped(pids, t0 + STOP_WAIT_S)
            self.windows += 1
            yield
        finally:
            resume(pids)
            self.paused_s += time.perf_counter() - t0

    def timed(self, fn: Callable[..., T]) -> Callable[..., T]:
        """`fn` (a timed part: a reference's timer) run inside a window."""

        def inside(*args: object, **kwargs: object) -> T:
            with self.window():
                return fn(*args, **kwargs)

        return inside


def _wait_stopped(pids: Sequence[int], deadline: float) -> None:
    waiting = list(pids)
    while waiting and time.perf_counter() < deadline:
        waiting = [p for p in waiting if (st := proc_stat(p)) is not None and st[0] not in _STOPPED]
        if waiting:
            time.sleep(0)
