"""The CPU workloads' campaigns on one host, in one go (device time is scarce): gemm-cpu int32 at 1024^3 and
2048^3, float32 at 2048^3, floyd-warshall-cpu at n = 5000, each trying the seeds' configurations first and
timing its baselines (the naive OpenMP version; numpy's BLAS for float32) in the same measuring process.

Usage: python3 benchmarks/cpu/campaign.py [--scale S] [--json FILE]
(S multiplies every campaign's time budget; the store is results/store/, its CPU's folder named by the model.)
It first checks, with a one-evaluation campaign on a tiny size in a scratch store, that rows are filed under
the CPU's model (not a GPU's), and stops if not."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import tuner
from tuner.measure.provenance import cpu_info
from tuner.store import gpu_slug
from tuner.workloads.floyd_warshall_cpu import SEED_CONFIGS as FW_SEEDS
from tuner.workloads.gemm_cpu import SEED_CONFIGS as GEMM_SEEDS

REAL_PROCESS = "tuner.measure.entry:process_entry"  # named: the campaign skips its CUDA-GPU check
# (workload, size, dtype, seconds of search, seeds): 1024^3 first, so 2048^3 warm-starts from its best
CAMPAIGNS = [
    ("gemm-cpu", "1024x1024x1024", "int32", 25, GEMM_SEEDS),
    ("gemm-cpu", "2048x2048x2048", "int32", 40, GEMM_SEEDS),
    ("gemm-cpu", "2048x2048x2048", "float32", 35, GEMM_SEEDS),
    ("floyd-warshall-cpu", "5k", "int32", 50, FW_SEEDS),
]


def files_rows_under_the_cpu() -> bool:
    """One evaluation on gemm-cpu's tiny size in a scratch store: is its folder the CPU model's?"""
    with tempfile.TemporaryDirectory() as tmp:
        out = tuner.tune(
            "gemm-cpu", size="test", budget=1, results=tmp, warm_start=False, confirm=False, measure_target=REAL_PROCESS
        )
        print(f"smoke campaign filed its rows under {out['gpu']!r}", flush=True)
        return (Path(tmp) / gpu_slug(cpu_info()["gpu"]) / "gemm-cpu").is_dir()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0, help="multiplies every campaign's time budget")
    p.add_argument("--json", help="write the summary here")
    args = p.parse_args()
    print(json.dumps(cpu_info()), flush=True)
    if not files_rows_under_the_cpu():
        print(
            "rows are not filed under the CPU's model: the measuring process must name its device with "
            "provenance.device_info (docs/results/cpu.md); nothing recorded",
            file=sys.stderr,
        )
        return 2
    summary = []
    for workload, size, dtype, seconds, seeds in CAMPAIGNS:
        start = time.perf_counter()
        try:
            out = tuner.tune(
                workload,
                size=size,
                dtype=dtype,
                budget=f"{max(5, round(seconds * args.scale))}s",
                first=tuple(seeds.values()),
                confirm=False,  # 15 rounds of each near-tie cost more device time than the whole search
                timeout=60,
                measure_target=REAL_PROCESS,
            )
        except tuner.TunerError as e:
            print(f"{workload} {size} {dtype}: {e}", file=sys.stderr, flush=True)
            continue
        best = tuner.best(workload, size=size, dtype=dtype, gpu=out["gpu"])
        ratios = {name: b["time_ms"] / best["time_ms"] for name, b in best["baselines"].items()}
        summary.append(
            {
                "workload": workload,
                "size": size,
                "dtype": dtype,
                "evaluated": out["evaluated"],
                "failures": out["failures"],
                "best_ms": best["time_ms"],
                "config": best["config"],
                "metrics": best["metrics"],
                "baseline_ms": {k: b["time_ms"] for k, b in best["baselines"].items()},
                "speedup_over": ratios,
                "wall_s": round(time.perf_counter() - start, 1),
            }
        )
        print(json.dumps(summary[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_info(), "campaigns": summary}, indent=1))
    return 0 if len(summary) == len(CAMPAIGNS) else 1


if __name__ == "__main__":
    sys.exit(main())
