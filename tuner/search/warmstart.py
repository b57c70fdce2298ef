"""Warm starts: the configurations a search tries first, taken from what the store already knows about the
same workload at other problem sizes, dtypes or GPUs. The best configs of a neighbouring size are usually
good here too (the same kernel meets the same hardware), so a search that starts from them skips most of
its exploration; a search from scratch has to find that region first."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tuner import store
from tuner.space import Space, size_distance
from tuner.store import config_medians


def warm_evaluations(workload_name: str, root: Path | None = None, own: pd.DataFrame | None = None) -> pd.DataFrame:
    """What a warm start draws on: the workload's recordings (`own`, if the caller has read them already) and
    those of the workloads that ran the same program (Workload.shares_program_with), whose configs count here
    where they lie in this space."""
    from tuner.workloads import get_workload

    own = store.load_evaluations(workload_name, root) if own is None else own
    sharing = get_workload(workload_name).shares_program_with
    frames = [df for df in [own, *(store.load_evaluations(n, root) for n in sharing)] if not df.empty]
    if len(frames) > 1:
        return pd.concat(frames, ignore_index=True)
    return frames[0] if frames else own


def warm_configs(
    evaluations: pd.DataFrame,
    space: Space,
    size: dict,
    dtype: str,
    gpu: str | None,
    count: int = 5,
    per_recording: int = 3,
) -> list[dict]:
    """Up to `count` configs to try first for (size, dtype, gpu): the `per_recording` best of each other
    recorded (size, dtype, gpu) in `evaluations` (this workload's, and those of workloads sharing its program:
    warm_evaluations), nearest recordings first (same GPU, then same dtype, then the nearest size), taken
    round-robin over the three nearest recordings so no single one dominates. The target size itself is left
    out, whichever workload recorded it: a warm start is for what was never measured. Configs that are not
    valid in the current space (an older space, or a larger one of the same program) are skipped before the
    best of each recording are taken."""
    if evaluations.empty:
        return []
    ok = evaluations[evaluations["status"] == "ok"]
    target = json.dumps(size, sort_keys=True)
    ok = ok[~((ok["size_vars"] == target) & (ok["dtype"] == dtype) & ((ok["gpu"] == gpu) if gpu else True))]
    if ok.empty:
        return []

    # each stored config text read and checked once, not once a recording: the recordings share most of their
    # configs (GEMM's 8180 rows were 8180 checks, and each read its JSON once per parameter)
    checked: dict[str, dict | None] = {}

    def in_space(text: str) -> dict | None:
        """The config a stored text names, of this space's parameters; None where it is not valid here."""
        if text not in checked:
            stored = json.loads(text)
            config = {k: stored.get(k) for k in space.params}
            valid = all(config[k] in values for k, values in space.params.items()) and space.is_valid(config, dtype)
            checked[text] = config if valid else None
        return checked[text]

    recordings = []
    for (size_vars, rec_dtype, rec_gpu), rows in ok.groupby(["size_vars", "dtype", "gpu"]):
        ranked = (in_space(str(c)) for c in config_medians(rows, space.maximize).index)
        best = [c for c in ranked if c is not None][:per_recording]
        key = (rec_gpu != gpu, rec_dtype != dtype, size_distance(size, json.loads(str(size_vars))))
        if best:
            recordings.append((key, best))
    recordings.sort(key=lambda r: r[0])
    nearest = [configs for _, configs in recordings[:3]]
    out, seen = [], set()
    for rank in range(per_recording):
        for configs in nearest:
            if rank >= len(configs):
                continue
            text = json.dumps(configs[rank], sort_keys=True)
            if text not in seen:
                seen.add(text)
                out.append(configs[rank])
    return out[:count]
