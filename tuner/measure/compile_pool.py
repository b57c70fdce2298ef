"""Compiling ahead: a pool of compiler processes that turn the next configs' kernel sources into cubins for
the GPU's architecture (host code into shared libraries) while the device measures the current one
(tuner/measure/pipeline.py feeds it, tuner/measure/cubin_backend.py and library_backend.py load what it made).

Each worker compiles one job at a time. A compiler that crashes (the worker dies) or hangs (killed after
`timeout` seconds, counted from when its worker had started) fails that job alone, as a `crashed` Compiled the
campaign records as a `compile` failure; the worker is replaced and the other jobs go on. A compiler's own verdict (a compile error) is an ordinary
Compiled with its `error`: the measuring process raises it where Kernel Tuner's compile would have.

While a request is with the measuring process the pool is `frozen`: the measuring process stops the workers
for each timed part (tuner/measure/quiet.py), so the pool starts no worker it was not told of, reaps none (its
pid stays its own) and counts no stopped time towards a hang or a compile's seconds."""

from __future__ import annotations

import hashlib
import importlib
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from tuner.measure.quiet import resume, signal_group


@dataclass(frozen=True)
class CompileJob:
    """One kernel source to compile: the source Kernel Tuner would compile for a config, the kernel's name
    expression and the compiler's options; for host code (tuner/measure/library_backend.py) also the compiler
    program and the source file's suffix."""

    source: str
    name: str
    options: tuple[str, ...]
    compiler: str = ""
    suffix: str = ""

    @property
    def key(self) -> str:
        return source_key(self.name, self.source)


@dataclass(frozen=True)
class Compiled:
    """What came of a job: a binary (a cubin, or a shared library for host code) and the kernel's (lowered) name
    in it, or the compiler's error, or (crashed) no verdict at all because the compiler crashed or hung."""

    key: str
    binary: bytes | None = None
    lowered_name: str = ""
    error: str = ""
    crashed: bool = False
    seconds: float = 0.0


def source_key(name: str, source: str) -> str:
    """What identifies a kernel source: the measuring process finds the pool's cubin by it, so a source that
    differs in any byte from the one it would compile is never served another's binary."""
    return hashlib.sha256(f"{name}\0{source}".encode()).hexdigest()


Compiler = Callable[[CompileJob], tuple[bytes, str]]  # a job -> (binary, its name); raises on a compile error
READY = "ready"  # a worker's first message: started, its compiler imported; a job's time to a hang starts then
START_S = 120.0  # the most a worker may take to start (a Python process spawned, on a loaded machine)


def resolve_compiler(compiler: Compiler | str) -> Compiler:
    """A compiler, or its "module:function" name."""
    if callable(compiler):
        return compiler
    module, _, func = compiler.partition(":")
    return getattr(importlib.import_module(module), func)


def _worker_main(conn: Any, compiler: Compiler | str) -> None:
    """A pool worker: compile each job it is sent until it is sent None."""
    os.setpgid(0, 0)  # a group of its own with the compilers it runs: stopped, continued and killed together
    fn = resolve_compiler(compiler)
    conn.send(READY)
    while True:
        job = conn.recv()
        if job is None:
            return
        t0 = time.perf_counter()
        try:
            binary, lowered = fn(job)
            out = Compiled(job.key, binary=binary, lowered_name=lowered)
        except Exception as e:  # the compiler's verdict on this source: the config's compile failure
            message = f"{type(e).__name__}: {e}".strip() or traceback.format_exc()
            out = Compiled(job.key, error=message[-4000:])
        conn.send(Compiled(**{**out.__dict__, "seconds": time.perf_counter() - t0}))


