"""The default strategy warm-started against warm-started TPE on every recorded complete space, in one command:

    nice -n 10 python benchmarks/common/warm_strategy_report.py [--repeats 10] [--first-seed 0] [--jobs 1]
        [--only TEXT,...] [--out FILE]

For each complete recording in the store (strategy_report.complete_recordings): `compare` at a budget of 10% of
the valid configs (at least 10, at most 100), the methodology score of `default` (tuner tune's strategy with
its warm start from the other recorded sizes) and of `tpe+warm`, with the first's 90% bootstrap interval over the
repeats, written to
results/records/common/<gpu>/strategies/warm_summary.md (issue 26: a cold default with the warm start on top) or
--out. --first-seed checks the comparison on seeds other than the 0..9 the designs were chosen on; --only keeps
the spaces whose label holds one of its texts (a mean over them only: say so where it is reported)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common
from benchmarks.common.report import COMMON, records_dir  # noqa: E402
from benchmarks.common.strategy_report import budget_for, complete_recordings, label_filter  # noqa: E402
from tuner import store  # noqa: E402
from tuner.answers.compare import load_recording, summarize, traces_of_spaces  # noqa: E402
from tuner.answers.compare_scores import INTERVAL  # noqa: E402
from tuner.search.strategies import DEFAULT_STRATEGY  # noqa: E402

STRATEGIES = ("default", "tpe+warm")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=0, help="seed of the first repeat (held-out seeds: 10..)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (the traces do not depend on it)")
    p.add_argument("--only", default="", help="comma-separated parts of the spaces' labels to keep")
    p.add_argument("--out", help="markdown (default: results/records/common/<gpu>/strategies/warm_summary.md)")
    args = p.parse_args()
    t0 = time.time()
    lines: list[str] = []
    scores: dict[str, list[float]] = {n: [] for n in STRATEGIES}
    keep = label_filter(args.only)
    spaces = [(f"{workload} {size} {dtype}", load_recording(workload, size, dtype, gpu_dir.name), configs,
               budget_for(configs), gpu_dir)
              for workload, size, dtype, gpu_dir, configs in complete_recordings(store.results_root())
              if keep(f"{workload} {size} {dtype}")]
    out_dir = spaces[0][4] if spaces else None  # the summary goes beside the first GPU's records
    seeds = range(args.first_seed, args.first_seed + args.repeats)
    every = traces_of_spaces([(rec, budget) for _, rec, _, budget, _ in spaces], STRATEGIES, seeds, args.jobs)
    for (label, rec, configs, budget, gpu_dir), traces in zip(spaces, every, strict=True):
        doc = summarize(rec, traces, budget, args.first_seed)
        got = {n: doc["strategies"][n]["methodology"]["score"] for n in STRATEGIES}
        for n in STRATEGIES:
            scores[n].append(got[n])
        lo, hi = doc["strategies"][STRATEGIES[0]]["methodology"]["interval"]
        lines.append(f"| {label} | {gpu_dir.name} | {configs} | {budget} | "
                     + " | ".join(f"{got[n]:.3f}" for n in STRATEGIES) + f" | {lo:.2f} - {hi:.2f} |")
        print(lines[-1], flush=True)
    if out_dir is None:
        print("no complete recording in the store", file=sys.stderr)
        return 1
    means = " | ".join(f"{statistics.mean(scores[n]):.3f}" for n in STRATEGIES)
    text = [
        f"Warm-started methodology scores (Willemsen et al. 2024): `default` is `{DEFAULT_STRATEGY}+warm`, against "
        f"`tpe+warm`; {args.repeats} repeats (seeds {args.first_seed}..{args.first_seed + args.repeats - 1}), "
        f"budget 10% of the valid configs (at least 10, at most 100). Made by "
        f"`python benchmarks/common/warm_strategy_report.py {' '.join(sys.argv[1:])}` "
        f"({time.time() - t0:.0f} s, {args.jobs} process(es) on a machine of {os.cpu_count()} cores).",
        "",
        "| space | gpu | configs | budget | " + " | ".join(STRATEGIES) + f" | {STRATEGIES[0]} {100 * INTERVAL:g}% "
        "bootstrap interval over the repeats |",
        "|---|---|---|---|" + "---|" * (len(STRATEGIES) + 1),
        *lines,
        f"| mean | | | | {means} | |",
    ]
    out = Path(args.out) if args.out else records_dir(COMMON, out_dir.name, "strategies") / "warm_summary.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
