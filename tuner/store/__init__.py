"""The store stage: Parquet parts under results/<gpu>/<workload>/, one row per evaluation (paths, parts), and
the rows a question needs as the current space reads them (rows)."""

from tuner.store.parts import PartWriter, read_parts, read_store, recorded_gpu, write_atomically, write_parquet
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
from tuner.store.rows import (
    canonical_config,
    complete_configs,
    config_medians,
    load_baselines,
    load_evaluations,
    same_protocol,
    timing_matches,
    without_superseded,
)
from tuner.store.schema import Degraded, StoreRead, collect

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
    "results_root",
    "safe_name",
    "same_protocol",
    "timing_matches",
    "without_superseded",
    "workload_dir",
    "write_parquet",
]
