"""The search's names and defaults that the command line shows before it searches: a leaf module (the standard
library only), so that building `tuner`'s parser imports neither Optuna nor Kernel Tuner
(tuner.search.strategies and tuner.answers.compare hold what uses them, and re-export these)."""

from __future__ import annotations

# Optuna's samplers by the names the tuner gives them (tuner.search.samplers configures them)
OPTUNA_SAMPLERS = ("auto", "tpe", "cmaes", "gp", "random", "qmc")

# what `tuner tune` runs (with the warm start on top): `auto` (tuner.search.auto_sampler), cold at least the best
# Kernel Tuner strategy on every recorded complete space; its figures, and how they were made, are in one place:
# docs/strategies.md ("A cold search") and results/records/common/nvidia-h100-80gb-hbm3/strategies/
DEFAULT_STRATEGY = "auto"
# measured on the recorded spaces with warm-started TPE (README, strategy comparison): 20 evaluations without a
# 0.5% gain cost under 1% of the optimum on average and save 40-60% of a 58-evaluation budget. `tuner tune`
# applies it when no budget is given (its default budget is then a ceiling)
DEFAULT_PATIENCE = 20

# what `tuner compare-strategies` compares unless told (tuner.answers.compare: `default` is DEFAULT_STRATEGY
# warm-started, `default-cold` the same without the warm start)
COMPARED_STRATEGIES = (
    "default",
    "default-cold",
    "tpe",
    "cmaes",
    "random",
    "qmc",
    "kt:genetic_algorithm",
    "kt:dual_annealing",
    "kt:greedy_ils",
    "kt:random_sample",
)
