"""A LocVolCalib campaign at course-large (or --size) that measures the naive pipeline, the best
optimised pipeline of the earlier space, the best warp pipeline of the earlier x-kernel and a spread of
warp-structure configurations with the rewritten x-kernels (XFORM 1-3) first, then lets TPE search the rest
of its time budget; every row lands in the store as in `tuner tune`.

  python benchmarks/locvolcalib/campaign.py --dtype float64 --budget 170s"""

from __future__ import annotations

import argparse
import json

from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest, parse_budget

NAIVE = {"STRUCTURE": 0, "SHARE_COEF": 0, "FUSE_EXPLICIT": 0, "SOLVER_X": 0, "SOLVER_Y": 0, "TILE_X": 8, "TILE_Y": 8,
         "BLOCK": 256, "KPB": 1, "STEPS": 1, "XFORM": 0, "XREGS": 0}
# the best of the first course-large float64 campaign (61.6 ms): cyclic reduction both ways, shared, fused
EARLIER_BEST = {"STRUCTURE": 1, "SHARE_COEF": 1, "FUSE_EXPLICIT": 1, "SOLVER_X": 1, "SOLVER_Y": 1, "TILE_X": 8,
                "TILE_Y": 8, "BLOCK": 256, "KPB": 1, "STEPS": 1, "XFORM": 0, "XREGS": 0}
WARP = {"STRUCTURE": 2, "SHARE_COEF": 1, "FUSE_EXPLICIT": 1, "SOLVER_X": 0, "SOLVER_Y": 0, "BLOCK": 256}
# (TILE_X, TILE_Y, KPB, STEPS, XFORM, XREGS): the best of the campaign of the earlier x-kernel (20261123T223454Z,
# 29.32 ms), then the rewritten x-kernels near the best of a first timing of them (the records'
# results/records/locvolcalib/nvidia-h100-80gb-hbm3/runs/run6_log.txt: XFORM 3 at
# 128 registers; 168 or 255 registers and VarY in registers were slower) and the asynchronous copy (XFORM 4)
SPREAD = [(4, 4, 8, 32, 0, 0), (4, 4, 8, 32, 3, 0), (4, 4, 8, 32, 4, 0), (8, 4, 8, 32, 4, 0), (16, 4, 8, 32, 4, 0),
          (4, 8, 8, 32, 4, 0), (8, 4, 8, 32, 3, 0), (4, 4, 8, 128, 4, 0), (4, 4, 4, 32, 4, 0)]


def first_configs(spread: int = len(SPREAD)) -> list:
    return [NAIVE, EARLIER_BEST] + [{**WARP, "TILE_X": tx, "TILE_Y": ty, "KPB": kpb, "STEPS": steps, "XFORM": xf,
                                     "XREGS": xr} for tx, ty, kpb, steps, xf, xr in SPREAD[:spread]]


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
