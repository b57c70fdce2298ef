"""The analysis behind `tuner compare-strategies` (tuner.cli.compare_strategies): replay a recorded complete
(brute-force) space with several strategies and repeats, and compare how fast each gets close to the optimum.

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
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.replay import replay
from tuner.search.stopping import evaluations_until_stop
from tuner.search.strategies import DEFAULT_PATIENCE, DEFAULT_STRATEGY, make_strategy
from tuner.search.warmstart import warm_configs, warm_evaluations
from tuner.store.recordings import find_recording
from tuner.workloads import get_workload

DEFAULT_STRATEGIES = (
    "default",
    "tpe",
    "cmaes",
    "random",
    "qmc",
    "kt:genetic_algorithm",
    "kt:dual_annealing",
    "kt:greedy_ils",
    "kt:random_sample",
)
CHECKPOINTS = (10, 20, 50, 100, 200)
WITHIN = (0.05, 0.01)  # "within 5% / 1% of the optimum"
PATIENCES = (10, 20, 30, 50)  # early-stopping rules measured offline on every trace
# strategy modifiers: `tpe+warm` starts from the best configs of the other recorded sizes (tuner.search.warmstart),
# `tpe+stop` stops early with the default patience (tuner.search.stopping). `default` is what `tuner tune --budget N`
# runs; without a budget it also stops early, which the `stopping` figures of each strategy measure
MODIFIERS = ("warm", "stop")
DEFAULT = f"{DEFAULT_STRATEGY}+warm"


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
    cachefile = find_recording(Path(root or store.results_root()), workload, size_name, dtype, gpu)
    # a brute-force replay computes the objective exactly as the strategies' replays will see it
    results, gpu_name = replay(
        space, size_vars, dtype, cachefile, make_strategy("brute_force"), max_evals=kt.searchspace(space).size
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


def make_compared_strategy(rec: Recording | None, name: str, seed: int | None = None) -> Any:
    """A strategy by name, with modifiers (MODIFIERS) after a '+'; `default` is `tuner tune`'s own."""
    base, *mods = (DEFAULT if name == "default" else name).split("+")
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


def _task(args: tuple[Recording, str, int, int]) -> tuple[str, int, list]:
    rec, strategy, seed, budget = args
    return strategy, seed, strategy_trace(rec, strategy, seed, budget)


def run_traces(
    rec: Recording,
    strategies: Sequence[str],
    repeats: int,
    budget: int,
    jobs: int = 1,
    on_done: Callable[[], object] | None = None,
) -> dict:
    """{strategy: [trace of repeat 0, 1, ...]}; repeat r is seeded with r, so the result does not depend on
    `jobs` or on the order in which workers finish."""
    tasks = [(rec, s, seed, budget) for seed in range(repeats) for s in strategies]
    out: dict[str, list] = {s: [None] * repeats for s in strategies}
    done: Iterator
    if jobs <= 1:
        done = map(_task, tasks)
    else:
        # spawned (not forked) workers: nothing inherited from the parent's threads or random generators
        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        done = pool.map(_task, tasks)
    try:
        for strategy, seed, trace in done:
            out[strategy][seed] = trace
            if on_done:
                on_done()
    finally:
        if jobs > 1:
            pool.shutdown(cancel_futures=True)
    return out


def best_so_far(traces: list, budget: int, maximize: bool) -> np.ndarray:
    """(repeats, budget) best objective after 1..budget unique evaluations: NaN until a config ran, then
    carried forward, also past the end of a run that stopped early."""
    out = np.full((len(traces), budget), np.nan)
    pick = np.fmax if maximize else np.fmin
    for i, trace in enumerate(traces):
        row = np.array([np.nan if v is None else v for v in trace][:budget], dtype=float)
        if row.size:
            row = pick.accumulate(row)
            out[i, : row.size] = row
            out[i, row.size :] = row[-1]
    return out


