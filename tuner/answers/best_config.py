"""`tuner best`: the best stored configuration for a GPU, size and dtype, with fallbacks that say so.

Which rows answer (`select`, the one place for these rules; `tuner results`, `tuner export` and `tuner report`
read through it): the GPU's (else another's, saying so) at the size (else the nearest measured, saying so); of
those, the rows measured with the kernel source as it is now where there are any (else every row, with a note
that they were measured with an earlier version of it); and only configs the space as it is now holds."""

from __future__ import annotations

import json
import math
import os
import shlex
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tuner import store
from tuner.errors import TunerError
from tuner.formatting import config_text
from tuner.measure.provenance import local_device_name, source_hash
from tuner.space import Space, format_size, size_distance
from tuner.store import confirmations as confirmation_choices
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


class NoAnswerError(TunerError):
    """Rows were chosen, but none can answer: every config measured failed, or lies outside the space now."""


class DegradedStoreError(TunerError):
    """What was asked for is not in the store as read, and parts of it were left out (they may hold it): the
    command exits as an answer from a degraded store does (3). `degraded`: Degraded.as_dict(), where known."""

    degraded: dict | None = None


def device_word(space: Space) -> str:
    """What the measurements ran on, in words: host code built for the CPU runs there (Space.on_cpu)."""
    return "CPU" if space.on_cpu else "GPU"


def size_said(space: Space, size: dict) -> str:
    """A size as a note names it: its name in the space and its variables (`5k (n=5000,m=30000)`), else the
    variables alone."""
    name = next((n for n, v in space.sizes.items() if v == size), None)
    return f"{name} ({format_size(size)})" if name else format_size(size)


def tuner_command(workload: Workload, root: Path | None) -> str:
    """`tuner` with the options that found `workload` and the store: a workloads folder (--workloads or
    TUNER_WORKLOADS) is said again for a workload of that folder, and --results where the store was named."""
    words = ["tuner"]
    folder = os.environ.get("TUNER_WORKLOADS")
    if folder and Path(workload.space.path).resolve().is_relative_to(Path(folder).resolve()):
        words += ["--workloads", shlex.quote(folder)]
    if root is not None:
        words += ["--results", shlex.quote(str(root))]
    return " ".join(words)


def nothing_stored(workload: Workload, root: Path | None) -> TunerError:
    return TunerError(
        f"nothing stored for {workload.name}: run `{tuner_command(workload, root)} tune {workload.name}` first"
    )


def _nearest_size(workload: Workload, size: dict, measured: dict) -> tuple[str, str]:
    """The measured size closest to `size`: by the workload's own features where it has them (spmv: a
    matrix's rows and nonzeros per row), else by log-distance of the size variables; of two as close (2^24
    between 2^23 and 2^25), the smaller, whatever order the parts were read in."""
    by_features = getattr(workload, "nearest_size", None)
    if by_features is not None:
        key = by_features(size, measured)
        if key is not None:
            return key, " by features"

    def closeness(key: str) -> tuple:
        return round(size_distance(measured[key], size), 9), math.prod(measured[key].values()), key

    return min(measured, key=closeness), ""


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


@dataclass
class Selection:
    """The stored rows that answer for one (GPU, size, dtype), and how they were chosen."""

    workload: Workload
    size_name: str
    size: dict
    dtype: str
    rows: pd.DataFrame  # every status, of the chosen GPU and size, kernel source and space (module docstring)
    notes: list = field(default_factory=list)
    fallback: list = field(default_factory=list)  # "other-gpu", "nearest-size"
    root: Path | None = None  # the results directory (None: the default)
    # the kernel source the rows were measured with: {"hash": now, "current": whether they are its, "measured_with"}
    kernel: dict | None = None
    # where another size answers: the note saying why, and the parts left out of the store that may hold the
    # size asked for ({path: why})
    size_note: str = ""
    may_hold: dict = field(default_factory=dict)

    @property
    def ok(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "ok"]

    def where(self) -> str:
        """`reduction n=1000 float32 on NVIDIA H100 80GB HBM3`"""
        first = self.rows.iloc[0]
        return f"{self.workload.name} {first['size']} {self.dtype} on {first['gpu']}"


def failures_said(rows: pd.DataFrame) -> str:
    """The failure classes of `rows` with their counts, commonest first: `timeout 2, compile 1`."""
    counts = rows.loc[rows["status"] != "ok", "status"].value_counts()
    return ", ".join(f"{status} {n}" for status, n in counts.items())


