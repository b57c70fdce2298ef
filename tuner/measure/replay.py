"""Replay: Kernel Tuner's simulation mode over a recorded cache, the measuring runner beside the live one.
`replay` runs a strategy over a recording in this process (a simulated campaign, a strategy comparison);
`replay_main` is a measuring process that answers the protocol from a recording (a distributed campaign
without a GPU)."""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_tuner import util
from kernel_tuner.interface import Options
from kernel_tuner.runners.simulation import SimulationRunner
from kernel_tuner.searchspace import Searchspace
from kernel_tuner.util import StopCriterionReached

from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.evaluate import evaluate
from tuner.measure.process import Measurer, serve
from tuner.measure.protocol import MeasureSpec
from tuner.space import Space

if TYPE_CHECKING:
    from collections.abc import Sequence
    from multiprocessing.connection import Connection


def simulation(
    space: Space, size: dict, dtype: str, cachefile: Path | str, *, store_root: Path | None = None, **options: Any
) -> tuple:
    """Kernel Tuner's simulation runner and tuning options over the recording `cachefile`, whose times are
    read as the store ranks them: a config's time is the median of its launches. The recording is never
    written: Kernel Tuner reads a copy, aligned to the space in a temporary folder (kt.aligned_cache). One
    derived into this user's cache that has gone or no longer reads whole since it was chosen is derived again
    from the store (`store_root`, else the project's: tuner.store.recordings.recording_again)."""
    cachefile = _again(cachefile, store_root)
    kernel_options = kt.kernel_options(space, size, dtype, [], "nvcuda")
    runner = SimulationRunner(kernel_options.kernel_source, kernel_options, Options(quiet=True), space.iterations, None)
    tuning_options = kt.tuning_options(space, size, dtype, simulation=True, **options)
    key = (json.dumps(size, sort_keys=True, default=str), dtype, tuple(tuning_options.metrics or ()))
    cache, device = _READ.get(
        space, Path(cachefile), key, lambda: _read(space, cachefile, kernel_options, tuning_options)
    )
    runner.dev.name = device  # as Kernel Tuner's process_cache sets it: the recording's device
    tuning_options["cache"] = dict(cache)  # the entries are shared: the runner hands out copies of them
    return runner, tuning_options


def _read(space: Space, cachefile: Path | str, kernel_options: Any, tuning_options: Any) -> tuple[dict, str]:
    """The recording's entries as Kernel Tuner's simulation reads them (process_cache, checked against the
    space), each `time` the median of its launches and its metrics computed from it; and its device's name."""
    runner = SimulationRunner(kernel_options.kernel_source, kernel_options, Options(quiet=True), space.iterations, None)
    with tempfile.TemporaryDirectory(prefix="tuner-replay-") as tmp:
        copy = _readable_copy(Path(cachefile), space, Path(tmp))
        try:
            cache = util.process_cache(str(copy), kernel_options, tuning_options, runner)
        except ValueError as e:
            raise TunerError(f"{cachefile}: cannot replay it with the current space: {e}") from None
    for entry in cache.values():
        times = entry.get("times")
        if isinstance(times, list) and times and isinstance(entry.get("time"), (int, float)):
            entry["time"] = statistics.median(times)  # recordings before it hold Kernel Tuner's mean
            if tuning_options.metrics:
                util.process_metrics(entry, tuning_options.metrics)
    return cache, runner.dev.name


