"""The LocVolCalib tables of docs/results/locvolcalib.md (printed; pasted there by hand), from what was
recorded: the course-large campaign in the store (with its copy baseline), naive vs tuned per dataset
(benchmarks/locvolcalib/validate.py on the GPU) and the numpy times (benchmarks/locvolcalib/references.py --times),
both kept in the records (results/records/locvolcalib/<gpu>/runs/).
Usage: python benchmarks/locvolcalib/report.py"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common
from benchmarks.common.report import H100, evaluations, header, records_dir, row, store_dir  # noqa: E402
from tuner.workloads import get_workload  # noqa: E402

RUNS = records_dir("locvolcalib", H100, "runs")
# seed 003, Table 1: total execution time in µs (course datasets small and large; its GPU is not named)
SEED = {"course-small": {"sequential": 2297659, "OpenMP": 213948, "naive CUDA": 92787, "optimised CUDA": 60867},
        "course-large": {"sequential": 216305907, "OpenMP": 10132446, "naive CUDA": 6975193,
                         "optimised CUDA": 3647836}}
ORDER = ["finpar-small", "finpar-small-n32", "finpar-medium", "finpar-large", "course-small", "course-medium",
         "course-large"]


def traffic_bytes(size: dict, itemsize: int) -> float:
    """The space's GB/s model: R read and written, the intermediate written and read, per time step."""
    return 4 * size["outer"] * size["numX"] * size["numY"] * (size["numT"] - 1) * itemsize


def main():
    space = get_workload("locvolcalib").space
    rows = json.loads((RUNS / "datasets_naive_tuned.json").read_text())
    numpy_s = json.loads((RUNS / "numpy_seconds_devvm.json").read_text())["seconds"]
    by = {(r["size"], r["dtype"], r["label"] == "naive"): r for r in rows}

    print(header("dataset", "K x M x N x T", "numpy float64 (s)", "naive CUDA float64 (ms)", "tuned CUDA float64 (ms)",
                 "tuned / naive", "tuned float32 (ms)", "output.data rule (f64 / f32)", "max rel. err. vs numpy (f64)",
                 "seed: sequential / naive CUDA / optimised CUDA (ms)"))
    for name in ORDER:
        s = space.sizes[name]
        naive, tuned, t32 = by[name, "float64", True], by[name, "float64", False], by[name, "float32", False]
        valid = "/".join({True: "VALID", False: "INVALID", None: "(none)"}[r["valid_output_data"]] for r in (tuned, t32))
        seed = SEED.get(name)
        seed_txt = " / ".join(f"{seed[k] / 1e3:,.0f}" for k in ("sequential", "naive CUDA", "optimised CUDA")) if seed else ""
        print(row(name, f"{s['outer']}x{s['numX']}x{s['numY']}x{s['numT']}", f"{numpy_s[name]:.1f}", f"{naive['ms']:.1f}",
                  f"{tuned['ms']:.2f}", f"{naive['ms'] / tuned['ms']:.1f}x", f"{t32['ms']:.2f}", valid,
                  f"{tuned['rel_err']:.1e}", seed_txt))

    for dtype in ("float64", "float32"):
        campaign_summary(space, dtype)


def campaign_summary(space, dtype: str):
    """The course-large campaign of this dtype: tuned, naive and the copy baseline, all from that campaign."""
    df = evaluations("locvolcalib", H100, ok=True, dtype=dtype)
    df = df[df["size"] == "course-large"]
    if df.empty:
        return
    best = df.loc[df.objective_value.idxmin()]  # type: ignore[call-overload]  # pandas-stubs: idxmin's label is Hashable
    df = df[df.campaign_id == best.campaign_id]  # earlier campaigns ran other kernel code: report the best's own
    naive = df[df.p_STRUCTURE == 0]
    base = pd.concat(pd.read_parquet(p) for p in (store_dir(H100, "locvolcalib") / "baselines").glob("*.parquet"))
    copy = base[(base.baseline == "copy") & (base.campaign_id == best.campaign_id)].iloc[0]
    copy_gbs = json.loads(copy.metrics)["GB/s"]
    itemsize = 8 if dtype == "float64" else 4
    gbs = traffic_bytes(space.sizes["course-large"], itemsize) / (best.objective_value / 1e3) / 1e9
    print()
    print(f"course-large {dtype} campaign ({len(df)} configs, TPE, {best.campaign_id}, commit {best.git_commit}):")
    if len(naive):
        n = naive.iloc[0]
        print(f"  tuned {best.objective_value:.2f} ms  naive {n.objective_value:.1f} ms (same campaign)  "
              f"speed-up {n.objective_value / best.objective_value:.1f}x")
    print(f"  effective {gbs:.0f} GB/s (4 value arrays per step)  copy {copy_gbs:.0f} GB/s "
          f"(median {statistics.median(copy.times):.4f} ms, same campaign)  ratio {gbs / copy_gbs:.2f}")
    print(f"  best config {json.loads(best.config)}")
    print("  best per structure: " + ", ".join(f"{v}: {g.objective_value.min():.2f} ms ({len(g)} configs)"
                                              for v, g in df.groupby("p_STRUCTURE")))
    warp = df[df.p_STRUCTURE == 2]
    for param in ("KPB", "STEPS", "TILE_X", "TILE_Y", "XFORM", "XREGS"):
        if len(warp):
            print(f"  warp structure, best per {param}: " + ", ".join(
                f"{int(v)}: {g.objective_value.min():.2f} ms" for v, g in warp.groupby(f"p_{param}")))

if __name__ == "__main__":
    main()
