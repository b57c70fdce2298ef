"""config_table (`tuner results`' table, the report's sweeps) from one grouped pass over the rows: per config the
median of its successful measurements, their count, and where none succeeded its latest failure."""

from __future__ import annotations

import json

import pandas as pd

from tuner.answers.selection import Selection
from tuner.answers.tables import config_table
from tuner.workloads import get_workload

WORKLOAD = get_workload("reduction")
BEST = {"variant": 7, "block_size_x": 256, "items_per_thread": 16, "vector": 4, "shuffle": 1, "finish": 1}


def _row(config: dict, when: str, status: str = "ok", value: float = float("nan"), error: str | None = None) -> dict:
    return {
        "workload": "reduction",
        "gpu": "G",
        "size": "16M",
        "size_vars": json.dumps({"n": 2**24}),
        "dtype": "float32",
        "config": json.dumps(config, sort_keys=True),
        "status": status,
        "objective_value": value,
        "time_ms": 1000 / value if status == "ok" else float("nan"),
        "metrics": "{}",
        "error": error,
        "timestamp": when,
    }


def test_each_config_by_its_successful_median_or_its_latest_failure(tmp_path):
    a, b, c = BEST, {**BEST, "block_size_x": 512}, {**BEST, "block_size_x": 128}
    rows = pd.DataFrame(
        [
            _row(b, "2026-01-03", "compile", error="nvcc\nerror: first"),
            _row(a, "2026-01-01", value=100.0),
            _row(b, "2026-01-04", "runtime", error="trace\nlast line says it"),
            _row(a, "2026-01-05", "timeout", error="took too long"),  # a success stands: measured ok before
            _row(a, "2026-01-02", value=300.0),
            _row(c, "2026-01-06", value=150.0),
        ]
    )
    sel = Selection(WORKLOAD, "16M", {"n": 2**24}, "float32", rows, root=tmp_path)
    table = config_table(sel)
    got = {row["block_size_x"]: row for row in table.to_dict("records")}
    assert list(table["block_size_x"]) == [256, 128, 512]  # best first (GB/s), the failed config last
    assert (got[256]["GB/s"], got[256]["time_ms"], got[256]["measurements"], got[256]["status"]) == (
        200.0,
        6.666666666666667,
        2,
        "ok",
    )
    assert pd.isna(got[256]["error"]) and got[256]["chosen"] and not got[128]["chosen"]
    assert (got[128]["GB/s"], got[128]["measurements"]) == (150.0, 1)
    assert (got[512]["measurements"], got[512]["status"], got[512]["error"]) == (0, "runtime", "last line says it")
    assert pd.isna(got[512]["GB/s"]) and pd.isna(got[512]["time_ms"])
