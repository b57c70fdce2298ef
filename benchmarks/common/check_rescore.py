"""Re-score recorded regression checks with today's rule (tuner.answers.check: noise floors from the baseline's
session spread, raw or normalised times deciding): the changes and intervals stay as measured on the GPU;
only the floors and the verdicts are recomputed from the baseline the checks ran against. Records are the
JSON lines of benchmarks/common/check_figures.py or the JSON of `tuner check --json`. Prints, per file, how many
checks were flagged then and how many are flagged now.

  python benchmarks/common/check_rescore.py results/records/common/nvidia-h100-80gb-hbm3/check/baseline-3-sessions.parquet \\
      results/records/common/nvidia-h100-80gb-hbm3/check/{aa,aa-2,ab}.jsonl
  python benchmarks/common/check_rescore.py 'results/store/nvidia-h100-80gb-hbm3/*/check/baseline.parquet' \\
      results/records/common/nvidia-h100-80gb-hbm3/check/{aa-6-sessions-*.jsonl,check-*.json}
"""

import glob
import json
import sys
from typing import Any

import pandas as pd

from tuner.answers.check import deciding, noise_floor
from tuner.stats import normalise, verdict


def _records(path):
    with open(path) as f:
        if path.endswith(".json"):
            return [{**c, "kernel": f"{c['workload']}/{c['size']}/{c['dtype']}"} for c in json.load(f)["checks"]]
        return [json.loads(line) for line in f]


def main(baselines_glob: str, *records: str) -> None:
    baselines = pd.concat([pd.read_parquet(p) for p in sorted(glob.glob(baselines_glob))], ignore_index=True)
    floors = {}
    b: Any  # pandas-stubs type itertuples' fields as any scalar: these are the baseline's columns
    for b in baselines.itertuples():
        key = f"{b.workload}/{b.size}/{b.dtype}"
        ref = json.loads(b.references).get(b.reference)
        floors[key] = {"raw": noise_floor(b.rounds, int(b.sessions)),
                       "normalised": noise_floor(normalise(b.rounds, ref), int(b.sessions)) if ref else None}
        print(f"{key}: {b.sessions} sessions, floors raw {floors[key]['raw']:.1%}"
              + (f", normalised {floors[key]['normalised']:.1%}" if ref else ""))
    for path in records:
        rows = [r for r in _records(path) if r.get("raw")]  # refused or failed checks have no comparison
        then = sum(r["verdict"] == "regression" for r in rows)
        now = 0
        for r in rows:
            f = floors[r["kernel"]]
            sides = {label: {**r[label], "threshold": f[label]} for label in ("raw", "normalised")
                     if r.get(label) and f[label] is not None}
            side = sides[deciding(sides["raw"], sides.get("normalised", {}))]  # {}: no normalised side, as None
            ci_low, ci_high = side["ci"]
            now += verdict(side["change"], ci_low, ci_high, side["threshold"]) == "regression"
        print(f"{path}: {len(rows)} checks, flagged then {then}, flagged with today's rule {now}")


if __name__ == "__main__":
    main(*sys.argv[1:])
