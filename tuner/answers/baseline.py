"""`tuner baseline`: take the regression baseline that `tuner check` (tuner.answers.check) compares with.

A baseline is the best stored config of a (workload, size, dtype) on this GPU, re-measured over many
rounds in several worker sessions spread over the run, each round also timing the workload's reference
(copy bandwidth, cuBLAS) in the same worker. This module holds the measuring process both commands start,
taking a baseline and its stored row, saving and loading baselines, and the session noise that sets a
kernel's noise floor. A baseline replaces the one it refreshes only once all its sessions are measured: until
then its sessions are kept beside the baselines (PARTIAL_FILE), which no check reads."""

from __future__ import annotations

import glob
import itertools
import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.stats

from tuner import locations, store
from tuner.answers import best_config
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.protocol import MeasureSpec
from tuner.measure.provenance import kernel_hash, software
from tuner.measure.runner import IsolatedRunner
from tuner.stats import THRESHOLD
from tuner.store.schema import Degraded, record
from tuner.workloads import get_workload

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

BASELINE_FILE = "check/baseline.parquet"
# a refresh's sessions until it has them all: kept (a stop loses nothing measured), never checked, and never in
# place of the complete baseline it refreshes
PARTIAL_FILE = "check/baseline.partial.parquet"
CHECK_ITERATIONS = 30  # timed launches per round: a steadier median than a campaign's 7
MIN_ROUNDS = 3  # a comparison's fewest rounds on each side (tuner.stats.compare)
BASELINE_SESSIONS = 6  # worker sessions per baseline kernel: their spread sets the noise floor (session_noise)
NOISE_ALPHA = 0.005  # how often an unchanged kernel may exceed its noise floor by session wobble alone
measure_target = None  # the measuring process's main function (None: the real one); tests substitute one


def measuring_process(
    workload: str, size: dict, dtype: str, backend: str, device: int, timeout: float
) -> tuple[IsolatedRunner, dict]:
    """A fresh measuring process, and its GPU with the timing protocol it times kernels with (tuner/measure/timing.py):
    both go into a baseline's row, and a check compares them with the baseline's."""
    runner = IsolatedRunner(
        MeasureSpec(workload, size, dtype, backend, device, None, baseline_repeats=0, iterations=CHECK_ITERATIONS),
        timeout=timeout,
        **({"target": measure_target} if measure_target else {}),
    )
    setup = runner.start()
    return runner, {**setup["gpu"], "timing": setup.get("timing", "plain")}


def _baseline_path(root: Path, gpu: str, workload: str) -> Path:
    return store.workload_dir(root, gpu, workload) / BASELINE_FILE


def load_check_baselines(root: Path | None = None, gpu: str | None = None, *, shipped: bool = False) -> pd.DataFrame:
    """The baselines of the project's store `root` (of `gpu`); with `shipped`, also those the recordings shipped
    with the built-in workloads hold (tuner.store.paths.read_roots), which no gate of the project checks."""
    df = store.read_parts(f"*/*/{BASELINE_FILE}", root or store.results_root(), shipped=shipped)
    if gpu and not df.empty:
        df = df[df["gpu"] == gpu]
    return df


@dataclass
class Baselines:
    """The baselines a check compares with (each row with `part`, the file it was read from), and what their read
    left out: whole parts and rows (their kernels are not in `frame`: a check must say so, and name them where a
    kernel it was asked for is among them)."""

    frame: pd.DataFrame
    unreadable: dict[str, str] = field(default_factory=dict)  # part: why it, or rows of it, could not be read
    shipped: bool = False  # those shipped with the built-in workloads (`tuner check --simulate --demo`)
    left_out: Degraded = field(default_factory=Degraded)  # what the read left out, as the store says it

    def unreadable_of(self, workloads: Iterable[str] | None = None, gpu: str | None = None) -> dict[str, str]:
        """The unreadable parts of `workloads` (None: any) on `gpu`, known by their folder: <gpu>/<workload>/check/."""
        names = None if workloads is None else set(workloads)
        return {
            path: why
            for path, why in self.unreadable.items()
            if (names is None or Path(path).parent.parent.name in names)
            and (gpu is None or Path(path).parent.parent.parent.name == store.gpu_slug(gpu))
        }


