"""Tuning campaigns over the spmv benchmark matrices, on the GPU machine: for each matrix, multivariate TPE
whose first evaluations are the seed's two kernels (variant 0 and 1 as the seed wrote them, at three block
sizes) and six hand-picked recipes (below), so every matrix has the seed's figures and the tuned best from
the same campaign, with cuSPARSE timed in it. Campaigns stop being started when the deadline (seconds from start) draws near.
With --configs FILE, each campaign measures exactly the seed's kernels and the configs of FILE (a JSON list of
configs for every matrix, or {"*": [...], matrix: [...]} adding per-matrix ones) and nothing else: how a new kernel
version is measured against the best configs of the previous one.
Usage: python benchmarks/spmv/campaigns.py --dtype float32 --budget 35 --deadline 250 [size ...]
       python benchmarks/spmv/campaigns.py --configs FILE --deadline 300 [size ...]"""

import argparse
import json
import sys
import time

from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.workloads import get_workload
from tuner.workloads.spmv import SEED_CONFIGS


def recipes(mean: int) -> list[dict]:
    """Configs worth measuring first: the merge path with four tile shapes, the CSR-stream split, and vector
    CSR with about half a row's nonzeros per lane."""
    lanes = min(32, max(2, 1 << max(0, (mean // 2).bit_length() - 1)))
    merge = [(128, 16, 1, 1), (256, 8, 1, 1), (128, 8, 1, 0), (256, 4, 1, 1)]  # threads, items, ldg, stream
    return ([{"variant": 5, "block_size_x": b, "threads_per_row": 1, "row_iters": i, "unroll": 1, "ldg": g, "stream": s}
             for b, i, g, s in merge]
            + [{"variant": 4, "block_size_x": 256, "threads_per_row": 4, "row_iters": 8, "unroll": 1, "ldg": 1, "stream": 1},
               {"variant": 2, "block_size_x": 256, "threads_per_row": lanes, "row_iters": 1, "unroll": 2, "ldg": 1, "stream": 0}])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("sizes", nargs="*")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--budget", type=int, default=35)
    p.add_argument("--deadline", type=float, default=280, help="seconds: no campaign starts after deadline - 20")
    p.add_argument("--configs", help="JSON: the configs to measure (after the seed's), instead of recipes + TPE")
    args = p.parse_args()
    listed = None
    if args.configs:
        listed = json.load(open(args.configs))
        if isinstance(listed, list):
            listed = {"*": listed}
    start = time.monotonic()
    sizes = args.sizes or list(get_workload("spmv").space.sizes)
    space = get_workload("spmv").space
    for size in sizes:
        left = args.deadline - (time.monotonic() - start)
        if left < 20:
            print(f"deadline: {size} {args.dtype} not started", flush=True)
            continue
        t0 = time.monotonic()
        try:
            if listed is None:
                first = tuple(SEED_CONFIGS + recipes(space.sizes[size]["mean"]))  # completed by the campaign
                budget = args.budget
            else:
                chosen: list[dict] = []
                for c in SEED_CONFIGS + listed.get("*", []) + listed.get(size, []):
                    c = space.complete(c)
                    if c not in chosen:
                        chosen.append(c)
                first, budget = tuple(chosen), len(chosen)
            r = run_campaign(CampaignRequest("spmv", size=size, dtype=args.dtype, strategy="tpe", max_evals=budget,
                                             time_limit=left - 10, timeout=30, quiet=True, first=first))
        except Exception as e:  # noqa: BLE001  (one matrix failing must not stop the others)
            print(f"{size} {args.dtype}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        best = r.best or {}
        print(f"{size} {args.dtype}: {r.evaluated} evaluated in {time.monotonic() - t0:.1f} s, failures {r.failures}, "
              f"best {best.get('value', float('nan')):.1f} GB/s {best.get('config')}, baselines {r.baselines}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
