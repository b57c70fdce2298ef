"""One strategy, cold, over every space the cold report compares, fast: each (space, repeat) a task on every core.

    python benchmarks/common/cold_sweep.py [--repeats 10] [--first-seed 0] [--strategy auto] [--only TEXT,...]
        [--jobs N]

Prints the methodology score of each space (the one cold_strategy_report.py gives for the same strategy,
repeats and budget: repeat r is seeded with first-seed + r) and their mean. For trying a change to a strategy
before the full report: cold_strategy_report.py runs seven strategies in one process (about 13 minutes on 2
cores); this one strategy on the device machine's 16 cores in about a minute, after a minute spent loading the
recordings (those --only keeps). A difference of a few hundredths in the mean at 10 repeats can be the seeds
alone: check a change on held-out seeds (--first-seed 10 --repeats 20) before keeping it."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common

from benchmarks.common.cold_strategy_report import recordings  # noqa: E402
from benchmarks.common.strategy_report import budget_for, label_filter  # noqa: E402
from tuner.answers.compare import summarize, traces_of_spaces  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=0, help="seed of the first repeat (held-out seeds: 10..)")
    p.add_argument("--strategy", default="auto")
    p.add_argument("--only", default="", help="comma-separated parts of the spaces' labels to keep")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    args = p.parse_args()
    spaces = [(label, rec, budget_for(configs)) for label, rec, configs, _ in recordings(label_filter(args.only))]
    started = time.time()
    seeds = range(args.first_seed, args.first_seed + args.repeats)
    every = traces_of_spaces([(rec, budget) for _, rec, budget in spaces], [args.strategy], seeds, args.jobs)
    scores = [summarize(rec, traces, budget)["strategies"][args.strategy]["methodology"]["score"]
              for (_, rec, budget), traces in zip(spaces, every, strict=True)]
    for (label, _, _), score in zip(spaces, scores):
        print(f"{score:7.3f}  {label}")
    print(f"mean {sum(scores) / len(scores):.3f} over {len(scores)} spaces, {args.repeats} repeats (seeds {seeds[0]}.."
          f"{seeds[-1]}) "
          f"({time.time() - started:.0f} s on {args.jobs} processes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
