"""`tuner best`: the best stored configuration for a GPU, size and dtype, with fallbacks that say so; the rows
it chooses among are tuner.answers.selection's."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from tuner import store
from tuner.answers.selection import (
    DegradedStoreError,
    NoAnswerError,
    all_failed,
    damaged_parts,
    failures_said,
    not_read_in_full,
    nothing_stored,
    select,
    stored_evaluations,
)
from tuner.errors import TunerError
from tuner.space import format_size
from tuner.store import confirmations as confirmation_choices
from tuner.store.gpu_choice import required_gpu
from tuner.store.schema import Degraded, collect
from tuner.workloads import Workload, get_workload

PROVENANCE = (
    "gpu",
    "compute_capability",
    "driver",
    "cuda",
    "backend",
    "compiler_options",
    "cpu_threads",  # CPU workloads: the logical CPUs and physical cores used, and the compiler
    "cpu_cores",
    "compiler",
    "kernel_hash",
    "package_version",
    "kernel_tuner_version",
    "git_commit",
    "campaign_id",
    "timestamp",
)


def best_row(
    rows: pd.DataFrame, maximize: bool, root: Path | None = None, confirmations: pd.DataFrame | None = None
) -> pd.Series:
    """Configs measured several times count by the median of their objective values; among near-ties that a
    confirmation measured again (tuner/campaign/confirmation.py; `confirmations` as tuner.store.confirmations.load
    reads them, else read here), its choice. The row returned is the chosen config's measurement nearest its
    median (the latest of equals), for its provenance, with that config's figures at the median (_at_median): the
    value, time and metrics `tuner results` shows for it."""
    per_config = store.config_medians(rows, maximize)
    config = per_config.index[0]
    confirmed = confirmation_choices.choice_for(rows, config, Path(root or store.results_root()), confirmations)
    if confirmed and confirmed[0] in per_config.index:
        config = confirmed[0]
    mine = rows[rows["config"] == config].sort_values("timestamp")
    distance = (mine["objective_value"] - per_config[config]).abs()
    row = mine.loc[distance[distance == distance.min()].index[-1]].copy()
    row["objective_value"], row["time_ms"], metrics = _at_median(mine)
    row["metrics"] = json.dumps(metrics)
    row["measurements"] = len(mine)
    row["confirmed_among"] = confirmed[1] if confirmed else 0
    return row


def _at_median(mine: pd.DataFrame) -> tuple[float, float, dict]:
    """One config's value, time and metrics at the median of its measurements: the middle one's (an odd
    count), else the mean of the two middle ones' (each figure alike, so that the value is the median the
    ranking and `tuner results` use, and time and metrics go with it)."""
    ranked = mine.sort_values("objective_value", kind="stable")
    n = len(ranked)
    middle = ranked.iloc[(n - 1) // 2 : n // 2 + 1]
    each = [json.loads(m) if isinstance(m, str) and m else {} for m in middle["metrics"]]
    metrics = {k: sum(m[k] for m in each) / len(each) for k in each[0] if all(k in m for m in each)}
    return float(middle["objective_value"].mean()), float(middle["time_ms"].mean()), metrics


def best(
    workload_name: str,
    size_text: str | None = None,
    dtype: str | None = None,
    gpu: str | None = None,
    root: Path | None = None,
    evaluations: pd.DataFrame | None = None,
    baselines: pd.DataFrame | None = None,
    confirmations: pd.DataFrame | None = None,
) -> dict:
    """The answer for one (GPU, size, dtype). Where a part or row of the store was left out (unreadable, or not
    as tuner.store.schema wants it), the answer says so: `degraded` names them and `fallback` gains "degraded"
    (given `evaluations`, `baselines` or `confirmations` (a caller asking for many sizes reads each once), what
    their own load left out is the caller's to gather: schema.collect)."""
    with collect() as degraded:
        answer = _best(workload_name, size_text, dtype, gpu, root, evaluations, baselines, confirmations)
    return with_degraded(answer, degraded)


def with_degraded(answer: dict, degraded: Degraded) -> dict:
    """`answer` saying what the store left out, if anything."""
    if degraded:
        kinds = [k for k in answer["fallback"].split("+") if k not in ("exact", "degraded")]
        answer["fallback"] = "+".join([*kinds, "degraded"])
        answer["degraded"] = degraded.as_dict()
    return answer


def _best(
    workload_name: str,
    size_text: str | None,
    dtype: str | None,
    gpu: str | None,
    root: Path | None,
    evaluations: pd.DataFrame | None,
    baselines: pd.DataFrame | None,
    confirmations: pd.DataFrame | None,
) -> dict:
    sel = select(workload_name, size_text, dtype, gpu, root, evaluations)
    if sel.ok.empty:
        raise NoAnswerError(f"{all_failed(sel)}: no config to answer (`tuner results` lists the failures)")
    workload, space, dtype, notes = sel.workload, sel.workload.space, sel.dtype, sel.notes
    row = best_row(sel.ok, space.maximize, root, confirmations)
    if row["confirmed_among"]:
        notes.append(f"chosen among {row['confirmed_among']} near-ties measured again side by side after the campaign")
    config = json.loads(row["config"])
    metrics = json.loads(row["metrics"])
    return {
        "workload": workload_name,
        "gpu": row["gpu"],
        "size": row["size"],
        "size_vars": json.loads(row["size_vars"]),
        "dtype": dtype,
        "config": config,
        "objective": space.objective,
        "value": float(row["objective_value"]),  # the median of the config's measurements, as are time and metrics
        "time_ms": float(row["time_ms"]),
        "metrics": metrics,
        "measurements": int(row["measurements"]),
        "baselines": _baselines(workload, row, metrics, root, baselines),
        "provenance": {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in PROVENANCE if k in row},
        "kernel_source": sel.kernel,
        "timing": sel.timing,
        "fallback": "+".join(sel.fallback) or "exact",
        "notes": notes,
    }


def _baselines(
    workload: Workload, row: pd.Series, metrics: dict, root: Path | None, baselines: pd.DataFrame | None
) -> dict:
    df = store.load_baselines(workload.name, root) if baselines is None else baselines
    if df.empty:
        return {}
    df = df[(df["gpu"] == row["gpu"]) & (df["size_vars"] == row["size_vars"]) & (df["dtype"] == row["dtype"])]
    out = {}
    for name, group in df.groupby("baseline"):
        # the reference timed in the best's own campaign (same machine, same session), else the latest
        same = group[group["campaign_id"] == row.get("campaign_id")] if "campaign_id" in group else group.iloc[:0]
        latest = (same if len(same) else group).sort_values("timestamp").iloc[-1]
        b_metrics = json.loads(latest["metrics"])
        out[name] = {
            "time_ms": float(latest["time_ms"]),
            "metrics": b_metrics,
            "ratio": {m: metrics[m] / v for m, v in b_metrics.items() if m in metrics and v},
        }
    return out


def best_per_gpu_and_size(
    workload_name: str,
    dtype: str | None = None,
    root: Path | None = None,
    *,
    size: str | None = None,
    gpu: str | None = None,
) -> list[dict]:
    """Every (GPU, size) with a successful measurement, each with its best config (for export); only `size`'s
    and only `gpu`'s where given."""
    return export_answers(workload_name, dtype, root, size=size, gpu=gpu)[0]


def export_answers(
    workload_name: str,
    dtype: str | None = None,
    root: Path | None = None,
    *,
    size: str | None = None,
    gpu: str | None = None,
    evaluations: pd.DataFrame | None = None,
    baselines: pd.DataFrame | None = None,
) -> tuple[list[dict], Degraded]:
    """best_per_gpu_and_size, with what the whole read left out (said once, not in each answer: each answer's
    `fallback` says "degraded" then). A (GPU, size, dtype) with no answer (every config of the current kernel
    source failed, or lies outside the space) is left out with a warning; asked for by `size`, an error.
    `evaluations`, `baselines`: the workload's, as stored_evaluations and store.load_baselines read them, from a
    caller that has read them already (`tuner report`); as for best, what their own load left out is the
    caller's to gather (schema.collect)."""
    with collect() as degraded:
        try:
            found = _per_gpu_and_size(workload_name, dtype, root, size, gpu, evaluations, baselines)
            answers = [with_degraded(a, degraded) for a in found]
        except DegradedStoreError as e:
            e.degraded = degraded.as_dict()
            raise
    for a in answers:
        a.pop("degraded", None)
    return answers, degraded


def _per_gpu_and_size(
    workload_name: str,
    dtype: str | None,
    root: Path | None,
    size: str | None,
    gpu: str | None,
    evaluations: pd.DataFrame | None,
    baselines: pd.DataFrame | None,
) -> list[dict]:
    workload = get_workload(workload_name)
    # select leaves out the times taken under an older protocol, saying so
    df = stored_evaluations(workload_name, root) if evaluations is None else evaluations
    if df.empty:
        raise nothing_stored(workload, root)
    dtypes = [workload.space.resolve_dtype(dtype)] if dtype else sorted(df["dtype"].unique())
    every = df[df["dtype"].isin(dtypes)]
    ok = every[every["status"] == "ok"]
    if ok.empty:
        raise TunerError(f"no successful {workload_name} measurement is stored for dtype {', '.join(dtypes)}")
    if gpu:  # an exported file holds what was asked for, or the command fails: no other GPU's or size's answers
        gpu = required_gpu(ok["gpu"], gpu, f"successful {workload_name}{' ' + dtypes[0] if dtype else ''}")
        every, ok = every[every["gpu"] == gpu], ok[ok["gpu"] == gpu]
    if size:
        ok = _at_export_size(workload, size, every, ok, gpu, root)
    base = store.load_baselines(workload_name, root) if baselines is None else baselines
    # completed once here for every answer: choice_for then finds nothing stale (it completed each answer's rows again)
    confirmed = store.complete_configs(
        confirmation_choices.load(workload_name, Path(root or store.results_root())), workload.space
    )
    out = []
    # each answer is drawn from the rows of its own GPU, size and dtype: selecting from all of them for each of
    # GEMM's 137 (GPU, size, dtype) was most of an export's (and a report's) time, and from its GPU's rows of its
    # dtype still half of it; an answer of a GPU, size and dtype stored needs no other rows (no fallback is taken)
    of_size = {key: rows for key, rows in df.groupby(["gpu", "size_vars", "dtype"])}
    for (gpu_name, measured, dt), _ in ok.groupby(["gpu", "size_vars", "dtype"]):
        try:
            answer = best(
                workload_name,
                format_size(json.loads(str(measured))),
                str(dt),
                gpu=str(gpu_name),
                root=root,
                evaluations=of_size[(gpu_name, measured, dt)],
                baselines=base,
                confirmations=confirmed,
            )
        except NoAnswerError as e:
            if size:
                raise
            warnings.warn(f"left out of the export: {e}", stacklevel=2)
            continue
        out.append(answer)
    return out


def _at_export_size(
    workload: Workload, size: str, every: pd.DataFrame, ok: pd.DataFrame, gpu: str | None, root: Path | None
) -> pd.DataFrame:
    """The successful rows of `size`; else an error that says whether it was measured (every config failed),
    may be in parts left out of the store (DegradedStoreError), or was never measured."""
    size_name, size_vars = workload.space.resolve_size(size, workload.parse_size)
    key = json.dumps(size_vars, sort_keys=True)
    at_size = ok[ok["size_vars"] == key]
    if len(at_size):
        return at_size
    what, on = f"{workload.name} {size_name}", f" on {gpu}" if gpu else ""
    failed = every[every["size_vars"] == key]
    if len(failed):
        raise NoAnswerError(f"{what} was measured{on}, but every config failed ({failures_said(failed)})")
    measured = "measured sizes: " + ", ".join(sorted(set(ok["size"].astype(str))))
    damaged = damaged_parts(workload.name, gpu, root)
    if damaged:
        raise DegradedStoreError(f"{what} was not found{on}, {not_read_in_full(damaged)}; {measured}")
    raise TunerError(f"{what} was never measured{on}; {measured}")


__all__ = ["best", "best_per_gpu_and_size", "best_row", "export_answers", "run_config"]


def run_config(
    workload_name: str,
    size: dict,
    dtype: str,
    given: dict | None = None,
    gpu: str | None = None,
    log: Callable[[str], object] = print,
) -> dict:
    """The config a program runs with (`tuner run`): the one given (every parameter that has no default in the
    space, and valid), else the best stored for this GPU and size, with its fallback (nearest size, other GPU)
    said through `log`."""
    if given:
        return get_workload(workload_name).space.checked(given, "--config", dtype)
    answer = best(workload_name, format_size(size), dtype, gpu=gpu)
    for note in answer["notes"]:
        log(f"note: {note}")
    return answer["config"]
