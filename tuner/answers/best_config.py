"""`tuner best`: the best stored configuration for a GPU, size and dtype, with fallbacks that say so."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tuner import store
from tuner.campaign import confirmation
from tuner.errors import TunerError
from tuner.measure.provenance import local_device_name
from tuner.space import format_size, size_distance
from tuner.store.gpu_choice import choose_gpu, named_gpu, required_gpu
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


def _nearest_size(workload: Workload, size: dict, measured: dict) -> tuple[str, str]:
    """The measured size closest to `size`: by the workload's own features where it has them (spmv: a
    matrix's rows and nonzeros per row), else by log-distance of the size variables."""
    by_features = getattr(workload, "nearest_size", None)
    if by_features is not None:
        key = by_features(size, measured)
        if key is not None:
            return key, " by features"
    return min(measured, key=lambda k: size_distance(measured[k], size)), ""


def best_row(
    rows: pd.DataFrame, maximize: bool, root: Path | None = None, confirmations: pd.DataFrame | None = None
) -> pd.Series:
    """Configs measured several times count by the median of their objective values; among near-ties that a
    confirmation measured again (tuner/confirmation.py; `confirmations` as confirmation.load reads them, else read
    here), its choice. The row returned is the chosen config's measurement at that median (for an even count, the
    nearer of the two middle ones)."""
    per_config = store.config_medians(rows, maximize)
    config = per_config.index[0]
    confirmed = confirmation.choice_for(rows, config, Path(root or store.results_root()), confirmations)
    if confirmed and confirmed[0] in per_config.index:
        config = confirmed[0]
    # the config's measurement at its median (the latest of equals): its value, time, metrics and ratios to
    # the baselines then all come from one measurement, and agree
    mine = rows[rows["config"] == config].sort_values("timestamp")
    distance = (mine["objective_value"] - per_config[config]).abs()
    row = mine.loc[distance[distance == distance.min()].index[-1]].copy()
    row["measurements"] = len(mine)
    row["confirmed_among"] = confirmed[1] if confirmed else 0
    return row


@dataclass
class Selection:
    """The stored rows that answer for one (GPU, size, dtype), and how they were chosen."""

    workload: Workload
    size_name: str
    size: dict
    dtype: str
    rows: pd.DataFrame  # every status, of the chosen GPU and size
    notes: list = field(default_factory=list)
    fallback: list = field(default_factory=list)  # "other-gpu", "nearest-size"
    root: Path | None = None  # the results directory (None: the default)

    @property
    def ok(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "ok"]


def select(
    workload_name: str,
    size_text: str | None = None,
    dtype: str | None = None,
    gpu: str | None = None,
    root: Path | None = None,
    evaluations: pd.DataFrame | None = None,
) -> Selection:
    """The rows for this GPU (else the GPU with the most successful measurements, saying so) and size (else
    the nearest measured one, saying so); the choice is made on successful rows, then every row of it kept."""
    workload = get_workload(workload_name)
    space = workload.space
    size_name, size = space.resolve_size(size_text, workload.parse_size)
    dtype = space.resolve_dtype(dtype)
    df = store.load_evaluations(workload_name, root) if evaluations is None else evaluations
    if df.empty:
        raise TunerError(f"nothing stored for {workload_name}: run `tuner tune {workload_name}` first")
    every_workload = df[df["workload"] == workload_name]
    every = every_workload[every_workload["dtype"] == dtype]
    df = every[every["status"] == "ok"]
    if df.empty:
        raise TunerError(f"no successful {workload_name} {dtype} measurement is stored")

    notes: list[str] = []
    fallback: list[str] = []
    wanted_gpu = _wanted_gpu(every_workload["gpu"], gpu, notes) if gpu else local_device_name(space)
    chosen, found = choose_gpu(df, wanted_gpu, size)  # else the GPU with the most measurements at this size
    if not found:  # no GPU here (and none named) too: the answer is not for this machine
        fallback.append("other-gpu")
        others = sorted(set(df["gpu"]) - {chosen})
        stored = (
            f"also stored: {', '.join(others)}; choose with --gpu" if others else f"the one GPU with {dtype} stored"
        )
        # the GPU may hold other dtypes of the workload: then it is this dtype it lacks
        of = f" {dtype}" if wanted_gpu in set(every_workload["gpu"]) else ""
        why = f"nothing{of} measured on {wanted_gpu}" if wanted_gpu else "no GPU found here"
        notes.append(f"{why}; answering from {chosen} ({stored})")
    df = df[df["gpu"] == chosen]

    key = json.dumps(size, sort_keys=True)
    if not (df["size_vars"] == key).any():
        measured = {k: json.loads(k) for k in df["size_vars"].unique()}
        key, how = _nearest_size(workload, size, measured)
        fallback.append("nearest-size")
        notes.append(_size_note(workload_name, size_name, str(df["gpu"].iloc[0]), root, how, measured[key]))
    rows = every[(every["gpu"] == df["gpu"].iloc[0]) & (every["size_vars"] == key)]
    return Selection(workload, size_name, size, dtype, rows, notes, fallback, root)


