"""The search's names and defaults that the command line shows before it searches: a leaf module (the standard
library only), so that building `tuner`'s parser imports neither Optuna nor Kernel Tuner
(tuner.search.strategies and tuner.answers.compare hold what uses them, and re-export these)."""

from __future__ import annotations

# Optuna's samplers by the names the tuner gives them (tuner.search.samplers configures them)
OPTUNA_SAMPLERS = ("auto", "tpe", "cmaes", "gp", "random", "qmc")

# what `tuner tune` runs (with the warm start on top). On the 22 recorded complete spaces, 10 repeats at 10% of
# each: cold, `auto` (tuner.search.auto_sampler) scores at least the best Kernel Tuner strategy on all 22 (mean
# 0.655, TPE 0.324: cold_summary.md); on seeds its design was not chosen on, 0.622 and 19 of 22 (seeds 10..29,
# TPE 0.441: cold_summary_heldout.md) and 0.606 and 22 of 22 (seeds 30..69, TPE 0.470: cold_summary_heldout40.md);
# warm-started, 0.776 against TPE's 0.753 (warm_summary.md)
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