def unreadable_text(parts: dict[str, str]) -> str:
    """`parts` ({path: why}, baseline parts) as a clause: "the baseline part P (why) could not be read: move it
    aside or record it again with `tuner baseline W`", W the workloads their folders name."""
    named = "; ".join(f"{path} ({why})" for path, why in sorted(parts.items()))
    workloads = " ".join(sorted({Path(path).parent.parent.name for path in parts}))
    return (
        f"the baseline part{'s' if len(parts) > 1 else ''} {named} could not be read: move "
        f"{'them' if len(parts) > 1 else 'it'} aside or record {'them' if len(parts) > 1 else 'it'} again with "
        f"`tuner baseline {workloads}`"
    )


def read_baselines(root: Path, *, demo: bool = False) -> Baselines:
    """The project's own baselines (the store `root` alone: a gate checks what the project recorded, never the
    recordings shipped with the built-in workloads), each row with the part it was read from (`part`: a row a
    check cannot use is named by its file), and what the read left out. With `demo` (`tuner check --simulate
    --demo`, the README's tour), those shipped with the built-in workloads instead, whatever the project holds
    (tuner.locations.BUILTIN_RESULTS: a wheel's package data, a source checkout's own store). What was left out
    goes to the tuner.store.schema.collect() around the read, else is a warning, as tuner.store.read_parts does."""
    source = Path(locations.BUILTIN_RESULTS if demo else root)
    frames, left_out = [], Degraded()
    for part in sorted(source.glob(f"*/*/{BASELINE_FILE}")):  # one read a part: each row knows its file
        found = store.read_store(glob.escape(part.relative_to(source).as_posix()), source, shipped=False)
        left_out.merge(found.degraded)
        if not found.frame.empty:
            frames.append(found.frame.assign(part=str(part)))
    if left_out and not record(left_out):
        left_out.warn(stacklevel=2)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return Baselines(frame, left_out.reasons(), demo, left_out)


def baseline_sessions(base: dict) -> int:
    """The worker sessions a baseline's rounds came from: 1 where it does not say (taken before the column; the
    store's schema admits a whole number of 1 or more, or nothing)."""
    n = base.get("sessions")
    return int(n) if isinstance(n, (int, float, np.integer, np.floating)) and math.isfinite(n) else 1


def take_baseline(
    workloads: Iterable[str],
    sizes: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    *,
    rounds: int = 10,
    sessions_per_baseline: int = BASELINE_SESSIONS,
    backend: str = "nvcuda",
    device: int = 0,
    timeout: float = 120,
    root: Path | None = None,
    log: Callable[[str], object] = print,
) -> list[dict]:
    """Re-measure the best stored config of each (workload, size, dtype) and store it as the baseline.

    Each kernel is measured in several worker sessions, and the sessions are spread over the whole run
    (pass 1 measures every kernel once, pass 2 again, ...): the spread between a kernel's sessions then
    holds what changes over minutes (clocks, temperature, launch state), which is what a later check on a
    runner that has been busy for minutes meets. Measured back to back, the sessions agreed better than
    the card agreed with itself ten minutes later, and A/A checks failed on that drift.

    A kernel's baseline is stored once it has all its sessions, and only then replaces the one it refreshes: a run
    stopped after one session must not leave a 1-session baseline (whose noise is unknown) in place of a 6-session
    one. The sessions of an unfinished one are kept in PARTIAL_FILE, which no check reads. Returns the baselines
    completed."""
    if rounds < 1 or sessions_per_baseline < 1 or rounds * sessions_per_baseline < MIN_ROUNDS:
        raise TunerError(
            f"a baseline needs at least {MIN_ROUNDS} rounds in all (--rounds x --sessions), "
            f"got {rounds} x {sessions_per_baseline}"
        )
    root = Path(root or store.results_root())
    kernels = []
    for name in workloads:
        workload = get_workload(name)
        space = workload.space
        evals = store.load_evaluations(name, root)
        if evals.empty:
            raise TunerError(f"nothing stored for {name}: tune it before taking a baseline")
        for size_text in sizes or sorted(evals["size"].unique()):
            size_name, size = space.resolve_size(size_text, workload.parse_size)
            for dtype in dtypes or sorted(evals["dtype"].unique()):
                kernels.append(_Kernel(name, size_name, size, space.resolve_dtype(dtype)))
    rows = {}
    try:
        for session in range(sessions_per_baseline):
            for kernel in kernels:
                if session > 0 and not kernel.sessions:
                    continue  # nothing tuned for it: skipped in the first pass
                row = _measure_session(kernel, rounds, sessions_per_baseline, backend, device, timeout, root, log)
                if row is None:
                    continue
                done = len(kernel.sessions) == sessions_per_baseline
                # complete: it replaces the baseline it refreshes; until then its sessions are kept beside it
                # (at once: a stop keeps what it measured), never in place of a complete one
                _save_baseline(root, row, log, partial=not done)
                if done:
                    rows[(kernel.name, kernel.size_name, kernel.dtype)] = row
    except BaseException:  # a stop (Ctrl-C, a config that fails now): what stands, and where the rest is kept
        unfinished = [k for k in kernels if 0 < len(k.sessions) < sessions_per_baseline]
        if unfinished:
            log(
                f"stopped: {len(unfinished)} baseline(s) unfinished ("
                + ", ".join(
                    f"{k.name} {k.size_name} {k.dtype} {len(k.sessions)}/{sessions_per_baseline}" for k in unfinished
                )
                + f"): their sessions are kept in {PARTIAL_FILE} beside the baselines, which stand as they were "
                "(no check reads an unfinished baseline); run `tuner baseline` again to record them"
            )
        raise
    return list(rows.values())


