"""A quick exploratory sweep of Floyd-Warshall configs at one size, outside the store: every config is built
in parallel (tuner.measure.hostcode, nvcc), run `--repeats` times after one warm-up, and its result checked exactly
against the reference before its time is printed. It is for choosing what a recorded campaign
(benchmarks/floyd_warshall/campaign.py) should measure; its figures are not in the store (the sweeps kept are
records: results/records/floyd-warshall/<gpu>/sweeps/) and the README does not quote them.

    python benchmarks/floyd_warshall/sweep.py N [--repeats 3] [--out sweep.json] [--top K]
(configs: the neighbourhood of the known good ones, listed in candidates() below), or
    python benchmarks/floyd_warshall/sweep.py N --from sweep.json --from-top 12 --vary MIN_BLOCKS=0,2,4,6 --vary PRIORITY=0,1
(the seed's config and the K fastest exact configs of an earlier sweep, each with every combination of the
given values that the space allows, e.g. the phase-3 MIN_BLOCKS that fit the SM's 2048 threads)."""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tuner.errors import TunerError
from tuner.measure.hostcode import build
from tuner.workloads import get_workload
from tuner.workloads.floyd_warshall import (
    EDGES_PER_VERTEX,
    GRAPH_SEED,
    reference,
    run_pipeline,
)
from tuner.workloads.graph_io import random_graph

BASE = {"BLOCK": 64, "block_size_x": 32, "block_size_y": 32, "VEC": 0, "DPX": 0, "PAD": 0, "K_UNROLL": 64,
        "LOOKAHEAD": 0, "SPLIT": 100, "KCHUNK": 0, "MIN_BLOCKS": 0, "PRIORITY": 0}  # the seed's configuration


def candidates(space) -> list[dict]:
    """The seed's config, then blocking 64 and 128 with 16-64 outputs per thread, int4 runs or not (blocking
    128: int4 runs only), whole or chunked pivot tiles, phase 3's bulk in two halves on their own streams
    behind the critical path's (LOOKAHEAD 3, PRIORITY 1: the best family since 4dc57c3); then blocking 64
    with whole tiles and LOOKAHEAD 1."""
    out = [BASE]
    for block, bx, by, vec, kchunk in itertools.product((64, 128), (8, 16, 32), (4, 8, 16, 32), (0, 1), (0, 32)):
        outputs = (block // bx) * (block // by) if block % bx == 0 and block % by == 0 else 0
        config = dict(BASE, BLOCK=block, block_size_x=bx, block_size_y=by, VEC=vec, PAD=4 if vec else 0,
                      K_UNROLL=16, LOOKAHEAD=3, PRIORITY=1, KCHUNK=kchunk)
        if outputs in (16, 32, 64) and (block == 64 or vec) and space.is_valid(config):
            out.append(config)
    out += [dict(c, LOOKAHEAD=1) for c in out[1:] if c["BLOCK"] == 64 and c["KCHUNK"] == 0]
    return out


def varied(space, configs: list[dict], name: str, values: list[int]) -> list[dict]:
    """Each config once per value of parameter `name` that the space allows with it."""
    return [dict(c, **{name: v}) for c in configs for v in values if space.is_valid(dict(c, **{name: v}))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--max-configs", type=int, default=None)
    p.add_argument("--budget-s", type=float, default=None, help="measure no new config after this many seconds")
    p.add_argument("--from", dest="source", help="an earlier sweep's JSON: take its fastest exact configs")
    p.add_argument("--from-top", type=int, default=12)
    p.add_argument("--vary", action="append", default=[], metavar="NAME=V1,V2",
                   help="try each config with each of these values of a parameter (repeatable)")
    args = p.parse_args()
    space = get_workload("floyd-warshall").space
    if args.source:
        rows = sorted((r for r in json.load(open(args.source))["rows"] if r.get("exact")), key=lambda r: r["ms"])
        configs = [BASE] + [r["config"] for r in rows[: args.from_top] if r["config"] != BASE]
    else:
        configs = candidates(space)
    for spec in args.vary:
        name, _, values = spec.partition("=")
        configs = varied(space, configs, name, [int(v) for v in values.split(",")])
    configs = configs[: args.max_configs]
    n, m = args.n, EDGES_PER_VERTEX * args.n
    edges = np.ascontiguousarray(random_graph(n, m, GRAPH_SEED), dtype=np.int32)
    t0 = time.time()
    with ThreadPoolExecutor(args.jobs) as pool:
        reference_run = pool.submit(reference, n, edges)
        built = list(pool.map(lambda c: _try_build(space, c), configs))
        expected = reference_run.result()
    print(f"{len(configs)} configs built, reference ready: {time.time() - t0:.0f} s", flush=True)
    dist = np.empty((n, n), dtype=np.int32)
    rows = []
    for config, fn in zip(configs, built):
        if args.budget_s is not None and time.time() - t0 > args.budget_s:
            print(f"time budget spent: {len(rows)} of {len(configs)} configs measured")
            break
        if isinstance(fn, str):
            rows.append({"config": config, "error": fn})
            continue
        times = []
        for _ in range(args.repeats + 1):
            dist.fill(-1)
            times.append(run_pipeline(fn, n, edges, dist))
        ok = min(times) > 0 and np.array_equal(dist, expected)
        ms = statistics.median(times[1:])
        rows.append({"config": config, "ms": ms, "Trelax/s": n**3 / ms / 1e9, "exact": bool(ok)})
        print(f"{ms:9.2f} ms {n**3 / ms / 1e9:6.2f} T/s {'exact' if ok else 'WRONG'}  {_short(config)}", flush=True)
        if args.out:  # after every config: a cut-off sweep keeps what it measured
            with open(args.out, "w") as f:
                json.dump({"n": n, "m": m, "rows": rows}, f, indent=1)
    good = sorted((r for r in rows if r.get("exact")), key=lambda r: r["ms"])
    print(f"\nbest {args.top} of {len(good)} exact ({len(rows) - len(good)} failed or wrong):")
    for r in good[: args.top]:
        print(f"{r['ms']:9.2f} ms {r['Trelax/s']:6.2f} T/s  {json.dumps(r['config'])}")
    return 0


def _try_build(space, config):
    try:
        return build(space, config, "int32")
    except TunerError as e:  # a config that does not build is reported, not fatal
        return str(e)[-300:]


def _short(c: dict) -> str:
    return (f"B{c['BLOCK']} {c['block_size_x']}x{c['block_size_y']} VEC{c['VEC']} PAD{c['PAD']} U{c['K_UNROLL']} "
            f"LA{c['LOOKAHEAD']} KC{c['KCHUNK']} MB{c.get('MIN_BLOCKS', 0)} PR{c.get('PRIORITY', 0)}")


if __name__ == "__main__":
    sys.exit(main())
