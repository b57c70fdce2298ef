"""Baselines of CPU workloads, timed in the measuring process beside the tuned code and on the same inputs:
a C function that times itself (a naive OpenMP version, built by the space's compiler with its options, as
its configurations are) and a Python call timed by the wall clock (numpy's BLAS on the same cores)."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable

import numpy as np

from tuner.errors import TunerError
from tuner.space import Space

MIN_REPEATS = 3  # a slow baseline (the naive Floyd-Warshall at n = 5000 takes seconds a run) is timed
MAX_SECONDS = 6.0  # at least this often, then until this much of its time is spent or the repeats are done


def baseline_source(space: Space, filename: str, dtype: str) -> str:
    """A baseline's C++ source beside the space's kernel, the dtype's #defines in front (as the space's own)."""
    path = space.kernel_source.parent / filename
    defines = space.dtypes[dtype].get("defines", {})
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + path.read_text()


def c_arguments(args: list) -> list:
    """Arguments for a built C function, as Kernel Tuner's C backend passes them: arrays by pointer, numpy
    scalars as their C type."""
    out: list[object] = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a.ctypes)
        elif isinstance(a, np.integer):
            out.append(ctypes.c_int(int(a)))
        else:
            out.append(ctypes.c_float(float(a)))
    return out


def self_timed(run: Callable[[], float], repeats: int, name: str) -> list[float]:
    """Milliseconds of up to `repeats` calls of run(), each as it measured itself (see MAX_SECONDS)."""
    times: list[float] = []
    for _ in range(max(repeats, 1)):
        ms = float(run())
        if not ms >= 0:
            raise TunerError(f"the {name} baseline failed (it returned {ms})")
        times.append(ms)
        if len(times) >= MIN_REPEATS and sum(times) / 1e3 >= MAX_SECONDS:
            break
    return times


def wall_timed(call: Callable[[], object], repeats: int, warmup: int = 2) -> list[float]:
    """Milliseconds of up to `repeats` calls of call(), each by the wall clock, after `warmup` calls."""
    for _ in range(warmup):
        call()
    times: list[float] = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
        if len(times) >= MIN_REPEATS and sum(times) / 1e3 >= MAX_SECONDS:
            break
    return times


def naive_timer(
    space: Space, filename: str, function: str, dtype: str, args: list, check: Callable[[], bool]
) -> Callable[[int], list[float]]:
    """A timer (repeats -> [ms, ...]) of the naive C function `function` of `filename` on `args` (the
    tuned code's arguments: it writes the same output), its answer checked once with check()."""
    from tuner.measure.hostcode import build_source

    fn = build_source(space, baseline_source(space, filename, dtype), function, f"baseline {filename}")
    c_args = c_arguments(args)

    def run() -> float:
        return float(fn(*c_args))

    if not run() >= 0 or not check():
        raise TunerError(f"the naive baseline of {space.workload} ({filename}) does not match the reference")
    return lambda repeats: self_timed(run, repeats, f"{space.workload} naive")
