"""Re-score recorded regression checks with today's noise floor (tuner.check.session_noise): the normalised
changes and intervals stay as measured on the GPU; only the floor is recomputed from the baseline the checks
ran against. Prints, per file, how many checks were flagged then and how many are flagged now.

  python benchmarks/check_rescore.py results/nvidia-h100-80gb-hbm3/reduction/check/figures/baseline-3-sessions.parquet \\
      results/nvidia-h100-80gb-hbm3/reduction/check/figures/{aa,aa-2,ab}.jsonl
"""

import json
import sys

import pandas as pd

from tuner.check import noise_floor
from tuner.stats import normalise, verdict


def main(baseline_path: str, *records: str) -> None:
    baselines = {f"{r.workload}/{r.size}/{r.dtype}": r for r in pd.read_parquet(baseline_path).itertuples()}
    floors = {}
    for key, b in baselines.items():
        ref = json.loads(b.references)[b.reference]
        floors[key] = noise_floor(normalise(b.rounds, ref), int(b.sessions))
        print(f"{key}: {b.sessions} sessions, floor {floors[key]:.1%}")
    for path in records:
        rows = [json.loads(line) for line in open(path)]
        then = sum(r["verdict"] == "regression" for r in rows)
        now = sum(verdict(r["normalised"]["change"], *r["normalised"]["ci"], floors[r["kernel"]]) == "regression"
                  for r in rows)
        print(f"{path}: {len(rows)} checks, flagged then {then}, flagged with today's floor {now}")


if __name__ == "__main__":
    main(*sys.argv[1:])