def select(
    workload_name: str,
    size_text: str | None = None,
    dtype: str | None = None,
    gpu: str | None = None,
    root: Path | None = None,
    evaluations: pd.DataFrame | None = None,
) -> Selection:
    """The rows for this GPU (else the GPU with the most successful measurements, saying so) and size (else
    the nearest measured one, saying so): the GPU is chosen on successful rows, the size on every row of it (a
    size whose every config failed was measured), then narrowed to the current kernel source's rows and the
    configs of the space (module docstring). A dtype with no successful row anywhere answers by its failures."""
    workload = get_workload(workload_name)
    space = workload.space
    size_name, size = space.resolve_size(size_text, workload.parse_size)
    dtype = space.resolve_dtype(dtype)
    df = store.load_evaluations(workload_name, root) if evaluations is None else evaluations
    if df.empty:
        raise nothing_stored(workload, root)
    every_workload = df[df["workload"] == workload_name]
    every = every_workload[every_workload["dtype"] == dtype]
    if every.empty:
        raise TunerError(f"no successful {workload_name} {dtype} measurement is stored")
    ok = every[every["status"] == "ok"]
    sel = Selection(workload, size_name, size, dtype, every.iloc[:0], root=root)
    chosen = _chosen_device(sel, every_workload, every, ok if len(ok) else every, gpu)
    on_device = every[every["gpu"] == chosen]
    key = _chosen_size(sel, on_device, ok[ok["gpu"] == chosen])
    rows, sel.kernel = _of_current_kernel(space, on_device[on_device["size_vars"] == key], sel.notes)
    sel.rows = _within_space(space, rows, dtype, sel.notes)
    if sel.rows.empty:
        raise NoAnswerError(
            f"every config stored for {workload_name} {rows['size'].iloc[0]} {dtype} on {chosen} lies outside "
            f"the space as it is now (a parameter value removed or a restriction tightened since): tune it again"
        )
    if sel.ok.empty:
        sel.notes.append(_all_failed(sel))
    return sel


def _chosen_device(
    sel: Selection, every_workload: pd.DataFrame, every: pd.DataFrame, pool: pd.DataFrame, gpu: str | None
) -> str:
    """The GPU (or CPU) to answer from, among `pool`'s: the one asked for (`gpu`, else this machine's) where
    it has some, else the one choose_gpu picks, with a note and the "other-gpu" fallback."""
    space = sel.workload.space
    wanted = _wanted_gpu(every_workload["gpu"], gpu, sel.notes) if gpu else local_device_name(space)
    chosen, found = choose_gpu(pool, wanted, sel.size)  # else the GPU with the most measurements at this size
    if found:
        return chosen
    sel.fallback.append("other-gpu")  # no GPU here (and none named) too: the answer is not for this machine
    device = device_word(space)
    others = sorted(set(pool["gpu"]) - {chosen})
    stored = (
        f"also stored: {', '.join(others)}; choose with --gpu"
        if others
        else f"the one {device} with {sel.dtype} stored"
    )
    if not wanted:
        why = f"no {device} found here"
    elif wanted in set(every["gpu"]):
        why = f"every {sel.dtype} measurement on {wanted} failed"
    else:  # the device may hold other dtypes of the workload: then it is this dtype it lacks
        why = f"nothing{f' {sel.dtype}' if wanted in set(every_workload['gpu']) else ''} measured on {wanted}"
    sel.notes.append(f"{why}; answering from {chosen} ({stored})")
    return chosen


def _chosen_size(sel: Selection, on_device: pd.DataFrame, ok_on_device: pd.DataFrame) -> str:
    """The size's key (`size_vars`) to answer from: the one asked for where the device has rows of it, of any
    status; else the nearest with a successful row (or any row, where none has), with a note."""
    key = json.dumps(sel.size, sort_keys=True)
    if (on_device["size_vars"] == key).any():
        return key
    candidates = ok_on_device if len(ok_on_device) else on_device
    measured = {k: json.loads(k) for k in candidates["size_vars"].unique()}
    key, how = _nearest_size(sel.workload, sel.size, measured)
    sel.fallback.append("nearest-size")
    gpu = str(on_device["gpu"].iloc[0])
    sel.may_hold = damaged_parts(sel.workload.name, gpu, sel.root)
    sel.size_note = _size_note(sel, gpu, how, measured[key])
    sel.notes.append(sel.size_note)
    return key


def _size_note(sel: Selection, gpu: str, how: str, nearest: dict) -> str:
    """The note of a nearest-size answer: that the size was never measured on `gpu`, unless parts of that GPU's
    folder of the store could not be read (or rows of them were left out): then that the store could not be read
    in full, naming them, as they may hold it."""
    nearest_said = f"nearest measured{how}: {size_said(sel.workload.space, nearest)}"
    if not sel.may_hold:
        return f"size {sel.size_name} was never measured on {gpu}; {nearest_said}"
    return f"size {sel.size_name} was not found on {gpu}, {_not_read_in_full(sel.may_hold)}; {nearest_said}"


def damaged_parts(workload_name: str, gpu: str | None, root: Path | None) -> dict[str, str]:
    """The parts of the workload's evaluations (of one GPU's folder, where given) left out whole or in rows,
    with why: they may hold what was not found."""
    pattern = f"{store.gpu_slug(gpu) if gpu else '*'}/{workload_name}/evaluations/*.parquet"
    return store.read_store(pattern, Path(root or store.results_root())).degraded.reasons()  # parsed already: kept


def _not_read_in_full(damaged: dict[str, str]) -> str:
    named = "; ".join(f"{path}: {why}" for path, why in sorted(damaged.items()))
    return (
        f"but the store could not be read in full: left out, {named} (it may hold it: move it aside or copy it again)"
    )


