"""`tuner best` gives, for every stored (workload, size, dtype, GPU), the config it gave before tuner/ was split
into subpackages: tests/data/best_answers.json was recorded with that code (commit 4c1d35e) on the committed
store by tests/data/record_best_answers.py (its docstring has the command). The GEMM entries of the shapes
re-tuned after split-K (issue 24: the squares and the 64 shapes, 2026-11-25) were recorded again by the same
script from the store that holds those campaigns; every other entry is as recorded then. A recorded config is
read with the space's `defaults` for parameters added since (as the store reads a recorded row)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from tuner import locations, store
from tuner.answers.best_config import best
from tuner.workloads import get_workload

HERE = Path(__file__).resolve().parent
RESULTS = locations.BUILTIN_RESULTS  # the committed store the answers were recorded from (results/store/)
ANSWERS = json.loads((HERE / "data" / "best_answers.json").read_text())


@cache
def _stored(workload: str):
    """The evaluations and baselines of a workload, loaded once for all its entries (as `tuner export` does)."""
    return store.load_evaluations(workload, RESULTS), store.load_baselines(workload, RESULTS)


def _id(entry: dict) -> str:
    return f"{entry['workload']}-{entry['size']}-{entry['dtype']}-{store.gpu_slug(entry['gpu'])}"


def test_every_recorded_combination_still_stored():
    """The store, as the code reads it now, still has a successful row for each recorded (workload, size, dtype,
    GPU) (combinations stored later need no recording)."""
    recorded = {(e["workload"], e["size"], e["dtype"], e["gpu"]) for e in ANSWERS}
    stored = set()
    for workload in sorted({e["workload"] for e in ANSWERS}):
        df = _stored(workload)[0]
        ok = df[(df["status"] == "ok") & (df["workload"] == workload)]
        stored |= {(workload, str(s), str(d), str(g)) for (s, d, g), _ in ok.groupby(["size", "dtype", "gpu"])}
    assert not recorded - stored, f"recorded, no longer stored: {sorted(recorded - stored)}"


@pytest.mark.parametrize("entry", ANSWERS, ids=_id)
def test_best_unchanged(entry):
    evaluations, baselines = _stored(entry["workload"])
    answer = best(entry["workload"], entry["size"], entry["dtype"], gpu=entry["gpu"], root=RESULTS,
                  evaluations=evaluations, baselines=baselines)
    asked = f"tuner best {entry['workload']} --size {entry['size']} --dtype {entry['dtype']} --gpu '{entry['gpu']}'"
    recorded = get_workload(entry["workload"]).space.complete(entry["config"])
    assert answer["config"] == recorded, f"{asked}: config {answer['config']}, was {recorded}"
    assert answer["value"] == pytest.approx(entry["value"], rel=1e-9), f"{asked}: value {answer['value']}, was {entry['value']}"
    assert answer["fallback"] == entry["fallback"], f"{asked}: answered {answer['fallback']}, was {entry['fallback']}"
