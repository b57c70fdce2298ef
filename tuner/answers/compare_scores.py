"""How close the traces of `tuner compare-strategies` (tuner.answers.compare) get to the optimum.

Per unique evaluation: the best so far, as a fraction of the optimum, and the evaluations until it is
within 5% / 1% of it; the score of Willemsen et al. against the calculated random search, and its bootstrap
interval over the repeats; what early stopping would have done. Pure functions of traces and arrays:
tuner.answers.compare.summarize gathers them into one document. A run that stopped before the budget keeps its
best for the rest of the budget."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from tuner.errors import TunerError
from tuner.search.early_stopping import evaluations_until_stop

CHECKPOINTS = (10, 20, 50, 100, 200)
WITHIN = (0.05, 0.01)  # "within 5% / 1% of the optimum"
PATIENCES = (10, 20, 30, 50)  # early-stopping rules measured offline on every trace
INTERVAL = 0.9  # the confidence of a score's bootstrap interval over the repeats
# the score's window: from the evaluations random search needs to get 1% of the way from the median to the
# optimum, to those it needs for 95% (autotuning_methodology's defaults)
CUTOFF_START, CUTOFF = 0.01, 0.95


# ---- best so far, per unique evaluation ---------------------------------------------------------------


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


# ---- the score of Willemsen et al. --------------------------------------------------------------------


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
    bsf: np.ndarray, values: np.ndarray, maximize: bool, *, cutoff: float = CUTOFF, cutoff_start: float = CUTOFF_START
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
    window = _window(bsf, values, maximize, cutoff, cutoff_start)
    if isinstance(window, list):
        return {"score": float("nan"), "error": float("nan"), "evaluations": window}
    standardised = window.standardised(_median(window.ranks, axis=0))
    return {
        "score": float(np.mean(standardised)),
        "error": float(np.std(standardised)),
        "evaluations": [int(window.evals[0]), int(window.evals[-1])],
    }


@dataclass(frozen=True)
class ScoreCurve:
    """Where a methodology score comes from: the evaluations M of its window, P(M) (the score is their mean), and
    each repeat's rank from the top at each M (0: the optimum; NaN until it found something)."""

    evals: np.ndarray  # M (1-based)
    standardised: np.ndarray  # P(M)
    rank_from_top: np.ndarray  # (repeats, M)


def score_curve(bsf: np.ndarray, values: np.ndarray, maximize: bool) -> ScoreCurve | None:
    """methodology_score's curve over its window, for a closer look at where a score is won or lost (None where
    the window holds no evaluation)."""
    window = _window(bsf, values, maximize, CUTOFF, CUTOFF_START)
    if isinstance(window, list):
        return None
    top = window.ranks if not maximize else window.dist.size - 1 - window.ranks
    return ScoreCurve(window.evals, window.standardised(_median(window.ranks, axis=0)), top)


@dataclass(frozen=True)
class _Window:
    """The evaluations M the score runs over, each repeat's rank there, and what standardises a curve."""

    evals: np.ndarray  # M (1-based)
    ranks: np.ndarray  # (repeats, M): each repeat's best's rank in `dist`; NaN until it found something
    dist: np.ndarray  # the recorded values, ascending
    baseline: np.ndarray  # the calculated random search at M
    gap: np.ndarray  # optimum - baseline
    worst_rank: int

    def standardised(self, median_rank: np.ndarray) -> np.ndarray:
        """P(M) of a curve given as the median rank at each M (any leading axes: resamples)."""
        curve = self.dist[np.round(np.nan_to_num(median_rank, nan=self.worst_rank)).astype(int)]
        return (curve - self.baseline) / self.gap


def _window(
    bsf: np.ndarray, values: np.ndarray, maximize: bool, cutoff: float, cutoff_start: float
) -> _Window | list[int]:
    """The score's window (methodology_score's docstring), or its [start, end] where it holds no evaluation."""
    dist = np.sort(np.asarray(values, dtype=float))  # ascending, as the package ranks the best found
    ordered = _worst_to_best(dist, maximize)
    optimum = ordered[-1]
    start = max(1, _cutoff_evals(ordered, maximize, cutoff_start))
    end = min(_cutoff_evals(ordered, maximize, cutoff), bsf.shape[1])
    if end < start:
        return [start, end]
    evals = np.arange(start, end + 1)
    baseline = calculated_random_search(dist, maximize, evals)
    gap = optimum - baseline
    if np.any(gap == 0):  # random search expected at the optimum: the package refuses; we stop before it
        keep = int(np.argmax(gap == 0))
        if keep == 0:
            return [start, end]
        evals, baseline, gap = evals[:keep], baseline[:keep], gap[:keep]
    # rank of each repeat's best in the distribution; runs that found nothing yet are left out of the median
    best = bsf[:, evals - 1]
    ranks = np.where(np.isnan(best), np.nan, np.searchsorted(dist, np.nan_to_num(best), side="left"))
    return _Window(evals, ranks, dist, baseline, gap, 0 if maximize else dist.size - 1)


def _median(ranks: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: nothing found yet by any run
        return np.nanmedian(ranks, axis=axis)


def score_resamples(bsf: np.ndarray, values: np.ndarray, maximize: bool, n_resamples: int = 1000) -> np.ndarray:
    """The methodology score of `n_resamples` bootstrap resamples of the repeats (the rows of `bsf`, drawn with
    replacement; scipy.stats.bootstrap, seeded, so a report repeats): how much a score owes to which repeats
    ran. Runs of one strategy differ most on the first evaluations, which the score weighs: two designs 0.07
    apart at 10 repeats were level on 20 other seeds (docs/strategies.md, "Held-out seeds")."""
    window = _window(bsf, values, maximize, CUTOFF, CUTOFF_START)
    if isinstance(window, list) or len(bsf) < 2:
        return np.full(n_resamples, np.nan)

    def score_of(rows: np.ndarray, axis: int = -1) -> np.ndarray:  # rows: (..., repeats), the last axis (scipy's)
        return window.standardised(_median(window.ranks[rows], axis=-2)).mean(axis=-1)

    from scipy import stats  # here: importing scipy.stats is a second of every `tuner` command's start

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate distribution (every repeat alike) is an answer here
        result = stats.bootstrap(
            (np.arange(len(bsf)),),
            score_of,
            vectorized=True,
            n_resamples=n_resamples,
            method="percentile",
            random_state=np.random.default_rng(0),
        )
    return np.asarray(result.bootstrap_distribution, dtype=float)


def interval(resamples: np.ndarray, confidence: float = INTERVAL) -> list[float]:
    """The central `confidence` interval of bootstrap resamples (NaN where there are none)."""
    ok = resamples[~np.isnan(resamples)]
    if not ok.size:
        return [float("nan"), float("nan")]
    tail = 50 * (1 - confidence)
    return [float(np.percentile(ok, tail)), float(np.percentile(ok, 100 - tail))]


# ---- checkpoints and early stopping -------------------------------------------------------------------


def checkpoints(budget: int) -> list[int]:
    return sorted({c for c in CHECKPOINTS if c <= budget} | {budget})


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