def _measure_session(
    kernel: _Kernel,
    rounds: int,
    sessions: int,
    backend: str,
    device: int,
    timeout: float,
    root: Path,
    log: Callable[[str], object],
) -> dict | None:
    """One more worker session of `kernel` (its config chosen in the first): the baseline row of its sessions so
    far; None where nothing is tuned for it on this GPU."""
    name, size_name, size, dtype = kernel.name, kernel.size_name, kernel.size, kernel.dtype
    space = get_workload(name).space
    t0 = time.monotonic()
    runner, gpu = measuring_process(name, size, dtype, backend, device, timeout)
    try:
        if kernel.config is None:
            # size_name is a named size or the k=v spelling of an ad-hoc one: either resolves again
            answer = best_config.best(name, size_name, dtype, gpu=gpu["gpu"], root=root)
            if answer["fallback"] != "exact" or answer["gpu"] != gpu["gpu"]:  # not a GPU named alike
                log(f"skip {name} {size_name} {dtype}: nothing tuned for it on {gpu['gpu']}")
                return None
            kernel.config = answer["config"]
        config = kernel.config
        measured = runner.measure_rounds([config[k] for k in space.params], list(space.params), rounds)
    finally:
        runner.shutdown()
    if measured["status"] != "ok":
        raise TunerError(
            f"{name} {size_name} {dtype}: the best config fails now ({measured['status']}: {measured['error'][:300]})"
        )
    kernel.sessions.append(measured)
    log(
        f"baseline {name} {size_name} {dtype}, session {len(kernel.sessions)}/{sessions}: {config} "
        f"median {np.median(measured['rounds']):.4g} ms over {rounds} rounds ({time.monotonic() - t0:.1f} s; "
        f"worker set-up {runner.setup.get('setup_s')})"  # type: ignore[union-attr]  # set by _worker's start
    )
    return _baseline_row(name, size_name, size, dtype, config, gpu, kernel.sessions, backend)


@dataclass
class _Kernel:
    """One (workload, size, dtype) of a baseline: its config, chosen in the first pass, and its sessions."""

    name: str
    size_name: str
    size: dict
    dtype: str
    config: dict | None = None
    sessions: list = field(default_factory=list)


def _baseline_row(
    name: str, size_name: str, size: dict, dtype: str, config: dict, gpu: dict, sessions: list[dict], backend: str
) -> dict:
    workload = get_workload(name)
    space = workload.space
    references = {k: [x for r in sessions for x in r["references"][k]] for k in sessions[0]["references"]}
    return {
        "workload": name,
        "size": size_name,
        "size_vars": json.dumps(size, sort_keys=True),
        "dtype": dtype,
        "config": json.dumps(config, sort_keys=True),
        "rounds": [x for r in sessions for x in r["rounds"]],
        "sessions": len(sessions),
        "references": json.dumps(references),
        "reference": workload.check_reference,
        **gpu,
        "backend": kt.effective_backend(space, backend),
        "kernel_hash": kernel_hash(space),
        **software(),
        "timestamp": datetime.now(UTC).isoformat(),
    }


