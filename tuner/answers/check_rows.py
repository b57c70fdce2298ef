"""What the regression gate reads of the store besides its baselines: each checked workload's evaluations (and
confirmations), once, for the GPUs, sizes and dtypes of its baselines: the times a planted config is replayed
from (check_replay), and the stored best config a baseline's is compared with (check.note_stored_best)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tuner import store
from tuner.formatting import config_text
from tuner.space import Space
from tuner.store.schema import record
from tuner.workloads import get_workload


@dataclass
class _Read:
    """StoreRows' read of one workload: its successful evaluations (of its baselines' GPUs, sizes and dtypes),
    those by (GPU, size, dtype), its confirmations by the same, and what the read of the evaluations left out."""

    rows: pd.DataFrame
    groups: dict[tuple, pd.DataFrame]
    confirmations: dict[tuple, pd.DataFrame]
    left_out: store.Degraded


class StoreRows:
    """The evaluations (and confirmations) of each workload checked, read once per workload and only for the
    GPUs, sizes and dtypes of its baselines: the times a planted config is replayed from (check_replay), and the
    stored best config of each baseline's GPU, size and dtype, which `tuner best` and `tuner export` answer
    (stored_best). Reading them adds nothing to the check's `degraded` (what a check leaves out is its
    baselines): a plant, whose times come from them, records what its read left out (record_left_out)."""

    def __init__(self, baselines: pd.DataFrame, root: Path) -> None:
        self.root = root
        self.baselines = baselines
        self._read: dict[str, _Read] = {}

    def _of(self, workload: str) -> _Read:
        if workload not in self._read:
            found = store.read_store(f"*/{workload}/evaluations/*.parquet", self.root)
            rows, groups = found.frame, {}
            if not rows.empty:
                mine = self.baselines[self.baselines["workload"] == workload]
                keys = set(_keyed(mine["gpu"], mine["size_vars"].map(_canonical_size), mine["dtype"]))
                sizes = {sv: _canonical_size(sv) for sv in rows["size_vars"].unique()}
                rows = rows.assign(size_key=rows["size_vars"].map(sizes))  # sizes told apart as JSON, not text
                rows = rows[_keyed(rows["gpu"], rows["size_key"], rows["dtype"]).isin(keys)]
                space = get_workload(workload).space
                rows = store.without_superseded(store.complete_configs(rows, space), space)
                rows = rows[rows["status"] == "ok"]
                groups = {k: group for k, group in rows.groupby(["gpu", "size_key", "dtype"], sort=False)}
            confirmations = store.read_store(f"*/{workload}/confirmations/*.parquet", self.root).frame
            confirmed = {}  # by (GPU, size, dtype): best_row reads each baseline's alone, not every one again
            if not confirmations.empty:
                sizes = {sv: _canonical_size(sv) for sv in confirmations["size_vars"].unique()}
                confirmations = confirmations.assign(size_key=confirmations["size_vars"].map(sizes))
                confirmed = dict(iter(confirmations.groupby(["gpu", "size_key", "dtype"], sort=False)))
            self._read[workload] = _Read(rows, groups, confirmed, found.degraded)
        return self._read[workload]

    def evaluations(self, workload: str) -> pd.DataFrame:
        """The successful evaluations of `workload` on its baselines' GPUs, sizes and dtypes."""
        return self._of(workload).rows

    def record_left_out(self, workload: str) -> None:
        """What the read of `workload`'s evaluations left out, to the schema.collect() around the check."""
        left_out = self._of(workload).left_out
        if left_out:
            record(left_out)

    def timing_of(self, base: dict, config: dict, space: Space) -> str | None:
        """How the stored rows of `config` on the baseline's GPU, size and dtype were timed (their `timing`; "plain"
        where they do not say), as a recording of them replays their times; None where no row, or rows timed in
        more than one way, hold it."""
        ok = self._of(base["workload"]).groups.get((base["gpu"], _canonical_size(base["size_vars"]), base["dtype"]))
        if ok is None or ok.empty:
            return None
        mine = ok[ok["config"] == store.canonical_config(space.complete(config))]
        timings = {store.recorded_timing(t) for t in (mine["timing"] if "timing" in mine else [None])}
        return timings.pop() if len(mine) and len(timings) == 1 else None

    def stored_best(self, base: dict, space: Space) -> tuple[dict, str] | None:
        """Where the baseline's config is no longer the best stored for its GPU, size and dtype (a later campaign
        found a better one: `tuner best` and `tuner export` answer it, and the gate checks a config no longer
        shipped): that config, and a note saying so. None where it still is, or nothing is stored there."""
        read = self._of(base["workload"])
        key = (base["gpu"], _canonical_size(base["size_vars"]), base["dtype"])
        ok = read.groups.get(key)
        if ok is None or ok.empty:
            return None
        from tuner.answers.best_config import best_row

        confirmations = read.confirmations.get(key, pd.DataFrame())
        best = json.loads(best_row(ok, space.maximize, self.root, confirmations)["config"])
        own = space.complete(json.loads(base["config"]))
        if best == own:
            return None
        changed = {k: v for k, v in best.items() if own.get(k, object()) != v}
        had = {k: own[k] for k in changed if k in own}
        in_part = ""
        if read.left_out:
            left = [*read.left_out.parts, *read.left_out.rows]
            in_part = f" (from a store read in part: {', '.join(sorted(left))} left out)"
        return best, (
            f"the baseline's config is no longer the stored best on {base['gpu']} at {base['size']} "
            f"{base['dtype']}: `tuner best` answers {config_text(changed)}"
            + (f" (the baseline has {config_text(had)})" if had else "")
            + f"{in_part}; refresh with `tuner baseline {base['workload']} --size {base['size']} --dtype {base['dtype']}`"
        )


def _keyed(gpu: pd.Series, size: pd.Series, dtype: pd.Series) -> pd.Series:
    """(GPU, size, dtype) as one text per row, to match many rows at once."""
    return gpu.astype(str) + "\0" + size.astype(str) + "\0" + dtype.astype(str)


def _canonical_size(size_vars: str) -> str:
    return json.dumps(json.loads(size_vars), sort_keys=True)
