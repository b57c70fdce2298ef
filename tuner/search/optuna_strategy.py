"""Optuna's samplers as a Kernel Tuner strategy: `tune(searchspace, runner, tuning_options)` runs the
search loop (tuner.search.loop) and Kernel Tuner's runner (live, isolated or simulated) measures."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import optuna
from kernel_tuner.strategies.common import CostFunc
from kernel_tuner.util import StopCriterionReached, get_result_cost

from tuner.errors import TunerError
from tuner.search.ahead import AskAhead, Pace, compile_ahead
from tuner.search.codec import Codec, Repair
from tuner.search.early_stopping import Patience
from tuner.search.loop import FAILED, SearchLoop
from tuner.search.sampler_view import ViewSampler
from tuner.search.samplers import make_sampler
from tuner.search.studies import open_study
from tuner.vocabulary import kt_error_status

if TYPE_CHECKING:
    from kernel_tuner.interface import Options
    from kernel_tuner.searchspace import Searchspace
    from optuna.storages import BaseStorage


class OptunaStrategy:
    """Optuna's ask/tell loop over Kernel Tuner's search space.

    - The study stores real parameter values and the objective in its direction (tuner.search.trial_kinds);
      the sampler sees numeric parameters as the index into their sorted values (ordinal), so that 64 lies
      between 32 and 128 (`encoding="categorical"`: every parameter categorical), and costs
      (tuner.search.sampler_view).
    - A suggestion that breaks a restriction, or repeats a measured config, costs no benchmark: its trial is
      pruned at once (the sampler sees a penalty, or the known cost), and the next trial is the unmeasured
      valid config nearest to the suggestion, so the search never stalls on its own suggestions.
    - Where the runner compiles ahead (a compile pool), trials are asked ahead of their measurement and their
      configs compiled meanwhile, as many as compiling needs to keep pace with measuring (tuner.search.ahead);
      the sampler counts those in flight (constant liar). Elsewhere one trial at a time.
    - Trials live in Optuna storage (SQLite by default), so an interrupted campaign resumes its study.
    - `stop_reason` says, after `tune`, why the search stopped.
    """

    def __init__(
        self,
        sampler: str,
        *,
        seed: int | None = None,
        storage: str | BaseStorage | None = None,
        study_name: str | None = None,
        encoding: str = "ordinal",
        warm_start: Sequence[dict] = (),
        patience: int | None = None,
    ):
        if encoding not in ("ordinal", "categorical"):
            raise TunerError(f"unknown encoding '{encoding}' (ordinal or categorical)")
        self.warm_start, self.patience = list(warm_start), patience
        self.sampler_name, self.seed, self.storage = sampler, seed, storage
        self.study_name, self.encoding = study_name, encoding
        self.stop_reason: str | None = None

    def tune(self, searchspace: Searchspace, runner: Any, tuning_options: Options) -> list:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        codec = Codec(searchspace.tune_params, self.encoding)
        metric, maximize = _objective(tuning_options)
        limit, prefetch = compile_ahead(runner)
        parallel = limit > 1  # trials in flight: the sampler lies about them (TPE's constant liar)
        study = open_study(
            self.storage,
            self.study_name,
            maximize=maximize,
            metric=metric,
            sampler=ViewSampler(make_sampler(self.sampler_name, self.seed, parallel=parallel), codec, searchspace.list),
        )
        cost_func = CostFunc(searchspace, tuning_options, runner, snap=False)
        loop = SearchLoop(
            study,
            codec,
            Repair(searchspace, codec, random.Random(self.seed)),
            searchspace.is_param_config_valid,
            maximize=maximize,
        )
        earlier = loop.measured_before()  # this study's results from an interrupted run
        for config in earlier:
            loop.repair.mark(config)
        for warm in self.warm_start:  # tried first, in order (Optuna serves enqueued trials before sampling)
            config = tuple(warm.get(n) for n in codec.names)
            if config not in earlier and None not in config and searchspace.is_param_config_valid(config):
                loop.enqueue(config, skip_if_exists=True, warm_start=True)
        stop = Patience(self.patience)

        try:
            # a resumed study's configs go through the runner again, which serves them from the store: they
            # count toward the budget and the patience, and are among the results (the best, the confirmation)
            for config in earlier:
                cost = cost_func(list(config), check_restrictions=False)
                loop.known(config, cost)
                if stop.update(cost if cost < FAILED else None):
                    self.stop_reason = "patience"
                    return cost_func.results
            ahead = AskAhead(loop, Pace(limit), prefetch, room=tuning_options.budget.get_evaluations_remaining)
            try:
                self.stop_reason = self._search(ahead, cost_func, tuning_options, stop)
            finally:
                ahead.drop()  # asked ahead and never measured: told FAIL, not left running
        except StopCriterionReached as stopped:
            self.stop_reason = _budget_reason(str(stopped))
        return cost_func.results

    @staticmethod
    def _search(ahead: AskAhead, cost_func: CostFunc, tuning_options: Options, stop: Patience) -> str:
        """Measure and tell the loop's proposals until it wants no more ("space exhausted") or patience stops
        it ("patience"); the budget's StopCriterionReached passes through, the trial it cut short told."""
        loop = ahead.loop
        while (proposal := ahead.next()) is not None:
            trial, config = proposal
            evaluated = len(cost_func.results)
            try:
                cost = cost_func(list(config), check_restrictions=False)
            except StopCriterionReached:
                if len(cost_func.results) > evaluated:  # measured, and that used up the budget: a trial like any
                    last = cost_func.results[-1]
                    loop.record(trial, config, _cost_of(last, tuning_options), **_failure(last))
                else:
                    loop.abandon(trial)
                raise
            except BaseException:  # interrupted: not left running (a sampler counting running trials would
                loop.abandon(trial)  # count it for ever in a resumed study)
                raise
            last = cost_func.results[-1]
            loop.record(trial, config, cost, **_failure(last))
            ahead.pace.observe(last)
            if stop.update(cost if cost < FAILED else None):
                return "patience"
        return "space exhausted"


def _objective(tuning_options: Options) -> tuple[str, bool]:
    """The objective's name and whether higher is better (Kernel Tuner 1.5 keeps both as lists)."""
    objective, higher = tuning_options.objective, tuning_options.objective_higher_is_better
    if isinstance(objective, (list, tuple)):
        objective, higher = objective[0], higher[0]
    return str(objective), bool(higher)


def _failure(result: dict) -> dict:
    """A failed evaluation's class for its trial's record ({} for one that ran): the measuring process's
    status where it gave one, else Kernel Tuner's error kind."""
    error = result.get("__error__")
    if error is None:
        return {}
    return {"status": result.get("status") or kt_error_status(error)}


def _budget_reason(message: str) -> str:
    """Kernel Tuner's StopCriterionReached says which limit: its evaluations or its time."""
    if "max_fevals" in message:
        return "budget"
    return "time limit" if "time limit" in message else message


def _cost_of(result: dict, tuning_options: Options) -> float:
    """Kernel Tuner's cost of one evaluation (what its cost function returns for it)."""
    cost = get_result_cost(result, tuning_options.objective, tuning_options.objective_higher_is_better)
    return cost[0] if len(cost) == 1 else cost
