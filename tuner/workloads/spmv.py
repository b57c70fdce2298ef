"""CSR sparse matrix-vector product y = A x (seed 001): inputs, the scipy reference with a tolerance fitted
to row length, cuSPARSE baselines, and the size notation `CLASS:rows=N,mean=M[,seed=S][,cols=C]` or
`mtx:FILE` (see spmv_matrices for the classes and the size variables)."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from tuner.errors import TunerError
from tuner.measure.vendor import cupy_or_none, time_with_events
from tuner.workloads import Workload
from tuner.workloads import spmv_matrices as mats

if TYPE_CHECKING:  # imported where the reference is computed: loading the workload (`tuner list`) needs none
    import scipy.sparse as sp

MANTISSA_BITS = {"float32": 24, "float64": 53}
# the seed's two kernels as it wrote them (no hints, no unrolling, one row per thread), at every block size
SEED_CONFIGS = [
    {
        "variant": v,
        "block_size_x": b,
        "threads_per_row": 1,
        "row_iters": 1,
        "unroll": 1,
        "ldg": 0,
        "stream": 0,
        "vec": 1,
        "full_occupancy": 0,
    }
    for v in (0, 1)
    for b in (128, 256, 512)
]
Y = 4  # index of y in the argument list


def min_traffic_bytes(size: dict, itemsize: int) -> int:
    """Values and column indices, row pointers, x once and y: what any CSR SpMV must move."""
    return size["nnz"] * (itemsize + 4) + (size["rows"] + 1) * 4 + (size["cols"] + size["rows"]) * itemsize


class SpMV(Workload):
    name = "spmv"
    check_reference = "cusparse"

    def parse_size(self, text: str) -> dict | None:
        text = text.strip()
        if text.startswith("mtx:"):
            return mats.register_file(text[4:])
        m = re.fullmatch(r"(\w+):\s*(\w+\s*=\s*\d+(?:\s*,\s*\w+\s*=\s*\d+)*)\s*,?", text)
        if not m or m.group(1) not in mats.CLASSES:
            return None
        pairs = [(k.strip(), int(v)) for k, v in (p.split("=") for p in m.group(2).split(","))]
        fields = dict(pairs)
        if len(fields) < len(pairs):
            raise TunerError(f"size '{text}': each of rows=, mean=, seed=, cols= at most once")
        unknown = set(fields) - {"rows", "mean", "seed", "cols"}
        if unknown or "rows" not in fields or "mean" not in fields:
            raise TunerError(
                f"size '{text}': give rows= and mean= (and optionally seed=, cols=); "
                f"unknown: {', '.join(sorted(unknown)) or 'none'}"
            )
        return mats.size_for(m.group(1), fields["rows"], fields["mean"], fields.get("seed", 1), fields.get("cols"))

    def matrix(self, size: dict) -> sp.csr_matrix:
        m = mats.generate(size)
        got = {"rows": m.shape[0], "cols": m.shape[1], "nnz": int(m.nnz)}
        wrong = {k: (size[k], v) for k, v in got.items() if size[k] != v}
        if wrong:
            raise TunerError(
                "the size does not describe its matrix: "
                + ", ".join(f"{k}={a} given, the matrix has {b}" for k, (a, b) in wrong.items())
            )
        return m

    def carry_length(self, size: dict) -> int:
        """Blocks of the largest grid the space can launch (variants 3-5 keep a carry per block)."""
        p = self.space.params
        rows_per_block = max(1, min(p["block_size_x"]) // max(p["threads_per_row"])) * min(p["row_iters"])
        items_per_block = min(p["block_size_x"]) * min(p["row_iters"])  # nonzeros (4) or rows + nonzeros (5)
        return max(-(-size["rows"] // rows_per_block), -(-(size["rows"] + size["nnz"]) // items_per_block)) + 1

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        m = self.matrix(size)
        x = rng.integers(-mats.X_MAX, mats.X_MAX + 1, size["cols"]).astype(dtype)
        n_carry = self.carry_length(size)
        pad = 1 if m.nnz == 0 else 0  # no zero-length buffers (a 0-byte cudaMalloc fails); never read past nnz
        return [
            m.indptr.astype(np.int32),
            np.append(m.indices, [0] * pad).astype(np.int32),
            np.append(m.data, [0] * pad).astype(dtype),
            x,
            np.zeros(size["rows"], dtype=dtype),
            np.zeros(2 * n_carry, dtype=dtype),
            np.zeros(n_carry, dtype=np.int32),
            np.zeros(1 + n_carry, dtype=np.uint32),
            np.int32(size["rows"]),
            np.int32(size["cols"]),
        ]

    def answer(self, args: list, size: dict, dtype: str) -> list:
        y = reference(args, size)
        return [None] * Y + [y] + [None] * (len(args) - Y - 1)

    def tolerances(self, size: dict, dtype: str) -> tuple[float, float]:
        """Exact integer data whose |a||x| row sums fit the mantissa: any order is exact, so 0.5 catches any
        lost or doubled product. Otherwise a probabilistic rounding bound, 4 u sqrt(L) sum|a||x|, for the
        longest row L (Higham & Mary)."""
        lengths, amax, integer = self._value_stats(size)
        longest = int(lengths.max()) if lengths.size else 0
        bound = longest * amax * mats.X_MAX
        if integer and bound < 2 ** MANTISSA_BITS[dtype]:
            return 0.5, 0.0
        u = 2.0 ** -MANTISSA_BITS[dtype]
        return 4 * u * np.sqrt(longest) * bound, 0.0

    def _value_stats(self, size: dict) -> tuple[np.ndarray, float, bool]:
        if size["matrix"] == 0:
            m = mats.generate(size)
            data = m.data
            return (
                np.diff(m.indptr),
                float(np.abs(data).max()) if data.size else 0.0,
                bool(np.all(data == np.round(data))),
            )
        amax = 4.0 if size["matrix"] == mats.CLASSES["laplace2d"] else float(np.abs(mats.VALUES).max())
        return mats.row_lengths(size), amax, True

    def reference_timers(self, args: list, size: dict, dtype: str) -> dict:
        cp = cupy_or_none()
        if cp is None or size["nnz"] == 0:
            return {}
        import cupyx.scipy.sparse as cusp

        row_ptr, col, val, x = (cp.asarray(a) for a in args[:4])
        a = cusp.csr_matrix((val, col, row_ptr), shape=(size["rows"], size["cols"]))
        expected = reference(args, size)
        atol, _ = self.tolerances(size, dtype)
        if not np.allclose((a @ x).get(), expected, rtol=0, atol=atol):
            raise RuntimeError("the cuSPARSE baseline computed a wrong product")
        run = _cusparse_spmv(cp, a, x)
        if not np.allclose(run().get(), expected, rtol=0, atol=atol):
            raise RuntimeError("the cuSPARSE baseline computed a wrong product")
        return {
            "cusparse": lambda repeats: time_with_events(run, repeats),
            "cupyx": lambda repeats: time_with_events(lambda: a @ x, repeats, delayed=False),
        }  # host set-up counts

    def nearest_size(self, size: dict, measured: dict) -> str | None:
        """Of the measured sizes (key -> size), the matrix nearest by features (rows, mean and spread of
        nonzeros per row, longest row); files not registered here are skipped."""
        want = mats.size_features(size)
        if want is None:
            return None
        scored = [
            (mats.feature_distance(want, f), key)
            for key, other in measured.items()
            if (f := mats.size_features(other)) is not None
        ]
        return min(scored)[1] if scored else None

    def baseline_metrics(self, name: str, time_ms: float, size: dict, dtype: str) -> dict:
        seconds = time_ms / 1e3
        return {
            "GB/s": min_traffic_bytes(size, np.dtype(dtype).itemsize) / seconds / 1e9,
            "GFLOP/s": 2 * size["nnz"] / seconds / 1e9,
        }


def reference(args: list, size: dict) -> np.ndarray:
    """scipy's CSR product in float64 of the kernel's own inputs."""
    import scipy.sparse as sp

    row_ptr, col, val, x = args[:4]
    nnz = int(row_ptr[-1])
    a = sp.csr_matrix((val[:nnz].astype(np.float64), col[:nnz], row_ptr), shape=(size["rows"], size["cols"]))
    return a @ x.astype(np.float64)


def _cusparse_spmv(cp: ModuleType, a: Any, x: Any) -> Callable[[], Any]:
    """cusparseSpMV (default algorithm, as cupyx calls it) with its descriptors and work buffer made once,
    so that the timing holds the library's kernel(s), not Python's per-call set-up."""
    from cupy._core import _dtype
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cusparse as lib
    from cupyx import cusparse

    y = cp.zeros(a.shape[0], a.dtype)
    desc_a, desc_x, desc_y = (
        cusparse.SpMatDescriptor.create(a),
        cusparse.DnVecDescriptor.create(x),
        cusparse.DnVecDescriptor.create(y),
    )
    handle = device.get_cusparse_handle()
    alpha, beta = np.array(1, a.dtype).ctypes, np.array(0, a.dtype).ctypes
    cuda_dtype = _dtype.to_cuda_dtype(a.dtype)
    op, alg = lib.CUSPARSE_OPERATION_NON_TRANSPOSE, lib.CUSPARSE_MV_ALG_DEFAULT
    size = lib.spMV_bufferSize(
        handle, op, alpha.data, desc_a.desc, desc_x.desc, beta.data, desc_y.desc, cuda_dtype, alg
    )
    buffer = cp.empty(max(size, 1), cp.int8)

    def run() -> Any:
        lib.spMV(
            handle, op, alpha.data, desc_a.desc, desc_x.desc, beta.data, desc_y.desc, cuda_dtype, alg, buffer.data.ptr
        )
        return y

    run.keep = (desc_a, desc_x, desc_y, alpha, beta, buffer)  # type: ignore[attr-defined]  # alive as long as run is
    return run


WORKLOAD = SpMV()
