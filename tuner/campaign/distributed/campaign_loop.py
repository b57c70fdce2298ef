"""The search loop (tuner.search.loop) of one worker in a distributed campaign: the same asks, settling and
tells as a single-process search, with what sharing the study adds:

- a trial is wanted while the budget lasts, the space has a config no trial holds (or one is queued) and the
  campaign's patience is not spent (its results in trial order, every worker's);
  the configs other workers hold are never suggested as the nearest free one;
- brute force samples nothing: each worker keeps the study's queue topped up with configs no trial holds,
  and a trial asked when others had emptied the queue is told surplus;
- right after each ask the trial gets a heartbeat, kept up until it is told (tuner.campaign.distributed.liveness);
- of trials that drew the same config, the lowest-numbered measured or live one keeps it: a later one is
  told its value (repeat) or steps aside (taken), and the search goes on from the nearest free config;
- a retried trial (its worker died) first looks for a row its dead worker may have stored (`on_retry`).
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import optuna
from optuna.storages import RDBStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, Trial, TrialState

from tuner.campaign.distributed.liveness import Heartbeat, Liveness, dead_trials
from tuner.campaign.distributed.study import (
    Campaign,
    TrialCodec,
    in_limbo,
    patience_spent,
    retry_of,
    tally_trials,
)
from tuner.search import optuna_private, trial_kinds
from tuner.search.codec import Repair, penalty_for
from tuner.search.loop import Prior, Proposal, SearchLoop
from tuner.search.sampler_view import ViewSampler
from tuner.search.samplers import make_sampler

if TYPE_CHECKING:
    from kernel_tuner.searchspace import Searchspace

FEED = 4  # brute force: a worker tops the queue up with this many configs when it holds fewer


class CampaignLoop(SearchLoop):
    """`halted()`: true once the worker should ask for nothing more (its measurement failed, its time is up).
    After `propose()` gives None, `running` says how many trials were running anywhere at the last look;
    `out_of_patience` says whether that look found the campaign's patience spent (a trial asked ahead is then given
    back unmeasured, as one process drops it: tuner.campaign.distributed.scheduler)."""

    def __init__(
        self,
        study: optuna.Study,
        storage: RDBStorage,
        camp: Campaign,
        searchspace: Searchspace,
        me: str,
        *,
        halted: Callable[[], bool] = lambda: False,
        on_retry: Callable[[], None] = lambda: None,
        log: Callable[[str], None] = lambda msg: None,
    ):
        codec = TrialCodec(searchspace)
        if camp.strategy != "brute_force":  # a sampler of its own, seeded apart from the other workers'
            seed = (camp.seed * 1_000_003 + zlib.crc32(me.encode())) % 2**31
            study.sampler = ViewSampler(make_sampler(camp.strategy, seed=seed, parallel=True), codec, searchspace.list)
        self.rng = random.Random(zlib.crc32(me.encode()))
        super().__init__(
            study,
            codec,
            Repair(searchspace, codec, self.rng),
            searchspace.is_param_config_valid,
            maximize=study.direction == StudyDirection.MAXIMIZE,
            worker=me,
        )
        self.codec: TrialCodec = codec
        self.storage, self.camp, self.searchspace, self.me = storage, camp, searchspace, me
        self.brute = camp.strategy == "brute_force"
        self.halted, self.on_retry, self.log = halted, on_retry, log
        self.liveness = Liveness(study, storage, camp.heartbeat_s, camp.grace_s)
        self.beats: dict[int, Heartbeat] = {}  # trial number -> its heartbeat, while this worker holds it
        self.held: dict[int, Trial] = {}  # trial number -> the trial, from its ask until the loop is done with it
        self.running = 0
        self.out_of_patience = False
        self._retrying: int | None = None  # the trial number of the retry being settled

    def propose(self) -> Proposal | None:
        proposal = super().propose()
        if proposal is not None and self._retrying == proposal.trial.number:
            self.on_retry()
        return proposal

    def close(self) -> None:
        """The worker stops (done, stopped, or failed): the trials it still holds (asked ahead, never measured) are
        given back (abandon), and their heartbeats stop. None is left running, to be given up for lost only after
        the grace period and retried as a dead worker's."""
        for trial in list(self.held.values()):
            try:
                self.abandon(trial)
            except Exception as e:  # noqa: BLE001  (the database gone: the trial is retried as a lost one's, later)
                # the error's type only: a driver's message may quote the storage URL
                self.log(
                    f"{self.me}: trial {trial.number} not given back ({type(e).__name__}); retried after the grace"
                )
            finally:
                self.release(trial)
        for number in list(self.beats):
            self.beats.pop(number).stop()

    def abandon(self, trial: Trial) -> None:
        """Not measured after all (asked ahead of a stop or past the time limit, or its measurement raised): told
        FAIL as `given_back`, so that it holds its config against nobody (no retry follows, study.in_limbo)."""
        self.pending.pop(trial.number, None)
        try:
            self.tell(trial, "given_back", state=TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # our heartbeat came late and another worker gave it up for lost: its retry takes the config

    # the hooks of SearchLoop

    def wanted(self) -> bool:
        if self.halted():
            return False
        self.liveness.check()
        tally = tally_trials(self.study.get_trials(deepcopy=False), self.codec, limbo_s=self.camp.grace_s)
        self.running = tally["running"] + tally["limbo"]  # a trial in limbo is retried: wait for it
        for config in tally["held"]:
            self.repair.mark(config)
        if self.brute:
            return tally["waiting"] + (self._feed(tally) if tally["waiting"] < FEED else 0) > 0
        # the campaign's, every worker's results; the latest look's word, not for good: a lower-numbered trial told
        # since may come before the results that spent it, in trial order
        self.out_of_patience = patience_spent(tally["done"].values(), self.camp.patience)
        if self.out_of_patience:
            return False
        # a queued trial (the nearest free config to a repeat) is taken even when none is free any more
        max_evals = self.camp.max_evals
        budget_left = max_evals is None or len(tally["done"]) + tally["running"] < max_evals
        return budget_left and (tally["waiting"] > 0 or not self.repair.exhausted())

    def distributions(self) -> dict | None:
        # brute force takes its config from the queued trial's fixed params: asking without distributions
        # spares one write transaction per parameter, which workers queue for
        return None if self.brute else self.codec.dists

    def started(self, trial: Trial) -> None:
        self.held[trial.number] = trial
        self.beats[trial.number] = self.liveness.beat(trial)
        trial.set_user_attr("worker", self.me)  # who holds it while it runs (`tuner status`)

    def release(self, trial: Trial) -> None:
        self.held.pop(trial.number, None)
        beat = self.beats.pop(trial.number, None)
        if beat is not None:
            beat.stop()

    def config_of(self, trial: Trial) -> tuple | None:
        frozen = self.storage.get_trial(optuna_private.trial_id(trial))  # a queued trial's params, its retry mark
        retry = retry_of(frozen) is not None
        self._retrying = trial.number if retry else None
        if self.brute and optuna_private.fixed_params(frozen) is None and not retry:
            return None  # others emptied the queue between looking and asking: Optuna sampled this trial
        return self.codec.config_of(frozen)

    def prior(self, trial: Trial, config: tuple) -> Prior | None:
        held = prior_claim(
            self.study, self.codec, trial.number, config, limbo_s=self.camp.grace_s, storage=self.storage
        )
        if held is None:
            return None
        return Prior(trial_kinds.cost(held) if held.state.is_finished() else None)

    def step_aside(self, config: tuple) -> None:
        if self.brute:  # the queue goes on with configs no trial holds
            self.repair.mark(config)
        else:
            super().step_aside(config)

    def penalty(self) -> float:
        if self.brute:  # no sampler learns from it: this worker's own results will do
            return super().penalty()
        return penalty_for(
            trial_kinds.cost(t)
            for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if trial_kinds.info(t).get("status") == "ok"
        )

    def tell(
        self, trial: Trial, kind: str, *, value: float | None = None, state: TrialState | None = None, **fields: Any
    ) -> None:
        try:
            super().tell(trial, kind, value=value, state=state, **fields)
        except optuna.exceptions.UpdateFinishedTrialError:
            # our heartbeat came late and another worker gave the trial up for lost: its retry finds our
            # row in the store and serves it
            self.log(f"{self.me}: trial {trial.number} was given up for lost meanwhile; its retry will reuse the row")

    def _feed(self, tally: dict) -> int:
        """Brute force: enqueue a few configs no trial holds, picked at random so that workers feeding at
        the same moment rarely pick the same (if they do, the claim check lets one measure it). The queue
        stays short on purpose: Optuna reads every waiting trial each time it pops one."""
        free = [tuple(c) for c in self.searchspace.list if tuple(c) not in tally["held"]]
        room = len(free) if self.camp.max_evals is None else self.camp.max_evals - len(tally["held"])  # the budget
        picked = self.rng.sample(free, max(0, min(FEED, len(free), room)))
        for config in picked:
            self.enqueue(config)
        return len(picked)


def prior_claim(
    study: optuna.Study,
    codec: TrialCodec,
    number: int,
    config: tuple,
    settle_s: float = 5.0,
    limbo_s: float = 0.0,
    storage: RDBStorage | None = None,
) -> FrozenTrial | None:
    """The lowest-numbered other trial holding `config`: measured or served (ran or failed), running, or lost and
    about to be retried (in limbo for up to `limbo_s`, tuner.campaign.distributed.study.in_limbo). A
    lower-numbered trial still being asked (its params arrive one by one) is waited for, briefly, so that two
    workers that drew the same config at the same moment both see who came first. Given the `storage`, a running
    trial whose worker is dead (past the grace `limbo_s`, liveness.dead_trials) holds nothing: it is retried."""
    deadline = time.monotonic() + settle_s
    dead: set[int] | None = None
    while True:
        trials = study.get_trials(deepcopy=False)
        limbo = {t.number for t in in_limbo(trials, limbo_s)} if limbo_s else set()
        if dead is None:  # once: a read of the heartbeats (on SQLite, under the write lock) per claim check
            dead = dead_trials(storage, trials, limbo_s) if storage is not None and limbo_s else set()
        best, unsettled = None, False
        for t in trials:
            if t.number >= number or t.number in dead or not _claims(t, limbo):
                continue
            other = codec.config_of(t)
            if other is None:
                unsettled = unsettled or t.state == TrialState.RUNNING
                continue
            if other == config and (best is None or t.number < best.number):
                best = t
        if best is not None or not unsettled or time.monotonic() > deadline:
            return best
        time.sleep(0.02)


def _claims(trial: FrozenTrial, limbo: set[int]) -> bool:
    """Whether the trial holds its config against later trials: running, holding a result, or in limbo."""
    return trial.state == TrialState.RUNNING or trial_kinds.holds_result(trial) or trial.number in limbo
