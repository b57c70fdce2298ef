"""Rows of the store: a config's canonical text, its median, and the evaluations of a workload as the
current space and timing protocol read them (defaulted parameters filled in, superseded times left out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tuner.errors import TunerError
from tuner.store.parts import read_parts
from tuner.store.paths import results_root
from tuner.workloads import get_workload

if TYPE_CHECKING:
    from tuner.space import Space


def canonical_config(config: dict) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def config_medians(rows: pd.DataFrame, maximize: bool) -> pd.Series:
    """Each config's objective value, the median of its measurements, best first (ties in config order)."""
    return rows.groupby("config")["objective_value"].median().sort_values(ascending=not maximize, kind="stable")


def load_evaluations(workload: str | None = None, root: Path | None = None, superseded: bool = False) -> pd.DataFrame:
    """The stored evaluations of one workload as the answers read them: its rows recorded before its space gained
    a parameter with a default (Space.defaults) read as configs with that value, so they keep counting; where a
    (GPU, size, dtype) has times taken the current way, older ones are left out (without_superseded) unless
    `superseded` (tuner.answers.selection leaves them out itself, saying how many). Of every workload (None):
    every row as stored, superseded times too, each known workload's configs completed alike."""
    df = read_parts(f"*/{workload or '*'}/evaluations/*.parquet", root or results_root())
    if df.empty:
        return df
    if not workload:
        return _completed_by_workload(df)
    space = get_workload(workload).space
    df = complete_configs(df, space)
    return df if superseded else without_superseded(df, space)


def _completed_by_workload(df: pd.DataFrame) -> pd.DataFrame:
    """complete_configs of each workload's rows, in their order; a workload no longer defined keeps its rows as
    stored."""
    if "workload" not in df or "config" not in df:
        return df
    parts = []
    for name, rows in df.groupby("workload", sort=False):
        try:
            parts.append(complete_configs(rows, get_workload(str(name)).space))
        except TunerError:
            parts.append(rows)
    return pd.concat(parts).sort_index()


def same_protocol(row: dict, space: Space, timing: str | None) -> bool:
    """Whether a stored time was taken as one taken now would be: over the space's number of launches and,
    for kernels (host code times itself), with the same timing protocol (tuner/measure/timing.py; rows from before
    the column existed were taken "plain")."""
    return _launches_match(row, space) and timing_matches(row, space, timing)


def _launches_match(row: dict, space: Space) -> bool:
    return row["times"] is not None and len(row["times"]) == space.iterations


def timing_matches(row: dict, space: Space, timing: str | None) -> bool:
    """Whether `row` (a stored evaluation or check baseline) was timed with the protocol `timing`."""
    return space.lang == "host" or recorded_timing(row.get("timing")) == timing


def recorded_timing(value: object) -> str:
    """The timing protocol a row's `timing` value says: a row from before the column existed (missing, None or
    NaN) was timed "plain"."""
    return value if isinstance(value, str) else "plain"


def without_superseded(df: pd.DataFrame, space: Space) -> pd.DataFrame:
    """Of the successful rows of a (GPU, size, dtype), only those taken nearest the current protocol count
    (the current timing protocol, tuner/measure/timing.py, first, then the space's number of launches): times taken
    another way are not comparable, so one ranking never mixes them. The files keep every row."""
    from tuner.vocabulary import PROTOCOL

    if "times" not in df or df.empty:
        return df
    ok = df["status"] == "ok"
    columns = ["times"] + (["timing"] if "timing" in df else [])
    rank = pd.Series(
        [
            2 * timing_matches(r, space, PROTOCOL) + _launches_match(r, space) if good else -1
            for r, good in zip(df[columns].to_dict("records"), ok)
        ],
        index=df.index,
    )
    best = rank.groupby([df["gpu"], df["size_vars"], df["dtype"]]).transform("max")
    if (rank[ok] == best[ok]).all():
        return df
    return df[~ok | (rank == best)].reset_index(drop=True)


def complete_configs(df: pd.DataFrame, space: Space) -> pd.DataFrame:
    """Rows whose config lacks a defaulted parameter get it (Space.complete), in `config` and its `p_` column."""
    if not space.defaults or "config" not in df:
        return df
    configs = df["config"].map(json.loads)
    stale = configs.map(lambda c: any(k not in c for k in space.defaults))
    if not stale.any():
        return df
    df = df.copy()
    df.loc[stale, "config"] = configs[stale].map(lambda c: canonical_config(space.complete(c)))
    for k, v in space.defaults.items():
        column = f"p_{k}"
        df[column] = df[column].fillna(v) if column in df else v
    return df


def load_baselines(workload: str | None = None, root: Path | None = None) -> pd.DataFrame:
    return read_parts(f"*/{workload or '*'}/baselines/*.parquet", root or results_root())
