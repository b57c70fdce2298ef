"""A tuned best for every shape of the seeds' grid (M, N, K each in {256, 512, 1024, 2048}, float32): one
regular campaign per shape (`tuner tune gemm --size MxNxK --budget B`, in this one process), TPE with the
framework's warm start from the stored shapes, preceded by the best stored config of each block tile (from
the nearest shapes that measured it), since the tile is what changes most between shapes. Shapes go from
large to small M, so each one has a tuned neighbour. A shape is done once the store holds `budget`
configs of it measured with the current kernel source; a rerun resumes. `--until` (epoch seconds) stops
before a shape that would not finish in time.

  python benchmarks/gemm/grid.py --budget 16 --until $(( $(date +%s) + 450 ))
"""

from __future__ import annotations

import argparse
import json
import time

from tuner import store
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.measure.provenance import source_hash
from tuner.space import size_distance
from tuner.workloads import get_workload

WORKLOAD, DTYPE, GPU = "gemm", "float32", "NVIDIA H100 80GB HBM3"
DIMS = (256, 512, 1024, 2048)


def grid_sizes() -> list[dict]:
    """The 64 shapes, large M (then N, then K) first."""
    return [{"m": m, "n": n, "k": k} for m in reversed(DIMS) for n in reversed(DIMS) for k in reversed(DIMS)]


def size_name(size: dict) -> str:
    return f"{size['m']}x{size['n']}x{size['k']}"


def tile(config: dict) -> tuple[int, int]:
    """The block tile (rows x columns of C) of a config; variants 1-3: their square tile."""
    if config["variant"] < 4:
        return config["block_size_x"], config["block_size_x"]
    return config["block_size_y"] * config["tile_m"], config["block_size_x"] * config["tile_n"]


def measured_configs(evals, size: dict, kernel_hash: str, gpu: str) -> int:
    rows = evals[(evals.size_vars == json.dumps(size, sort_keys=True)) & (evals.dtype == DTYPE)
                 & (evals.gpu == gpu) & (evals.kernel_hash == kernel_hash)]
    return rows.config.nunique()


def best_per_tile(evals, size: dict, gpu: str) -> list[dict]:
    """For each register-tiled block tile: its best config at the nearest other shape that measured it,
    best first."""
    ok = evals[(evals.status == "ok") & (evals.dtype == DTYPE) & (evals.gpu == gpu) & (evals.p_variant == 4)
               & (evals.size_vars != json.dumps(size, sort_keys=True))]
    picks = {}
    for size_vars, rows in sorted(ok.groupby("size_vars"), key=lambda g: size_distance(size, json.loads(g[0]))):
        per_config = store.config_medians(rows, maximize=True)
        ceiling = per_config.iloc[0]
        for config_text, value in per_config.items():
            config = json.loads(config_text)
            if tile(config) not in picks:
                picks[tile(config)] = (value / ceiling, config)
    return [config for _, config in sorted(picks.values(), key=lambda p: -p[0])]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=int, default=16, help="configs measured per shape")
    p.add_argument("--until", type=float, help="epoch seconds: start no shape that would end after this")
    p.add_argument("--gpu", default=GPU, help="the GPU whose recordings count as done (and seed the tiles)")
    p.add_argument("--timeout", type=float, default=30, help="seconds per config")
    args = p.parse_args()
    kernel_hash = source_hash(get_workload(WORKLOAD).space.source_text)
    durations, tuned, left = [], 0, []
    for size in grid_sizes():
        evals = store.load_evaluations(WORKLOAD)
        if not evals.empty and measured_configs(evals, size, kernel_hash, args.gpu) >= args.budget:
            continue
        estimate = max(durations[-5:]) if durations else 20.0
        if args.until and time.time() + estimate > args.until:
            left.append(size_name(size))
            continue
        first = best_per_tile(evals, size, args.gpu) if not evals.empty else []
        started = time.time()
        out = run_campaign(CampaignRequest(WORKLOAD, size=size_name(size), dtype=DTYPE, strategy="tpe",
                                           max_evals=args.budget, seed=1, timeout=args.timeout, quiet=True,
                                           first=tuple(first)))
        durations.append(time.time() - started)
        tuned += 1
        best = out.best["value"] if out.best else float("nan")
        cublas_ms = out.baselines.get("cublas")
        cublas = 2e-6 * size["m"] * size["n"] * size["k"] / cublas_ms if cublas_ms else float("nan")
        print(f"{size_name(size)}: best {best:.0f} GFLOP/s, cuBLAS {cublas:.0f} ({best / cublas:.2f}); "
              f"{out.evaluated} configs, {out.measured} measured; {durations[-1]:.1f} s", flush=True)
    print(f"tuned {tuned} shapes" + (f"; {len(left)} left for a rerun: {' '.join(left)}" if left else "; grid complete"))


if __name__ == "__main__":
    main()
