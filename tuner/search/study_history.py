"""The study as the `auto` sampler (tuner.search.auto_sampler) reads it: each trial's parameters as level
indices (0 .. size - 1 of its distribution: an IntDistribution's steps, a CategoricalDistribution's choices),
its cost (minimised), the configs still being measured, and whether a warm start queued trials. Read through
the study alone (`study.get_trials`, `study.direction`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.study import Study, StudyDirection
from optuna.trial import TrialState

from tuner.search import trial_kinds
from tuner.search.codec import penalty_for


@dataclass
class History:
    """The study's configs as level indices (rows of `levels`), their costs (minimised; NaN: invalid or
    failed), and those still being measured."""

    levels: np.ndarray  # (n, d) int: complete trials, each config once
    costs: np.ndarray  # (n,)
    pending: np.ndarray  # (p, d) int: running trials with their params set
    seen: set  # every config above, as tuples
    warm_start: bool = False  # whether the study holds a trial the warm start queued (trial_kinds.WARM_START)


def read_history(study: Study, names: list[str], dists: list[BaseDistribution]) -> History:
    """The study's trials as level indices and costs. A penalty (what the loop tells an invalid or failed
    config: penalty_for the costs told before it) becomes NaN here. A config told twice (the loop tells a
    repeat its known value) counts once. One pass over the trials: the warm start's mark is read from any of
    them (one that failed included)."""
    sign = 1.0 if study.direction == StudyDirection.MINIMIZE else -1.0
    rows, costs, pending, seen = [], [], [], set()
    lo, hi = math.inf, -math.inf
    trials = study.get_trials(deepcopy=False)
    warm_start = any(t.user_attrs.get(trial_kinds.WARM_START) for t in trials)
    for t in sorted(trials, key=lambda t: t.number):
        if t.state not in (TrialState.COMPLETE, TrialState.RUNNING) or not all(n in t.params for n in names):
            continue
        key = tuple(level_of(d, t.params[n]) for n, d in zip(names, dists, strict=True))
        if t.state == TrialState.RUNNING:
            pending.append(key)
            seen.add(key)
            continue
        if t.value is None or key in seen:
            continue
        cost = sign * t.value
        penalty = penalty_for((lo, hi) if lo <= hi else ())
        bad = not math.isfinite(cost) or math.isclose(cost, penalty, rel_tol=1e-12) or cost >= penalty_for(())
        if not bad:
            lo, hi = min(lo, cost), max(hi, cost)
        seen.add(key)
        rows.append(key)
        costs.append(math.nan if bad else cost)
    d = len(names)
    return History(
        np.array(rows, dtype=int).reshape(-1, d),
        np.array(costs, dtype=float),
        np.array(pending, dtype=int).reshape(-1, d),
        seen,
        warm_start,
    )


def n_levels(dist: BaseDistribution) -> int:
    if isinstance(dist, CategoricalDistribution):
        return len(dist.choices)
    assert isinstance(dist, IntDistribution)
    return (dist.high - dist.low) // dist.step + 1


def level_of(dist: BaseDistribution, value: Any) -> int:
    if isinstance(dist, CategoricalDistribution):
        return int(dist.to_internal_repr(value))
    assert isinstance(dist, IntDistribution)
    return (int(value) - dist.low) // dist.step


def value_of(dist: BaseDistribution, level: int) -> Any:
    if isinstance(dist, CategoricalDistribution):
        return dist.choices[level]
    assert isinstance(dist, IntDistribution)
    return dist.low + level * dist.step
