"""A worker: one process bound to one GPU, taking trials from the campaign's study until it is done."""

from __future__ import annotations

import json
import os
import queue
import random
import socket
import statistics
import sys
import threading
import time
import warnings
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import optuna
import sqlalchemy
from optuna.trial import TrialState

from tuner import store
from tuner.campaign import confirmation
from tuner.campaign.distributed.cache_parts import cache_part, merge_cache_parts
from tuner.campaign.distributed.study import (
    MEASURED,
    Campaign,
    TrialCodec,
    load_campaign,
    tally_trials,
)
from tuner.campaign.request import CampaignRequest
from tuner.campaign.session import known_rows, open_session, store_row
from tuner.errors import TunerError
from tuner.formatting import readable
from tuner.measure import kt
from tuner.measure.provenance import source_hash
from tuner.measure.runner import IsolatedRunner
from tuner.search.strategies import Repair, make_sampler, penalty_for
from tuner.workloads import get_workload

POLL_S = 1.0  # how often an idle worker looks again while others still measure
FEED = 4  # brute force: a worker tops the queue up with this many configs when it holds fewer


def _claim_gpu(study, name: str, gpu: str, allow_mixed: bool) -> None:
    """The first worker sets the campaign's GPU model; the others must match it (timings are per model)."""
    if "gpu" not in study.user_attrs:
        study.set_user_attr("gpu", gpu)
    claimed = study.user_attrs["gpu"]
    if claimed != gpu and not allow_mixed:
        raise TunerError(f"campaign '{name}' runs on {claimed}, this worker's GPU is {gpu}: timings are per GPU "
                         "model, so the worker does not join (--allow-mixed-gpus to join anyway)")


def worker_id(device: int, pid: int | None = None) -> str:
    """This host's worker process `pid` (default: this one) on GPU `device`."""
    return store.safe_name(f"{socket.gethostname()}-gpu{device}-{pid or os.getpid()}")


def measuring_process(camp: Campaign, worker_target=None) -> dict:
    """What a worker's measuring process runs (IsolatedRunner.for_campaign's arguments, less the device): a
    replay of the recording for a simulated campaign, else Kernel Tuner on the GPU (or a test's stand-in,
    `worker_target` "module:function"). JSON, so that the parent can hand it to the workers it starts."""
    replay = "tuner.measure.replay:replay_main"
    return {"workload": camp.workload, "size": camp.size_vars, "dtype": camp.dtype, "backend": camp.backend,
            "timeout": camp.timeout, "env": {"TUNER_REPLAY": camp.recording} if camp.simulate else {},
            "target": replay if camp.simulate else worker_target}


