"""Where a strategy's cold score is won or lost: its methodology score's curve P(M) over the window, from replays
cold_strategy_report.py kept (--save-traces).

    python benchmarks/common/score_window.py --load-traces FILE.json.gz ... [--strategy auto] [--first-seed 30]
        [--repeats 40] [--only TEXT,...]

For each space: the window's evaluations, the score (the mean of P over them), P's mean over the window's first
four evaluations and over its thirds, the score without those first four, and at the window's end the median
run's rank from the top (0: the optimum), the share of runs at the optimum, random search's expected rank there,
and how many configs lie within 2% of the optimum. No replay is run: the recordings are read for their values."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common

from benchmarks.common.cold_strategy_report import load_traces, recordings  # noqa: E402
from benchmarks.common.strategy_report import label_filter  # noqa: E402
from tuner.answers.compare_scores import best_so_far, score_curve  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--load-traces", metavar="FILE", nargs="+", required=True)
    p.add_argument("--strategy", default="auto")
    p.add_argument("--first-seed", type=int, default=30)
    p.add_argument("--repeats", type=int, default=40)
    p.add_argument("--only", default="", help="comma-separated parts of the spaces' labels to keep")
    args = p.parse_args()
    seeds = range(args.first_seed, args.first_seed + args.repeats)
    kept = {label: (budget, t[args.strategy]) for (label, budget), t in
            load_traces(args.load_traces, [args.strategy], seeds).items()}
    print("| space | window | score | first 4 | thirds | without the first 4 | median rank from the top at the end "
          "| runs at the optimum | random search's rank | within 2% |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    scores, without = [], []
    for label, rec, _, _ in recordings(label_filter(args.only)):
        if label not in kept:
            continue
        budget, traces = kept[label]
        curve = score_curve(best_so_far(traces, budget, rec.maximize), rec.values, rec.maximize)
        if curve is None:
            continue
        pm, m = curve.standardised, curve.evals
        third = max(1, len(pm) // 3)
        end = curve.rank_from_top[:, -1]
        within = int(np.sum(np.abs(rec.values - rec.optimum) <= 0.02 * abs(rec.optimum)))
        scores.append(pm.mean())
        without.append(pm[4:].mean() if len(pm) > 4 else pm.mean())
        thirds = " / ".join(f"{x:+.2f}" for x in (pm[:third].mean(), pm[third : 2 * third].mean(), pm[2 * third :].mean()))
        print(f"| {label} | {m[0]}-{m[-1]} | {pm.mean():.3f} | {pm[:4].mean():+.2f} | {thirds} | {without[-1]:.3f} | "
              f"{np.nanmedian(end):.1f} | {np.mean(end == 0):.2f} | {len(rec.values) / (m[-1] + 1):.1f} | {within} |")
    print(f"\nmean of {len(scores)} spaces: {np.mean(scores):.3f}; without each window's first 4 evaluations "
          f"{np.mean(without):.3f} ({args.strategy}, seeds {seeds[0]}..{seeds[-1]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
