"""Kernel Tuner's own search strategies (`kt:<name>`, and brute force), seeded and told the budget."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import numpy as np
from kernel_tuner.interface import Options, strategy_map

if TYPE_CHECKING:
    from kernel_tuner.searchspace import Searchspace


class KernelTunerStrategy:
    """One of Kernel Tuner's strategies, seeded (they draw from numpy's and Python's global generators)."""

    def __init__(self, name: str, seed: int | None):
        self.name, self.seed = name, seed
        self.stop_reason: str | None = None  # after `tune`: why the search stopped

    def tune(self, searchspace: Searchspace, runner: Any, tuning_options: Options) -> list:
        if self.seed is not None:
            np.random.seed(self.seed)
            random.seed(self.seed)
        max_fevals = tuning_options.budget.max_fevals
        if max_fevals is not None and self.name != "brute_force":  # brute_force refuses the option
            # Kernel Tuner's tune_kernel() tells the strategies the budget this way; without it random_sample
            # stops at 10% of the space and greedy_ils at 100 evaluations, whatever the budget
            tuning_options = Options(
                {
                    **tuning_options,
                    "max_fevals": max_fevals,
                    "strategy_options": Options({**tuning_options.strategy_options, "max_fevals": max_fevals}),
                }
            )
        results = strategy_map[self.name].tune(searchspace, runner, tuning_options)
        self.stop_reason = _why_stopped(results, searchspace, tuning_options)
        return results


def _why_stopped(results: list, searchspace: Searchspace, tuning_options: Options) -> str:
    """Kernel Tuner's strategies end on their budget inside: tell it from what they evaluated."""
    budget = tuning_options.budget
    unique = {tuple(r.get(k) for k in searchspace.tune_params) for r in results if isinstance(r, dict)}
    if len(unique) >= searchspace.size:
        return "space exhausted"
    if budget.max_fevals is not None and len(unique) >= budget.max_fevals:
        return "budget"
    if budget.time_limit is not None and budget.get_time_spent() >= budget.time_limit:
        return "time limit"
    return "the strategy ended"
