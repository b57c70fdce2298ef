"""Dense matrix multiplication (seeds 002 and 004): inputs (with split-K's workspace), the float64 numpy
reference, the K-fitted float32 tolerance, the MxNxK size notation, cuBLAS SGEMM (through cupy, TF32 off)
as the baseline, and a numpy model of the kernel's split-K decomposition."""

from __future__ import annotations

import os
import re

import numpy as np

from tuner.errors import TunerError
from tuner.measure.vendor import cupy_or_none, time_with_events
from tuner.workloads import Workload

FLOAT32_EPS = float(np.finfo(np.float32).eps)
_UNUSED = {
    "tile_n": 1,
    "warp_x": 8,
    "double_buffer": 0,
    "pad_a": 0,
    "vector": 1,
    "unroll": 0,
    "split_k": 1,
    "split_reduce": 0,
    "stages": 0,
    "rn_sum": 0,
    "k_groups": 1,
}
# The seeds' versions as points of the space, each with the tile its report found best at 2048^3
# (seed 002 on a K40: naive 32x32, coalesced 16x16, shared 32x32; seed 004: 32x32 tiles, 16 merged threads).
SEED_VERSIONS = {
    "naive": {"variant": 1, "block_size_x": 32, "block_size_y": 32, "tile_m": 1, "tile_k": 32, **_UNUSED},
    "coalesced A": {"variant": 2, "block_size_x": 16, "block_size_y": 16, "tile_m": 1, "tile_k": 16, **_UNUSED},
    "shared A and B": {"variant": 3, "block_size_x": 32, "block_size_y": 32, "tile_m": 1, "tile_k": 32, **_UNUSED},
    "merged x16": {"variant": 3, "block_size_x": 32, "block_size_y": 2, "tile_m": 16, "tile_k": 32, **_UNUSED},
}
# the smallest block tile (rows and columns of C) that splits K: split-K's counters are one per such tile
SPLIT_TILE = 32
_SIZE = re.compile(r"\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*")


def float32_tolerance(k: int) -> float:
    """Absolute tolerance of a float32 product of K terms against the float64 one.

    Inputs are uniform in [-1, 1): an entry of C is a sum of K products with mean |a*b| = 1/4, so its scale
    is about sqrt(K)/3, and a float32 accumulation in any order is off by at most about eps * K * that scale
    in practice (each of the K additions rounds to eps/2 of a partial sum). A dropped or doubled term moves
    an entry by |a*b|, 1/4 on average: far above this for every K the space allows."""
    return FLOAT32_EPS * k * (np.sqrt(k) / 3.0) * 0.75 + 1e-6


def k_slices(k: int, tile_k: int, split_k: int) -> list[tuple[int, int]]:
    """The K range [begin, end) of each of the split_k blocks of an output tile, as the kernel cuts it: whole
    tile_k-deep tiles, ceil(tiles / split_k) per block, the last ones shorter or empty."""
    tiles = -(-k // tile_k)
    per = -(-tiles // split_k)
    return [(min(k, min(tiles, z * per) * tile_k), min(k, min(tiles, z * per + per) * tile_k)) for z in range(split_k)]


def split_k_product(a: np.ndarray, b: np.ndarray, tile_k: int, split_k: int) -> np.ndarray:
    """What split_reduce 1 computes, in numpy: each slice's partial product in the inputs' dtype, the
    partials summed in slice order (the kernel's own order within a slice differs: both are float32 sums)."""
    total = np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)
    for begin, end in k_slices(a.shape[1], tile_k, split_k):
        total += a[:, begin:end] @ b[begin:end, :]
    return total


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
        return [a, b, c, np.int32(m), np.int32(n), np.int32(k), *self.split_workspace(m, n, dtype)]

    def split_workspace(self, m: int, n: int, dtype: str) -> list[np.ndarray]:
        """Split-K's workspace (kernels/gemm/gemm.cu): accum (M x N) and the counters (one per 32 x 32 tile
        or larger) zero, as every launch leaves them; partials room for the largest split_k's slices."""
        most = max(self.space.params["split_k"])
        counters = -(-m // SPLIT_TILE) * -(-n // SPLIT_TILE)
        accum = np.zeros((m, n), dtype=dtype)
        partials = np.zeros((most, m, n), dtype=dtype) if most > 1 else np.zeros(1, dtype=dtype)
        return [accum, partials, np.zeros(counters, dtype=np.int32)]

    def answer(self, args: list, size: dict, dtype: str) -> list:
        # float64 BLAS: exact for the int32 inputs (|C| < 2^53), the reference for float32
        exact = args[0].astype(np.float64) @ args[1].astype(np.float64)
        # accum and the counters must be zero again after a launch (Kernel Tuner also resets them to these
        # before each verification run, so one config's leftovers never reach the next)
        accum, counters = np.zeros_like(args[6]), np.zeros_like(args[8])
        c = exact.astype(np.int32) if dtype == "int32" else exact
        return [None, None, c, None, None, None, accum, None, counters]

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
