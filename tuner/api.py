"""The Python API, for notebooks and scripts: the same campaigns and answers as the CLI (which is a thin
layer over these), returning plain dicts and pandas DataFrames."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd


def tune(
    workload: str,
    *,
    size: str | None = None,
    dtype: str | None = None,
    strategy: str | None = None,
    budget: int | str | None = None,
    simulate: bool = False,
    results: str | Path | None = None,
    quiet: bool = True,
    **options: Any,
) -> dict:
    """Run a campaign (or replay one with `simulate=True`) and return its outcome: the best config, its value,
    how many configs were evaluated and measured, failures by class. `budget`: evaluations (150) or a
    duration ("10m"); `options`: any other field of tuner.campaign.request.CampaignRequest (backend, device,
    seed, timeout, patience, storage, warm_start, ...)."""
    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest, parse_budget

    max_evals, time_limit = parse_budget(None if budget is None else str(budget))
    if strategy is not None:
        options["strategy"] = strategy
    req = CampaignRequest(
        workload=workload,
        size=size,
        dtype=dtype,
        max_evals=max_evals,
        time_limit=time_limit,
        simulate=simulate,
        results=Path(results) if results else None,
        quiet=quiet,
        **options,
    )
    return asdict(run_campaign(req))


def best(
    workload: str,
    size: str | None = None,
    dtype: str | None = None,
    gpu: str | None = None,
    *,
    results: str | Path | None = None,
) -> dict:
    """The best stored config for a GPU (default: this machine's), size and dtype, as `tuner best --json`
    answers: config, objective value, time, baselines, provenance, and the fallback taken (nearest size,
    another GPU) with notes saying so."""
    from tuner.answers.best_config import best as best_answer

    return best_answer(workload, size, dtype, gpu=gpu, root=Path(results) if results else None)


def results(
    workload: str,
    *,
    size: str | None = None,
    dtype: str | None = None,
    gpu: str | None = None,
    results: str | Path | None = None,
) -> pd.DataFrame:
    """Every stored evaluation of `workload` (one row per measurement: config, status, times, objective,
    metrics, provenance), narrowed to a size, dtype and GPU where given. The GPU as `best` takes it: its stored
    name, its folder's (`nvidia-h200`) or a word of it (`h200`). TunerError for a workload, size or dtype the
    workload does not have, or a GPU it has nothing stored on. The columns: docs/store.md."""
    from tuner.store import load_evaluations
    from tuner.store.gpu_choice import required_gpu
    from tuner.workloads import get_workload

    w = get_workload(workload)  # an unknown workload, size or dtype is an error, not an empty table
    sizes = w.space.resolve_size(size, w.parse_size) if size is not None else None
    dtype = w.space.resolve_dtype(dtype) if dtype is not None else None
    df = load_evaluations(workload, Path(results) if results else None)
    stored: list[str] = [] if df.empty else [str(g) for g in df["gpu"].unique()]
    named = required_gpu(stored, gpu, workload) if gpu is not None else None
    if df.empty:
        return df
    if sizes is not None:
        df = df[(df["size"] == sizes[0]) | (df["size_vars"] == json.dumps(sizes[1], sort_keys=True))]
    if dtype is not None:
        df = df[df["dtype"] == dtype]
    if named is not None:
        df = df[df["gpu"] == named]
    return df.reset_index(drop=True)


def load_store(results: str | Path | None = None) -> pd.DataFrame:
    """Every evaluation in the store (default: the project's results folder), of every workload and GPU."""
    from tuner.store import load_evaluations

    return load_evaluations(None, Path(results) if results else None)
