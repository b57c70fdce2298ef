"""Search strategies. Each is an object with Kernel Tuner's strategy interface,
`tune(searchspace, runner, tuning_options)`, so Kernel Tuner's runners (live, isolated or simulated)
evaluate what it picks. Optuna samplers by name; Kernel Tuner's own strategies as `kt:<name>`."""

from __future__ import annotations

import random
import sys
import warnings

import numpy as np
import optuna
from kernel_tuner.interface import Options, strategy_map
from kernel_tuner.strategies.common import CostFunc
from kernel_tuner.util import StopCriterionReached, get_result_cost

from tuner.errors import TunerError
from tuner.search.stopping import Patience

OPTUNA_SAMPLERS = ("tpe", "cmaes", "gp", "random", "qmc")
DEFAULT_STRATEGY = "tpe"
# measured on the recorded spaces (README, strategy comparison): with a warm start, 20 evaluations without a
# 0.5% gain cost under 1% of the optimum on average and save 40-60% of a 58-evaluation budget. `tuner tune`
# applies it when no budget is given (its default budget is then a ceiling)
DEFAULT_PATIENCE = 20


def strategy_names() -> list[str]:
    return list(OPTUNA_SAMPLERS) + ["brute_force"] + [f"kt:{n}" for n in strategy_map if n != "brute_force"]


def make_strategy(name: str, *, seed: int | None = None, storage: str | None = None, study_name: str | None = None,
                  encoding: str = "ordinal", warm_start=(), patience: int | None = None):
    """`warm_start`: configs (dicts) an Optuna search tries first; `patience`: stop after that many unique
    evaluations without a 0.5% improvement (tuner.search.stopping). Kernel Tuner's strategies take neither."""
    if name in OPTUNA_SAMPLERS:
        return OptunaStrategy(name, seed=seed, storage=storage, study_name=study_name, encoding=encoding,
                              warm_start=warm_start, patience=patience)
    if warm_start or patience:
        raise TunerError(f"warm starts and early stopping work with the Optuna strategies ({', '.join(OPTUNA_SAMPLERS)}), "
                         f"not with '{name}'")
    kt_name = name.removeprefix("kt:")
    if kt_name in strategy_map and (name.startswith("kt:") or name == "brute_force"):
        return KernelTunerStrategy(kt_name, seed)
    raise TunerError(f"unknown strategy '{name}'; choose one of: {', '.join(strategy_names())}")


class KernelTunerStrategy:
    """One of Kernel Tuner's strategies, seeded (they draw from numpy's and Python's global generators)."""

    def __init__(self, name: str, seed: int | None):
        self.name, self.seed = name, seed

    def tune(self, searchspace, runner, tuning_options):
        if self.seed is not None:
            np.random.seed(self.seed)
            random.seed(self.seed)
        max_fevals = tuning_options.budget.max_fevals
        if max_fevals is not None and self.name != "brute_force":  # brute_force refuses the option
            # Kernel Tuner's tune_kernel() tells the strategies the budget this way; without it random_sample
            # stops at 10% of the space and greedy_ils at 100 evaluations, whatever the budget
            tuning_options = Options({**tuning_options, "max_fevals": max_fevals,
                                      "strategy_options": Options({**tuning_options.strategy_options,
                                                                   "max_fevals": max_fevals})})
        return strategy_map[self.name].tune(searchspace, runner, tuning_options)


def make_sampler(name: str, seed: int | None, *, parallel: bool = False):
    """`parallel`: several workers share the study; TPE then counts the configs other workers are still
    measuring as bad ones already (constant liar), so the workers spread out instead of crowding."""
    if name == "tpe":
        # multivariate TPE models the interactions between parameters (e.g. variant x block size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, n_startup_trials=10,
                                              constant_liar=parallel)
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


