"""Blocked Floyd-Warshall (seed 000): the graph of a size, the exact numpy/scipy reference, and the program
`tuner run floyd-warshall INPUT OUTPUT` on the best stored configuration.

The space is a host pipeline (kernels/floyd_warshall/fw.cu): floyd_warshall(edges, dist, n, m, gpus)
builds the matrix on the GPU(s), runs all rounds, returns their time in ms and fills `dist`."""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tuner.atomic import write_atomically
from tuner.errors import TunerError
from tuner.formatting import config_text
from tuner.workloads import Workload
from tuner.workloads.graph_io import INF, random_graph, read_graph, write_distances

if TYPE_CHECKING:
    import argparse

    from scipy.sparse import csr_matrix

GRAPH_SEED = 2026  # the graphs of the named sizes: random_graph(n, m, GRAPH_SEED)
EDGES_PER_VERTEX = 6  # m when a size gives only n
DENSE_REFERENCE_MAX_N = 1500  # up to here plain Floyd-Warshall in numpy; above, Dijkstra from every vertex


# ---- the reference ---------------------------------------------------------------------------------
def run_pipeline(fn: Callable[..., float], n: int, edges: np.ndarray, dist: np.ndarray, gpus: int = 1) -> float:
    """Run a built pipeline (tuner.measure.hostcode.build) on an edge list: the distances land in `dist` (n x n int32);
    returns the GPU time of the rounds in ms, negative after a CUDA error (which the pipeline printed)."""
    edges = np.ascontiguousarray(edges, dtype=np.int32)
    return fn(edges.ctypes, dist.ctypes, ctypes.c_int(n), ctypes.c_int(len(edges)), ctypes.c_int(gpus))


def initial_matrix(n: int, edges: np.ndarray) -> np.ndarray:
    d = np.full((n, n), INF, dtype=np.int64)
    if len(edges):
        np.minimum.at(d, (edges[:, 0], edges[:, 1]), edges[:, 2].astype(np.int64))
    np.fill_diagonal(d, 0)
    return d


def floyd_warshall_numpy(n: int, edges: np.ndarray) -> np.ndarray:
    """Plain Floyd-Warshall, one vectorised relaxation of the whole matrix per pivot."""
    d = initial_matrix(n, edges)
    for k in range(n):
        np.minimum(d, d[:, k, None] + d[None, k, :], out=d)
    return d.astype(np.int32)  # entries never exceed INF


def _csr(n: int, edges: np.ndarray) -> csr_matrix:
    """The graph for scipy: the lightest of parallel edges, each weight + 1/(4n) so zero-weight edges stay
    edges (scipy drops explicit zeros); a path has < n edges, so rounding the distance removes the extra."""
    from scipy.sparse import csr_matrix

    order = np.lexsort((edges[:, 2], edges[:, 1], edges[:, 0]))
    e = edges[order]
    first = np.ones(len(e), dtype=bool)
    first[1:] = (e[1:, 0] != e[:-1, 0]) | (e[1:, 1] != e[:-1, 1])
    e = e[first]
    return csr_matrix((e[:, 2] + 1.0 / (4 * n), (e[:, 0], e[:, 1])), shape=(n, n))


def dijkstra_rows(n: int, edges: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Rows lo..hi-1 of the distance matrix, by scipy's Dijkstra from those sources."""
    from scipy.sparse.csgraph import dijkstra

    dist = dijkstra(_csr(n, edges), directed=True, indices=np.arange(lo, hi))
    out = np.full(dist.shape, INF, dtype=np.int32)
    finite = np.isfinite(dist)
    out[finite] = np.rint(dist[finite]).astype(np.int32)
    return out


def _dijkstra_parallel(n: int, edges: np.ndarray) -> np.ndarray:
    """Every row, in chunks over the CPU cores. Subprocesses, not multiprocessing: the campaign's worker
    that asks for the reference is a daemon process, which multiprocessing does not let have children."""
    workers = max(1, min(os.cpu_count() or 1, 32, n // 64))
    bounds = np.linspace(0, n, workers + 1).astype(int)
    out = np.empty((n, n), dtype=np.int32)
    with tempfile.TemporaryDirectory(prefix="fw-ref-") as tmp:
        graph = Path(tmp) / "edges.npy"
        np.save(graph, edges)
        procs = [
            (
                lo,
                hi,
                Path(tmp) / f"rows{lo}.npy",
            )
            for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        ]
        running = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tuner.workloads.floyd_warshall",
                    "rows",
                    str(graph),
                    str(n),
                    str(lo),
                    str(hi),
                    str(path),
                ]
            )
            for lo, hi, path in procs
        ]
        for (lo, hi, path), p in zip(procs, running):
            if p.wait() != 0:
                raise RuntimeError(f"the reference's Dijkstra worker for rows {lo}..{hi} failed")
            out[lo:hi] = np.load(path)
    return out