def current_kernel_hash(space: Space) -> str | None:
    """The kernel source's hash as a campaign records it now (tuner.campaign.session); None where the source
    cannot be read."""
    try:
        return source_hash(space.source_text)
    except OSError:
        return None


def _of_current_kernel(space: Space, rows: pd.DataFrame, notes: list[str]) -> tuple[pd.DataFrame, dict | None]:
    """The rows measured with the kernel source as it is now, where there are any (another source's times and
    failures are not this one's); else every row, with a note: the built-in workloads' rows span several
    versions of their kernels, each adding configs with defaults that compile as before, and a user's first
    campaign after an edit has none of the new source's yet. And what the rows were measured with."""
    current = current_kernel_hash(space)
    if current is None or "kernel_hash" not in rows or rows.empty:
        return rows, None
    hashes = rows["kernel_hash"].astype(str)
    now = bool((hashes == current).any())
    if now:
        earlier = set(rows.loc[hashes != current, "config"]) - set(rows.loc[hashes == current, "config"])
        if earlier:  # incomplete as an answer: said
            notes.append(
                f"{len(earlier)} config(s) measured only with an earlier version of the kernel source are left out "
                f"(tune again to measure them with this one)"
            )
        rows, hashes = rows[hashes == current], hashes[hashes == current]
    else:
        measured = ", ".join(h for h in sorted(set(hashes)) if h not in ("", "nan", "None")) or "none recorded"
        notes.append(
            f"the stored measurements were taken with an earlier version of the kernel source "
            f"({space.kernel_source.name} hashes {current} now; measured with {measured}): tune again to measure "
            f"this one"
        )
    return rows, {"hash": current, "current": now, "measured_with": sorted(set(hashes))}


def in_space(space: Space, config: str, dtype: str) -> bool:
    """Whether the space as it is now holds `config` (its values, restrictions and block size; Space.checked)."""
    try:
        space.checked(json.loads(config), dtype=dtype)
    except TunerError:
        return False
    return True


def _within_space(space: Space, rows: pd.DataFrame, dtype: str, notes: list[str]) -> pd.DataFrame:
    """The rows of configs the space holds now (a value removed or a restriction tightened since they were
    measured leaves some out), with a note where the best stored config is one of those left out."""
    outside = [str(c) for c in rows["config"].unique() if not in_space(space, str(c), dtype)]
    if not outside:
        return rows
    ok = rows[rows["status"] == "ok"]
    leader = str(store.config_medians(ok, space.maximize).index[0]) if len(ok) else ""
    if leader in outside:
        notes.append(
            f"the best stored config, {config_text(json.loads(leader))}, lies outside the space as it is now (a "
            f"parameter value removed or a restriction tightened since it was measured): answering from the configs "
            f"within it ({len(outside)} stored config(s) left out)"
        )
    return rows[~rows["config"].isin(outside)]


def _all_failed(sel: Selection) -> str:
    configs = sel.rows["config"].nunique()
    return f"{sel.where()} was measured, but every config failed ({configs} config(s): {failures_said(sel.rows)})"


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
    if sel.ok.empty:
        raise NoAnswerError(f"{_all_failed(sel)}: no config to answer (`tuner results` lists the failures)")
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
) -> tuple[list[dict], Degraded]:
    """best_per_gpu_and_size, with what the whole read left out (said once, not in each answer: each answer's
    `fallback` says "degraded" then). A (GPU, size, dtype) with no answer (every config of the current kernel
    source failed, or lies outside the space) is left out with a warning; asked for by `size`, an error."""
    with collect() as degraded:
        try:
            answers = [with_degraded(a, degraded) for a in _per_gpu_and_size(workload_name, dtype, root, size, gpu)]
        except DegradedStoreError as e:
            e.degraded = degraded.as_dict()
            raise
    for a in answers:
        a.pop("degraded", None)
    return answers, degraded


def _per_gpu_and_size(
    workload_name: str, dtype: str | None, root: Path | None, size: str | None, gpu: str | None
) -> list[dict]:
    workload = get_workload(workload_name)
    df = store.load_evaluations(workload_name, root)
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
    base = store.load_baselines(workload_name, root)
    confirmed = confirmation_choices.load(workload_name, Path(root or store.results_root()))
    out = []
    for (gpu_name, measured, dt), _ in ok.groupby(["gpu", "size_vars", "dtype"]):
        try:
            answer = best(
                workload_name,
                format_size(json.loads(str(measured))),
                str(dt),
                gpu=str(gpu_name),
                root=root,
                evaluations=df,
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
        raise DegradedStoreError(f"{what} was not found{on}, {_not_read_in_full(damaged)}; {measured}")
    raise TunerError(f"{what} was never measured{on}; {measured}")


__all__ = [
    "DegradedStoreError",
    "NoAnswerError",
    "Selection",
    "best",
    "best_per_gpu_and_size",
    "best_row",
    "export_answers",
    "select",
]


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
