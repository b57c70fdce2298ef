"""The course's graph format (seed 000) and a random graph generator.

Input: int32 n (vertices), int32 m (edges), then m triples of int32 (source, destination, weight), vertices
numbered from 0, weights >= 0 (the course's are in [0, 1000]). Output: the n x n distances as int32,
row-major, 0 from a vertex to itself, INF = 2^30 - 1 where there is no path. All little-endian.

    python -m tuner.workloads.graph_io N M OUTPUT [--seed S]     writes a random graph
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from tuner.errors import TunerError

INF = 2**30 - 1
MAX_WEIGHT = 1000
INT32 = np.dtype("<i4")


def check_graph(n: int, edges: np.ndarray, where: str = "the graph") -> None:
    """Raise a TunerError naming the first problem: n < 1, a vertex out of range, a negative weight, or
    weights so large that a shortest path could reach INF (the pipeline adds two int32 distances)."""
    if n < 1:
        raise TunerError(f"{where}: n = {n}; a graph needs at least one vertex")
    if edges.size == 0:
        return
    vertices = edges[:, :2]
    bad = np.flatnonzero(((vertices < 0) | (vertices >= n)).any(axis=1))
    if bad.size:
        s, d, _ = edges[bad[0]]
        raise TunerError(f"{where}: edge {bad[0]} ({s} -> {d}) has a vertex out of range 0..{n - 1}")
    bad = np.flatnonzero(edges[:, 2] < 0)
    if bad.size:
        raise TunerError(f"{where}: edge {bad[0]} has a negative weight ({edges[bad[0], 2]})")
    heaviest = int(edges[:, 2].max())
    if heaviest * (n - 1) >= INF:
        raise TunerError(
            f"{where}: weights up to {heaviest} on {n} vertices could make a path as long as "
            f"INF = 2^30 - 1; use weights below {INF // max(n - 1, 1) + 1}"
        )


def read_graph(path: str | Path) -> tuple[int, np.ndarray]:
    """(n, edges as an (m, 3) int32 array) from a file in the course's format, checked."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TunerError(f"cannot read the graph {path}: {e.strerror}") from None
    if len(data) < 8:
        raise TunerError(f"{path}: truncated: {len(data)} bytes, the header (n, m) alone takes 8")
    n, m = (int(x) for x in np.frombuffer(data, INT32, 2))
    if m < 0:
        raise TunerError(f"{path}: m = {m} edges")
    expected = 8 + 12 * m
    if len(data) < expected:
        raise TunerError(
            f"{path}: truncated: m = {m} edges need {expected} bytes, the file has {len(data)} "
            f"({(len(data) - 8) // 12} whole edges)"
        )
    if len(data) > expected:
        raise TunerError(f"{path}: {len(data) - expected} bytes after the {m} edges the header announces")
    edges = np.frombuffer(data, INT32, 3 * m, offset=8).reshape(m, 3).astype(np.int32)
    check_graph(n, edges, str(path))
    return n, edges


def write_graph(path: str | Path, n: int, edges: np.ndarray) -> None:
    edges = np.asarray(edges, dtype=INT32).reshape(-1, 3)
    with open(path, "wb") as f:
        f.write(np.array([n, len(edges)], dtype=INT32).tobytes())
        f.write(edges.tobytes())


def write_distances(path: str | Path, dist: np.ndarray) -> None:
    np.ascontiguousarray(dist, dtype=INT32).tofile(path)


def read_distances(path: str | Path, n: int) -> np.ndarray:
    data = np.fromfile(path, dtype=INT32)
    if data.size != n * n:
        raise TunerError(f"{path}: {data.size} distances, expected n * n = {n * n}")
    return data.reshape(n, n)


def random_graph(n: int, m: int, seed: int = 0) -> np.ndarray:
    """m distinct directed edges (no self-loops) with weights uniform in [0, 1000], as an (m, 3) int32
    array; the same (n, m, seed) gives the same graph."""
    if n < 1:
        raise TunerError(f"n = {n}; a graph needs at least one vertex")
    pairs = n * (n - 1)
    if not 0 <= m <= pairs:
        raise TunerError(f"m = {m} edges: a simple directed graph on {n} vertices has 0..{pairs}")
    rng = np.random.default_rng([seed, n, m])
    pair = rng.choice(pairs, size=m, replace=False) if m else np.zeros(0, dtype=np.int64)
    src, rest = np.divmod(pair, n - 1) if n > 1 else (pair, pair)
    dst = rest + (rest >= src)  # skip the diagonal
    weight = rng.integers(0, MAX_WEIGHT + 1, size=m)
    return np.stack([src, dst, weight], axis=1).astype(np.int32)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tuner.workloads.graph_io", description="write a random graph in the course's binary format"
    )
    p.add_argument("n", type=int)
    p.add_argument("m", type=int)
    p.add_argument("output")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        write_graph(args.output, args.n, random_graph(args.n, args.m, args.seed))
    except TunerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
