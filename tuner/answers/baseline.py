"""`tuner baseline`: take the regression baseline that `tuner check` (tuner.answers.check) compares with.

A baseline is the best stored config of a (workload, size, dtype) on this GPU, re-measured over many
rounds in several worker sessions spread over the run, each round also timing the workload's reference
(copy bandwidth, cuBLAS) in the same worker. This module holds the measuring process both commands start,
taking a baseline and its stored row, saving and loading baselines, and the session noise that sets a
kernel's noise floor."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.stats

from tuner import store
from tuner.answers import best_config
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.protocol import MeasureSpec
from tuner.measure.provenance import kernel_hash, software
from tuner.measure.runner import IsolatedRunner
from tuner.stats import THRESHOLD
from tuner.store.schema import record
from tuner.workloads import get_workload

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

BASELINE_FILE = "check/baseline.parquet"
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
    """The baselines a check compares with, and the baseline parts that could not be read (their kernels are
    not in `frame`: a check must say so, and name them where a kernel it was asked for is among them)."""

    frame: pd.DataFrame
    unreadable: dict[str, str] = field(default_factory=dict)  # part: why it could not be read
    shipped: bool = False  # those shipped with the built-in workloads: the project has none of its own

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


def read_baselines(root: Path, *, shipped_if_none: bool = False) -> Baselines:
    """The project's own baselines (the store `root` alone: a gate checks what the project recorded, not the
    recordings shipped with the built-in workloads), with the parts that could not be read. With
    `shipped_if_none` (`tuner check --simulate`, the README's demo), a project with no baseline at all gets those
    shipped with the built-ins instead (Baselines.shipped), where an installed package reads them
    (tuner.store.paths.read_roots). What was left out goes to the tuner.store.schema.collect() around the read,
    else is a warning, as tuner.store.read_parts does."""
    pattern = f"*/*/{BASELINE_FILE}"
    found, shipped = store.read_store(pattern, root, shipped=False), False
    if shipped_if_none and found.frame.empty and not found.degraded and len(store.read_roots(root)) > 1:
        found, shipped = store.read_store(pattern, root, shipped=True), True
    if found.degraded and not record(found.degraded):
        found.degraded.warn(stacklevel=2)
    return Baselines(found.frame, dict(found.degraded.parts), shipped and not found.frame.empty)


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
    the card agreed with itself ten minutes later, and A/A checks failed on that drift."""
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
    for session in range(sessions_per_baseline):
        for kernel in kernels:
            name, size_name, size, dtype, sessions = (
                kernel.name,
                kernel.size_name,
                kernel.size,
                kernel.dtype,
                kernel.sessions,
            )
            if session > 0 and not sessions:
                continue  # nothing tuned for it: skipped in the first pass
            space = get_workload(name).space
            t0 = time.monotonic()
            runner, gpu = measuring_process(name, size, dtype, backend, device, timeout)
            try:
                if kernel.config is None:
                    # size_name is a named size or the k=v spelling of an ad-hoc one: either resolves again
                    answer = best_config.best(name, size_name, dtype, gpu=gpu["gpu"], root=root)
                    if answer["fallback"] != "exact" or answer["gpu"] != gpu["gpu"]:  # not a GPU named alike
                        log(f"skip {name} {size_name} {dtype}: nothing tuned for it on {gpu['gpu']}")
                        continue
                    kernel.config = answer["config"]
                config = kernel.config
                row = runner.measure_rounds([config[k] for k in space.params], list(space.params), rounds)
            finally:
                runner.shutdown()
            if row["status"] != "ok":
                raise TunerError(
                    f"{name} {size_name} {dtype}: the best config fails now ({row['status']}: {row['error'][:300]})"
                )
            sessions.append(row)
            rows[(name, size_name, dtype)] = _baseline_row(name, size_name, size, dtype, config, gpu, sessions, backend)
            _save_baseline(root, rows[(name, size_name, dtype)])  # at once: an interrupted run keeps what it measured
            log(
                f"baseline {name} {size_name} {dtype}, session {len(sessions)}/{sessions_per_baseline}: {config} "
                f"median {np.median(row['rounds']):.4g} ms over {rounds} rounds ({time.monotonic() - t0:.1f} s; "
                f"worker set-up {runner.setup.get('setup_s')})"  # type: ignore[union-attr]  # set by _worker's start
            )
    return list(rows.values())


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


def _save_baseline(root: Path, row: dict) -> None:
    """Add (or replace) one (size, dtype) baseline in its workload's file, atomically."""
    path = _baseline_path(root, row["gpu"], row["workload"])
    old = pd.read_parquet(path) if path.exists() else pd.DataFrame()
    if not old.empty:
        old = old[~((old["size_vars"] == row["size_vars"]) & (old["dtype"] == row["dtype"]))]
    store.write_parquet(pd.concat([old, pd.DataFrame([row])], ignore_index=True), path)
