"""Timing of vendor references (CUB, cuBLAS, cuSPARSE, copy bandwidth) with CUDA events through cupy,
in the same process and on the same inputs as the tuned kernels."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def cupy_or_none() -> ModuleType | None:
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:  # no cupy, or no GPU: baselines are skipped, tuning goes on
        return None


def time_with_events(fn: Callable[[], object], repeats: int = 50, warmup: int = 5, delayed: bool = True) -> list[float]:
    """Milliseconds of each of `repeats` calls of fn(), each between its own pair of events; `delayed`: the
    GPU spins before each start event, so fn's host-side launch overhead is not counted (tuner/measure/timing.py),
    as for the tuned kernels."""
    import cupy

    from tuner.measure.timing import spin

    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    times = []
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(repeats):
        if delayed:
            spin()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return times


def copy_timer(nbytes: int) -> Callable[[int], list[float]]:
    """A timer (repeats -> [ms, ...]) of a device-to-device copy of nbytes, its buffers allocated once;
    the caller counts 2 * nbytes moved (read + write)."""
    import cupy

    src = cupy.ones(nbytes // 4 or 1, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    return lambda repeats: time_with_events(lambda: dst.__setitem__(Ellipsis, src), repeats)
