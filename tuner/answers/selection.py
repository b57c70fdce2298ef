"""Which stored rows answer a question (`select`, the one place for these rules; `tuner best`, `tuner results`,
`tuner export` and `tuner report` read through it): the GPU's (else another's, saying so) at the size (else the
nearest measured, saying so); of those, the times taken the current way where there are any (times taken under an
older timing protocol left out, with a note saying how many: tuner.store.without_superseded); of those, the rows
measured with the kernel source as it is now where there are any (else every row, with a note that they were
measured with an earlier version of it); and only configs the space as it is now holds."""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Iterable, Sized
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tuner import store
from tuner.errors import TunerError
from tuner.formatting import config_text
from tuner.measure.provenance import kernel_hash, local_device_name
from tuner.space import Space, format_size, size_distance
from tuner.store.gpu_choice import choose_gpu, named_gpu
from tuner.vocabulary import PROTOCOL
from tuner.workloads import Workload, get_workload


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
    """The measured size closest to `size`: by the workload's own features where it has them
    (Workload.nearest_size), else by log-distance of the size variables; of two as close (2^24 between 2^23 and
    2^25), the smaller, whatever order the parts were read in."""
    key = workload.nearest_size(size, measured)
    if key is not None:
        return key, " by features"

    def closeness(key: str) -> tuple:
        return round(size_distance(measured[key], size), 9), math.prod(measured[key].values()), key

    return min(measured, key=closeness), ""


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
    # the timing protocol the rows were timed with, and the rows of the GPU, size and dtype left out as timed
    # under an older one: {"protocol": now, "measured_with", "left_out": a count, "left_out_with"} (protocol_note)
    timing: dict | None = None
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
    size whose every config failed was measured), then narrowed to the times taken the current way, the current
    kernel source's rows and the configs of the space (module docstring). A dtype with no successful row anywhere
    answers by its failures. `evaluations`: the workload's rows as stored_evaluations reads them (superseded times
    too, left out here with a note), or as store.load_evaluations does (left out already, without one)."""
    workload = get_workload(workload_name)
    space = workload.space
    size_name, size = space.resolve_size(size_text, workload.parse_size)
    dtype = space.resolve_dtype(dtype)
    df = stored_evaluations(workload_name, root) if evaluations is None else evaluations
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
    key = _chosen_size(sel, on_device, ok[ok["gpu"] == chosen], ok)
    rows, sel.timing = _of_current_protocol(space, on_device[on_device["size_vars"] == key], sel.notes)
    rows, sel.kernel = _of_current_kernel(space, rows, sel.notes)
    sel.rows = _within_space(space, rows, dtype, sel.notes)
    if sel.rows.empty:
        raise NoAnswerError(
            f"every config stored for {workload_name} {rows['size'].iloc[0]} {dtype} on {chosen} lies outside "
            f"the space as it is now (a parameter value removed or a restriction tightened since): tune it again"
        )
    if sel.ok.empty:
        sel.notes.append(all_failed(sel))
    return sel


def _chosen_device(
    sel: Selection, every_workload: pd.DataFrame, every: pd.DataFrame, pool: pd.DataFrame, gpu: str | None
) -> str:
    """The GPU (or CPU) to answer from, among `pool`'s: the one asked for (`gpu`, else this machine's) where
    it has some, else the one choose_gpu picks, with a note and the "other-gpu" fallback."""
    space = sel.workload.space
    wanted = _wanted_gpu(every_workload["gpu"].unique(), gpu, sel.notes) if gpu else local_device_name(space)
    chosen, found = choose_gpu(pool, wanted, sel.size)  # else the GPU with the most measurements at this size
    if found:
        return chosen
    # the most measurements counted as the answers count them: the times taken the current way
    chosen, _ = choose_gpu(store.without_superseded(pool, space), wanted, sel.size)
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


def _chosen_size(sel: Selection, on_device: pd.DataFrame, ok_on_device: pd.DataFrame, ok: pd.DataFrame) -> str:
    """The size's key (`size_vars`) to answer from: the one asked for where the device has rows of it, of any
    status; else the nearest with a successful row (or any row, where none has), with a note, and another that
    names the devices (of `ok`, every device's successful rows) that measured the size itself."""
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
    exact = json.dumps(sel.size, sort_keys=True)
    elsewhere = sorted(set(ok.loc[ok["size_vars"] == exact, "gpu"]) - {gpu})
    if elsewhere:  # the nearest size here, though this size itself was measured on another device
        sel.notes.append(f"size {sel.size_name} itself was measured on {', '.join(elsewhere)} (choose with --gpu)")
    return key


def _size_note(sel: Selection, gpu: str, how: str, nearest: dict) -> str:
    """The note of a nearest-size answer: that the size was never measured on `gpu`, unless parts of that GPU's
    folder of the store could not be read (or rows of them were left out): then that the store could not be read
    in full, naming them, as they may hold it."""
    nearest_said = f"nearest measured{how}: {size_said(sel.workload.space, nearest)}"
    if not sel.may_hold:
        return f"size {sel.size_name} was never measured on {gpu}; {nearest_said}"
    return f"size {sel.size_name} was not found on {gpu}, {not_read_in_full(sel.may_hold)}; {nearest_said}"


def damaged_parts(workload_name: str, gpu: str | None, root: Path | None) -> dict[str, str]:
    """The parts of the workload's evaluations (of one GPU's folder, where given) left out whole or in rows,
    with why: they may hold what was not found."""
    pattern = f"{store.gpu_slug(gpu) if gpu else '*'}/{workload_name}/evaluations/*.parquet"
    return store.read_store(pattern, Path(root or store.results_root())).degraded.reasons()  # parsed already: kept


def not_read_in_full(damaged: dict[str, str]) -> str:
    named = "; ".join(f"{path}: {why}" for path, why in sorted(damaged.items()))
    return (
        f"but the store could not be read in full: left out, {named} (it may hold it: move it aside or copy it again)"
    )


def stored_evaluations(workload_name: str, root: Path | None = None) -> pd.DataFrame:
    """Every stored evaluation of the workload, its configs completed as the answers read them, the times taken
    under an older timing protocol too: select leaves those out itself, saying how many (store.load_evaluations
    by default leaves them out without a word)."""
    return store.load_evaluations(workload_name, root, superseded=True)


def without_older_protocols(rows: pd.DataFrame, space: Space) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`rows` without the times taken under an older protocol where newer ones exist (store.without_superseded,
    the rule), and the rows left out, each with its index in `rows`."""
    if rows.empty or "times" not in rows:
        return rows, rows.iloc[:0]
    marked = rows.assign(_stored_row=range(len(rows)))
    kept = store.without_superseded(marked, space)["_stored_row"]
    if len(kept) == len(rows):
        return rows, rows.iloc[:0]
    keep = marked["_stored_row"].isin(kept).to_numpy()
    return rows[keep], rows[~keep]


def _timed_with(rows: pd.DataFrame) -> list[str]:
    """The timing protocols of `rows`, each once."""
    return sorted(set(_timings(rows)))


def protocol_note(space: Space, kept: pd.DataFrame, left: pd.DataFrame) -> str:
    """The note of rows left out as timed under an older protocol (`left`, beside the rows `kept`): how many, how
    they were timed against the rows of their GPU, size and dtype that were kept, how many of their configs have
    no other time there, and where every row is."""
    groups = {key[:3] for key in _measured(left)}
    ok = kept[kept["status"] == "ok"]
    rest = ok[
        pd.Series([k in groups for k in zip(ok["gpu"], ok["size_vars"], ok["dtype"])], index=ok.index, dtype=bool)
    ]
    launches = {*map(_launches, left["times"]), *map(_launches, rest["times"])} != {space.iterations}
    only = _measured(left) - _measured(rest)
    again = (
        f"{len(only)} of their configs {'has' if len(only) == 1 else 'have'} no other time: tune again to time them"
        if only
        else "each of their configs was timed again"
    )
    return (
        f"{len(left)} row(s) timed under an older protocol ({_how_timed(left, space, launches)}, not "
        f"{_how_timed(rest, space, launches)} as the rest) are left out, as their times do not compare with the "
        f"rest's; {again} (tuner.load_store() keeps every row)"
    )


def _how_timed(rows: pd.DataFrame, space: Space, launches: bool) -> str:
    """How `rows` were timed, in words: `plain`, `plain over 7 or 32 launches, delayed-start over 32 launches`
    (host code, which times itself: `over 5 runs`)."""
    counts: dict[str, set[int]] = {}
    for timing, times in zip(_timings(rows), rows["times"]):
        counts.setdefault(timing, set()).add(_launches(times))
    said = []
    for timing, n in sorted(counts.items()):
        words = [] if space.lang == "host" else [timing]
        if launches:
            words.append(f"over {' or '.join(map(str, sorted(n)))} {'runs' if space.lang == 'host' else 'launches'}")
        said.append(" ".join(words))
    return ", ".join(dict.fromkeys(said))


def _launches(times: object) -> int:
    """How many times a row holds (none recorded: 0)."""
    return len(times) if isinstance(times, Sized) else 0


def _timings(rows: pd.DataFrame) -> list[str]:
    """Each row's timing protocol (a row from before the column existed: plain, as tuner.store reads it)."""
    timings = rows["timing"] if "timing" in rows else [None] * len(rows)
    return [store.recorded_timing(t) for t in timings]


def _measured(rows: pd.DataFrame) -> set[tuple]:
    """The (GPU, size, dtype, config) of each row: a config's times at one GPU, size and dtype."""
    return set(zip(rows["gpu"], rows["size_vars"], rows["dtype"], rows["config"]))


def _of_current_protocol(space: Space, rows: pd.DataFrame, notes: list[str]) -> tuple[pd.DataFrame, dict | None]:
    """The rows of one GPU, size and dtype timed the current way where there are any (without_older_protocols),
    with a note where some were left out; and how they were timed."""
    if rows.empty or "times" not in rows:
        return rows, None
    kept, left = without_older_protocols(rows, space)
    protocol = "host" if space.lang == "host" else PROTOCOL
    timing = {"protocol": protocol, "measured_with": _timed_with(kept[kept["status"] == "ok"]), "left_out": len(left)}
    if len(left):
        timing["left_out_with"] = _timed_with(left)
        notes.append(protocol_note(space, kept, left))
    return kept, timing


def current_kernel_hash(space: Space) -> str | None:
    """The kernel source's hash now (tuner.measure.provenance.kernel_hash, as every row records it); None where the
    source cannot be read."""
    try:
        return kernel_hash(space)
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


def _within_space(space: Space, rows: pd.DataFrame, dtype: str, notes: list[str]) -> pd.DataFrame:
    """The rows of configs the space holds now (a value removed or a restriction tightened since they were
    measured leaves some out), with a note where the best stored config is one of those left out."""
    outside = [str(c) for c in rows["config"].unique() if not space.holds(str(c), dtype)]
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


def all_failed(sel: Selection) -> str:
    configs = sel.rows["config"].nunique()
    return f"{sel.where()} was measured, but every config failed ({configs} config(s): {failures_said(sel.rows)})"


def _wanted_gpu(stored: Iterable[str], gpu: str, notes: list[str]) -> str:
    """`gpu` as the store names it (tuner.store.gpu_choice.stored_gpu_name), a note where only some of its words
    named it; as given where it names no stored GPU (select then answers from another, saying which are stored)."""
    name, note = named_gpu(stored, gpu)
    notes.extend([note] if note else [])
    return name or gpu