def fraction_of_optimum(bsf: np.ndarray, optimum: float, maximize: bool) -> np.ndarray:
    """Best-so-far as a fraction of the optimum, in [0, 1] (0 before anything ran)."""
    frac = bsf / optimum if maximize else optimum / bsf
    return np.nan_to_num(frac, nan=0.0)


def evaluations_to(bsf: np.ndarray, optimum: float, maximize: bool, within: float) -> np.ndarray:
    """Per repeat, the unique evaluations until the best is within `within` (0.05 = 5%) of the optimum;
    inf where it never got there."""
    with np.errstate(invalid="ignore"):
        hit = bsf >= optimum * (1 - within) if maximize else bsf <= optimum * (1 + within)
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1.0, np.inf)


# ---- the score of Willemsen et al. -------------------------------------------------------------------


def _worst_to_best(values: np.ndarray, maximize: bool) -> np.ndarray:
    v = np.sort(values)
    return v if maximize else v[::-1]


def calculated_random_search(values: np.ndarray, maximize: bool, evals: np.ndarray) -> np.ndarray:
    """The calculated random-search baseline of Willemsen et al.: after M evaluations drawn without
    replacement from N configs, the best has expected rank M(N+1)/(M+1) (counted from the worst); the
    baseline is the recorded value at that position, rounded and capped as `autotuning_methodology`
    1.1.0 does (`RandomSearchCalculatedBaseline._redwhite_index`: index round(M(N+1)/(M+1)), at most N-1,
    into the values sorted worst to best)."""
    dist = _worst_to_best(values, maximize)
    n = dist.size
    m = np.asarray(evals, dtype=float)
    return dist[np.minimum(n - 1, np.round(m * (n + 1) / (m + 1)).astype(int))]


def _cutoff_evals(dist: np.ndarray, maximize: bool, percentile: float) -> int:
    """Evaluations random search needs (by the calculated baseline) to reach the value `percentile` of the
    way from the median to the optimum (`SearchspaceStatistics.cutoff_point` of the package)."""
    n, optimum = dist.size, dist[-1]
    target = optimum + (np.median(dist) - optimum) * (1 - percentile)
    reached = dist >= target if maximize else dist <= target
    i = int(np.argmax(reached))
    if percentile != 1.0 and dist[i] == optimum:
        if i == 0:
            raise TunerError("every recorded configuration is as good as the optimum: nothing to compare")
        i -= 1
    return math.ceil(i / (n + 1 - i))


