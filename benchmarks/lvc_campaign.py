"""A LocVolCalib campaign at course-large (or --size) that measures the naive pipeline, the best
optimised pipeline of the earlier space and a spread of warp-structure configurations first, then lets TPE
search the rest of its time budget; every row lands in the store as in `tuner tune`.

  python benchmarks/lvc_campaign.py --dtype float64 --budget 170s"""

from __future__ import annotations

import argparse
import json

from tuner.campaign import CampaignRequest, parse_budget, run_campaign

NAIVE = {"STRUCTURE": 0, "SHARE_COEF": 0, "FUSE_EXPLICIT": 0, "SOLVER_X": 0, "SOLVER_Y": 0, "TILE_X": 8, "TILE_Y": 8,
         "BLOCK": 256, "KPB": 1, "STEPS": 1}
# the best of the first course-large float64 campaign (61.6 ms): cyclic reduction both ways, shared, fused
EARLIER_BEST = {"STRUCTURE": 1, "SHARE_COEF": 1, "FUSE_EXPLICIT": 1, "SOLVER_X": 1, "SOLVER_Y": 1, "TILE_X": 8,
                "TILE_Y": 8, "BLOCK": 256, "KPB": 1, "STEPS": 1}
WARP = {"STRUCTURE": 2, "SHARE_COEF": 1, "FUSE_EXPLICIT": 1, "SOLVER_X": 0, "SOLVER_Y": 0, "BLOCK": 256}
# (TILE_X, TILE_Y, KPB, STEPS): the best tiles of the first warp campaign (ecdd4ec), the factors of all steps at
# once, and 2-4 outer indices per block
SPREAD = [(16, 4, 1, 32), (16, 4, 1, 128), (8, 4, 1, 128), (16, 8, 1, 128), (8, 8, 1, 128), (16, 4, 2, 128),
          (8, 4, 2, 128), (8, 8, 4, 128), (4, 4, 4, 128)]


def first_configs(spread: int = len(SPREAD)) -> list:
    return [NAIVE, EARLIER_BEST] + [{**WARP, "TILE_X": tx, "TILE_Y": ty, "KPB": kpb, "STEPS": steps}
                                    for tx, ty, kpb, steps in SPREAD[:spread]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="course-large")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--budget", default="170s")
    ap.add_argument("--first", type=int, default=len(SPREAD), help="how many of the warp spread to measure first")
    args = ap.parse_args()
    max_evals, time_limit = parse_budget(args.budget)
    first = first_configs(args.first)
    result = run_campaign(CampaignRequest(workload="locvolcalib", size=args.size, dtype=args.dtype, strategy="tpe",
                                          max_evals=max_evals, time_limit=time_limit, timeout=60, quiet=True,
                                          first=tuple(first)))
    print(json.dumps(result.__dict__, indent=1, default=str), flush=True)


if __name__ == "__main__":
    main()
