"""Dense matrix multiplication on the CPU (seed 004: loop order, AVX2, OpenMP, tiling): the gemm workload's
inputs, reference, float32 tolerance and MxNxK notation; as baselines in the same campaign, the naive
OpenMP i-j-k loop and, for float32, numpy's BLAS on the same cores.

The space is host code built by g++ (kernels/gemm_cpu/gemm_cpu.cpp): gemm_cpu(A, B, C, M, N, K) computes
C = A B and returns its time in ms."""

from __future__ import annotations

import numpy as np

from tuner.errors import TunerError
from tuner.measure.host_baselines import naive_timer, wall_timed
from tuner.workloads.gemm import Gemm

_ONE_ROW = {"MR": 1, "NRV": 1, "BM": 1, "BN": 0, "BK": 0, "SCHEDULE": 0, "PIN": 0}
# The seed's hand-picked versions as points of the space, with its 32 threads and AVX2's 8 lanes: the i-k-j
# loop with A's rows split over the threads ("OpenMP + SIMD + Memory Locality"), and the transpose with
# 8-wide dot products, rows split into contiguous shares (the static schedule of one-row tiles)
SEED_CONFIGS = {
    "ikj + AVX2 + OpenMP": {"VARIANT": 1, "THREADS": 32, "VEC": 8, **_ONE_ROW},
    "transpose + AVX2 + OpenMP": {"VARIANT": 2, "THREADS": 32, "VEC": 8, **_ONE_ROW},
}


class GemmCpu(Gemm):
    name = "gemm-cpu"
    check_reference = "naive-omp"

    # gemm_cpu(A, B, C, M, N, K): the gemm workload's arguments without its split-K workspace
    def split_workspace(self, m: int, n: int, dtype: str) -> list[np.ndarray]:
        return []

    def answer(self, args: list, size: dict, dtype: str) -> list:
        exact = args[0].astype(np.float64) @ args[1].astype(np.float64)  # exact for the int32 inputs
        return [None, None, exact.astype(np.int32) if dtype == "int32" else exact, None, None, None]

    def reference_timers(self, args: list, size: dict, dtype: str) -> dict:
        a, b = args[0], args[1]
        atol = self.tolerances(size, dtype)[0]
        expected = self.answer(args, size, dtype)[2]

        def close(c: np.ndarray) -> bool:
            return bool(np.allclose(c, expected, rtol=0, atol=atol))

        c_naive = np.zeros_like(args[2])
        timers = {
            "naive-omp": naive_timer(
                self.space, "naive.cpp", "gemm_naive", dtype, [a, b, c_naive, *args[3:]], lambda: close(c_naive)
            )
        }
        if dtype == "float32":  # numpy's integer matmul is no BLAS: no int32 counterpart
            c_blas = np.empty_like(args[2])
            np.matmul(a, b, out=c_blas)
            if not close(c_blas):
                raise TunerError("numpy's BLAS is not within the float32 tolerance of the reference")
            timers["numpy-blas"] = lambda repeats: wall_timed(lambda: np.matmul(a, b, out=c_blas), repeats)
        return timers


WORKLOAD = GemmCpu()