def run_worker(name: str, url: str, device: int = 0, *, results: Path | None = None, allow_mixed_gpus: bool = False,
               worker_target=None, launched: IsolatedRunner | None = None, log=None) -> dict:
    """Join campaign `name` on GPU `device`; take trials until the campaign is done. Returns a summary.
    `launched`: its measuring process, launched early by the caller (used if it is the one this needs)."""
    log = log or (lambda msg: None)
    info = {"host": socket.gethostname(), "device": device, "pid": os.getpid(), "started": _now(), "timeline_s": {}}
    timeline = _Timeline(info["timeline_s"])
    info["process_started"] = round(timeline.t0, 3)  # epoch seconds
    study, camp = load_campaign(name, url, heartbeat=True)
    workload = get_workload(camp.workload)
    space = workload.space
    searchspace = kt.searchspace(space)
    timeline.mark("loaded")  # imports, the study, the search space
    if source_hash(space.source_text) != camp.kernel_hash:
        raise TunerError(f"campaign '{name}' tunes another version of {space.kernel_source.name} (kernel hash "
                         f"{camp.kernel_hash}): check out the same commit on every host")
    if camp.space_hash and camp.space_hash != space.space_hash:  # trials' params would decode to other configs
        raise TunerError(f"campaign '{name}' tunes another version of {space.path.name} (its parameters or "
                         "restrictions differ): check out the same commit on every host")
    root = Path(results or store.results_root())
    if camp.simulate:  # replayed rows are kept apart from measured ones (the store's readers never see them)
        root = root / "simulated"
    process = measuring_process(camp, worker_target)
    me = worker_id(device)
    req = CampaignRequest(workload=camp.workload, size=camp.size, dtype=camp.dtype, strategy=camp.strategy,
                          backend=camp.backend, device=device, seed=camp.seed, timeout=camp.timeout, quiet=True,
                          worker_target=process["target"])
    part = f"{store.safe_name(name)}.{me}"
    session = open_session(req, workload, camp.size, camp.size_vars, camp.dtype, root, name, part=part,
                           cachefile=lambda gpu: cache_part(root, gpu, camp, me),
                           check_gpu=lambda gpu: _claim_gpu(study, name, gpu["gpu"], allow_mixed_gpus),
                           env=process["env"], launched=launched)
    timeline.mark("joined")  # the measuring process started (its set-up in setup_s), baselines stored
    info["gpu"], info["launched_early"] = session.gpu["gpu"], launched is not None and session.runner is launched
    info["setup_s"] = {**session.runner.lifecycle_s, **session.runner.setup.get("setup_s", {})}
    study.set_user_attr(f"worker:{me}", info)
    log(f"worker {me} on {session.gpu['gpu']} joined campaign {name}")
    try:
        worker = _Worker(study, camp, space, searchspace, session, me, root, req, log)
        timeline.mark("ready")  # the store read for configs measured before
        summary = worker.run()
        timeline.mark("searched")  # the last trial told, and none running anywhere
        _confirm_campaign(study, space, searchspace, session, root, me, log)
        timeline.mark("confirmed")
        return summary
    finally:
        session.runner.shutdown()
        session.writer.flush()
        if not camp.simulate:
            merge_cache_parts(store.cache_path(root, session.gpu["gpu"], camp.workload, camp.size, camp.dtype),
                              [cache_part(root, session.gpu["gpu"], camp, me)])
        timeline.mark("closed")
        try:  # where this worker's time went, for `tuner status`; not worth failing a finished worker over
            study.set_user_attr(f"worker:{me}", info)
        except Exception:  # noqa: BLE001
            pass


class _Timeline:
    """Seconds from this process's start (Python's start-up and imports included) to each stage's end, into
    `marks`: a campaign's wall time that more workers do not divide (start-up, confirmation, shutdown) shows."""

    def __init__(self, marks: dict):
        self.marks = marks
        try:  # the process's start on Linux: /proc/self/stat's starttime, in clock ticks since boot
            ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
            age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
            self.t0 = time.time() - age
        except (OSError, ValueError, IndexError, AttributeError):
            self.t0 = time.time()

    def mark(self, stage: str) -> None:
        self.marks[stage] = round(time.time() - self.t0, 2)


