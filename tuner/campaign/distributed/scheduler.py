"""One worker's two threads around its search loop (tuner.campaign.distributed.campaign_loop): the calling
thread measures, one config at a time; a scheduler thread keeps the books with the study (asks for the next
trial while the current one measures, then stores its row and tells it), so the GPU waits for the database
only when a measurement is quicker than the bookkeeping.

The trials asked ahead go to the runner's compile pool as they are asked (tuner.search.ahead), as a
single-process search's do: at least one waits behind the one measuring, more where compiling a config takes
longer than measuring one (Pace), up to the pool's workers. Past the worker's time limit, once the scheduler's
latest look at the study found the campaign's patience spent (as one process drops what it asked ahead when its
patience stops the search), or when the worker stops (Ctrl-C, SIGTERM, an error), a trial asked ahead is not
measured but given back (told FAIL, CampaignLoop.abandon): its config is free again at once for a worker with time
left. The trial taken at once behind the one measuring is taken before the scheduler tells that one's result and
looks again: the GPU does not wait for the database to learn whether that result spent the patience."""

from __future__ import annotations

import queue
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.storages import RDBStorage
from optuna.trial import Trial, TrialState

from tuner import store
from tuner.campaign.distributed.campaign_loop import CampaignLoop
from tuner.campaign.distributed.study import Campaign
from tuner.campaign.request import CampaignRequest
from tuner.campaign.session import Session, known_rows, store_row
from tuner.formatting import readable
from tuner.measure import kt
from tuner.search import trial_kinds
from tuner.search.ahead import Pace, compile_ahead
from tuner.search.loop import Proposal
from tuner.space import Space
from tuner.space.model import row_time

if TYPE_CHECKING:
    from kernel_tuner.searchspace import Searchspace

POLL_S = 1.0  # how often an idle worker looks again while others still measure


