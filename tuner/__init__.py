"""GPU autotuning campaigns: Kernel Tuner compiles, launches, times and verifies; Optuna searches;
every measurement lands in pandas tables under results/."""

__version__ = "0.1.0"