def session_noise(rounds: ArrayLike, sessions: int, alpha: float = NOISE_ALPHA) -> float:
    """The relative slowdown that one fresh session of an unchanged kernel exceeds with probability `alpha`
    (0 for a single session, whose spread is unknown). Every session (worker process) lands at its own
    offset, so a check, itself one session, is one more draw from the baseline's per-session medians: the
    one-sided upper prediction bound t(n-1) quantile x s x sqrt(1 + 1/n), s their relative spread.
    A fixed 3 s instead, with the spread of 3 sessions (2 degrees of freedom), is exceeded by about 6% of
    unchanged checks, which is what the first A/A runs on the H100 showed; the t quantile prices in how
    little a few sessions say about the spread (with 3 it is wide: a baseline wants 6 or more)."""
    if sessions < 2:
        return 0.0
    medians = [float(np.median(part)) for part in np.array_split(np.asarray(rounds, float), sessions)]
    spread = float(np.std(medians, ddof=1) / np.median(medians))
    return float(scipy.stats.t.ppf(1 - alpha, sessions - 1) * spread * np.sqrt(1 + 1 / sessions))


def noise_floor(rounds: ArrayLike, sessions: int, threshold: float = THRESHOLD) -> float:
    """The slowdown a kernel must show to be flagged: the practical threshold or its session noise."""
    return max(threshold, session_noise(rounds, sessions))


def _save_baseline(root: Path, row: dict, log: Callable[[str], object], *, partial: bool = False) -> None:
    """Add (or replace) one (size, dtype) baseline in its workload's file, written whole (tuner.atomic); with
    `partial`, in the file of unfinished ones (PARTIAL_FILE) instead. A complete baseline leaves that file too."""
    folder = store.workload_dir(root, row["gpu"], row["workload"])
    key = (row["size_vars"], row["dtype"])
    _replace_row(folder, PARTIAL_FILE, key, row if partial else None, log)
    if not partial:
        _replace_row(folder, BASELINE_FILE, key, row, log)


def _replace_row(folder: Path, name: str, key: tuple[str, str], row: dict | None, log: Callable[[str], object]) -> None:
    """In the part `folder`/`name`: the row of `key` (size_vars, dtype) replaced by `row` (None: left out; the
    file too, where nothing is left), the part written whole (tuner.atomic: a stop never leaves half a file)."""
    path = folder / name
    old = _old_rows(folder, name, log)  # a damaged part is moved aside: then what could be read is written again
    kept = old[~((old["size_vars"] == key[0]) & (old["dtype"] == key[1]))] if not old.empty else old
    new = pd.concat([kept, pd.DataFrame([row])], ignore_index=True) if row is not None else kept
    if new.empty:
        path.unlink(missing_ok=True)
    elif row is not None or len(kept) < len(old) or not path.exists():
        store.write_parquet(new, path)


def _old_rows(folder: Path, name: str, log: Callable[[str], object]) -> pd.DataFrame:
    """The rows of the part `folder`/`name` as the store's schema admits them. A part that cannot be read in full
    (truncated, a row a check could not use) is moved aside, with a line naming both files: the refresh replaces
    it with what could be read and the new row, and nothing in it is lost."""
    path = folder / name
    if not path.exists():
        return pd.DataFrame()
    found = store.read_store(glob.escape(name), folder, shipped=False)  # `name` under check/: its schema applies
    if found.degraded:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        stem = path.name.removesuffix(".parquet")
        aside = next(  # never over one moved aside before (in the same second, say)
            p
            for n in itertools.count()
            if not (p := path.with_name(f"{stem}.damaged-{stamp}{f'-{n}' if n else ''}.parquet")).exists()
        )
        path.replace(aside)
        why = "; ".join(found.degraded.reasons().values())
        log(f"note: {path} could not be read in full ({why}): moved aside to {aside.name}, and replaced")
    return found.frame
