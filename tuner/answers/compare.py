"""The analysis behind `tuner compare-strategies` (tuner.cli.compare_strategies): replay a recorded complete
(brute-force) space with several strategies and repeats, and compare how fast each gets close to the optimum.
The space is a workload's recording in the store, or any Kernel Tuner cache or T4 results file (`compare_file`:
whatever kernel and GPU it came from; tuner.store.kt_files reads it, tuner.measure.file_replay replays it).

This module holds the recordings, the strategies compared (with their modifiers), the replays that turn a
strategy into a trace of unique evaluations, and `compare`, which runs them and `summarize`s the traces
into one document with the figures of tuner.answers.compare_scores; tuner.answers.compare_report renders it.

Everything counts *unique* evaluations: a strategy that re-evaluates a configuration gets no new evaluation
counted (a real campaign serves it from the store). A strategy that stops before the budget keeps its best
for the rest of the budget (that is what its user gets)."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner import store
from tuner.answers.compare_scores import (
    WITHIN,
    best_so_far,
    calculated_random_search,
    checkpoints,
    early_stopping,
    evaluations_to,
    fraction_of_optimum,
    interval,
    methodology_score,
    score_resamples,
)
from tuner.errors import TunerError
from tuner.measure.file_replay import replay_file
from tuner.measure.replay import replay, searchspace_size
from tuner.search.names import COMPARED_STRATEGIES
from tuner.search.strategies import DEFAULT_PATIENCE, DEFAULT_STRATEGY, make_strategy, strategy_names
from tuner.search.warmstart import warm_configs, warm_evaluations
from tuner.store.kt_files import FileRecording, read_recording
from tuner.store.recording_choice import find_recording
from tuner.workloads import get_workload

# strategy modifiers: `tpe+warm` starts from the best configs of the other recorded sizes (tuner.search.warmstart),
# `tpe+stop` stops early with the default patience (tuner.search.early_stopping). `default` is what `tuner tune --budget N`
# runs; without a budget it also stops early, which the `stopping` figures of each strategy measure.
# `default-cold` is the same strategy with the warm start off: what a kernel with no stored neighbours gets
MODIFIERS = ("warm", "stop")
DEFAULT = f"{DEFAULT_STRATEGY}+warm"
COLD, WARM = "default-cold", "default"


@dataclass(frozen=True)
class Recording:
    """A recorded complete space: where it is, and the objective of every recorded config that ran."""

    workload: str
    size_name: str
    dtype: str
    cachefile: Path
    gpu: str
    objective: str
    maximize: bool
    values: np.ndarray  # ascending; failed configs left out
    # configs a warm-started strategy tries first: from the store's other sizes / dtypes / GPUs, never this one
    warm_start: tuple = ()
    file: FileRecording | None = None  # a Kernel Tuner file with no workload here: replayed over its configs

    @property
    def optimum(self) -> float:
        return float(self.values[-1] if self.maximize else self.values[0])


def load_recording(
    workload: str, size: str | None = None, dtype: str | None = None, gpu: str | None = None, root: Path | None = None
) -> Recording:
    w = get_workload(workload)
    space = w.space
    size_name, size_vars = space.resolve_size(size, w.parse_size)
    dtype = space.resolve_dtype(dtype)
    cachefile = find_recording(Path(root or store.results_root()), workload, size_name, dtype, gpu, size_vars)
    # a brute-force replay computes the objective exactly as the strategies' replays will see it
    results, gpu_name = replay(
        space, size_vars, dtype, cachefile, make_strategy("brute_force"), max_evals=searchspace_size(space, dtype)
    )
    trace = _unique_trace(results, list(space.params), space.objective)
    values = np.sort(np.array([v for v in trace if v is not None], dtype=float))
    if values.size < 2:
        raise TunerError(f"{cachefile}: fewer than two configurations ran; nothing to compare")
    warm = warm_configs(warm_evaluations(workload, root), space, size_vars, dtype, gpu_name)
    return Recording(
        workload,
        size_name,
        dtype,
        Path(cachefile),
        gpu_name,
        space.objective,
        space.maximize,
        values,
        tuple(json.dumps(c) for c in warm),
    )


def load_file_recording(path: Path, objective: str | None = None, direction: str | None = None) -> Recording:
    """A Kernel Tuner cache or T4 results file as a recording (no warm start: nothing stored is its neighbour)."""
    f = read_recording(Path(path), objective, direction)
    values = np.sort(np.array(f.values, dtype=float))
    return Recording(f.kernel or Path(path).name, "", "", Path(path), f.device, f.objective, f.maximize, values, (), f)


def space_size(rec: Recording) -> int:
    """The configs a strategy searches: the workload's space, or every config a file recording holds."""
    if rec.file is not None:
        return len(rec.file.configs)
    return searchspace_size(get_workload(rec.workload).space, rec.dtype)  # built once for every replay of it


