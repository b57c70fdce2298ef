"""Matrices of the spmv workload: Matrix Market files, generators for the classes that matter, and the
features (rows, mean and spread of nonzeros per row) that `tuner best spmv --matrix` chooses by.

A problem size is a dict of integers: {matrix, rows, cols, nnz, mean, seed}. `matrix` is the class code
below; a generated matrix is fully determined by (matrix, rows, mean, seed), and cols and nnz are what the
generator yields (the YAML states them so that the metrics can use them; `arguments()` checks them).
A Matrix Market file has class 0 and seed = a hash of its content; its path is found through the
environment (TUNER_SPMV_FILES, set by `register_file`) so that worker processes see it too.

Generated values and x are small integers, so every product and every partial sum is exact in float32
(while a row's |a||x| sum stays below 2^24, which the generators guarantee): any summation order gives
the reference exactly, and a lost or doubled product shows.
"""

from __future__ import annotations

import json
import math
import os
import warnings
import zlib
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tuner.errors import TunerError

if TYPE_CHECKING:  # scipy.sparse is imported where a matrix is made: loading the workload (`tuner list`) needs none
    import scipy.sparse as sp

CLASSES = {"file": 0, "uniform": 1, "powerlaw": 2, "laplace2d": 3, "banded": 4, "denserow": 5}
CLASS_NAMES = {code: name for name, code in CLASSES.items()}
FILES_ENV = "TUNER_SPMV_FILES"
POWERLAW_ALPHA = 1.5  # Pareto tail of the row lengths: finite mean, unbounded variance
DENSE_ROW_MAX = 1 << 21  # the dense row's length cap: keeps its |a||x| sum (<= 6 * 2^21) exact in float32
INDEX_MAX = 2**31 - 1  # CSR row pointers and column indices are int32
VALUES = np.array([-2, -1, 1, 2], dtype=np.int8)  # nonzeros of generated matrices
X_MAX = 3  # x holds integers in [-3, 3]


# ---- Matrix Market ------------------------------------------------------------------------------------------
def read_matrix_market(path: str | Path) -> sp.csr_matrix:
    """A .mtx file (coordinate; real, integer or pattern; general, symmetric or skew-symmetric) as CSR with
    float64 values, rows' columns sorted, duplicates summed. Anything else is a one-line TunerError."""
    import scipy.io
    import scipy.sparse as sp

    path = Path(path)
    if not path.is_file():
        raise TunerError(f"{path}: no such Matrix Market file")
    try:
        _, _, _, fmt, field, symmetry = scipy.io.mminfo(str(path))
    except (ValueError, OSError, OverflowError, IndexError, TypeError) as e:
        raise TunerError(f"{path}: not a valid Matrix Market file: {e}") from None
    if fmt != "coordinate":
        raise TunerError(f"{path}: a dense ('{fmt}') Matrix Market file; spmv needs a sparse 'coordinate' one")
    if field not in ("real", "integer", "pattern"):
        raise TunerError(f"{path}: Matrix Market field '{field}' is not supported (real, integer or pattern)")
    if symmetry not in ("general", "symmetric", "skew-symmetric"):
        raise TunerError(
            f"{path}: Matrix Market symmetry '{symmetry}' is not supported (general, symmetric, skew-symmetric)"
        )
    try:
        with warnings.catch_warnings():
            # scipy 1.18 says mmread will return a sparse array, not a matrix: either becomes a CSR matrix below
            warnings.filterwarnings("ignore", message=".*spmatrix.*", category=DeprecationWarning)
            m = scipy.io.mmread(str(path))
    except (ValueError, OSError, OverflowError, IndexError, TypeError) as e:
        raise TunerError(f"{path}: not a valid Matrix Market file: {e}") from None
    m = sp.csr_matrix(m, dtype=np.float64)
    if m.shape[0] == 0 or m.shape[1] == 0:
        raise TunerError(f"{path}: the matrix has no rows or no columns ({m.shape[0]} x {m.shape[1]})")
    if m.nnz >= 2**31 or max(m.shape) >= 2**31:
        raise TunerError(f"{path}: too large for int32 indices ({m.shape[0]} x {m.shape[1]}, {m.nnz} nonzeros)")
    m.sum_duplicates()
    m.sort_indices()
    return m