class _Memo:
    """What a replay reads of a recording, kept for the next replay of the same file (its path, size, time and
    inode unchanged) over the same space in this process: a comparison replays one recording hundreds of times
    (strategies x repeats), and reading, aligning, copying and checking it again each time, and building the
    space's searchspace again (GEMM's: 2 s), was as long as the replays of Kernel Tuner's strategies themselves.
    Only what is read is shared, never what a strategy is handed (a searchspace keeps state as it is walked)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.values: dict[tuple, tuple[Space, Any]] = {}

    def get(self, space: Space, path: Path | None, key: tuple, make: Any) -> Any:
        try:
            st = path.stat() if path is not None else None
        except OSError:  # gone (its reader says so)
            return make()
        stamp = (str(path), st.st_size, st.st_mtime_ns, st.st_ino) if st is not None else None
        full = (id(space), stamp, *key)
        kept = self.values.get(full)
        if kept is not None and kept[0] is space:  # the same object: an id may be reused once one is gone
            return kept[1]
        value = make()
        while len(self.values) >= self.size:  # the oldest out
            del self.values[next(iter(self.values))]
        self.values[full] = (space, value)
        return value


_READ = _Memo(4)


def _readable_copy(cachefile: Path, space: Space, folder: Path) -> Path:
    """A copy of the recording in `folder` for Kernel Tuner to read, aligned to the space's parameters with
    defaults; the recording itself where there is none to copy (Kernel Tuner says so)."""
    if not cachefile.is_file():
        return cachefile
    copy = folder / cachefile.name
    data = kt.aligned_cache(cachefile, space)
    if data is None:
        shutil.copyfile(cachefile, copy)
    else:
        copy.write_text(json.dumps(data, indent=""))
    return copy


def recorded_searchspace(space: Space, cache: dict, dtype: str | None = None) -> tuple[Searchspace, int]:
    """The space's search space (for `dtype`: kt.searchspace) restricted to the configs the recording holds
    (in the space's order), and the space's size: a partial recording (a strategy's campaign, a sampled
    space) replays over what it holds, a config it lacks is invalid to the strategy. A complete recording
    gets the space's own."""
    # the space's searchspace, read here only; a complete recording gets one of its own (kt.searchspace hands out
    # copies), as Kernel Tuner's strategies change the one they walk (its caches of neighbours)
    full = kt.shared_searchspace(space, dtype)
    held = [c for c in full.list if ",".join(str(v) for v in c) in cache]
    if len(held) == full.size:
        return kt.searchspace(space, dtype), full.size
    if not held:
        raise TunerError(f"the recording holds none of the space's {full.size} configs")
    names = list(full.tune_params)
    recorded = {str(i): dict(zip(names, c)) for i, c in enumerate(held)}
    restricted = Searchspace(None, None, None, from_cache={"tune_params": full.tune_params, "cache": recorded})
    return restricted, full.size


def searchspace_size(space: Space, dtype: str | None = None) -> int:
    """kt.searchspace(space, dtype).size, of the searchspace kept for every reader (kt.shared_searchspace:
    recorded_searchspace reads it for every replay; a comparison asks its size again and again)."""
    return int(kt.shared_searchspace(space, dtype).size)


def recording_searchspace(
    space: Space,
    cachefile: Path | str,
    dtype: str | None = None,
    *,
    store_root: Path | None = None,
    likely: Sequence[Path] = (),
) -> Searchspace:
    """The search space a replay of `cachefile` (recorded for `dtype`) covers: the configs it holds
    (recorded_searchspace), read without writing it (aligned in memory where the space gained parameters
    with defaults). A distributed campaign reads it again and again (its workers, its status) while the
    cache folder may be deleted: one derived there that has gone or no longer reads whole is derived again
    from its store (`store_root`, else the first of `likely` and the project's store that holds its rows:
    tuner.store.recordings.recording_again)."""
    cachefile = _again(cachefile, store_root, likely)
    data = kt.aligned_cache(cachefile, space) or util.read_cache(str(cachefile), open_cache=False)
    return recorded_searchspace(space, data["cache"], dtype)[0]


def _again(cachefile: Path | str, store_root: Path | None, likely: Sequence[Path] = ()) -> Path:
    from tuner.store.recordings import recording_again

    return recording_again(cachefile, store_root, likely)


@dataclass
class Replay:
    """A strategy's run over a recording: its results in the order evaluated (repeats included, None where
    the budget ran out), the recorded GPU, and how many of the space's configs the recording held."""

    results: list
    gpu: str
    replayed: int
    space_size: int

    @property
    def coverage(self) -> str:
        held = "all" if self.replayed == self.space_size else str(self.replayed)
        return f"replayed over {held} of the space's {self.space_size} configs the recording holds"


STALL = 2000  # runner calls in a row that bring no config not evaluated before: a strategy going in circles


class StallGuard:
    """Kernel Tuner's runner, stopping a strategy that has evaluated nothing new for STALL calls in a row (a
    StopCriterionReached, which Kernel Tuner's strategies end on). On a recording that holds part of its
    space, a local search such as Kernel Tuner's greedy_ils can circle for ever among configs it has seen:
    its budget counts only new ones, and its random walks land outside the recording."""

    def __init__(self, runner: Any) -> None:
        self.runner, self.idle = runner, 0
        self.seen: set[tuple] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)

    def run(self, parameter_space: Any, tuning_options: Any) -> Any:
        results = self.runner.run(parameter_space, tuning_options)
        new = {tuple(config) for config in parameter_space} - self.seen
        self.seen |= new
        self.idle = 0 if new else self.idle + 1
        if self.idle >= STALL:
            raise StopCriterionReached(f"no configuration not evaluated before in {STALL} evaluations in a row")
        return results