class OptunaStrategy:
    """Optuna's ask/tell loop over Kernel Tuner's search space.

    - Numeric parameters are encoded as the index into their sorted values (ordinal), so samplers see that
      64 lies between 32 and 128; `encoding="categorical"` gives every parameter a categorical distribution.
    - A suggestion that breaks a restriction, or repeats a measured config, costs no benchmark: Optuna is
      told a penalty (or the known value) at once, and the next trial is the unmeasured valid config
      nearest to the suggestion, so the search never stalls on its own suggestions.
    - Trials live in Optuna storage (SQLite by default), so an interrupted campaign resumes its study.
    """

    def __init__(self, sampler: str, *, seed=None, storage=None, study_name=None, encoding="ordinal", warm_start=(),
                 patience=None):
        if encoding not in ("ordinal", "categorical"):
            raise TunerError(f"unknown encoding '{encoding}' (ordinal or categorical)")
        self.warm_start, self.patience = list(warm_start), patience
        self.sampler_name, self.seed, self.storage = sampler, seed, storage
        self.study_name, self.encoding = study_name, encoding

    def tune(self, searchspace, runner, tuning_options):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        codec = Codec(searchspace.tune_params, self.encoding)
        names, dists = codec.names, codec.dists
        study = optuna.create_study(storage=self.storage, study_name=self.study_name, load_if_exists=True,
                                    direction="minimize", sampler=make_sampler(self.sampler_name, self.seed))
        cost_func = CostFunc(searchspace, tuning_options, runner, snap=False)
        rng = random.Random(self.seed)

        visited = {}  # config -> cost, from this study's earlier trials and this run
        earlier = [codec.decode(t.params) for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                   if t.user_attrs.get("measured")]
        earlier = [c for c in earlier if c is not None and searchspace.is_param_config_valid(c)]
        repair = Repair(searchspace, codec, rng)
        for config in earlier:
            repair.mark(config)
        for warm in self.warm_start:  # tried first, in order (Optuna serves enqueued trials before sampling)
            config = tuple(warm.get(n) for n in names)
            if config not in earlier and None not in config and searchspace.is_param_config_valid(config):
                study.enqueue_trial(codec.encode(config), skip_if_exists=True)
        stop = Patience(self.patience)

        def penalty():
            return penalty_for(visited.values())

        def record(trial, config, cost) -> bool:
            """Tell Optuna a measured config's cost; True when the patience has run out."""
            visited[config] = cost
            repair.mark(config)
            trial.set_user_attr("measured", True)
            study.tell(trial, cost if cost < sys.float_info.max else penalty())
            return stop.update(cost if cost < sys.float_info.max else None)

        try:
            # a resumed study's configs go through the runner again, which serves them from the store: they
            # count toward the budget and the patience, and are among the results (the best, the confirmation)
            for config in earlier:
                visited[config] = cost = cost_func(list(config), check_restrictions=False)
                if stop.update(cost if cost < sys.float_info.max else None):
                    return cost_func.results
            while not repair.exhausted():
                trial = study.ask(dists)
                config = codec.decode(trial.params)
                if config in visited or not searchspace.is_param_config_valid(config):
                    # costs no benchmark: Optuna learns the known value (or a penalty for breaking a
                    # restriction), and the nearest unmeasured valid config is the next trial
                    known = visited.get(config)
                    trial.set_user_attr("invalid" if known is None else "repeat", True)
                    study.tell(trial, known if known is not None and known < sys.float_info.max else penalty())
                    study.enqueue_trial(codec.encode(repair.nearest(config)))
                    continue
                evaluated = len(cost_func.results)
                try:
                    cost = cost_func(list(config), check_restrictions=False)
                except StopCriterionReached:
                    if len(cost_func.results) > evaluated:  # measured, and that used up the budget: a trial like any
                        record(trial, config, _cost_of(cost_func.results[-1], tuning_options))
                    else:
                        study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    raise
                if record(trial, config, cost):
                    break
        except StopCriterionReached:
            pass
        return cost_func.results


def _cost_of(result: dict, tuning_options) -> float:
    """Kernel Tuner's cost of one evaluation (what its cost function returns for it)."""
    cost = get_result_cost(result, tuning_options.objective, tuning_options.objective_higher_is_better)
    return cost[0] if len(cost) == 1 else cost


def penalty_for(costs) -> float:
    """What Optuna is told for a failed or invalid config: a quarter of the range worse than the worst cost."""
    finite = [c for c in costs if c is not None and c < sys.float_info.max]
    if not finite:
        return 1e30
    lo, hi = min(finite), max(finite)
    return hi + 0.25 * (hi - lo) + 1e-9 * abs(hi)


class Codec:
    """Configs <-> Optuna params. Numeric parameters are encoded as the index into their sorted values
    (`ordinal`), so samplers see that 64 lies between 32 and 128; `categorical` gives every parameter a
    categorical distribution (its values as they are)."""

    def __init__(self, tune_params: dict, encoding: str = "ordinal"):
        self.names = list(tune_params)
        self.dists, self._values = {}, {}
        for name, values in tune_params.items():
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            if encoding == "ordinal" and numeric:
                self._values[name] = sorted(values)
                self.dists[name] = optuna.distributions.IntDistribution(0, len(values) - 1)
            else:
                self.dists[name] = optuna.distributions.CategoricalDistribution(list(values))

    def code(self, name, value):
        """One parameter's value as Optuna sees it."""
        return self._values[name].index(value) if name in self._values else value

    def encode(self, config, names=None) -> dict:
        return {n: self.code(n, v) for n, v in zip(names or self.names, config)}

    def decode(self, params: dict) -> tuple | None:
        """The config of a trial's params; None when some are missing."""
        if not all(n in params for n in self.names):
            return None
        return tuple(self._values[n][params[n]] if n in self._values else params[n] for n in self.names)


class Repair:
    """Nearest unmeasured valid configuration to a suggestion, by L1 distance over value indices."""

    def __init__(self, searchspace, codec: Codec, rng):
        self.configs = [tuple(c) for c in searchspace.list]
        self.index = {c: i for i, c in enumerate(self.configs)}
        self.codes = np.array([[_distance_code(codec, n, v) for n, v in zip(codec.names, c)] for c in self.configs],
                              dtype=float)
        self.codes += np.array([rng.random() * 1e-3 for _ in self.configs])[:, None]  # random tie-break
        self.free = np.ones(len(self.configs), dtype=bool)
        self.codec = codec

    def mark(self, config):
        i = self.index.get(tuple(config))
        if i is not None:
            self.free[i] = False

    def exhausted(self) -> bool:
        return not self.free.any()

    def nearest(self, config):
        target = np.array([_distance_code(self.codec, n, v) for n, v in zip(self.codec.names, config)], dtype=float)
        dist = np.abs(self.codes - target).sum(axis=1)
        dist[~self.free] = np.inf
        return self.configs[int(np.argmin(dist))]


def _distance_code(codec: Codec, name, value):
    """Ordinal parameters by their index; categorical ones are 0 (equal) or apart by their hash."""
    code = codec.code(name, value)
    return code if isinstance(code, (int, np.integer)) else (hash(code) % 997)