def file_hash(path: str | Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            crc = zlib.crc32(block, crc)
    return crc & 0x7FFFFFFF


def register_file(path: str | Path) -> dict:
    """The problem size of a Matrix Market file; remembers its path for this process and its workers."""
    path = Path(path).resolve()
    m = _load_file(str(path))
    key = file_hash(path)
    files = json.loads(os.environ.get(FILES_ENV, "{}"))
    files[str(key)] = str(path)
    os.environ[FILES_ENV] = json.dumps(files)
    return {
        "matrix": 0,
        "rows": m.shape[0],
        "cols": m.shape[1],
        "nnz": int(m.nnz),
        "mean": max(1, round(m.nnz / m.shape[0])),
        "seed": key,
    }


def registered_path(size: dict) -> str | None:
    return json.loads(os.environ.get(FILES_ENV, "{}")).get(str(size["seed"]))


@lru_cache(maxsize=2)
def _load_file(path: str) -> sp.csr_matrix:
    return read_matrix_market(path)


# ---- generators -----------------------------------------------------------------------------------------------
def row_lengths(size: dict) -> np.ndarray:
    """Nonzeros per row of a generated matrix (cheap: no columns drawn); what nnz and the features need."""
    cls, rows, cols, mean = size["matrix"], size["rows"], size["cols"], size["mean"]
    rng = np.random.default_rng([size["seed"], cls, 1])
    if cls in (1, 5):  # uniform: 0 .. 2*mean nonzeros, empty rows included
        lengths = rng.integers(0, 2 * mean + 1, rows).astype(np.int64)
        if cls == 5:
            lengths[rows // 2] = min(cols, DENSE_ROW_MAX)
    elif cls == 2:  # Pareto with shape alpha and mean `mean`
        xm = mean * (POWERLAW_ALPHA - 1) / POWERLAW_ALPHA
        lengths = np.floor(xm * (1 - rng.random(rows)) ** (-1 / POWERLAW_ALPHA) + 0.5).astype(np.int64)
        lengths = np.clip(lengths, 1, min(cols, DENSE_ROW_MAX))
    elif cls == 3:
        lengths = _laplace_neighbours(rows)[1].sum(axis=1).astype(np.int64)
    elif cls == 4:
        r = np.arange(rows)
        lo, hi = np.maximum(r - mean // 2, 0), np.minimum(r - mean // 2 + mean, cols)
        lengths = np.maximum(hi - lo, 0)
    else:
        raise TunerError(f"unknown matrix class {cls}; known: " + ", ".join(f"{c} {n}" for n, c in CLASSES.items()))
    return lengths


def generate(size: dict) -> sp.csr_matrix:
    """The matrix of a size: a generated class, or a registered Matrix Market file."""
    import scipy.sparse as sp

    cls, rows, cols = size["matrix"], size["rows"], size["cols"]
    if cls == 0:
        path = registered_path(size)
        if path is None:
            raise TunerError(
                f"size {size} is a Matrix Market file (hash {size['seed']}) that was not given: "
                "pass it with --matrix FILE"
            )
        return _load_file(path)
    if cls == 3:
        return _laplace2d(rows, cols)
    lengths = row_lengths(size)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    nnz = int(indptr[-1])
    if nnz >= 2**31:
        raise TunerError(f"{nnz} nonzeros: too many for int32 indices")
    rng = np.random.default_rng([size["seed"], cls, 2])
    row_of = np.repeat(np.arange(rows, dtype=np.int64), lengths)
    k = np.arange(nnz, dtype=np.int64) - indptr[:-1][row_of]  # position within its row
    if cls == 4:  # contiguous band: row r holds columns lo(r) .. lo(r)+len-1
        indices = np.maximum(row_of - size["mean"] // 2, 0) + k
    else:
        # random columns, sorted and distinct: the k-th of a row's L is drawn from the k-th of L equal
        # strata of the columns ([k*cols/L, k*cols/L + cols//L) are disjoint), so rows are canonical CSR
        length = lengths[row_of]
        indices = (k * cols) // length + (rng.random(nnz) * (cols // length)).astype(np.int64)
    data = VALUES[rng.integers(0, len(VALUES), nnz)].astype(np.float64)
    return sp.csr_matrix((data, indices.astype(np.int32), indptr.astype(np.int32)), shape=(rows, cols))


def _laplace2d(rows: int, cols: int) -> sp.csr_matrix:
    """5-point Laplacian (4 on the diagonal, -1 to the 4 neighbours) on a grid isqrt(rows) wide."""
    import scipy.sparse as sp

    if rows != cols:
        raise TunerError(f"laplace2d matrices are square; got rows={rows}, cols={cols}")
    offsets, present = _laplace_neighbours(rows)
    r = np.arange(rows, dtype=np.int64)
    columns = (r[:, None] + offsets[None, :])[present]
    values = np.where(offsets == 0, 4.0, -1.0)[None, :].repeat(rows, axis=0)[present]
    indptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(present.sum(axis=1), out=indptr[1:])
    return sp.csr_matrix((values, columns.astype(np.int32), indptr.astype(np.int32)), shape=(rows, cols))


def _laplace_neighbours(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Column offsets of the 5-point stencil (in column order, so rows come out sorted) and, per row,
    which of them lie on the grid."""
    width = max(1, math.isqrt(rows))
    r = np.arange(rows, dtype=np.int64)
    offsets = np.array([-width, -1, 0, 1, width])
    present = np.stack(
        [r >= width, r % width != 0, np.ones(rows, bool), (r % width != width - 1) & (r + 1 < rows), r + width < rows],
        axis=1,
    )
    if width == 1:  # a single column of grid points: the -1/+1 neighbours are the -width/+width ones
        present[:, 1] = present[:, 3] = False
    return offsets, present


def size_for(cls_name: str, rows: int, mean: int, seed: int = 1, cols: int | None = None) -> dict:
    """A generated size with its nnz filled in."""
    if cls_name not in CLASSES or cls_name == "file":
        raise TunerError(f"unknown matrix class '{cls_name}'; known: {', '.join(n for n in CLASSES if n != 'file')}")
    if rows < 1 or mean < 1 or (cols is not None and cols < 1):
        raise TunerError(f"rows, cols and mean must be >= 1 (rows={rows}, cols={cols}, mean={mean})")
    cols = cols or rows
    # CSR with 32-bit indices, said before a row-length array of that many rows is allocated
    if max(rows, cols) > INDEX_MAX - 1 or rows * mean > INDEX_MAX:
        raise TunerError(
            f"rows={rows}, cols={cols}, mean={mean}: too large for 32-bit CSR indices "
            f"(rows and cols at most {INDEX_MAX - 1}, about rows x mean nonzeros at most {INDEX_MAX})"
        )
    if cls_name in ("uniform", "denserow") and 2 * mean > cols:
        raise TunerError(
            f"mean={mean} with cols={cols}: a {cls_name} row holds up to 2 x mean distinct "
            "columns, more than the matrix has"
        )
    size = {"matrix": CLASSES[cls_name], "rows": rows, "cols": cols, "nnz": 0, "mean": mean, "seed": seed}
    size["nnz"] = int(row_lengths(size).sum())
    return size


# ---- features -----------------------------------------------------------------------------------------------
def features(lengths: np.ndarray) -> dict:
    """What a config choice depends on: rows, mean nonzeros per row, their spread (coefficient of variation)
    and the longest row relative to the mean."""
    lengths = np.asarray(lengths, dtype=np.float64)
    mean = float(lengths.mean()) if lengths.size else 0.0
    return {
        "rows": int(lengths.size),
        "mean": mean,
        "cv": float(lengths.std() / mean) if mean else 0.0,
        "max_over_mean": float(lengths.max() / mean) if mean else 0.0,
    }


def size_features(size: dict) -> dict | None:
    """Features of a size; None for a Matrix Market file that is not registered here."""
    if size["matrix"] == 0:
        path = registered_path(size)
        return None if path is None else features(np.diff(_load_file(path).indptr))
    return features(row_lengths(size))


def feature_distance(a: dict, b: dict) -> float:
    """log-scale distance: a factor of 2 in rows, mean, (1 + spread) or longest row counts the same."""

    def lg(v: float) -> float:
        return math.log2(1 + v)

    return math.sqrt(
        (lg(a["rows"]) - lg(b["rows"])) ** 2
        + (lg(a["mean"]) - lg(b["mean"])) ** 2
        + (lg(a["cv"]) - lg(b["cv"])) ** 2
        + (lg(a["max_over_mean"]) - lg(b["max_over_mean"])) ** 2
    )