def replay_recording(
    space: Space,
    size: dict,
    dtype: str,
    cachefile: Path,
    strategy: Any,
    *,
    max_evals: int | None = None,
    time_limit: float | None = None,
    seed: int | None = None,
) -> Replay:
    """Run `strategy` in Kernel Tuner's simulation mode on a recording, over the configs it holds."""
    from tuner.store import recorded_gpu

    cachefile = _again(cachefile, None)  # derived again where it has gone since it was chosen
    runner, tuning_options = simulation(
        space, size, dtype, cachefile, max_fevals=max_evals, time_limit=time_limit, seed=seed
    )
    try:
        searchspace, space_size = recorded_searchspace(space, tuning_options["cache"], dtype)
    except TunerError as e:
        raise TunerError(f"{cachefile}: {e}") from None
    try:
        results = strategy.tune(searchspace, StallGuard(runner), tuning_options)
    except ValueError as e:
        raise TunerError(f"{cachefile}: the recording does not cover the space: {e}") from None
    return Replay(results, recorded_gpu(cachefile) or runner.dev.name, searchspace.size, space_size)


def replay(
    space: Space,
    size: dict,
    dtype: str,
    cachefile: Path,
    strategy: Any,
    *,
    max_evals: int | None = None,
    time_limit: float | None = None,
    seed: int | None = None,
) -> tuple[list, str]:
    """Run `strategy` in Kernel Tuner's simulation mode on a recording (replay_recording); returns the results
    in the order the strategy evaluated them (repeats included, None where the budget ran out) and the
    recorded GPU."""
    r = replay_recording(space, size, dtype, cachefile, strategy, max_evals=max_evals, time_limit=time_limit, seed=seed)
    return r.results, r.gpu


def replay_main(conn: Connection, spec: MeasureSpec) -> None:
    """A measuring process that answers from a recorded Kernel Tuner cache (env TUNER_REPLAY), so a
    distributed campaign runs end to end without a GPU. TUNER_REPLAY_DELAY (seconds per evaluation) paces
    it, e.g. to rehearse killing a worker mid-way."""
    os.environ.update(spec.env)
    try:
        serve(
            conn,
            lambda: ReplayMeasurer(spec, os.environ["TUNER_REPLAY"], float(os.environ.get("TUNER_REPLAY_DELAY", "0"))),
        )
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        # its parent is gone (the pipe closed) or Ctrl-C reached the whole process group: the parent reports
        # the interrupt; a replay has nothing unsaved, so it exits without a traceback of its own
        return


class ReplayMeasurer(Measurer):
    def __init__(self, spec: MeasureSpec, recording: str, delay: float) -> None:
        from tuner.store import recorded_gpu
        from tuner.workloads import get_workload

        space = get_workload(spec.workload).space
        recording = str(_again(recording, None))  # the campaign's, derived again where the cache lost it
        self.runner, self.tuning_options = simulation(space, spec.size, spec.dtype, recording, metrics=False)
        self.keys = list(self.tuning_options.tune_params)
        self.delay = delay
        gpu = {
            "gpu": recorded_gpu(Path(recording)) or self.runner.dev.name,
            "compute_capability": "",
            "driver": "",
            "cuda": "",
            "replayed_from": recording,
        }  # the GPU's name: a host-code space's cache names the CPU
        self.setup = {"gpu": gpu, "baselines": {}}

    def measure(self, values: list) -> dict:
        time.sleep(self.delay)
        return evaluate(self.runner, self.tuning_options, self.keys, values)

    def measure_rounds(self, configs: list, rounds: int, references: bool) -> list[dict]:
        """Each round the median of a resample of the config's recorded times."""
        rows = []
        for values in configs:
            row = evaluate(self.runner, self.tuning_options, self.keys, values)
            if row["status"] == "ok":
                rng = random.Random(zlib.crc32(",".join(map(str, values)).encode()))
                row["rounds"] = [
                    statistics.median(rng.choices(row["times"], k=len(row["times"]))) for _ in range(rounds)
                ]
                row["references"] = {}
            rows.append(row)
        return rows