class _Worker:
    def __init__(self, study, camp, space, searchspace, session, me, root, req, log):
        from kernel_tuner.strategies.common import CostFunc

        self.study, self.camp, self.space, self.searchspace = study, camp, space, searchspace
        self.session, self.me, self.root, self.req, self.log = session, me, root, req, log
        self.codec = TrialCodec(searchspace)
        if camp.strategy != "brute_force":  # a sampler of its own, seeded apart from the other workers'
            study.sampler = make_sampler(camp.strategy, seed=(camp.seed * 1_000_003 + zlib.crc32(me.encode())) % 2**31, parallel=True)
        self.rng = random.Random(zlib.crc32(me.encode()))
        self.repair = Repair(searchspace, self.codec, self.rng)
        self.counts = {"measured": 0, "served": 0, "trials": 0, "handed_back": 0}  # handed back: told at once
        self.ok_costs = []
        self.last_row = None
        self.next_check = 0.0  # when to look for trials of dead workers next
        runner = session.runner
        runner.known = known_rows(store.load_evaluations(camp.workload, root), space, session.common, session.provenance,
                                  camp.timeout)
        runner.on_row = self._on_row
        self.cost_func = CostFunc(searchspace, kt.tuning_options(space, camp.size_vars, camp.dtype, seed=camp.seed),
                                  runner, snap=False)

    def _on_row(self, row, fresh):
        self.last_row = (row, fresh)  # written to the store by the scheduler, before it tells the study

    def run(self) -> dict:
        """Two threads: this one measures, one config at a time; a scheduler thread keeps the books with
        the study (asks for the next trial while this one measures, then stores and tells the last), so
        the GPU waits for the database only when a measurement is quicker than the bookkeeping."""
        todo, done = queue.Queue(), queue.Queue()  # the scheduler keeps at most two trials in flight
        self.beats, self.scheduler_error, self.stopping = set(), None, threading.Event()
        with warnings.catch_warnings():  # heartbeats outside Study.optimize are what we mean
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
            scheduler = threading.Thread(target=self._schedule, args=(todo, done), name="scheduler", daemon=True)
            scheduler.start()
            try:
                while (job := todo.get()) is not None:
                    self.last_row = None
                    try:
                        cost = self.cost_func(list(job[1]), check_restrictions=False)
                    except BaseException as e:
                        done.put((job, e))
                        raise
                    done.put((job, (cost, self.last_row)))
            finally:
                self.stopping.set()  # after an error here, the scheduler asks for nothing more
                scheduler.join(timeout=60)
                for beat in list(self.beats):  # not daemon threads: they would keep a failed worker alive
                    beat.__exit__(None, None, None)
        if self.scheduler_error is not None:
            raise self.scheduler_error
        return {"worker": self.me, "gpu": self.session.gpu["gpu"], **self.counts}

    def _schedule(self, todo, done):
        """Keep one trial measuring and one waiting behind it; finish each as its result comes back."""
        deadline = time.monotonic() + self.camp.time_limit if self.camp.time_limit else None
        inflight = 0
        try:
            while not self.stopping.is_set():
                while inflight and not done.empty():
                    if not self._finish(*done.get()):
                        return
                    inflight -= 1
                if inflight < 2 and not (deadline and time.monotonic() >= deadline):
                    job, state = self._next_job()
                    if job is not None:
                        todo.put(job)
                        inflight += 1
                        continue
                    if state == "again":  # the trial was told at once (invalid, surplus, another's config)
                        continue
                    if state == "over" and inflight == 0:
                        return  # nothing left to ask and nobody measuring anywhere
                elif inflight == 0:
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

    def _next_job(self):
        """The next (trial, config, heartbeat) to measure, or None and why: "again" (the trial needed no
        measurement and is told already), "wait" (nothing to ask while others measure), "over" (nothing to
        ask and no trial running anywhere)."""
        brute = self.camp.strategy == "brute_force"
        if time.monotonic() >= self.next_check:  # a dead worker's trial goes back to the queue
            _adopt_orphans(self.study, self.camp.grace_s)
            optuna.storages.fail_stale_trials(self.study)
            self.next_check = time.monotonic() + min(self.camp.heartbeat_s, self.camp.grace_s / 4)
        tally = tally_trials(self.study.get_trials(deepcopy=False), self.codec)
        for config in tally["held"]:
            self.repair.mark(config)
        if brute:
            wanted = tally["waiting"] + (self._feed(tally) if tally["waiting"] < FEED else 0) > 0
        else:  # a queued trial (the nearest free config to a repeat) is taken even when none is free any more
            budget_left = self.camp.max_evals is None or len(tally["done"]) + tally["running"] < self.camp.max_evals
            wanted = budget_left and (tally["waiting"] > 0 or not self.repair.exhausted())
        if not wanted:
            return None, "over" if tally["running"] == 0 else "wait"
        # brute force takes its config from the queued trial's fixed params: asking without distributions
        # spares one write transaction per parameter, which workers queue for
        trial = self.study.ask() if brute else self.study.ask(self.codec.dists)
        self.study._storage.record_heartbeat(trial._trial_id)  # at once: see _adopt_orphans
        beat = optuna.storages._heartbeat.get_heartbeat_thread(trial._trial_id, self.study._storage)
        beat.__enter__()
        self.beats.add(beat)
        self.counts["trials"] += 1
        try:
            trial.set_user_attr("worker", self.me)
            config = self._config_to_measure(trial, brute)
        except BaseException:
            self._stop(beat)
            raise
        if config is None:
            self._stop(beat)
            self.counts["handed_back"] += 1
            return None, "again"
        return (trial, config, beat), "measure"

    def _config_to_measure(self, trial, brute: bool):
        """The trial's config, or None once the trial is told (surplus, invalid, or another trial's)."""
        frozen = self.study._storage.get_trial(trial._trial_id)
        if brute and not ({"fixed_params", "failed_trial"} & set(frozen.system_attrs)):
            # others emptied the queue between looking and asking: Optuna sampled this trial
            self._tell(trial, "surplus", state=TrialState.FAIL)
            return None
        config = self.codec.config_of(frozen)
        if not self.searchspace.is_param_config_valid(config):
            self._tell(trial, "invalid", value=self._penalty())
            self._enqueue_nearest(config, brute)
            return None
        prior = _prior_claims(self.study, self.codec, trial.number, config)
        if prior is not None:  # a lower-numbered trial holds this config: step aside
            if prior.state == TrialState.COMPLETE:
                self._tell(trial, "repeat", value=prior.value)
            else:
                self._tell(trial, "taken", state=TrialState.FAIL)
            self._enqueue_nearest(config, brute)
            return None
        if "failed_trial" in frozen.system_attrs:  # a retry: its dead worker may have stored the row already
            self.session.runner.known.update(known_rows(store.load_evaluations(self.camp.workload, self.root),
                                                         self.space, self.session.common, self.session.provenance,
                                                         self.camp.timeout))
        return config

    def _finish(self, job, result) -> bool:
        """Store and tell one measured trial; False when the measuring thread failed (it raises)."""
        trial, config, beat = job
        try:
            if isinstance(result, BaseException):
                self.study.tell(trial, state=TrialState.FAIL)
                return False
            cost, (row, fresh) = result
            if fresh:  # the row first: a retry of this trial looks for it in the store
                self.session.writer.append({**store_row(row, self.space, self.camp.size_vars, self.camp.dtype,
                                                         self.session.common, self.session.provenance, self.req),
                                            "worker": self.me})
            ok = row["status"] == "ok"
            value = self.space.objective_value(row, self.camp.size_vars, self.camp.dtype) if ok else None
            self.counts["measured" if fresh else "served"] += 1
            if ok:
                self.ok_costs.append(cost)
            self._tell(trial, "measured" if fresh else "served",
                       value=cost if cost < sys.float_info.max else self._penalty(), status=row["status"],
                       objective=value, config=store.canonical_config(dict(zip(self.codec.names, config))),
                       time_ms=statistics.median(row["times"]) if ok and row.get("times") else None)
            self.log(f"{self.me}: {row['status']:<12} {dict(zip(self.codec.names, config))}"
                     + (f"  {readable(value)} {self.space.objective}" if value is not None else ""))
            return True
        finally:
            self._stop(beat)

    def _stop(self, beat):
        beat.__exit__(None, None, None)
        self.beats.discard(beat)

    def _feed(self, tally) -> int:
        """Brute force: enqueue a few configs no trial holds, picked at random so that workers feeding at
        the same moment rarely pick the same (if they do, the claim check lets one measure it). The queue
        stays short on purpose: Optuna reads every waiting trial each time it pops one."""
        free = [tuple(c) for c in self.searchspace.list if tuple(c) not in tally["held"]]
        room = len(free) if self.camp.max_evals is None else self.camp.max_evals - len(tally["held"])  # the budget
        picked = self.rng.sample(free, max(0, min(FEED, len(free), room)))
        for config in picked:
            self.study.enqueue_trial(self.codec.encode(config))
        return len(picked)

    def _tell(self, trial, kind, *, value=None, state=None, **attrs):
        try:
            trial.set_user_attr("tuner", {"kind": kind, "worker": self.me, **attrs})
            self.study.tell(trial, value, state=state)
        except optuna.exceptions.UpdateFinishedTrialError:
            # our heartbeat came late and another worker gave the trial up for lost: its retry finds our
            # row in the store and serves it
            self.log(f"{self.me}: trial {trial.number} was given up for lost meanwhile; its retry will reuse the row")

    def _penalty(self) -> float:
        if self.camp.strategy == "brute_force":  # no sampler learns from it: no need to read the study
            return penalty_for(self.ok_costs)
        ok = [t.value for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.user_attrs.get("tuner", {}).get("status") == "ok"]
        return penalty_for(ok)

    def _enqueue_nearest(self, config, brute: bool):
        """The search goes on from the unclaimed valid config nearest to the one it could not have."""
        self.repair.mark(config)
        if not brute and not self.repair.exhausted():
            self.study.enqueue_trial(self.codec.encode(self.repair.nearest(config)))


