"""Dense matrix multiplication (seeds 002 and 004): inputs, the float64 numpy reference, the K-fitted
float32 tolerance, the MxNxK size notation, and cuBLAS SGEMM (through cupy, TF32 off) as the baseline."""

from __future__ import annotations

import os
import re

import numpy as np

from tuner.errors import TunerError
from tuner.measure.vendor import cupy_or_none, time_with_events
from tuner.workloads import Workload

FLOAT32_EPS = float(np.finfo(np.float32).eps)
_UNUSED = {"tile_n": 1, "warp_x": 8, "double_buffer": 0, "pad_a": 0, "vector": 1, "unroll": 0}
# The seeds' versions as points of the space, each with the tile its report found best at 2048^3
# (seed 002 on a K40: naive 32x32, coalesced 16x16, shared 32x32; seed 004: 32x32 tiles, 16 merged threads).
SEED_VERSIONS = {
    "naive": {"variant": 1, "block_size_x": 32, "block_size_y": 32, "tile_m": 1, "tile_k": 32, **_UNUSED},
    "coalesced A": {"variant": 2, "block_size_x": 16, "block_size_y": 16, "tile_m": 1, "tile_k": 16, **_UNUSED},
    "shared A and B": {"variant": 3, "block_size_x": 32, "block_size_y": 32, "tile_m": 1, "tile_k": 32, **_UNUSED},
    "merged x16": {"variant": 3, "block_size_x": 32, "block_size_y": 2, "tile_m": 16, "tile_k": 32, **_UNUSED},
}
_SIZE = re.compile(r"\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*")


def float32_tolerance(k: int) -> float:
    """Absolute tolerance of a float32 product of K terms against the float64 one.

    Inputs are uniform in [-1, 1): an entry of C is a sum of K products with mean |a*b| = 1/4, so its scale
    is about sqrt(K)/3, and a float32 accumulation in any order is off by at most about eps * K * that scale
    in practice (each of the K additions rounds to eps/2 of a partial sum). A dropped or doubled term moves
    an entry by |a*b|, 1/4 on average: far above this for every K the space allows."""
    return FLOAT32_EPS * k * (np.sqrt(k) / 3.0) * 0.75 + 1e-6


class Gemm(Workload):
    name = "gemm"
    check_reference = "cublas"  # compute-bound: normalise by cuBLAS timed in the same round

    def parse_size(self, text: str) -> dict | None:
        match = _SIZE.fullmatch(text)
        if match is None:
            return None
        m, n, k = (int(g) for g in match.groups())
        return {"m": m, "n": n, "k": k}

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        m, n, k = size["m"], size["n"], size["k"]
        if dtype == "int32":  # small integers: every sum is exact in int32 (|C| <= 64 K)
            a = rng.integers(-8, 9, (m, k), dtype=np.int32)
            b = rng.integers(-8, 9, (k, n), dtype=np.int32)
        else:
            a = rng.uniform(-1.0, 1.0, (m, k)).astype(dtype)
            b = rng.uniform(-1.0, 1.0, (k, n)).astype(dtype)
        c = np.zeros((m, n), dtype=dtype)
        return [a, b, c, np.int32(m), np.int32(n), np.int32(k)]

    def answer(self, args: list, size: dict, dtype: str) -> list:
        # float64 BLAS: exact for the int32 inputs (|C| < 2^53), the reference for float32
        exact = args[0].astype(np.float64) @ args[1].astype(np.float64)
        return [None, None, exact.astype(np.int32) if dtype == "int32" else exact, None, None, None]

    def tolerances(self, size: dict, dtype: str) -> tuple[float, float]:
        if dtype == "int32":
            return 0.0, 0.0
        return float32_tolerance(size["k"]), 0.0

    def reference_timers(self, args: list, size: dict, dtype: str) -> dict:
        if dtype != "float32":
            return {}  # cuBLAS has no int32 GEMM with int32 output
        # cupy asks cuBLAS for TF32 only when CUPY_TF32 > 0; NVIDIA_TF32_OVERRIDE=0 forbids it library-wide
        os.environ["CUPY_TF32"] = "0"
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
        cp = cupy_or_none()
        if cp is None:
            return {}
        a, b = cp.asarray(args[0]), cp.asarray(args[1])
        c = cp.matmul(a, b)
        atol = self.tolerances(size, dtype)[0]
        expected = self.answer(args, size, dtype)[2]
        if not np.allclose(cp.asnumpy(c), expected, rtol=0, atol=atol):
            raise TunerError("the cuBLAS baseline is not within the float32 tolerance (TF32 on?)")
        out = cp.empty_like(c)
        return {"cublas": lambda repeats: time_with_events(lambda: cp.matmul(a, b, out=out), repeats)}

    def baseline_metrics(self, name: str, time_ms: float, size: dict, dtype: str) -> dict:
        return {"GFLOP/s": 2.0 * size["m"] * size["n"] * size["k"] / (time_ms / 1e3) / 1e9}


WORKLOAD = Gemm()
