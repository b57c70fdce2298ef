"""Whether a fixed rule could start a cold search better than chance (issue 26): for each complete recording
(cold_strategy_report.recordings), the mean rank, from the best (0) to the worst (1), of the configs each rule
picks from the recording alone, before anything is measured. Chance is 0.5.

    python benchmarks/common/start_priors.py [--only TEXT,...]

The rules: `threads 256`, the configs whose threads a block (block_size_x * _y * _z, Kernel Tuner's names) lie
nearest 256; `middle`, those nearest the middle of every parameter's values (the median of the valid configs'
value indices); `common`, those holding the most of each parameter's commonest value among the valid configs;
`largest` and `smallest`, the tenth of the configs with the largest and smallest sum of value indices scaled to
[0, 1]. No replay is run: the recordings are read for their values."""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for benchmarks.common

from benchmarks.common.cold_strategy_report import recordings  # noqa: E402
from benchmarks.common.strategy_report import label_filter  # noqa: E402

RULES = ("threads 256", "middle", "common", "largest", "smallest")


def rule_ranks(cache: dict, objective: str, maximize: bool) -> dict[str, float]:
    """Each rule's mean rank (0: the best config, 1: the worst) over the configs of a Kernel Tuner cache that ran."""
    params = cache["tune_params"]
    names = [k for k in params if len(params[k]) > 1]
    ran = [(e, e.get(objective, e.get("time"))) for e in cache["cache"].values()]
    ran = [(e, v) for e, v in ran if isinstance(v, (int, float)) and v < 1e19]  # Kernel Tuner's failures: 1e20
    values = np.array([v for _, v in ran], dtype=float)
    rank = (-values if maximize else values).argsort().argsort() / max(len(values) - 1, 1)
    levels = np.array([[params[k].index(e[k]) for k in names] for e, _ in ran], dtype=float)
    scaled = levels / np.maximum(np.array([len(params[k]) - 1 for k in names], dtype=float), 1)
    threads = np.array([np.prod([e.get(b, 1) for b in ("block_size_x", "block_size_y", "block_size_z")]) for e, _ in ran])
    off_256 = np.abs(np.log2(threads / 256))
    off_middle = np.abs(levels - np.median(levels, axis=0)).sum(axis=1)
    commonest = np.array([Counter(levels[:, j]).most_common(1)[0][0] for j in range(len(names))])
    holding = (levels == commonest).sum(axis=1)
    total = scaled.sum(axis=1)
    picks = {
        "threads 256": off_256 == off_256.min(),
        "middle": off_middle == off_middle.min(),
        "common": holding == holding.max(),
        "largest": total >= np.quantile(total, 0.9),
        "smallest": total <= np.quantile(total, 0.1),
    }
    return {rule: float(rank[picked].mean()) for rule, picked in picks.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated parts of the spaces' labels to keep")
    args = p.parse_args()
    print("| space | " + " | ".join(RULES) + " |")
    print("|---|" + "---|" * len(RULES))
    every = []
    for label, rec, _, _ in recordings(label_filter(args.only)):
        opener = gzip.open if str(rec.cachefile).endswith(".gz") else open
        with opener(rec.cachefile, "rt") as f:
            ranks = rule_ranks(json.load(f), rec.objective, rec.maximize)
        every.append(ranks)
        print(f"| {label} | " + " | ".join(f"{ranks[r]:.2f}" for r in RULES) + " |")
    print(f"| mean of {len(every)} | " + " | ".join(f"{np.mean([e[r] for e in every]):.3f}" for r in RULES) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
