"""Transfer tuned GEMM configs to other shapes: measure the best k configs of one stored size (or configs
given as JSON) at each target size in a regular campaign (rows, cuBLAS baseline and provenance as usual),
then optionally go on with a TPE campaign over the whole space (the transferred rows are served free).

  python benchmarks/gemm/transfer.py --source 2048x2048x2048 --top 8 --size 1024x1024x1024 --tpe 40
  python benchmarks/gemm/transfer.py --configs @benchmarks/gemm/recipes.json --size 4096x4096x4096
  python benchmarks/gemm/transfer.py --source 2048x2048x2048 --top 4 --grid      # the seeds' 64 shapes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from tuner import store
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.measure import kt
from tuner.workloads import get_workload
from tuner.workloads.gemm import SEED_VERSIONS

WORKLOAD = "gemm"


def top_configs(size_text: str, dtype: str, k: int, diverse: bool = False) -> list[dict]:
    """The k best stored configs at a size; `diverse`: the best of each block tile (BM x BN) first, so that
    small shapes get small tiles to choose from."""
    workload = get_workload(WORKLOAD)
    _, size = workload.space.resolve_size(size_text, workload.parse_size)
    df = store.load_evaluations(WORKLOAD)
    df = df[(df["size_vars"] == json.dumps(size, sort_keys=True)) & (df["dtype"] == dtype) & (df["status"] == "ok")]
    ranked = [json.loads(c) for c in store.config_medians(df, maximize=True).index]
    if diverse:
        tiles, firsts = set(), []
        for c in ranked:
            tile = (c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"])
            if tile not in tiles:
                tiles.add(tile)
                firsts.append(c)
        ranked = firsts + [c for c in ranked if c not in firsts]
    return ranked[:k]


def stored_configs(size_text: str, dtype: str) -> set:
    workload = get_workload(WORKLOAD)
    _, size = workload.space.resolve_size(size_text, workload.parse_size)
    df = store.load_evaluations(WORKLOAD)
    return set(df[(df["size_vars"] == json.dumps(size, sort_keys=True)) & (df["dtype"] == dtype)]["config"])


def only(configs: list[dict], where: str | None = None):
    """The gemm space restricted to these configs, or to those meeting `where` (in this process; the
    worker keeps the full space)."""
    space = get_workload(WORKLOAD).space
    if where:
        return dataclasses.replace(space, restrictions=[*space.restrictions, where])
    names = list(space.params)
    tuples = ", ".join("(" + ", ".join(str(c[n]) for n in names) + ",)" for c in configs)
    return dataclasses.replace(space, restrictions=[*space.restrictions, f"({', '.join(names)},) in ({tuples},)"])


def transfer(configs, sizes, dtype, tpe_budget, timeout, where=None):
    workload_class = type(get_workload(WORKLOAD))
    full, restricted = workload_class.space, only(configs, where)
    if where:
        configs = [dict(zip(restricted.params, c)) for c in kt.searchspace(restricted).list]
    wanted = {store.canonical_config(c) for c in configs}
    for size in sizes:
        if not tpe_budget and wanted <= stored_configs(size, dtype):
            continue  # measured before (a resumed batch)
        started = time.time()
        # run_campaign builds the workload itself: swap its class's space property for this run
        workload_class.space = property(lambda self: restricted)  # type: ignore[method-assign, assignment]
        try:
            out = run_campaign(CampaignRequest(WORKLOAD, size=size, dtype=dtype, strategy="brute_force",
                                               timeout=timeout, quiet=True))
        finally:
            workload_class.space = full  # type: ignore[method-assign]
        best = out.best["value"] if out.best else float("nan")
        if tpe_budget:
            tuned = run_campaign(CampaignRequest(WORKLOAD, size=size, dtype=dtype, strategy="tpe",
                                                 max_evals=tpe_budget, timeout=timeout, quiet=True))
            best = max(best, tuned.best["value"]) if tuned.best else best
        cublas = out.baselines.get("cublas")
        print(f"{size} {dtype}: best {best:.0f} GFLOP/s"
              + (f", cuBLAS {2e-6 * _flops(size) / cublas:.0f} GFLOP/s" if cublas else "")
              + f" ({time.time() - started:.0f} s)", flush=True)


def _flops(size_text):
    w = get_workload(WORKLOAD)
    s = w.space.resolve_size(size_text, w.parse_size)[1]
    return s["m"] * s["n"] * s["k"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", help="stored size whose best configs are transferred")
    p.add_argument("--source-dtype", default="float32")
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--diverse", action="store_true", help="the best of each block tile first")
    p.add_argument("--seeds", action="store_true", help="also the seeds' versions (SEED_VERSIONS)")
    p.add_argument("--where", help="instead: every config of the space meeting this expression, e.g. 'tile_m == 4'")
    p.add_argument("--configs", help="JSON list of configs to measure (instead of --source), or @file")
    p.add_argument("--size", action="append", default=[], help="target size (repeatable)")
    p.add_argument("--grid", action="store_true", help="every size of the seeds' 4x4x4 grid")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--tpe", type=int, default=0, help="then a TPE campaign of this many evaluations per size")
    p.add_argument("--timeout", type=float, default=30)
    args = p.parse_args()
    if args.configs and args.configs.startswith("@"):
        args.configs = Path(args.configs[1:]).read_text()
    configs = json.loads(args.configs) if args.configs else []
    if args.source:
        configs += top_configs(args.source, args.source_dtype, args.top, args.diverse)
    if args.seeds:
        configs += list(SEED_VERSIONS.values())
    sizes = list(args.size)
    if args.grid:
        seed_dims = {"256", "512", "1024", "2048"}
        sizes += [name for name in get_workload(WORKLOAD).space.sizes if set(name.split("x")) <= seed_dims]
    transfer(configs, sizes, args.dtype, args.tpe, args.timeout, args.where)


if __name__ == "__main__":
    main()