def _adopt_orphans(study, grace_s: float) -> None:
    """A worker killed between taking a trial and its first heartbeat leaves a RUNNING trial that Optuna's
    stale check never fails (it looks at heartbeats only). Once such a trial is older than the grace period,
    give it one heartbeat: nobody renews it, so the next check fails it and it is retried like any other."""
    old = datetime.now() - timedelta(seconds=grace_s)  # Optuna stamps datetime_start in local time
    candidates = [t._trial_id for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                  if t.datetime_start is not None and t.datetime_start < old]
    if not candidates:
        return
    storage = study._storage
    with storage._backend.engine.connect() as conn:  # Optuna's schema: one row per trial that beat
        beating = {row[0] for row in conn.execute(
            sqlalchemy.text("SELECT trial_id FROM trial_heartbeats WHERE trial_id IN :ids")
            .bindparams(sqlalchemy.bindparam("ids", expanding=True)), {"ids": candidates})}
    for trial_id in set(candidates) - beating:
        storage.record_heartbeat(trial_id)


def _prior_claims(study, codec, number: int, config, settle_s: float = 5.0):
    """The lowest-numbered other trial holding `config`: measured or served, or running. A lower-numbered
    trial still being asked (its params arrive one by one) is waited for, briefly, so that two workers that
    drew the same config at the same moment both see who came first."""
    deadline = time.monotonic() + settle_s
    while True:
        best, unsettled = None, False
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.COMPLETE)):
            if t.number >= number:
                continue
            other = codec.config_of(t)
            if other is None:
                unsettled = unsettled or t.state == TrialState.RUNNING
                continue
            if other != config or (t.state == TrialState.COMPLETE
                                   and t.user_attrs.get("tuner", {}).get("kind") not in MEASURED):
                continue
            if best is None or t.number < best.number:
                best = t
        if best is not None or not unsettled or time.monotonic() > deadline:
            return best
        time.sleep(0.02)


def _confirm_campaign(study, space, searchspace, session, root, me, log) -> None:
    """The campaign is done: re-measure its near-ties in this worker and record the choice (tuner/confirmation.py).
    Every worker that finishes before a choice is recorded measures (workers that finish together do so
    side by side, each on its own GPU); the first choice recorded in the study stands, and each worker's
    measurements go to the store."""
    if "confirmed" in study.user_attrs:
        return
    codec = TrialCodec(searchspace)
    values = {}
    for config, t in tally_trials(study.get_trials(deepcopy=False), codec)["done"].items():
        info = t.user_attrs["tuner"]
        if info.get("status") == "ok" and config is not None:
            values[store.canonical_config(json.loads(info["config"]))] = info["objective"]
    record = confirmation.confirm_and_save(session, space, searchspace, values, root, me, log)
    if record is None:
        return
    if "confirmed" not in study.user_attrs:  # Optuna has no compare-and-set: two workers may both get here
        study.set_user_attr("confirmed", {"config": record["chosen"], "seconds": record["seconds"], "worker": me,
                                          "finalists": len(record["finalists"]), "rule": record["rule"]})


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
