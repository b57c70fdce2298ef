"""The store stage: Parquet parts under results/<gpu>/<workload>/, one row per evaluation (paths, parts), and
the rows a question needs as the current space reads them (rows).

The names of parts, rows and schema are imported when first used (PEP 562): they need pandas and pyarrow
(about a second), which a light name (results_root, the paths) does without."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tuner.atomic import write_atomically
from tuner.store.paths import (
    cache_path,
    checked_results_folder,
    gpu_slug,
    new_campaign_id,
    read_roots,
    results_root,
    safe_name,
    workload_dir,
)

if TYPE_CHECKING:
    from tuner.store.parts import PartWriter, read_parts, read_store, recorded_gpu, write_parquet
    from tuner.store.rows import (
        canonical_config,
        complete_configs,
        config_medians,
        load_baselines,
        load_evaluations,
        recorded_timing,
        same_protocol,
        timing_matches,
        without_superseded,
    )
    from tuner.store.schema import Degraded, StoreRead, collect

# the heavy names, by the module that defines them
_LAZY = {
    **dict.fromkeys(["PartWriter", "read_parts", "read_store", "recorded_gpu", "write_parquet"], "tuner.store.parts"),
    **dict.fromkeys(
        [
            "canonical_config",
            "complete_configs",
            "config_medians",
            "load_baselines",
            "load_evaluations",
            "recorded_timing",
            "same_protocol",
            "timing_matches",
            "without_superseded",
        ],
        "tuner.store.rows",
    ),
    **dict.fromkeys(["Degraded", "StoreRead", "collect"], "tuner.store.schema"),
}


def __getattr__(name: str) -> Any:
    """A heavy name, its module imported now (and the name kept here: asked once)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Degraded",
    "StoreRead",
    "collect",
    "read_store",
    "write_atomically",
    "PartWriter",
    "cache_path",
    "canonical_config",
    "checked_results_folder",
    "complete_configs",
    "config_medians",
    "gpu_slug",
    "load_baselines",
    "load_evaluations",
    "new_campaign_id",
    "read_parts",
    "read_roots",
    "recorded_gpu",
    "recorded_timing",
    "results_root",
    "safe_name",
    "same_protocol",
    "timing_matches",
    "without_superseded",
    "workload_dir",
    "write_parquet",
]
