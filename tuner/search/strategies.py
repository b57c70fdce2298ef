"""Search strategies by name. Each is an object with Kernel Tuner's strategy interface,
`tune(searchspace, runner, tuning_options)`, so Kernel Tuner's runners (live, isolated or simulated)
evaluate what it picks. Optuna samplers by name (tuner.search.optuna_strategy, through the one search loop
of tuner.search.loop); Kernel Tuner's own strategies as `kt:<name>` (tuner.search.kt_strategies)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernel_tuner.interface import strategy_map

from tuner.errors import TunerError
from tuner.search.codec import Codec, Repair, penalty_for
from tuner.search.kt_strategies import KernelTunerStrategy
from tuner.search.names import DEFAULT_PATIENCE, DEFAULT_STRATEGY, OPTUNA_SAMPLERS
from tuner.search.optuna_strategy import OptunaStrategy
from tuner.search.samplers import make_sampler

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

__all__ = [
    "DEFAULT_PATIENCE",
    "DEFAULT_STRATEGY",
    "OPTUNA_SAMPLERS",
    "Codec",
    "KernelTunerStrategy",
    "OptunaStrategy",
    "Repair",
    "make_sampler",
    "make_strategy",
    "penalty_for",
    "strategy_names",
]


def strategy_names() -> list[str]:
    return list(OPTUNA_SAMPLERS) + ["brute_force"] + [f"kt:{n}" for n in strategy_map if n != "brute_force"]


def make_strategy(
    name: str,
    *,
    seed: int | None = None,
    storage: str | BaseStorage | None = None,
    study_name: str | None = None,
    encoding: str = "ordinal",
    warm_start: Sequence[dict] = (),
    patience: int | None = None,
) -> OptunaStrategy | KernelTunerStrategy:
    """`warm_start`: configs (dicts) an Optuna search tries first; `patience`: stop after that many unique
    evaluations without a 0.5% improvement (tuner.search.early_stopping). Kernel Tuner's strategies take neither."""
    if name in OPTUNA_SAMPLERS:
        return OptunaStrategy(
            name,
            seed=seed,
            storage=storage,
            study_name=study_name,
            encoding=encoding,
            warm_start=warm_start,
            patience=patience,
        )
    if warm_start or patience:
        raise TunerError(
            f"warm starts and early stopping work with the Optuna strategies "
            f"({', '.join(OPTUNA_SAMPLERS)}), not with '{name}'"
        )
    kt_name = name.removeprefix("kt:")
    if kt_name in strategy_map and (name.startswith("kt:") or name == "brute_force"):
        return KernelTunerStrategy(kt_name, seed)
    raise TunerError(f"unknown strategy '{name}'; choose one of: {', '.join(strategy_names())}")