def reference(n: int, edges: np.ndarray) -> np.ndarray:
    """The exact distance matrix: numpy Floyd-Warshall for small n, else scipy's Dijkstra from every vertex
    (kept on disk: a campaign restarts its worker after a failure, and each start asks for it)."""
    if n <= DENSE_REFERENCE_MAX_N:
        return floyd_warshall_numpy(n, edges)
    from tuner.measure.hostcode import cache_dir

    key = hashlib.sha256(np.ascontiguousarray(edges, dtype=np.int32).tobytes()).hexdigest()[:16]
    path = cache_dir().parent / "fw-reference" / f"n{n}-m{len(edges)}-{key}.npy"
    if path.exists():
        return np.load(path)
    out = _dijkstra_parallel(n, edges)

    def save(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.save(f, out)

    write_atomically(path, save)
    return out


# ---- the workload ----------------------------------------------------------------------------------
def parse_graph_size(text: str, extra: tuple[str, ...] = ()) -> dict | None:
    """A graph's size as `--size` gives it: `n=5000` (m = EDGES_PER_VERTEX n edges, at most n(n-1)), or with m=...
    and any of the `extra` variables besides; None where `text` is not one (the space reads it then)."""
    parts = dict(re.findall(r"(\w+)\s*=\s*(\d+)", text))
    if "n" not in parts or set(parts) - {"n", "m", *extra} or len(parts) != text.count("="):
        return None
    n = int(parts["n"])
    m = int(parts.get("m", min(EDGES_PER_VERTEX * n, n * (n - 1))))
    return {"n": n, "m": m, **{k: int(parts[k]) for k in extra if k in parts}}


class FloydWarshall(Workload):
    name = "floyd-warshall"
    run_help = "all-pairs shortest paths of a graph in the course's binary format, on the GPU"

    def parse_size(self, text: str) -> dict | None:
        """`n=5000` (m = 6n edges, one GPU), or with any of m=..., gpus=... besides."""
        size = parse_graph_size(text, extra=("gpus",))
        return None if size is None else {**size, "gpus": size.get("gpus", 1)}

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        # the graph depends on the size only (not on rng), so every campaign of a size sees the same one
        n, m = size["n"], size["m"]
        edges = random_graph(n, m, GRAPH_SEED)
        dist = np.zeros((n, n), dtype=np.int32)
        return [edges, dist, np.int32(n), np.int32(m), np.int32(size["gpus"])]

    def answer(self, args: list, size: dict, dtype: str) -> list:
        return [None, reference(size["n"], args[0]), None, None, None]

    def tolerances(self, size: dict, dtype: str) -> tuple[float, float]:
        return 0.0, 0.0

    # ---- `tuner run floyd-warshall INPUT OUTPUT` ------------------------------------------------
    def add_run_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("input", help="graph: int32 n, int32 m, then m (source, destination, weight) int32 triples")
        parser.add_argument("output", help="where the n x n int32 distances go (2^30 - 1: no path)")
        parser.add_argument("--gpus", type=int, default=1, help="GPUs to split the work over (default 1)")

    def run(self, args: argparse.Namespace, config_for: Callable[[dict, str], dict]) -> int:
        from tuner.measure.hostcode import build

        if args.gpus < 1:
            raise TunerError(f"--gpus {args.gpus}: at least one GPU")
        n, edges = read_graph(args.input)
        space = self.space
        dtype = space.resolve_dtype(args.dtype)
        size = {"n": n, "m": len(edges), "gpus": args.gpus}
        config = config_for(size, dtype)
        fn = build(space, config, dtype)
        dist = np.empty((n, n), dtype=np.int32)
        start = time.perf_counter()
        ms = run_pipeline(fn, n, edges, dist, args.gpus)
        if ms < 0:
            raise TunerError(
                "the GPU pipeline failed (its CUDA error is printed above): is there a CUDA GPU "
                f"(and {args.gpus} of them)?"
            )
        total = time.perf_counter() - start
        write_distances(args.output, dist)
        print(
            f"{n} vertices, {len(edges)} edges: {ms / 1e3:.4f} s on the GPU ({n**3 / (ms / 1e3) / 1e12:.2f} T "
            f"relaxations/s), {total:.3f} s with set-up and copies; config {config_text(config)}",
            file=sys.stderr,
        )
        return 0


WORKLOAD = FloydWarshall()


def _rows_main(argv: list[str]) -> int:
    """python -m tuner.workloads.floyd_warshall rows EDGES.npy N LO HI OUT.npy (a reference worker)."""
    graph, n, lo, hi, out = argv
    np.save(out, dijkstra_rows(int(n), np.load(graph), int(lo), int(hi)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "rows":
        sys.exit(_rows_main(sys.argv[2:]))
    sys.exit("usage: python -m tuner.workloads.floyd_warshall rows EDGES.npy N LO HI OUT.npy")
