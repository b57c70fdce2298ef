"""The measuring process: it sets up once (inputs, reference, a CUDA context), then answers the campaign's
requests (tuner/measure/protocol.py) one at a time. Kernel Tuner stops on unrecognised compile errors,
illegal addresses and failed verifications, and waits forever on a kernel that hangs; here each of those
becomes a row with its failure class, and after one that may have broken the CUDA context the process exits
so that the campaign starts a fresh one.

`serve` speaks the protocol for any `Measurer`: the live one here (Kernel Tuner on the GPU), the replay of a
recording (tuner/measure/replay.py)."""

from __future__ import annotations

import os
import statistics
import sys
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tuner.measure.evaluate import evaluate, open_cache
from tuner.measure.protocol import (
    SURVIVABLE,
    CacheReady,
    Fatal,
    Measure,
    MeasureRounds,
    MeasureSpec,
    Ready,
    Result,
    Stop,
    UseCache,
    config_key,
)
from tuner.measure.quiet import Pauser

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


class Measurer(ABC):
    """One way of answering the protocol's requests (the live GPU, a replayed recording)."""

    setup: dict  # what Ready tells the campaign
    pauser: Pauser | None = None  # stops the compile pool's workers for the timed parts (a replay times none)

    @abstractmethod
    def measure(self, values: list) -> dict: ...

    @abstractmethod
    def measure_rounds(self, configs: list, rounds: int, references: bool) -> list[dict]: ...

    def use_cache(self, path: str) -> None:  # noqa: B027  (optional: a replay writes no cache)
        """Append fresh measurements to Kernel Tuner's cache at `path` (a replay writes none)."""

    def accept_compiled(self, compiled: tuple) -> None:  # noqa: B027  (optional: a replay compiles nothing)
        """Binaries the compile pool made for the next request's configs (cubin_backend.py, library_backend.py)."""