def methodology_score(
    bsf: np.ndarray, values: np.ndarray, maximize: bool, *, cutoff: float = 0.95, cutoff_start: float = 0.01
) -> dict:
    """The performance score of Willemsen et al., "A methodology for comparing optimization algorithms for
    auto-tuning" (Future Generation Computer Systems, 2024), as `autotuning_methodology` 1.1.0 computes it
    over function evaluations, on our unique-evaluation best-so-far matrix `bsf` (repeats x evaluations):

    - the strategy's curve at M evaluations is the recorded value at the median (over repeats) rank of the
      best found (`StochasticOptimizationAlgorithm.get_curve_over_fevals` with the distribution);
    - it is standardised against the calculated random-search baseline B(M) (`calculated_random_search`)
      and the optimum: P(M) = (curve(M) - B(M)) / (optimum - B(M)) (`Baseline.get_standardised_curves`),
      so 0 is random search and 1 is the optimum found at once;
    - the score is the mean of P over M, its error the standard deviation of P over M
      (`report_experiments.get_strategy_scores`).

    M runs over the package's range: from the evaluations random search needs to get `cutoff_start` of the
    way from the median to the optimum, to those it needs for `cutoff` (0.01 and 0.95, the package's
    defaults; `cutoff_point_fevals_time_start_end`), capped at the evaluations in `bsf`. (The package's
    curve over evaluations counts every evaluation and drops repeats that stopped early; ours counts unique
    evaluations and carries a stopped run's best forward.)

    `values` are the objective values of every valid config of the space (failed ones left out)."""
    dist = np.sort(np.asarray(values, dtype=float))  # ascending, as the package ranks the best found
    ordered = _worst_to_best(dist, maximize)
    optimum = ordered[-1]
    start = max(1, _cutoff_evals(ordered, maximize, cutoff_start))
    end = min(_cutoff_evals(ordered, maximize, cutoff), bsf.shape[1])
    if end < start:
        return {"score": float("nan"), "error": float("nan"), "evaluations": [start, end]}
    evals = np.arange(start, end + 1)
    baseline = calculated_random_search(dist, maximize, evals)
    # rank of each repeat's best in the distribution; runs that found nothing yet are left out of the median
    best = bsf[:, evals - 1]
    ranks = np.where(np.isnan(best), np.nan, np.searchsorted(dist, np.nan_to_num(best), side="left"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: nothing found yet by any run
        median_rank = np.nanmedian(ranks, axis=0)
    worst_rank = 0 if maximize else dist.size - 1
    curve = dist[np.round(np.nan_to_num(median_rank, nan=worst_rank)).astype(int)]
    gap = optimum - baseline
    if np.any(gap == 0):  # random search expected at the optimum: the package refuses; we stop before it
        keep = int(np.argmax(gap == 0))
        if keep == 0:
            return {"score": float("nan"), "error": float("nan"), "evaluations": [start, end]}
        evals, curve, baseline, gap = evals[:keep], curve[:keep], baseline[:keep], gap[:keep]
    standardised = (curve - baseline) / gap
    return {
        "score": float(np.mean(standardised)),
        "error": float(np.std(standardised)),
        "evaluations": [int(evals[0]), int(evals[-1])],
    }


# ---- the comparison ------------------------------------------------------------------------------------


def checkpoints(budget: int) -> list[int]:
    return sorted({c for c in CHECKPOINTS if c <= budget} | {budget})


def summarize(rec: Recording, traces: dict, budget: int) -> dict:
    """The comparison as one JSON-ready document."""
    doc: dict = {
        "workload": rec.workload,
        "size": rec.size_name,
        "dtype": rec.dtype,
        "gpu": rec.gpu,
        "recording": str(rec.cachefile),
        "configs": int(rec.values.size),
        "objective": rec.objective,
        "maximize": rec.maximize,
        "optimum": rec.optimum,
        "budget": budget,
        "repeats": len(next(iter(traces.values()))),
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
        entry: dict = {
            "methodology": methodology_score(bsf, rec.values, rec.maximize),
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
    return doc


def early_stopping(runs: list, frac: np.ndarray, maximize: bool) -> dict:
    """What each patience would have done to these runs: evaluations used, and the best found then."""
    out = {}
    close = 1 - WITHIN[0] if maximize else 1 / (1 + WITHIN[0])  # "within 5%" as evaluations_to counts it
    for patience in PATIENCES:
        used = np.array(
            [
                evaluations_until_stop([None if v is None else (-v if maximize else v) for v in t], patience)
                for t in runs
            ]
        )
        at_stop = frac[np.arange(len(runs)), np.maximum(used, 1) - 1]
        out[str(patience)] = {
            "evaluations": float(used.mean()),
            "fraction": float(at_stop.mean()),
            "within_5pct": float((at_stop >= close - 1e-12).mean()),
        }
    return out


def compare(
    workload: str,
    size: str | None = None,
    dtype: str | None = None,
    *,
    strategies: Iterable[str] = DEFAULT_STRATEGIES,
    repeats: int = 30,
    budget: int = 200,
    gpu: str | None = None,
    root: Path | None = None,
    jobs: int | None = None,
    on_start: Callable[[int], object] | None = None,
    on_done: Callable[[], object] | None = None,
) -> dict:
    strategies = list(dict.fromkeys(strategies))
    if not strategies:
        raise TunerError("no strategies to compare")
    for s in strategies:
        make_compared_strategy(None, s)  # an unknown name fails here, before any replay
    if repeats < 1 or budget < 1:
        raise TunerError("--repeats and --budget must be at least 1")
    rec = load_recording(workload, size, dtype, gpu, root)
    budget = min(budget, kt.searchspace(get_workload(workload).space).size)
    if on_start:
        on_start(len(strategies) * repeats)
    jobs = jobs or os.cpu_count() or 1
    traces = run_traces(rec, strategies, repeats, budget, jobs=min(jobs, len(strategies) * repeats), on_done=on_done)
    return summarize(rec, traces, budget)


# ---- output --------------------------------------------------------------------------------------------


def table_rows(doc: dict, sep: str = " ") -> tuple[list[str], list[list[str]]]:
    """Header and rows of the table; `sep` joins a figure and its spread (a newline stacks them on screen)."""
    header = ["strategy", "score"] + [f"@{c}" for c in doc["checkpoints"]]
    header += [f"evals to {100 * (1 - w):g}%" for w in WITHIN] + ["evals used"]
    rows = []
    for name, e in doc["strategies"].items():
        m = e["methodology"]
        row = [name, "n/a" if math.isnan(m["score"]) else f"{m['score']:.3f}{sep}± {m['error']:.3f}"]
        row += [
            f"{e['fraction'][str(c)]['mean']:.3f}{sep}± {e['fraction'][str(c)]['std']:.3f}" for c in doc["checkpoints"]
        ]
        for w in WITHIN:
            t = e["evaluations_to"][f"{w:g}"]
            median = f"> {doc['budget']}" if t["median"] is None else f"{t['median']:g}"
            row.append(median + (f"{sep}({t['never']}/{doc['repeats']} never)" if t["never"] else ""))
        row.append(f"{e['unique_evaluations']:.0f}")
        rows.append(row)
    return header, rows


def caption(doc: dict) -> str:
    """What was compared, and how to read the table."""
    first = next(iter(doc["strategies"].values()))["methodology"]["evaluations"]
    return (
        f"{doc['workload']} {doc['size']} {doc['dtype']} on {doc['gpu']}: {doc['configs']} recorded configs, "
        f"optimum {doc['optimum']:.4g} {doc['objective']}; {doc['repeats']} repeats, budget {doc['budget']} "
        f"unique evaluations. @k: best found after k unique evaluations as a fraction of the optimum "
        f"(mean ± std over repeats). Score: Willemsen et al. 2024 (0 = calculated random search, "
        f"1 = optimum at once), the mean over evaluations {first[0]}-{first[1]} of the standardised curve "
        f"(± its std over those evaluations)."
    )


def markdown(doc: dict) -> str:
    header, rows = table_rows(doc)
    lines = [caption(doc), "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    x = np.arange(1, doc["budget"] + 1)
    for name, e in doc["strategies"].items():
        (line,) = ax.plot(x, e["curve"]["mean"], label=name, linewidth=1.5)
        ax.fill_between(x, e["curve"]["p10"], e["curve"]["p90"], color=line.get_color(), alpha=0.12, linewidth=0)
    ax.plot(x, doc["random_search_calculated"], "k--", linewidth=1, label="random search (calculated)")
    ax.set_xlabel("unique evaluations")
    ax.set_ylabel("best found / optimum")
    ax.set_title(
        f"{doc['workload']} {doc['size']} {doc['dtype']} on {doc['gpu']} "
        f"(mean, band: 10th-90th percentile of {doc['repeats']} repeats)",
        fontsize=10,
    )
    # the differences that matter are within a few percent of the optimum, after the first few evaluations
    k = min(10, doc["budget"])
    low = min(e["curve"]["p10"][k - 1] for e in doc["strategies"].values())
    ax.set_ylim(max(0.0, math.floor((low - 0.01) * 20) / 20), 1.005)
    ax.set_xscale("log")
    ax.set_xlim(1, doc["budget"])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
