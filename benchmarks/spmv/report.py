"""Markdown tables for docs/results/spmv.md (printed; pasted there by hand) from the stored spmv campaigns:
per matrix, the seed's two kernels (as the seed wrote them, best of the block sizes measured), the tuned
best and cuSPARSE (same campaign), and the harmonic mean and minimum of tuned / cuSPARSE; then per matrix
class.
Only the newest kernel code's measurements count (the kernel hash of the latest row), unless --all-kernels.
Usage: python benchmarks/spmv/report.py [--dtype float32] [--all-kernels] [GPU name]"""

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common
from benchmarks.common.report import H100, baselines, commits, evaluations, header, row, software, values  # noqa: E402
from tuner.answers.best_config import best  # noqa: E402
from tuner.workloads import get_workload  # noqa: E402
from tuner.workloads.spmv import SEED_CONFIGS  # noqa: E402
from tuner.workloads.spmv_matrices import CLASS_NAMES  # noqa: E402

VARIANTS = {0: "scalar", 1: "scalar + shared x", 2: "vector", 3: "nonzero split", 4: "CSR-stream split", 5: "merge path",
            6: "CSR-stream 2"}


def describe(c: dict) -> str:
    lanes = f", {c['threads_per_row']} lanes/row" if c["variant"] in (2, 3, 4, 6) else ""
    hints = "".join([", ldg" if c["ldg"] else "", ", stream" if c["stream"] else "",
                     f", unroll {c['unroll']}" if c["unroll"] > 1 and c["variant"] != 6 else "",
                     f", vec {c.get('vec', 1)}" if c.get("vec", 1) > 1 else "",
                     ", 32 registers" if c.get("full_occupancy") else ""])
    return f"{VARIANTS[c['variant']]}: {c['block_size_x']} threads{lanes}, row_iters {c['row_iters']}{hints}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("gpu", nargs="?", default=H100)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--all-kernels", action="store_true", help="pool the measurements of every kernel version")
    args = p.parse_args()
    space = get_workload("spmv").space
    df = evaluations("spmv", args.gpu, dtype=args.dtype)
    if not args.all_kernels and len(df):
        df = df[df.kernel_hash == df.sort_values("timestamp").kernel_hash.iloc[-1]]
    ok = df[df.status == "ok"]
    base = baselines("spmv")
    seeds = {json.dumps(c, sort_keys=True, separators=(",", ":")) for c in SEED_CONFIGS}

    print(header("matrix", "class", "rows", "nnz", "seed scalar GB/s", "seed shared-x GB/s", "tuned GB/s", "tuned GFLOP/s",
                 "cuSPARSE GB/s", "tuned / cuSPARSE", "evaluated", "tuned config"))
    ratios: dict[str, float] = {}
    per_class: dict[str, list] = {}
    for name, size in space.sizes.items():
        rows = ok[ok["size"] == name]
        if rows.empty:
            print(row(name, CLASS_NAMES[size["matrix"]], "", "", "not measured", "", "", "", "", "", "", ""))
            continue
        b = best("spmv", name, args.dtype, gpu=args.gpu, evaluations=df, baselines=base)
        seed = {}
        for variant in (0, 1):
            r = rows[rows.config.isin(seeds) & rows.config.map(lambda c, v=variant: json.loads(c)["variant"] == v)]
            seed[variant] = f"{r.objective_value.max():.0f}" if len(r) else "n/a"
        cus = b["baselines"]["cusparse"]
        ratio = cus["ratio"]["GB/s"]
        ratios[name] = ratio
        per_class.setdefault(CLASS_NAMES[size["matrix"]], []).append((seed, b, cus, ratio))
        print(row(name, CLASS_NAMES[size["matrix"]], size["rows"], size["nnz"], seed[0], seed[1], f"{b['value']:.0f}",
                  f"{b['metrics']['GFLOP/s']:.1f}", f"{cus['metrics']['GB/s']:.0f}", f"{ratio:.2f}",
                  rows.config.nunique(), describe(b["config"])))
    if ratios:
        hmean = statistics.harmonic_mean(list(ratios.values()))
        worst = min(ratios, key=ratios.__getitem__)
        print(f"\nTuned / cuSPARSE over {len(ratios)} matrices: harmonic mean {hmean:.2f}, minimum "
              f"{ratios[worst]:.2f} ({worst}); {sum(r >= 1 for r in ratios.values())} of {len(ratios)} at or above 1.0.")

    print("\n" + header("class", "matrices", "seed scalar / cuSPARSE", "seed shared-x / cuSPARSE",
                        "tuned / cuSPARSE (harmonic mean)", "tuned / cuSPARSE (min)"))
    for cls, items in per_class.items():
        def hm(values):
            values = [v for v in values if v is not None]
            return f"{statistics.harmonic_mean(values):.2f}" if values else "n/a"

        seed_ratio = {v: [float(s[v]) / c["metrics"]["GB/s"] if s[v] != "n/a" else None for s, _, c, _ in items]
                      for v in (0, 1)}
        tuned = [r for *_, r in items]
        print(row(cls, len(items), hm(seed_ratio[0]), hm(seed_ratio[1]), hm(tuned), f"{min(tuned):.2f}"))

    if len(ok):
        print(f"\nProvenance: {len(df)} evaluations ({len(ok)} verified), {df.config.nunique()} configs; {software(ok)}, "
              f"kernel {values(ok.kernel_hash)}, commits {commits(ok)}")


if __name__ == "__main__":
    main()
