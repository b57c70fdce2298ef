"""The search's ask/tell loop, one for single-process and distributed campaigns (the package's only
`study.ask`).

`propose()` asks the study for a trial and settles every suggestion that needs no measurement: one that
breaks a restriction is pruned with a penalty cost, one whose config already has a result is pruned with
that result's cost, and the unmeasured valid config nearest to it is queued as a next trial, so the search
never stalls on its own suggestions. It returns the next (trial, config) to measure; `record()` tells the
measurement: the objective in its own direction, or for a failed config a pruned trial with the penalty.
Trials are recorded as tuner.search.trial_kinds describes; the sampler sees them through
tuner.search.sampler_view, as costs.

Trials may be asked ahead (tuner.search.ahead): a config proposed and not yet told is `pending`, held like a
measured one (never the nearest free config, a suggestion of it steps aside as `taken`), so no config is
measured twice. Asked one at a time, nothing is ever pending at an ask, and the loop is the sequential one.

A distributed campaign (tuner/campaign/distributed/campaign_loop.py) overrides the hooks: when a trial is
wanted (the budget, trials of other workers, brute force's queue), what follows each ask (a heartbeat),
where a trial's config comes from (a queued trial's fixed params), and which earlier trial holds a config
(other workers' trials as well as its own)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import optuna
from optuna.trial import Trial, TrialState

from tuner.search import trial_kinds
from tuner.search.codec import Codec, Repair, penalty_for

FAILED = sys.float_info.max  # Kernel Tuner's cost of a config that failed to compile, run or verify


class Proposal(NamedTuple):
    trial: Trial
    config: tuple


@dataclass(frozen=True)
class Prior:
    """An earlier trial holding a suggested config: its cost, or None while it is still being measured."""

    value: float | None


class SearchLoop:
    """Owns the study, the codec, the repair and the penalty; `valid(config)` applies the restrictions;
    `maximize`: the objective's direction (a cost is its negation then, as Kernel Tuner's).
    `fields`: added to every trial's record (a distributed worker's name)."""

    def __init__(
        self,
        study: optuna.Study,
        codec: Codec,
        repair: Repair,
        valid: Callable[[tuple], bool],
        *,
        maximize: bool = False,
        **fields: Any,
    ):
        self.study, self.codec, self.repair, self.valid = study, codec, repair, valid
        self.maximize = maximize
        self.fields = fields
        self.values: dict[tuple, float] = {}  # config -> cost: measured here, or known from before
        self.asked = 0  # trials asked for
        self.settled = 0  # of those, told without a measurement
        self.pending: dict[int, tuple] = {}  # trial number -> config: proposed, not told yet

    # the loop

    def propose(self) -> Proposal | None:
        """The next trial to measure and its config; None when no more trials are wanted."""
        while self.wanted():
            trial = self.study.ask(self.distributions())
            self.asked += 1
            try:
                self.started(trial)
                config = self._settle(trial)
            except BaseException:
                self.release(trial)
                raise
            if config is not None:
                self.pending[trial.number] = config
                self.repair.mark(config)  # held: the nearest free config to a later suggestion is another
                return Proposal(trial, config)
            self.release(trial)
            self.settled += 1
        return None

    def record(self, trial: Trial, config: tuple, cost: float, kind: str = "measured", /, **fields: Any) -> None:
        """Tell the study a config's cost: its objective value, or a failed config's trial pruned (the sampler
        is told the penalty); `fields` go to the trial's record (a failure's `status`, its class)."""
        self.values[config] = cost
        self.repair.mark(config)
        self.pending.pop(trial.number, None)
        if cost < FAILED:
            self.tell(trial, kind, value=-cost if self.maximize else cost, cost=cost, **fields)
        else:
            self.tell(trial, kind, state=TrialState.PRUNED, cost=self.penalty(), **fields)

    def abandon(self, trial: Trial) -> None:
        """The trial's config was not measured after all (out of budget, asked ahead of a stop, or the
        measurement raised)."""
        self.pending.pop(trial.number, None)
        self.study.tell(trial, state=TrialState.FAIL)

    def known(self, config: tuple, cost: float) -> None:
        """A config's cost from before this loop (a resumed study's): suggestions of it are told the cost."""
        self.values[config] = cost
        self.repair.mark(config)

    def enqueue(self, config: tuple, *, skip_if_exists: bool = False, warm_start: bool = False) -> None:
        """Queue `config` as a trial: Optuna serves queued trials before it samples. A warm start's trial is marked
        so (trial_kinds.WARM_START): the `auto` sampler skips its covering start after one."""
        attrs = {trial_kinds.WARM_START: True} if warm_start else None
        self.study.enqueue_trial(self.codec.encode(config), user_attrs=attrs, skip_if_exists=skip_if_exists)

    def penalty(self) -> float:
        return penalty_for(self.values.values())

    def measured_before(self) -> list[tuple]:
        """The valid configs of the study's trials that hold a result, in trial order."""
        configs = [
            self.codec.decode(t.params)
            for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if trial_kinds.holds_result(t)
        ]
        return [c for c in configs if c is not None and self.valid(c)]

    # hooks: a distributed campaign overrides them

    def wanted(self) -> bool:
        """Whether to ask for another trial."""
        return not self.repair.exhausted()

    def distributions(self) -> dict | None:
        """What the study is asked to suggest."""
        return self.codec.dists

    def started(self, trial: Trial) -> None:
        """Runs right after each ask."""

    def release(self, trial: Trial) -> None:
        """Runs once the loop is done with a trial it asked for: settled, measured or failed."""

    def config_of(self, trial: Trial) -> tuple | None:
        """The trial's config; None if it has none (nothing to measure)."""
        return self.codec.decode(trial.params)

    def prior(self, trial: Trial, config: tuple) -> Prior | None:
        """The earlier trial holding `config`, if any: measured, or asked ahead and not told yet."""
        cost = self.values.get(config)
        if cost is not None:
            return Prior(cost)
        return Prior(None) if config in self.pending.values() else None

    def step_aside(self, config: tuple) -> None:
        """After a suggestion that needs no measurement: queue the nearest free config to it."""
        self.repair.mark(config)
        if not self.repair.exhausted():
            self.enqueue(self.repair.nearest(config))

    def tell(
        self, trial: Trial, kind: str, *, value: float | None = None, state: TrialState | None = None, **fields: Any
    ) -> None:
        trial.set_user_attr(trial_kinds.ATTR, trial_kinds.record(kind, **self.fields, **fields))
        self.study.tell(trial, value, state=state)

    def _settle(self, trial: Trial) -> tuple | None:
        """The trial's config to measure, or None once the trial is told without a measurement."""
        config = self.config_of(trial)
        if config is None:
            self.tell(trial, "surplus", state=TrialState.FAIL)
            return None
        if not self.valid(config):
            self.tell(trial, "invalid", state=TrialState.PRUNED, status="invalid", cost=self.penalty())
        elif (prior := self.prior(trial, config)) is None:
            return config
        elif prior.value is None:
            self.tell(trial, "taken", state=TrialState.FAIL)
        else:
            cost = prior.value if prior.value < FAILED else self.penalty()
            self.tell(trial, "repeat", state=TrialState.PRUNED, cost=cost)
        self.step_aside(config)
        return None