class Scheduler:
    """A worker's search: `run()` measures, on the calling thread, what its scheduler thread proposes."""

    def __init__(
        self,
        study: optuna.Study,
        storage: RDBStorage,
        camp: Campaign,
        space: Space,
        searchspace: Searchspace,
        session: Session,
        me: str,
        root: Path,
        req: CampaignRequest,
        log: Callable[[str], None],
    ):
        from kernel_tuner.strategies.common import CostFunc

        self.study, self.camp, self.space, self.searchspace = study, camp, space, searchspace
        self.session, self.me, self.root, self.req, self.log = session, me, root, req, log
        self.counts = {"measured": 0, "served": 0}
        self.last_row: tuple[dict, bool] | None = None
        self.stopping = threading.Event()
        self.scheduler_error: BaseException | None = None
        self.deadline: float | None = None  # set below, once the search is ready to start
        # its search ended at the deadline, not for want of work (the campaign's results tell budget, space and
        # patience apart: tuner.campaign.distributed.status._stopped), as one process says `time limit`
        self.timed_out = False
        limit, self.prefetch = compile_ahead(session.runner)  # the pipeline is made here, before the threads
        self.pace = Pace(limit)
        self.loop = BudgetLoop(
            study, storage, camp, searchspace, me, halted=self._halted, on_retry=self._read_known_rows, log=log
        )
        runner = session.runner
        runner.known = self._known_rows()
        runner.on_row = self._on_row
        self.cost_func = CostFunc(
            searchspace, kt.tuning_options(space, camp.size_vars, camp.dtype, seed=camp.seed), runner, snap=False
        )
        # the time budget starts here, after the store read for rows measured before (which a large store makes
        # slow, and which is not the search's time), as one process's does (Kernel Tuner's TuningBudget, made by
        # kt.tuning_options in tuner.campaign.local._run_session, after its store read); here after the budget
        # loop's set-up too
        self.deadline = time.monotonic() + camp.time_limit if camp.time_limit else None

    def _known_rows(self) -> dict:
        return known_rows(
            store.load_evaluations(self.camp.workload, self.root),
            self.space,
            self.session.common,
            self.session.provenance,
            self.camp.timeout,
        )

    def _read_known_rows(self) -> None:
        """A retry: its dead worker may have stored the row already, and then it is served, not measured."""
        self.session.runner.known.update(self._known_rows())

    def _on_row(self, row: dict, fresh: bool) -> None:
        self.last_row = (row, fresh)  # written to the store by the scheduler, before it tells the study

    def _halted(self) -> bool:
        return self.stopping.is_set() or (self.deadline is not None and time.monotonic() >= self.deadline)

    def run(self) -> dict:
        """Search until the campaign is done; a summary of this worker's trials."""
        todo: queue.Queue[Proposal | None] = queue.Queue()  # the scheduler keeps `_inflight()` trials in flight
        done: queue.Queue[tuple[Proposal, object]] = queue.Queue()
        with warnings.catch_warnings():  # heartbeats outside Study.optimize are what we mean
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
            scheduler = threading.Thread(target=self._schedule, args=(todo, done), name="scheduler", daemon=True)
            scheduler.start()
            try:
                while (job := todo.get()) is not None:
                    if self._out_of_time() or self.loop.out_of_patience:  # asked ahead, never measured
                        done.put((job, None))
                        continue
                    self.last_row = None
                    try:
                        cost = self.cost_func(list(job.config), check_restrictions=False)
                    except BaseException as e:
                        done.put((job, e))
                        raise
                    done.put((job, (cost, self.last_row)))
            finally:
                self.stopping.set()  # after an error here, the scheduler asks for nothing more
                scheduler.join(timeout=60)
                self.loop.close()
        if self.scheduler_error is not None:
            raise self.scheduler_error
        # handed back: trials told at once, without a measurement (invalid, repeat, taken, surplus)
        return {
            "worker": self.me,
            "gpu": self.session.gpu["gpu"],
            "simulated": self.camp.simulate,  # its `measured` were replayed from the recording
            **self.counts,
            "trials": self.loop.asked,
            "handed_back": self.loop.settled,
            "stopped": self._stopped(),
        }

    def _stopped(self) -> str | None:
        """Why its search stopped, as `tuner status` says it of the campaign (status._stopped): the campaign's
        patience spent (which status checks first: a worker that waited for others past its deadline stopped on
        the patience all the same), else its time limit, where its time ran out; None for want of work."""
        if self.loop.out_of_patience:
            return "patience"
        return "time limit" if self.timed_out else None

    def _out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _inflight(self) -> int:
        """Trials to keep asked: one measuring, one waiting behind it (the database's time hidden), and more
        where their compiles need it."""
        return max(2, self.pace.depth)

    def _schedule(self, todo: queue.Queue[Proposal | None], done: queue.Queue[tuple[Proposal, object]]) -> None:
        """Keep trials measuring and waiting behind (`_inflight`); finish each as its result comes back."""
        inflight = 0
        try:
            while not self.stopping.is_set():
                while inflight and not done.empty():
                    if not self._finish(*done.get()):
                        return
                    inflight -= 1
                if inflight < self._inflight() and not self._halted():
                    proposal = self.loop.propose()
                    if proposal is not None:
                        if self.prefetch is not None:  # before it is queued: the measuring thread never takes a
                            self.prefetch([proposal.config])  # config whose compile job is still being made here
                        todo.put(proposal)
                        inflight += 1
                        continue
                    if self.loop.running == 0 and inflight == 0 and not self._halted():
                        return  # nothing left to ask and nobody measuring anywhere
                if inflight == 0 and self._halted():  # halted while asking too: its `running` is an old look
                    self.timed_out = not self.stopping.is_set()  # else stopped by the measuring thread
                    return  # out of time
                try:
                    if not self._finish(*done.get(timeout=POLL_S)):
                        return
                    inflight -= 1
                except queue.Empty:
                    pass  # still measuring here, or others are; the trial of one that dies comes back
            while not done.empty():  # stopped by the measuring thread: tell what it left (its failure)
                self._finish(*done.get())
        except BaseException as e:  # noqa: BLE001  (raised again by the measuring thread)
            self.scheduler_error = e
        finally:
            todo.put(None)

    def _finish(self, job: Proposal, result: Any) -> bool:
        """Store and tell one measured trial; False when the measuring thread failed (it raises). `result`: the
        measuring thread's exception, None for a trial it did not measure (out of time or of patience), or
        (cost, (row, fresh))."""
        trial, config = job
        try:
            if result is None or isinstance(result, BaseException):
                self.loop.abandon(trial)
                return result is None
            cost, (row, fresh) = result
            if fresh:  # the row first: a retry of this trial looks for it in the store
                self.session.writer.append(
                    {
                        **store_row(
                            row,
                            self.space,
                            self.camp.size_vars,
                            self.camp.dtype,
                            self.session.common,
                            self.session.provenance,
                            self.req,
                        ),
                        "worker": self.me,
                    }
                )
            self.pace.observe(row)
            ok = row["status"] == "ok"
            value = self.space.objective_value(row, self.camp.size_vars, self.camp.dtype) if ok else None
            self.counts["measured" if fresh else "served"] += 1
            named = dict(zip(self.loop.codec.names, config, strict=True))
            self.loop.record(
                trial,
                config,
                cost,
                "measured" if fresh else "served",
                status=row["status"],
                objective=value,
                config=store.canonical_config(named),
                time_ms=row_time(row) if ok and row.get("times") else None,
            )
            self.log(
                f"{self.me}: {row['status']:<12} {named}"
                + (f"  {readable(value)} {self.space.objective}" if value is not None else "")
            )
            return True
        finally:
            self.loop.release(trial)


class BudgetLoop(CampaignLoop):
    """A worker's search loop that claims a trial, then checks the budget. CampaignLoop.wanted() looks at the study
    (done + running < budget) before its ask: workers that look at the same moment all ask, and a campaign went
    past its budget (201/200 with four workers). So a trial asked past the budget is told `surplus`: past it when
    the trials before it in number (done, running or queued; those that hold one config counted once) fill the
    budget. Numbers order the trials as every worker sees them, so of trials asked together the later ones give
    way; a queued trial keeps the number it was queued with, and the ask takes the lowest-numbered queued one
    first. A trial numbered below the budget is never past it (no read)."""

    def config_of(self, trial: Trial) -> tuple | None:
        config = super().config_of(trial)
        return None if config is not None and self.past_budget(trial.number) else config

    def past_budget(self, number: int) -> bool:
        budget = self.camp.max_evals
        if budget is None or number < budget:
            return False
        configs, unnamed = set(), 0
        for t in self.study.get_trials(deepcopy=False):
            if t.number < number and (
                t.state in (TrialState.RUNNING, TrialState.WAITING) or trial_kinds.holds_result(t)
            ):
                config = self.codec.config_of(t)
                if config is None:
                    unnamed += 1  # still being asked: counted, a config of its own or not
                else:
                    configs.add(config)
        return len(configs) + unnamed >= budget
