"""Run one Floyd-Warshall config once at size n (outside the store), for a profiler to watch:

    ncu -k regex:fw_phase3 --launch-skip 200 -c 2 python3 benchmarks/floyd_warshall/run_one.py 11000 '{"BLOCK": 64, ...}'

Parameters the JSON leaves out take the space's defaults (then the seed's values); the result is checked
exactly against the reference unless --no-check (a profiler's replays make the check slow, not wrong). The profiles
kept are records: results/records/floyd-warshall/<gpu>/profile/."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.floyd_warshall
from benchmarks.floyd_warshall.sweep import BASE  # noqa: E402
from tuner.measure.hostcode import build  # noqa: E402
from tuner.workloads import get_workload  # noqa: E402
from tuner.workloads.floyd_warshall import (  # noqa: E402
    EDGES_PER_VERTEX,
    GRAPH_SEED,
    reference,
    run_pipeline,
)
from tuner.workloads.graph_io import random_graph  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int)
    p.add_argument("config", help="JSON object of parameters")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--no-check", action="store_true")
    args = p.parse_args()
    space = get_workload("floyd-warshall").space
    config = space.complete({**BASE, **json.loads(args.config)})
    fn = build(space, config, "int32")
    n, m = args.n, EDGES_PER_VERTEX * args.n
    edges = np.ascontiguousarray(random_graph(n, m, GRAPH_SEED), dtype=np.int32)
    dist = np.empty((n, n), dtype=np.int32)
    for _ in range(args.repeats):
        ms = run_pipeline(fn, n, edges, dist)
        print(f"{ms:.2f} ms {n**3 / ms / 1e9:.2f} T/s", flush=True)
    if not args.no_check and not np.array_equal(dist, reference(n, edges)):
        print("WRONG result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