def _size_note(workload_name: str, size_name: str, gpu: str, root: Path | None, how: str, nearest: dict) -> str:
    """The note of a nearest-size answer: that the size was never measured on `gpu`, unless parts of that GPU's
    folder of the store could not be read (or rows of them were left out): then that the store could not be read
    in full, naming them, as they may hold it."""
    nearest_said = f"nearest measured{how}: {format_size(nearest)}"
    pattern = f"{store.gpu_slug(gpu)}/{workload_name}/evaluations/*.parquet"
    left = store.read_store(pattern, Path(root or store.results_root())).degraded  # parsed already: kept
    damaged = dict(left.parts)
    for path, by_reason in left.rows.items():
        damaged.setdefault(path, "rows left out: " + ", ".join(f"{n} with {r}" for r, n in by_reason.items()))
    if not damaged:
        return f"size {size_name} was never measured on {gpu}; {nearest_said}"
    named = "; ".join(f"{path}: {why}" for path, why in sorted(damaged.items()))
    return (
        f"size {size_name} was not found on {gpu}, but the store could not be read in full: left out, {named} "
        f"(it may hold it: move it aside or copy it again); {nearest_said}"
    )


def _wanted_gpu(stored: pd.Series, gpu: str, notes: list[str]) -> str:
    """`gpu` as the store names it (tuner.store.gpu_choice.stored_gpu_name), a note where only some of its words
    named it; as given where it names no stored GPU (select then answers from another, saying which are stored)."""
    name, note = named_gpu(stored, gpu)
    notes.extend([note] if note else [])
    return name or gpu


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
    workload, space, dtype, notes = sel.workload, sel.workload.space, sel.dtype, sel.notes
    df = sel.ok

    row = best_row(df, space.maximize, root, confirmations)
    if row["confirmed_among"]:
        notes.append(f"chosen among {row['confirmed_among']} near-ties measured again side by side after the campaign")
    config = json.loads(row["config"])
    metrics = json.loads(row["metrics"])
    answer = {
        "workload": workload_name,
        "gpu": row["gpu"],
        "size": row["size"],
        "size_vars": json.loads(row["size_vars"]),
        "dtype": dtype,
        "config": config,
        "objective": space.objective,
        "value": float(row["objective_value"]),
        "time_ms": float(row["time_ms"]),
        "metrics": metrics,
        "measurements": int(row["measurements"]),
        "baselines": _baselines(workload, row, metrics, root, baselines),
        "provenance": {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in PROVENANCE if k in row},
        "fallback": "+".join(sel.fallback) or "exact",
        "notes": notes,
    }
    return answer


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
) -> tuple[list[dict], Degraded]:
    """best_per_gpu_and_size, with what the whole read left out (said once, not in each answer: each answer's
    `fallback` says "degraded" then)."""
    with collect() as degraded:
        answers = [with_degraded(a, degraded) for a in _per_gpu_and_size(workload_name, dtype, root, size, gpu)]
    for a in answers:
        a.pop("degraded", None)
    return answers, degraded


def _per_gpu_and_size(
    workload_name: str, dtype: str | None, root: Path | None, size: str | None, gpu: str | None
) -> list[dict]:
    workload = get_workload(workload_name)
    df = store.load_evaluations(workload_name, root)
    if df.empty:
        raise TunerError(f"nothing stored for {workload_name}: run `tuner tune {workload_name}` first")
    dtypes = [workload.space.resolve_dtype(dtype)] if dtype else sorted(df["dtype"].unique())
    ok = df[(df["status"] == "ok") & df["dtype"].isin(dtypes)]
    if ok.empty:
        raise TunerError(f"no successful {workload_name} measurement is stored for dtype {', '.join(dtypes)}")
    if gpu:  # an exported file holds what was asked for, or the command fails: no other GPU's or size's answers
        ok = ok[
            ok["gpu"] == required_gpu(ok["gpu"], gpu, f"successful {workload_name}{' ' + dtypes[0] if dtype else ''}")
        ]
    if size:
        size_name, size_vars = workload.space.resolve_size(size, workload.parse_size)
        at_size = ok[ok["size_vars"] == json.dumps(size_vars, sort_keys=True)]
        if at_size.empty:
            where = f" on {ok['gpu'].iloc[0]}" if gpu else ""
            raise TunerError(
                f"{workload_name} {size_name} was never measured{where}; measured sizes: "
                + ", ".join(sorted(set(ok["size"].astype(str))))
            )
        ok = at_size
    base = store.load_baselines(workload_name, root)
    confirmed = confirmation.load(workload_name, Path(root or store.results_root()))
    out = []
    for (gpu_name, measured, dt), _ in ok.groupby(["gpu", "size_vars", "dtype"]):
        out.append(
            best(
                workload_name,
                format_size(json.loads(str(measured))),
                str(dt),
                gpu=str(gpu_name),
                root=root,
                evaluations=df,
                baselines=base,
                confirmations=confirmed,
            )
        )
    return out


__all__ = ["Selection", "best", "best_per_gpu_and_size", "best_row", "export_answers", "select"]


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