class _Worker:
    def __init__(self, ctx: Any, compiler: Compiler | str) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, compiler), daemon=True)
        self.proc.start()
        child.close()
        self.job: CompileJob | None = None
        self.started = False  # READY came: until then a job's wait is the worker's start, not the compiler's
        self.since = 0.0  # when the job was sent (or the worker started), moved on by the time it was stopped
        self.stopped_s = 0.0  # of the job's time, stopped by the measuring process

    def kill(self) -> None:
        if self.proc.is_alive():
            signal_group(self.proc.pid, signal.SIGKILL)  # with a compiler it runs (g++ would go on alone)
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class CompilePool:
    """Up to `workers` compiler processes, started as jobs need them. `submit` queues a job (once per key);
    `result` waits for its Compiled. A background thread hands jobs to idle workers and collects results, so
    compiling goes on while the caller waits on the GPU."""

    def __init__(self, compiler: Compiler | str, workers: int, timeout: float) -> None:
        self.compiler, self.size, self.timeout = compiler, max(1, workers), timeout
        self.restarts = 0  # workers replaced after a crash or hang
        self._ctx = mp.get_context("spawn")  # the measuring side may hold a CUDA context: never fork it
        self._workers: list[_Worker] = []
        self._queue: deque[CompileJob] = deque()
        self._results: dict[str, Compiled] = {}
        self._known: set[str] = set()  # keys submitted (queued, compiling or done)
        self._cond = threading.Condition()
        self._closed = False
        self._frozen = 0  # requests with the measuring process now (see frozen)
        self._thread = threading.Thread(target=self._pump, name="compile-pool", daemon=True)
        self._thread.start()

    def submit(self, job: CompileJob) -> str:
        with self._cond:
            if job.key not in self._known:
                self._known.add(job.key)
                self._queue.append(job)
                self._cond.notify_all()
        return job.key

    def result(self, key: str) -> Compiled:
        """The job's outcome, once there (it was submitted; a hang ends after the pool's timeout)."""
        with self._cond:
            if key not in self._known:
                raise KeyError(f"no compile job {key[:12]} was submitted")
            while key not in self._results:
                if self._closed:
                    raise RuntimeError("the compile pool was closed")
                self._cond.wait(0.5)
            self._known.discard(key)  # a later submit of the same source compiles it again
            return self._results.pop(key)

    def done(self, key: str) -> bool:
        with self._cond:
            return key in self._results

    @contextmanager
    def frozen(self) -> Iterator[tuple[int, ...]]:
        """While a request is with the measuring process: the workers' pids, which it may stop (SIGSTOP) for
        its timed parts. No worker is started or reaped meanwhile; all are continued (SIGCONT) on the way out,
        however the request ended (the measuring process died or hung with them stopped)."""
        with self._cond:
            self._frozen += 1
            pids = tuple(w.proc.pid for w in self._workers if w.proc.pid is not None)
        try:
            yield pids
        finally:
            resume(pids)  # first, without the lock: the pump may be reading a stopped worker's reply under it
            with self._cond:
                self._frozen -= 1
                self._cond.notify_all()

    def credit(self, stopped_s: float) -> None:
        """The measuring process kept the workers stopped `stopped_s` seconds: not a compile's time, nor a hang."""
        with self._cond:
            now = time.perf_counter()
            for w in self._workers:
                if w.job is not None:
                    s = max(0.0, min(stopped_s, now - w.since))
                    w.since += s
                    w.stopped_s += s

    @property
    def pids(self) -> tuple[int, ...]:
        with self._cond:
            return tuple(w.proc.pid for w in self._workers if w.proc.pid is not None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(10)
        for w in self._workers:
            try:
                if w.proc.is_alive() and w.job is None:
                    w.conn.send(None)
                    w.proc.join(2)
            except (OSError, BrokenPipeError):
                pass
            w.kill()
        self._workers = []

    # -- the background thread ------------------------------------------------------------------
    def _pump(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                self._dispatch()
                busy = [w for w in self._workers if w.job is not None]
                if not busy:
                    self._cond.wait(0.2)
                    continue
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.05)
            with self._cond:
                now, deferred = time.perf_counter(), False
                for w in busy:
                    if w.job is None:
                        continue
                    ended = w.proc.sentinel in ready
                    if self._frozen and (ended or w.conn not in ready):
                        # until the request is over: an ended worker is not reaped (its pid stays its own, for
                        # the signals), a slow one's stopped time is no hang
                        deferred = deferred or ended
                    elif w.conn in ready or ended:
                        self._collect(w)
                    elif not w.started and now - w.since > START_S:
                        self._fail(w, f"the compiler's process did not start within {START_S:.0f} s and was killed")
                    elif w.started and now - w.since > self.timeout:
                        self._fail(w, f"the compiler did not finish within {self.timeout:.0f} s and was killed")
                self._cond.notify_all()
            if deferred:
                time.sleep(0.05)  # its sentinel stays ready: no busy loop meanwhile

    def _dispatch(self) -> None:
        while self._queue:
            idle = next((w for w in self._workers if w.job is None), None)
            if idle is None:
                if len(self._workers) >= self.size or self._frozen:
                    return
                idle = _Worker(self._ctx, self.compiler)
                self._workers.append(idle)
            job = self._queue.popleft()
            try:
                idle.conn.send(job)
            except (OSError, BrokenPipeError):  # died while idle: replace it, the job goes back in front
                self._queue.appendleft(job)
                if self._frozen:  # not reaped until the request is over (see _pump)
                    return
                self._replace(idle)
                continue
            idle.job, idle.since, idle.stopped_s = job, time.perf_counter(), 0.0

    def _collect(self, w: _Worker) -> None:
        assert w.job is not None
        try:
            if w.conn.poll():
                out = w.conn.recv()
                if out == READY:  # the job's time starts now
                    w.started, w.since, w.stopped_s = True, time.perf_counter(), 0.0
                    return
                if w.stopped_s:  # the worker timed the job with a clock that ran on while it was stopped
                    out = Compiled(**{**out.__dict__, "seconds": max(0.0, out.seconds - w.stopped_s)})
                self._results[w.job.key] = out
                w.job = None
                return
        except (EOFError, OSError):
            if self._frozen:  # it ended: failed once the request is over, when it may be reaped (see _pump)
                return
        w.proc.join(5)
        self._fail(w, f"the compiler crashed (its process ended with exit code {w.proc.exitcode})")

    def _fail(self, w: _Worker, message: str) -> None:
        assert w.job is not None
        key, seconds = w.job.key, time.perf_counter() - w.since
        self._results[key] = Compiled(key, error=message, crashed=True, seconds=seconds)
        w.job = None
        self._replace(w)

    def _replace(self, w: _Worker) -> None:
        w.kill()
        self._workers.remove(w)
        self.restarts += 1  # a new one starts at the next dispatch


def nvrtc_cubin(job: CompileJob) -> tuple[bytes, str]:
    """NVRTC, as Kernel Tuner's nvcuda backend calls it (tuner/measure/cubin_backend.py), but to a cubin: the
    options name a real architecture (sm_XX), so the driver has no PTX left to compile when it loads it."""
    from cuda.bindings import nvrtc

    def ok(ret: Any) -> Any:
        ret = ret if isinstance(ret, tuple) else (ret,)
        if ret[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC error: {nvrtc.nvrtcGetErrorString(ret[0])[1].decode()}")
        return ret[1] if len(ret) == 2 else ret[1:]

    name = job.name.encode()
    program = ok(nvrtc.nvrtcCreateProgram(job.source.encode(), b"CUDAProgram", 0, [], []))
    try:
        ok(nvrtc.nvrtcAddNameExpression(program, name))
        options = [o.encode() for o in job.options]
        try:
            ok(nvrtc.nvrtcCompileProgram(program, len(options), options))
        except RuntimeError as e:  # the log says why (and "uses too much shared data", which Kernel Tuner skips)
            size = ok(nvrtc.nvrtcGetProgramLogSize(program))
            log = b" " * size
            ok(nvrtc.nvrtcGetProgramLog(program, log))
            raise RuntimeError(f"{e}\n{log.decode(errors='replace').rstrip(chr(0)).strip()}") from None
        cubin = b" " * ok(nvrtc.nvrtcGetCUBINSize(program))
        ok(nvrtc.nvrtcGetCUBIN(program, cubin))
        lowered = ok(nvrtc.nvrtcGetLoweredName(program, name))
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return cubin, lowered.decode() if isinstance(lowered, bytes) else str(lowered)
