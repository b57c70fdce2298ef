"""Sum reduction (seed 001, Harris's seven versions): inputs, numpy reference, CUB and copy baselines."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from tuner.measure.vendor import copy_timer, cupy_or_none, time_with_events
from tuner.workloads import Workload

ACCUMULATOR = {"float32": np.float32, "int32": np.int64}


class Reduction(Workload):
    name = "reduction"
    check_reference = "copy"  # memory-bound: normalise by the copy bandwidth of the same round

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        n = size["n"]
        # small integers: every summation order gives the exact sum, in float32 too
        values = rng.integers(-8, 9, n, dtype=np.int8).astype(dtype)
        acc = ACCUMULATOR[dtype]
        out = np.zeros(1, dtype=acc)
        partials = np.zeros((n + 31) // 32 + 1, dtype=acc)
        counter = np.zeros(1, dtype=np.uint32)
        return [values, out, partials, counter, np.int32(n)]

    def answer(self, args: list, size: dict, dtype: str) -> list:
        total = np.array([args[0].sum(dtype=np.int64)], dtype=ACCUMULATOR[dtype])
        return [None, total, None, None, None]

    def reference_timers(self, args: list, size: dict, dtype: str) -> dict:
        cp = cupy_or_none()
        if cp is None:
            return {}
        x = cp.asarray(args[0])
        with _cub_routines():
            if int(x.sum()) != int(args[0].sum(dtype=np.int64)):
                raise RuntimeError("the CUB baseline computed a wrong sum")

        def cub(repeats: int) -> list[float]:
            with _cub_routines():
                return time_with_events(lambda: x.sum(), repeats)

        return {"cub": cub, "copy": copy_timer(args[0].nbytes)}

    def baseline_metrics(self, name: str, time_ms: float, size: dict, dtype: str) -> dict:
        nbytes = size["n"] * np.dtype(dtype).itemsize
        moved = 2 * nbytes if name == "copy" else nbytes  # a copy reads and writes every byte
        return {"GB/s": moved / (time_ms / 1e3) / 1e9}


@contextlib.contextmanager
def _cub_routines() -> Iterator[None]:
    """cupy's sum through CUB's device reduction (its own kernel otherwise)."""
    from cupy._core import _accelerator

    saved = _accelerator.get_routine_accelerators()
    _accelerator.set_routine_accelerators(["cub"])
    try:
        yield
    finally:
        _accelerator.set_routine_accelerators(saved)


WORKLOAD = Reduction()
