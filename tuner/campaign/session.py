"""A campaign's session on one GPU: its measuring process started, the GPU it landed on, the vendor baselines
it measured stored, and where each measured row goes (the campaign's Parquet part, Kernel Tuner's cache).
Rows measured before with the same code, GPU and protocol are resumed from the store, not measured again."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tuner import store
from tuner.campaign.request import CampaignRequest
from tuner.measure import kt
from tuner.measure.protocol import config_key
from tuner.measure.provenance import kernel_hash, software
from tuner.measure.runner import IsolatedRunner
from tuner.space.model import row_time

if TYPE_CHECKING:
    import pandas as pd

    from tuner.space import Space
    from tuner.workloads import Workload

    # Kernel Tuner's cache file of a session: a path, or a function of the GPU's name (None: the shared one)
    CacheFile = Path | str | Callable[[str], Path | str] | None


@dataclass
class Session:
    """A measuring process started on one GPU, and where the rows it measures go."""

    runner: IsolatedRunner
    gpu: dict
    wdir: Path
    common: dict  # the campaign's columns of every row
    provenance: dict
    writer: store.PartWriter
    baselines: dict


def open_session(
    req: CampaignRequest,
    workload: Workload,
    size_name: str,
    size: dict,
    dtype: str,
    root: Path,
    campaign_id: str,
    *,
    part: str | None = None,
    cachefile: CacheFile = None,
    check_gpu: Callable[[dict], object] | None = None,
    env: dict | None = None,
    launched: IsolatedRunner | None = None,
) -> Session:
    """Start the measuring process, learn its GPU, store the baselines it measured, and open the Parquet part
    (evaluations/<part or campaign_id>.parquet) and Kernel Tuner's cache file (a path, or a function of the
    GPU's name; default: the shared one of this GPU, size and dtype). `check_gpu(gpu)` may refuse the GPU
    before anything is written. `launched`: a measuring process launched early for this session (used if it is
    the one the session needs, else shut down)."""
    runner = IsolatedRunner.for_campaign(
        req.workload, size, dtype, req.backend, req.device, timeout=req.timeout, env=env, target=req.measure_target
    )
    if launched is not None:
        if launched.same_as(runner):
            runner = launched
        else:
            launched.shutdown()
    setup = runner.start()  # tells us which GPU we are on, before anything is written
    try:
        space = workload.space
        gpu = setup["gpu"]
        if check_gpu is not None:
            check_gpu(gpu)
        wdir = store.workload_dir(root, gpu["gpu"], req.workload)
        wdir.mkdir(parents=True, exist_ok=True)
        runner.spec.baseline_repeats = 0  # measured once, above; restarted workers skip them
        cachefile = cachefile(gpu["gpu"]) if callable(cachefile) else cachefile
        cachefile = cachefile or store.cache_path(root, gpu["gpu"], req.workload, size_name, dtype)
        kt.align_cache(cachefile, space)
        runner.use_cachefile(str(cachefile))
        provenance = {
            **gpu,
            "backend": kt.effective_backend(space, req.backend),
            "timing": setup.get("timing", "plain"),
            "compiler_options": json.dumps(space.build_options(dtype)),
            "kernel_hash": kernel_hash(space),
            **software(),
        }
        common = {
            "campaign_id": campaign_id,
            "workload": req.workload,
            "kernel": space.kernel_name,
            "size": size_name,
            "size_vars": json.dumps(size, sort_keys=True),
            "dtype": dtype,
        }
        _store_baselines(workload, setup["baselines"], size, dtype, wdir, common, provenance, part=part)
        writer = store.PartWriter(wdir / "evaluations" / f"{part or campaign_id}.parquet")
        return Session(runner, gpu, wdir, common, provenance, writer, setup["baselines"])
    except BaseException:  # nothing keeps a measuring process running for a session that did not open
        runner.shutdown()
        raise


def known_rows(
    previous: pd.DataFrame, space: Space, common: dict, provenance: dict, timeout: float | None = None
) -> dict:
    """Rows measured before with the same GPU, kernel source, compiler options, backend and parameters: resumed,
    not re-run.
    A time taken another way (another number of launches, or another timing protocol: tuner/measure/timing.py) is
    measured again, and so is a timeout under a shorter `timeout` than this one's (or an unrecorded one)."""
    if previous.empty:
        return {}
    same = previous[
        (previous["gpu"] == provenance["gpu"])
        & (previous["size_vars"] == common["size_vars"])
        & (previous["dtype"] == common["dtype"])
        & (previous["kernel_hash"] == provenance["kernel_hash"])
        & (previous["compiler_options"] == provenance["compiler_options"])
        & (previous["backend"] == provenance["backend"])
    ]
    known = {}
    for rec in same.to_dict("records"):
        if rec["status"] == "ok" and not store.same_protocol(rec, space, provenance.get("timing")):
            continue
        if rec["status"] == "timeout" and timeout and not rec.get("timeout_s", 0) >= timeout:  # NaN: unrecorded
            continue
        config = json.loads(rec["config"])
        if set(config) != set(space.params):  # measured with parameters the space has no more, or lacks one it has
            continue
        values = [config[k] for k in space.params]
        row = {
            **config,
            "status": rec["status"],
            "error": rec["error"],
            "compile_time": rec["compile_ms"],
            "verification_time": rec["verify_ms"],
            "benchmark_time": rec["benchmark_ms"],
        }
        if rec["status"] == "ok":
            row["times"] = list(rec["times"])
        known[config_key(values)] = row
    return known


def store_row(
    row: dict, space: Space, size: dict, dtype: str, common: dict, provenance: dict, req: CampaignRequest
) -> dict:
    config = {k: row[k] for k in space.params}
    ok = row["status"] == "ok"
    times = list(row.get("times") or []) if ok else []
    metrics = space.compute_metrics(row, size, dtype) if ok else {}
    return {
        **common,
        "config": store.canonical_config(config),
        **{f"p_{k}": v for k, v in config.items()},
        "status": row["status"],
        "error": row.get("error", ""),
        "times": times,
        "time_ms": row_time(row) if times else float("nan"),
        "objective": space.objective,
        "objective_value": space.objective_value(row, size, dtype) if ok else float("nan"),
        "metrics": json.dumps(metrics),
        "compile_ms": float(row.get("compile_time", 0.0)),
        "verify_ms": float(row.get("verification_time", 0.0)),
        "benchmark_ms": float(row.get("benchmark_time", 0.0)),
        "timeout_s": float(req.timeout) if req.timeout else float("nan"),  # a timeout under a longer one is re-run
        "strategy": req.strategy,
        "seed": req.seed if req.seed is not None else -1,
        "timestamp": datetime.now(UTC).isoformat(),
        **provenance,
    }


def _store_baselines(
    workload: Workload,
    baselines: dict,
    size: dict,
    dtype: str,
    wdir: Path,
    common: dict,
    provenance: dict,
    part: str | None = None,
) -> None:
    if not baselines:
        return
    writer = store.PartWriter(wdir / "baselines" / f"{part or common['campaign_id']}.parquet")
    for name, times in baselines.items():
        median = statistics.median(times)
        writer.rows.append(
            {
                **common,
                "baseline": name,
                "times": list(times),
                "time_ms": median,
                "metrics": json.dumps(workload.baseline_metrics(name, median, size, dtype)),
                "timestamp": datetime.now(UTC).isoformat(),
                **provenance,
            }
        )
    writer.flush()


def baseline_medians(baselines: dict | None) -> dict:
    return {name: statistics.median(times) for name, times in (baselines or {}).items()}
