"""Blocked Floyd-Warshall on the CPU (seed 000's OpenMP + SIMD version): the graphs and exact reference of
the floyd-warshall workload, and the naive OpenMP triple loop as the baseline timed in the same campaign.

The space is host code built by g++ (kernels/floyd_warshall_cpu/fw_cpu.cpp): floyd_warshall_cpu(edges,
dist, n, m) builds the matrix, runs all rounds, returns their time in ms and fills `dist`."""

from __future__ import annotations

import numpy as np

from tuner.measure.host_baselines import naive_timer
from tuner.workloads import Workload
from tuner.workloads.floyd_warshall import GRAPH_SEED, parse_graph_size, reference
from tuner.workloads.graph_io import random_graph

# The seed's hand-picked configuration as a point of the space: 64 x 64 tiles, OpenMP's dynamic schedule
# over all cores, 4-wide SSE min/add in the k-i-j loop, the matrix row-major, no pinning
SEED_CONFIGS = {
    "hw3-1": {"BLOCK": 64, "THREADS": 0, "SCHEDULE": 1, "VEC": 4, "RI": 1, "RJ": 0, "LAYOUT": 0, "PIN": 0},
}


class FloydWarshallCpu(Workload):
    name = "floyd-warshall-cpu"
    check_reference = "naive-omp"

    def parse_size(self, text: str) -> dict | None:
        """`n=5000` (m = 6n edges), or with m=... besides."""
        return parse_graph_size(text)

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        # the floyd-warshall workload's graph of this size (not drawn from rng): the same reference
        n, m = size["n"], size["m"]
        edges = random_graph(n, m, GRAPH_SEED)
        return [edges, np.zeros((n, n), dtype=np.int32), np.int32(n), np.int32(m)]

    def answer(self, args: list, size: dict, dtype: str) -> list:
        return [None, reference(size["n"], args[0]), None, None]

    def tolerances(self, size: dict, dtype: str) -> tuple[float, float]:
        return 0.0, 0.0

    def reference_timers(self, args: list, size: dict, dtype: str) -> dict:
        out = np.zeros_like(args[1])
        mine = [args[0], out, *args[2:]]
        expected = self.answer(args, size, dtype)[1]
        check = lambda: bool(np.array_equal(out, expected))  # noqa: E731
        return {"naive-omp": naive_timer(self.space, "naive.cpp", "floyd_warshall_naive", dtype, mine, check)}

    def baseline_metrics(self, name: str, time_ms: float, size: dict, dtype: str) -> dict:
        return {"Grelax/s": size["n"] ** 3 / (time_ms / 1e3) / 1e9}


WORKLOAD = FloydWarshallCpu()