def serve(conn: Connection, make_measurer: Callable[[], Measurer]) -> None:
    """Set up with `make_measurer()`, say Ready (or Fatal), then answer requests until Stop or a failure
    after which the process must not go on."""
    try:
        measurer = make_measurer()
    except Exception as e:  # no GPU, no backend, bad inputs: the campaign cannot run at all
        conn.send(Fatal(f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    conn.send(Ready(measurer.setup))
    while True:
        request = conn.recv()
        if isinstance(request, Stop):
            return
        if isinstance(request, UseCache):  # the campaign knows the GPU now, hence where its cache goes
            try:
                measurer.use_cache(request.path)
            except Exception as e:  # Kernel Tuner refuses a cache of another space or device, or a broken one
                conn.send(Fatal(f"{type(e).__name__}: {e}", traceback.format_exc()))
                return
            conn.send(CacheReady())
            continue
        if isinstance(request, (Measure, MeasureRounds)):
            if request.compiled:
                measurer.accept_compiled(request.compiled)
            if measurer.pauser is not None:
                measurer.pauser.watch(request.pause)
        if isinstance(request, MeasureRounds):
            rows = measurer.measure_rounds([list(c) for c in request.configs], request.rounds, request.references)
        elif isinstance(request, Measure):
            rows = [measurer.measure(list(request.values))]
        else:
            raise TypeError(f"not a request of the measuring protocol: {request!r}")
        conn.send(Result(tuple(rows), measurer.pauser.take_paused_s() if measurer.pauser else 0.0))
        if rows[0]["status"] not in SURVIVABLE:
            return


def quiet_kernel_tuner_del(unraisable: Any) -> None:
    """sys.unraisablehook: a Kernel Tuner backend whose __init__ failed (no GPU) fails again in its __del__
    (`'CudaFunctions' object has no attribute 'green_ctx_cache'`); the set-up's own error says what is wrong,
    so that traceback is not shown. Anything else goes to Python's hook."""
    where = getattr(unraisable.object, "__module__", "") or ""
    if where.startswith("kernel_tuner") and getattr(unraisable.object, "__name__", "") == "__del__":
        return
    sys.__unraisablehook__(unraisable)


PROFILE_ENV = "TUNER_PROFILE_DIR"  # set: each measuring process writes its cProfile statistics there


def live_main(conn: Connection, spec: MeasureSpec, entered: float | None = None) -> None:
    """The measuring process on the GPU."""
    entered = entered or time.time()  # the parent compares it with its spawn: the cost of a new process
    sys.unraisablehook = quiet_kernel_tuner_del
    os.environ.update(spec.env)
    profile_dir = os.environ.get(PROFILE_ENV)
    if not profile_dir:
        serve(conn, lambda: LiveMeasurer(spec, entered))
        return
    import cProfile  # where a measuring process's time goes (benchmarks/throughput.py --parts timeline)

    with cProfile.Profile() as profile:
        try:
            serve(conn, lambda: LiveMeasurer(spec, entered))
        finally:
            profile.dump_stats(os.path.join(profile_dir, f"measure-{os.getpid()}.prof"))


class LiveMeasurer(Measurer):
    """Kernel Tuner's sequential runner on the GPU, its stages marked so that a compile error, a wrong answer
    and a crash in a benchmark are told apart."""

    ahead = False  # takes binaries compiled ahead (set up in __init__)

    def __init__(self, spec: MeasureSpec, entered: float):
        t_imports = time.perf_counter()
        import numpy as np
        from kernel_tuner.runners.sequential import SequentialRunner

        from tuner.measure import cubin_backend, kt, library_backend, timing
        from tuner.measure.provenance import device_info
        from tuner.workloads import get_workload

        t0 = time.perf_counter()
        self.spec = spec
        self.workload = workload = get_workload(spec.workload)
        workload.device = spec.device  # a workload that runs a reference kernel runs it here
        space = workload.space
        self.args = workload.arguments(spec.size, spec.dtype, np.random.default_rng(spec.data_seed))
        answer = workload.answer(self.args, spec.size, spec.dtype)
        t1 = time.perf_counter()
        self.kernel_options = kt.kernel_options(
            space,
            spec.size,
            spec.dtype,
            self.args,
            spec.backend,
            workload.constant_arguments(self.args, spec.size, spec.dtype),
        )
        self.runner = SequentialRunner(
            self.kernel_options.kernel_source,
            self.kernel_options,
            kt.device_options(space, spec.dtype, spec.device),
            spec.iterations or space.iterations,
            None,
        )
        # host code times its own pipeline inside; a kernel's start event waits for the host's launch
        # (tuner/measure/timing.py)
        timing_protocol = "host" if space.lang == "host" else timing.delay_start_events(self.runner.dev.dev)
        t2 = time.perf_counter()
        self.tuning_options = kt.tuning_options(
            space,
            spec.size,
            spec.dtype,
            answer=answer,  # with the space's metrics: the cache's entries carry them, as Kernel Tuner writes them
            tolerances=workload.tolerances(spec.size, spec.dtype),
        )
        self.keys = list(self.tuning_options.tune_params)
        self.host_code = self.kernel_options.lang == kt.kt_lang(kt.HOST_BACKEND)
        gpu = device_info(workload.space, spec.device)  # a CPU workload: the CPU, keyed as a GPU is
        if self.host_code:  # Kernel Tuner's C backend names the machine (x86_64); the cache names the device
            self.runner.dev.name = gpu["gpu"]
        self.use_cache(spec.cachefile)
        dev = self.runner.dev
        # binaries compiled ahead by the campaign's compile pool are loaded, not compiled: cubins on nvcuda,
        # shared libraries on the C backend (host code)
        self.cubin_target = cubin_backend.install(self.runner.dev.dev)
        self.library_target = None if self.cubin_target else library_backend.install(self.runner.dev.dev)
        self.ahead = bool(self.cubin_target or self.library_target)
        # the timed part: Kernel Tuner's benchmark (its timed launches, not the compile or the verification's
        # launch) runs with the compile pool's workers stopped
        self.pauser = Pauser()
        for method, stage in (
            ("compile_kernel", "compile"),
            ("check_kernel_output", "verify"),
            ("benchmark", "benchmark"),
        ):
            fn = getattr(dev, method)
            setattr(dev, method, _staged(self.pauser.timed(fn) if stage == "benchmark" else fn, stage, dev))
        # a C-backend (host code) library is replaced by the next one built: nothing to keep
        self.fastest = Fastest(0 if self.host_code else Fastest.KEEP)
        baselines = (
            workload.baselines(self.args, spec.size, spec.dtype, spec.baseline_repeats) if spec.baseline_repeats else {}
        )
        # where the start goes (a regression check starts one process per kernel): inputs and numpy reference,
        # Kernel Tuner's runner (CUDA context, arguments on the GPU), the rest (references, GPU query)
        seconds = {
            "imports": t0 - t_imports,
            "data": t1 - t0,
            "kernel_tuner": t2 - t1,
            "rest": time.perf_counter() - t2,
        }
        self.setup = {
            "gpu": gpu,
            "baselines": baselines,
            "timing": timing_protocol,
            "cubin": self.cubin_target,  # what the compile pool compiles for (None: it does not) ...
            "library": self.library_target,  # ... for host code
            "setup_s": {k: round(v, 2) for k, v in seconds.items()},
            "entered_at": entered,
        }

    def use_cache(self, path: str | None) -> None:
        self.spec.cachefile = path
        open_cache(path, self.kernel_options, self.tuning_options, self.runner)

    def accept_compiled(self, compiled: tuple) -> None:
        from tuner.measure import cubin_backend

        cubin_backend.offer(self.runner.dev.dev, compiled)

    def measure(self, values: list) -> dict:
        dev = self.runner.dev.dev
        if self.ahead:
            dev.pool_ms = 0.0
        row = evaluate(self.runner, self.tuning_options, self.keys, values)
        if self.ahead:
            dev.ready.clear()  # offered for this config alone: Kernel Tuner may have compiled nothing
            if dev.pool_ms and "compile_time" in row:  # compiled ahead: the pool's compile and the load
                row["compile_time"] += dev.pool_ms
        self.fastest.offer(config_key(values), row, self.runner.dev)
        return row

    def measure_rounds(self, configs: list, rounds: int, references: bool) -> list[dict]:
        from tuner.measure.rounds import measure_rounds

        started = time.perf_counter()  # the references, set up once for all rounds
        timers = self.workload.reference_timers(self.args, self.spec.size, self.spec.dtype) if references else {}
        if self.pauser is not None:  # timed too
            timers = {name: self.pauser.timed(timer) for name, timer in timers.items()}
        prepared_s = round(time.perf_counter() - started, 2)
        rows = measure_rounds(
            self.runner,
            self.tuning_options,
            self.keys,
            configs,
            rounds,
            timers=timers,
            one_at_a_time=self.host_code,
            compiled=dict(self.fastest.funcs),
        )
        if self.ahead:
            self.runner.dev.dev.ready.clear()
        return [{**row, "references_s": prepared_s} if row["status"] == "ok" else row for row in rows]


def _staged(fn: Callable[..., Any], stage: str, holder: Any) -> Callable[..., Any]:
    def wrapper(*a: Any, **kw: Any) -> Any:
        holder._tuner_stage = stage
        out = fn(*a, **kw)
        if stage == "compile":
            holder._tuner_compiled = out  # for Fastest
        return out

    return wrapper


class Fastest:
    """The compiled kernels of the fastest configs measured so far in this process, so that the campaign's
    confirmation (tuner/campaign/confirmation.py), which measures its near-best configs again, does not
    compile them again: five nvcc runs were 2-3 s of every campaign's wall time, which no number of GPUs
    divides."""

    KEEP = 8  # confirmation.MAX_FINALISTS, as many as a confirmation measures (not imported: it brings pandas)

    def __init__(self, keep: int):
        self.keep = keep
        self.funcs: dict[str, object] = {}  # cache key -> compiled kernel
        self.ms: dict[str, float] = {}  # cache key -> median time

    def offer(self, key: str, row: dict, dev: Any) -> None:
        func = getattr(dev, "_tuner_compiled", None)  # what this evaluation compiled
        if not self.keep or func is None or row["status"] != "ok" or not row.get("times"):
            return  # served from a cache or failed: nothing was compiled, or nothing worth keeping
        self.ms[key], self.funcs[key] = statistics.median(row["times"]), func
        if len(self.ms) > self.keep:
            slowest = max(self.ms, key=lambda k: self.ms[k])
            del self.ms[slowest], self.funcs[slowest]
