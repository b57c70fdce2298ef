"""How the workers of `tuner tune --workers N` stop: a SIGTERM as Ctrl-C (the campaign's rows stored, the
measuring process stopped), and the death of the `tune` that started them, SIGKILL included, as a SIGTERM, so
that none is left measuring on a GPU with nobody watching."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import FrameType

PARENT_ENV = "TUNER_WORKER_PARENT"  # set by `tune --workers` (launch.py): its pid; the worker stops when it dies
PARENT_POLL_S = 1.0  # where the kernel cannot signal a parent's death (not Linux): how often a worker looks


class Terminated(KeyboardInterrupt):
    """A SIGTERM (or the death of the `tuner tune` that started this worker): stopped as Ctrl-C stops it, the
    `finally`s storing what was measured and stopping the measuring process (the CLI says "interrupted", 130)."""


@contextmanager
def stopped_like_ctrl_c(parent: int | None = None) -> Iterator[None]:
    """While inside: the first SIGTERM raises Terminated, as Ctrl-C raises KeyboardInterrupt; a SIGTERM after a
    stop has begun (a Ctrl-C's or a SIGTERM's) is ignored, so that it does not cut the clean-up short (`tune
    --workers` sends its workers one as Ctrl-C reaches them all). `parent`: the pid of the process that started
    this one; its death, SIGKILL included, sends this process a SIGTERM (Linux's PR_SET_PDEATHSIG, elsewhere a
    thread that looks every PARENT_POLL_S). Signal handlers belong to the main thread: elsewhere this only
    watches the parent."""
    main = threading.current_thread() is threading.main_thread()
    begun = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal begun
        if not begun:
            begun = True
            raise Terminated()

    def on_int(signum: int, frame: FrameType | None) -> None:
        nonlocal begun
        begun = True
        signal.default_int_handler(signum, frame)

    def on_unraisable(unraisable: Any) -> None:
        # a handler's exception raised while Python ran a __del__ or a weakref callback is printed and dropped
        # ("Exception ignored in"), and the stop with it (seen: a worker measured on, deaf to further SIGTERMs):
        # asked for again, from another thread so that it is raised once this callback is over
        nonlocal begun
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            begun = False
            threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGTERM)).start()
        else:
            hook(unraisable)

    saved = {}
    hook = sys.unraisablehook
    if main:
        # a signal ignored at our start (nohup, a background job of a script) stays ignored
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
            saved[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_term)
            sys.unraisablehook = on_unraisable
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            saved[signal.SIGINT] = signal.signal(signal.SIGINT, on_int)
    try:
        if parent is not None:
            _watch_parent(parent)
        yield
    finally:
        sys.unraisablehook = hook
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _watch_parent(parent: int) -> None:
    """A SIGTERM to this process when `parent` dies (a worker of `tune --workers` stops with it, rather than
    measure on, unwatched, as an orphan), or at once if it has died already."""
    if not _signal_on_parent_death(signal.SIGTERM):

        def poll() -> None:
            while os.getppid() == parent:
                time.sleep(PARENT_POLL_S)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=poll, name="parent-watch", daemon=True).start()
    if os.getppid() != parent:  # it died before the watch began (this process was adopted): no signal comes
        os.kill(os.getpid(), signal.SIGTERM)


def _signal_on_parent_death(signum: int) -> bool:
    """Linux's PR_SET_PDEATHSIG: the kernel sends `signum` when the parent dies, SIGKILL included; False where it
    cannot. The signal comes when the parent's *thread* that started this process ends: launch.py starts the
    workers on the thread that then waits for them, so that is the parent's end."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, signum, 0, 0, 0) == 0  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False
