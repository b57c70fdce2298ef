"""Early stopping: a search stops when its best has not improved by more than `min_delta` (relative) in
`patience` consecutive unique evaluations. As in Keras' EarlyStopping, the best that counts moves only on a
real gain: steady gains under `min_delta` each add up to one and reset the count. One rule, used live by
the Optuna strategies and offline by `tuner compare-strategies` to measure what a patience costs and saves
on recorded spaces."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MIN_DELTA = 0.005  # improvements under 0.5% are within the timing noise of a single evaluation


class Patience:
    """Feed it each new evaluation's cost (lower is better; None or inf for a failed config)."""

    def __init__(self, patience: int | None, min_delta: float = MIN_DELTA):
        if patience is not None and patience < 1:
            raise ValueError("patience must be at least 1 evaluation")
        self.patience, self.min_delta = patience, min_delta
        self.best = math.inf  # the best cost seen
        self.reference = math.inf  # the cost a gain is measured from: the best at the last real gain
        self.since = 0

    def update(self, cost: Any) -> bool:  # float | None; Any: mypy does not narrow it through `finite`
        """True when the search should stop after this evaluation."""
        finite = cost is not None and math.isfinite(cost)
        if finite and (math.isinf(self.reference) or cost < self.reference - self.min_delta * abs(self.reference)):
            self.reference, self.since = cost, 0
        else:
            self.since += 1
        if finite:
            self.best = min(self.best, cost)
        return self.patience is not None and self.since >= self.patience


def evaluations_until_stop(costs: Sequence[float | None], patience: int | None, min_delta: float = MIN_DELTA) -> int:
    """How many of `costs` (in evaluation order) a search with this patience would have used."""
    rule = Patience(patience, min_delta)
    for i, cost in enumerate(costs):
        if rule.update(cost):
            return i + 1
    return len(costs)
