"""Optuna's samplers by the names the tuner gives them, configured as the search uses them."""

from __future__ import annotations

import warnings

import optuna

from tuner.errors import TunerError


def make_sampler(name: str, seed: int | None, *, parallel: bool = False) -> optuna.samplers.BaseSampler:
    """`parallel`: several workers share the study; TPE then counts the configs other workers are still
    measuring as bad ones already (constant liar), so the workers spread out instead of crowding; `auto`
    never suggests a config another worker is measuring (tuner.search.auto_sampler)."""
    if name == "auto":
        from tuner.search.auto_sampler import AutoSampler  # scikit-learn loads only when it is used

        return AutoSampler(seed=seed)
    if name == "tpe":
        # multivariate TPE models the interactions between parameters (e.g. variant x block size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(
                seed=seed, multivariate=True, group=True, n_startup_trials=10, constant_liar=parallel
            )
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if name == "gp":
        try:
            import torch  # noqa: F401  (Optuna's GP sampler is written in PyTorch)
        except ImportError:
            raise TunerError("the 'gp' strategy needs PyTorch: pip install torch") from None
        return optuna.samplers.GPSampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "qmc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
    raise TunerError(f"unknown Optuna sampler '{name}'")
