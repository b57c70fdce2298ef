"""The project's memory: Parquet tables under results/<gpu>/<workload>/, one row per evaluation.

Each campaign writes its own part file (evaluations/<campaign>.parquet, baselines/<campaign>.parquet),
rewritten atomically after every row, so a killed campaign loses nothing it measured and concurrent
writers never clobber each other. Readers merge all parts. Kernel Tuner's JSON cache of each
(size, dtype) lives beside them (<size>_<dtype>.cache.json): its simulation mode replays it.
"""

from __future__ import annotations

import io
import json
import os
import re
import time
import uuid
import warnings
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from tuner.provenance import gpu_slug
from tuner.space import PROJECT_ROOT


def results_root() -> Path:
    return Path(os.environ.get("TUNER_RESULTS", PROJECT_ROOT / "results"))


def new_campaign_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def workload_dir(root: Path, gpu: str, workload: str) -> Path:
    return Path(root) / gpu_slug(gpu) / workload


def cache_path(root: Path, gpu: str, workload: str, size_name: str, dtype: str) -> Path:
    return workload_dir(root, gpu, workload) / f"{_safe(size_name)}_{dtype}.cache.json"


def canonical_config(config: dict) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


class PartWriter:
    """Rows of one campaign into one Parquet part, rewritten atomically (write, then rename)."""

    def __init__(self, path: Path, min_interval_s: float = 0.0):
        self.path = Path(path)
        self.rows: list[dict] = []
        self.min_interval_s = min_interval_s
        self._last = 0.0

    def append(self, row: dict) -> None:
        self.rows.append(row)
        if time.monotonic() - self._last >= self.min_interval_s:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        write_parquet(pd.DataFrame(self.rows), self.path)
        self._last = time.monotonic()


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Whole or not at all: written beside, then renamed over (a reader, or a kill, never meets half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def config_medians(rows: pd.DataFrame, maximize: bool) -> pd.Series:
    """Each config's objective value, the median of its measurements, best first (ties in config order)."""
    return rows.groupby("config")["objective_value"].median().sort_values(ascending=not maximize, kind="stable")


def read_parts(pattern: str, root: Path) -> pd.DataFrame:
    frames = []
    for part in sorted(Path(root).glob(pattern)):
        try:  # one read of the whole file: a writer may replace it meanwhile, and the old inode stays whole
            frames.append(pd.read_parquet(io.BytesIO(part.read_bytes())))
        except Exception as e:  # noqa: BLE001  (pyarrow's errors: truncated, not Parquet at all)
            # one damaged file (copied in half from another host, say) must not take every query down with it
            warnings.warn(f"{part}: not a readable Parquet file ({str(e).splitlines()[0]}); left out: move it "
                          "aside or copy it again", stacklevel=2)
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_evaluations(workload: str | None = None, root: Path | None = None) -> pd.DataFrame:
    """The stored evaluations (of one workload, or all). A workload's rows recorded before its space gained
    a parameter with a default (Space.defaults) read as configs with that value, so they keep counting; where a
    (GPU, size, dtype) has times taken the current way, older ones are left out (without_superseded)."""
    df = read_parts(f"*/{workload or '*'}/evaluations/*.parquet", root or results_root())
    if workload and not df.empty:
        from tuner.workloads import get_workload  # the workloads import the store

        space = get_workload(workload).space
        df = without_superseded(complete_configs(df, space), space)
    return df


def same_protocol(row, space, timing: str | None) -> bool:
    """Whether a stored time was taken as one taken now would be: over the space's number of launches and,
    for kernels (host code times itself), with the same timing protocol (tuner/timing.py; rows from before
    the column existed were taken "plain")."""
    return _launches_match(row, space) and timing_matches(row, space, timing)


def _launches_match(row, space) -> bool:
    return row["times"] is not None and len(row["times"]) == space.iterations


def timing_matches(row, space, timing) -> bool:
    """Whether `row` (a stored evaluation or check baseline) was timed with the protocol `timing`."""
    recorded = row.get("timing")
    return space.lang == "host" or (recorded if isinstance(recorded, str) else "plain") == timing


def without_superseded(df: pd.DataFrame, space) -> pd.DataFrame:
    """Of the successful rows of a (GPU, size, dtype), only those taken nearest the current protocol count
    (the current timing protocol, tuner/timing.py, first, then the space's number of launches): times taken
    another way are not comparable, so one ranking never mixes them. The files keep every row."""
    from tuner.timing import PROTOCOL

    if "times" not in df or df.empty:
        return df
    ok = df["status"] == "ok"
    columns = ["times"] + (["timing"] if "timing" in df else [])
    rank = pd.Series([2 * timing_matches(r, space, PROTOCOL) + _launches_match(r, space) if good else -1
                      for r, good in zip(df[columns].to_dict("records"), ok)], index=df.index)
    best = rank.groupby([df["gpu"], df["size_vars"], df["dtype"]]).transform("max")
    if (rank[ok] == best[ok]).all():
        return df
    return df[~ok | (rank == best)].reset_index(drop=True)


def complete_configs(df: pd.DataFrame, space) -> pd.DataFrame:
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


def recorded_gpu(cachefile: Path) -> str | None:
    """The GPU a Kernel Tuner cache under results/<gpu>/<workload>/ was measured on, as the store names it.
    (The cache's own device name is the host CPU's for host-code spaces, which the C backend runs.)
    The folder is one GPU's, so the first part that names a GPU answers; only its `gpu` column is read
    (every replay asks, and a strategy comparison replays hundreds of times)."""
    for part in sorted((Path(cachefile).parent / "evaluations").glob("*.parquet")):
        gpus = pd.read_parquet(io.BytesIO(part.read_bytes()), columns=["gpu"])["gpu"].dropna()
        if len(gpus):
            return str(gpus.iloc[0])
    return None


def load_baselines(workload: str | None = None, root: Path | None = None) -> pd.DataFrame:
    return read_parts(f"*/{workload or '*'}/baselines/*.parquet", root or results_root())