def make_compared_strategy(rec: Recording | None, name: str, seed: int | None = None) -> Any:
    """A strategy by name, with modifiers (MODIFIERS) after a '+'; `default` is `tuner tune`'s own, `default-cold`
    the same without its warm start."""
    head, *given = name.split("+")
    known = [WARM, COLD, *strategy_names()]
    if head not in known:
        raise TunerError(f"unknown strategy '{head}'; choose one of: {', '.join(known)}")
    if given and head in (WARM, COLD):
        raise TunerError(
            f"'{name}': {head} takes no modifiers ({WARM} is {DEFAULT}, {COLD} is {DEFAULT_STRATEGY}: give that "
            "with the modifiers)"
        )
    base, *mods = {WARM: DEFAULT, COLD: DEFAULT_STRATEGY}.get(name, name).split("+")
    unknown = set(mods) - set(MODIFIERS)
    if unknown:
        raise TunerError(
            f"unknown strategy modifier(s) {', '.join(sorted(unknown))} in '{name}' (known: {', '.join(MODIFIERS)})"
        )
    warm = [json.loads(c) for c in rec.warm_start] if rec is not None and "warm" in mods else []
    # a placeholder warm start before the recording is known, so a Kernel Tuner strategy with +warm fails early
    warm = warm or ([{}] if rec is None and "warm" in mods else [])
    return make_strategy(base, seed=seed, warm_start=warm, patience=DEFAULT_PATIENCE if "stop" in mods else None)


def _unique_trace(results: list, params: list[str], objective: str) -> list:
    """The objective of each newly evaluated config, in evaluation order (None for a failed one)."""
    seen, trace = set(), []
    for r in results:
        if r is None:
            continue
        key = tuple(r[k] for k in params)
        if key in seen:
            continue
        seen.add(key)
        value = r.get(objective)
        ok = "__error__" not in r and isinstance(value, (int, float)) and math.isfinite(value)
        trace.append(float(value) if ok else None)
    return trace


