"""Warm starts: the configurations a search tries first, taken from what the store already knows about the
same workload at other problem sizes, dtypes or GPUs. The best configs of a neighbouring size are usually
good here too (the same kernel meets the same hardware), so a search that starts from them skips most of
its exploration; a search from scratch has to find that region first."""

from __future__ import annotations

import json

import pandas as pd

from tuner.space import Space, size_distance
from tuner.store import config_medians


def warm_configs(evaluations: pd.DataFrame, space: Space, size: dict, dtype: str, gpu: str | None,
                 count: int = 5, per_recording: int = 3) -> list[dict]:
    """Up to `count` configs to try first for (size, dtype, gpu): the `per_recording` best of each other
    recorded (size, dtype, gpu) of this workload, nearest recordings first (same GPU, then same dtype, then
    the nearest size), taken round-robin over the three nearest recordings so no single one dominates. The
    target itself is left out: a warm start is for what was never measured. Configs that are not valid in
    the current space (an older space, say) are skipped."""
    if evaluations.empty:
        return []
    ok = evaluations[(evaluations["status"] == "ok") & (evaluations["workload"] == space.workload)]
    target = json.dumps(size, sort_keys=True)
    ok = ok[~((ok["size_vars"] == target) & (ok["dtype"] == dtype) & ((ok["gpu"] == gpu) if gpu else True))]
    if ok.empty:
        return []
    recordings = []
    for (size_vars, rec_dtype, rec_gpu), rows in ok.groupby(["size_vars", "dtype", "gpu"]):
        ranked = config_medians(rows, space.maximize).index[:per_recording]
        key = (rec_gpu != gpu, rec_dtype != dtype, size_distance(size, json.loads(size_vars)))
        recordings.append((key, [json.loads(c) for c in ranked]))
    recordings.sort(key=lambda r: r[0])
    nearest = [configs for _, configs in recordings[:3]]
    out, seen = [], set()
    for rank in range(per_recording):
        for configs in nearest:
            if rank >= len(configs):
                continue
            config = {k: configs[rank].get(k) for k in space.params}
            key = json.dumps(config, sort_keys=True)
            valid = all(config[k] in values for k, values in space.params.items()) and space.is_valid(config)
            if valid and key not in seen:
                seen.add(key)
                out.append(config)
    return out[:count]