def strategy_trace(rec: Recording, strategy: str, seed: int, budget: int) -> list:
    """One replay of `strategy` on the recording: objective values per unique evaluation, at most `budget`."""
    if rec.file is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = replay_file(rec.file, make_compared_strategy(rec, strategy, seed), max_evals=budget, seed=seed)
        return _unique_trace(results, list(rec.file.tune_params), rec.objective)[:budget]
    w = get_workload(rec.workload)
    space = w.space
    _, size_vars = space.resolve_size(rec.size_name, w.parse_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's dual annealing warns about overflows in its temperature
        results, _ = replay(
            space,
            size_vars,
            rec.dtype,
            rec.cachefile,
            make_compared_strategy(rec, strategy, seed),
            max_evals=budget,
            seed=seed,
        )
    return _unique_trace(results, list(space.params), space.objective)[:budget]


def _task(args: tuple[int, Recording, str, int, int]) -> tuple[int, str, int, list]:
    space, rec, strategy, seed, budget = args
    return space, strategy, seed, strategy_trace(rec, strategy, seed, budget)


def run_traces(
    rec: Recording,
    strategies: Sequence[str],
    repeats: int,
    budget: int,
    jobs: int = 1,
    on_done: Callable[[], object] | None = None,
    first_seed: int = 0,
) -> dict:
    """{strategy: [trace of repeat 0, 1, ...]}; repeat r is seeded with first_seed + r, so the result does not
    depend on `jobs` or on the order in which workers finish (and a design chosen on seeds 0..9 can be scored on
    seeds it was not chosen on)."""
    seeds = range(first_seed, first_seed + repeats)
    return traces_of_spaces([(rec, budget)], strategies, seeds, jobs=jobs, on_done=on_done)[0]


def traces_of_spaces(
    spaces: Sequence[tuple[Recording, int]],
    strategies: Sequence[str],
    seeds: range,
    jobs: int = 1,
    on_done: Callable[[], object] | None = None,
) -> list[dict[str, list]]:
    """run_traces for each (recording, budget) of `spaces` at once: every (space, seed, strategy) is one task of
    one pool of `jobs` processes, the largest spaces first, so no space waits for the last repeat of the one
    before (the strategy reports replay every recorded space). Repeat r is seeded with seeds[r]."""
    tasks = [(i, rec, s, seed, budget) for i, (rec, budget) in enumerate(spaces) for seed in seeds for s in strategies]
    tasks.sort(key=lambda t: -t[4] * len(t[1].values))  # stable: a space's tasks keep their order
    out: list[dict[str, list]] = [{s: [None] * len(seeds) for s in strategies} for _ in spaces]
    done: Iterator
    if jobs <= 1:
        done = map(_task, tasks)
    else:
        # spawned (not forked) workers: nothing inherited from the parent's threads or random generators
        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        done = pool.map(_task, tasks)
    try:
        for i, strategy, seed, trace in done:
            out[i][strategy][seed - seeds[0]] = trace
            if on_done:
                on_done()
    finally:
        if jobs > 1:
            pool.shutdown(cancel_futures=True)
    return out


# ---- the comparison -----------------------------------------------------------------------------------


def summarize(rec: Recording, traces: dict, budget: int, first_seed: int = 0) -> dict:
    """The comparison as one JSON-ready document (`first_seed`: the seed of the traces' first repeat)."""
    doc: dict = {
        "workload": rec.workload,
        "size": rec.size_name,
        "dtype": rec.dtype,
        "gpu": rec.gpu,
        "recording": str(rec.cachefile),
        "configs": int(rec.values.size),
        "space": space_size(rec),
        "warm_start": len(rec.warm_start),
        "objective": rec.objective,
        "maximize": rec.maximize,
        "optimum": rec.optimum,
        "budget": budget,
        "repeats": len(next(iter(traces.values()))),
        "first_seed": first_seed,
        "checkpoints": checkpoints(budget),
        "strategies": {},
    }
    evals = np.arange(1, budget + 1)
    doc["random_search_calculated"] = fraction_of_optimum(
        calculated_random_search(rec.values, rec.maximize, evals), rec.optimum, rec.maximize
    ).tolist()
    for name, runs in traces.items():
        bsf = best_so_far(runs, budget, rec.maximize)
        frac = fraction_of_optimum(bsf, rec.optimum, rec.maximize)
        methodology = methodology_score(bsf, rec.values, rec.maximize)
        methodology["interval"] = interval(score_resamples(bsf, rec.values, rec.maximize))
        entry: dict = {
            "methodology": methodology,
            "unique_evaluations": float(np.mean([len(t) for t in runs])),
            "fraction": {},
            "evaluations_to": {},
        }
        for c in doc["checkpoints"]:
            col = frac[:, c - 1]
            entry["fraction"][str(c)] = {
                "mean": float(col.mean()),
                "std": float(col.std()),
                "p10": float(np.percentile(col, 10)),
                "p90": float(np.percentile(col, 90)),
            }
        for within in WITHIN:
            n = evaluations_to(bsf, rec.optimum, rec.maximize, within)
            median = float(np.median(n))  # runs that never got there count as infinitely many evaluations
            entry["evaluations_to"][f"{within:g}"] = {
                "median": None if math.isinf(median) else median,
                "never": int(np.isinf(n).sum()),
            }
        entry["stopping"] = early_stopping(runs, frac, rec.maximize)
        entry["curve"] = {
            "mean": frac.mean(axis=0).tolist(),
            "p10": np.percentile(frac, 10, axis=0).tolist(),
            "p90": np.percentile(frac, 90, axis=0).tolist(),
        }
        doc["strategies"][name] = entry
    scores = {name: e["methodology"]["score"] for name, e in doc["strategies"].items()}
    if COLD in scores and WARM in scores:  # the default with its warm start off and on, side by side
        doc["cold_warm"] = {"cold": scores[COLD], "warm": scores[WARM]}
    return doc


def compare(
    workload: str,
    size: str | None = None,
    dtype: str | None = None,
    *,
    strategies: Iterable[str] = COMPARED_STRATEGIES,
    repeats: int = 30,
    budget: int = 200,
    gpu: str | None = None,
    root: Path | None = None,
    jobs: int | None = None,
    first_seed: int = 0,
    on_start: Callable[[int], object] | None = None,
    on_done: Callable[[], object] | None = None,
) -> dict:
    """Replay a workload's recorded complete space with each strategy, `repeats` runs seeded `first_seed`,
    `first_seed` + 1, ... (a later first seed checks a design on seeds it was not chosen on)."""
    strategies = _checked(strategies, repeats, budget, first_seed, jobs)
    rec = load_recording(workload, size, dtype, gpu, root)
    return _run(rec, strategies, repeats, budget, jobs, first_seed, on_start, on_done)


def compare_file(
    path: Path,
    *,
    objective: str | None = None,
    direction: str | None = None,
    strategies: Iterable[str] = COMPARED_STRATEGIES,
    repeats: int = 30,
    budget: int = 200,
    jobs: int | None = None,
    first_seed: int = 0,
    on_start: Callable[[int], object] | None = None,
    on_done: Callable[[], object] | None = None,
) -> dict:
    """`compare` on a Kernel Tuner cache or T4 results file (load_file_recording)."""
    strategies = _checked(strategies, repeats, budget, first_seed, jobs)
    rec = load_file_recording(Path(path), objective, direction)
    return _run(rec, strategies, repeats, budget, jobs, first_seed, on_start, on_done)


def _checked(strategies: Iterable[str], repeats: int, budget: int, first_seed: int, jobs: int | None) -> list[str]:
    strategies = list(dict.fromkeys(strategies))
    if not strategies:
        raise TunerError("no strategies to compare")
    for s in strategies:
        make_compared_strategy(None, s)  # an unknown name fails here, before any replay
    if repeats < 1 or budget < 1:
        raise TunerError("--repeats and --budget must be at least 1")
    if first_seed < 0:
        raise TunerError(f"--first-seed must be 0 or more, not {first_seed}")
    if jobs is not None and jobs < 1:
        raise TunerError(f"--jobs must be at least 1 (leave it out for one per CPU core), not {jobs}")
    return strategies


def _run(
    rec: Recording,
    strategies: list[str],
    repeats: int,
    budget: int,
    jobs: int | None,
    first_seed: int,
    on_start: Callable[[int], object] | None,
    on_done: Callable[[], object] | None,
) -> dict:
    budget = min(budget, space_size(rec))
    if on_start:
        on_start(len(strategies) * repeats)
    jobs = min(jobs or os.cpu_count() or 1, len(strategies) * repeats)
    traces = run_traces(rec, strategies, repeats, budget, jobs=jobs, on_done=on_done, first_seed=first_seed)
    return summarize(rec, traces, budget, first_seed)
