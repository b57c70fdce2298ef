"""Campaigns spread over many GPUs and hosts, on Optuna's distributed storage.

One campaign is one Optuna study in a shared database (SQLite on one host, PostgreSQL across hosts); its
settings (workload, size, dtype, strategy, budget, GPU model) are the study's user attributes. Any number
of workers join it, each a process bound to one GPU with its own isolated worker process
(tuner/isolation.py) and its own Parquet part in the store (merged on read):

- a worker asks the study for a trial, measures its config, writes the row, then tells the study; its
  bookkeeping runs on a scheduler thread that asks for the next trial while the current one measures;
- brute force enqueues the configs no trial holds yet, a few at a time: Optuna hands each WAITING trial
  to exactly one worker (the queue stays short: each pop reads every waiting trial);
- TPE samples with a constant liar, so workers do not all try the same region;
- a worker records a heartbeat while it measures. A killed worker's trial goes stale after the grace
  period; the next worker to look fails it and Optuna's RetryFailedTrialCallback enqueues it again. The
  retry first looks in the store, so a row written just before the kill is served, never measured twice;
- of trials that drew the same config, the lowest-numbered live one measures it; the others are told
  its value (or step aside), and the search goes on from the nearest unclaimed config.

Workers stay until no trial is running anywhere, so a trial left by a worker that dies is always retried.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import warnings
import zlib
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import optuna
import sqlalchemy
from optuna.trial import TrialState

from tuner import confirm, kt, store
from tuner.campaign import (
    CampaignRequest,
    CampaignResult,
    default_max_evals,
    find_recording,
    known_rows,
    open_session,
    store_row,
)
from tuner.errors import TunerError
from tuner.isolation import IsolatedRunner
from tuner.provenance import source_hash
from tuner.strategies import (
    OPTUNA_SAMPLERS,
    Codec,
    Repair,
    make_sampler,
    penalty_for,
)
from tuner.workloads import get_workload

HEARTBEAT_S = 10  # how often a measuring worker says it is alive
GRACE_S = 60  # silence after which its trial is retried by another worker (longer than any compile stall)
MAX_RETRY = 3
POLL_S = 1.0  # how often an idle worker looks again while others still measure
FEED = 4  # brute force: a worker tops the queue up with this many configs when it holds fewer
MEASURED = ("measured", "served")  # trial kinds that hold a result of the campaign


@dataclass
class Campaign:
    """What every worker needs to know; kept as the study's user attribute 'campaign'."""
    name: str
    workload: str
    size: str
    size_vars: dict
    dtype: str
    strategy: str
    max_evals: int | None
    time_limit: float | None  # per worker, from its start
    seed: int
    backend: str
    timeout: float
    kernel_hash: str
    simulate: bool = False
    recording: str | None = None  # the Kernel Tuner cache a simulated campaign replays
    heartbeat_s: int = HEARTBEAT_S
    grace_s: int = GRACE_S

    def key(self) -> tuple:
        return (self.workload, json.dumps(self.size_vars, sort_keys=True), self.dtype, self.strategy, self.seed,
                self.kernel_hash, self.simulate, self.backend)


def default_name(workload: str, size_name: str, dtype: str, strategy: str, seed) -> str:
    return store._safe(f"{workload}-{size_name}-{dtype}-{strategy}-s{seed}")


def default_storage(root: Path) -> str:
    return f"sqlite:///{Path(root).resolve() / 'campaigns.sqlite3'}"


def open_storage(url: str, heartbeat_s: int | None = None, grace_s: int | None = None):
    """Optuna's RDB storage (the one with heartbeats); stale trials are failed and enqueued again."""
    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        raise TunerError(f"storage '{url}': a distributed campaign needs a database URL (sqlite:///path on one host, "
                         "postgresql://user@host/db across hosts); Optuna's heartbeat, which retries the trial of "
                         "a dead worker, exists only in its RDB storage")
    sqlite = url.startswith("sqlite")
    engine_kwargs = {"creator": _sqlite_connector(url)} if sqlite else {"pool_pre_ping": True}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = (_SQLiteStorage if sqlite else optuna.storages.RDBStorage)(
                url, engine_kwargs=engine_kwargs, **_heartbeat_options(heartbeat_s, grace_s))
    except ImportError as e:
        raise TunerError(f"storage '{_redact(url)}' needs its database driver ({e}): pip install 'gpu-tuner[distributed]'") from None
    except Exception as e:  # noqa: BLE001  (sqlalchemy's errors: no server, wrong password, no such database)
        raise TunerError(f"cannot open storage '{_redact(url)}': {str(e).splitlines()[0]}") from None
    if sqlite:
        # Optuna pops a queued trial by reading its state and then updating it. PostgreSQL locks the row
        # (SELECT ... FOR UPDATE); SQLite ignores that, so two workers could both pop the same trial,
        # unless every transaction that may write takes the write lock at its start. Reads of trials do
        # not: in WAL mode they run beside the writer instead of queueing for its lock.
        sqlalchemy.event.listen(storage.engine, "begin", lambda conn: conn.exec_driver_sql(
            "BEGIN" if getattr(_reading, "on", False) else "BEGIN IMMEDIATE"))
    return storage


_reading = threading.local()  # set while a _SQLiteStorage method that only reads runs (per thread: heartbeats)


class _SQLiteStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage whose pure reads of trials open plain (deferred) SQLite transactions."""

    def _get_trials(self, *args, **kwargs):
        return self._read(super()._get_trials, *args, **kwargs)

    def get_trial(self, *args, **kwargs):
        return self._read(super().get_trial, *args, **kwargs)

    @staticmethod
    def _read(method, *args, **kwargs):
        _reading.on = True
        try:
            return method(*args, **kwargs)
        finally:
            _reading.on = False


def _heartbeat_options(heartbeat_s, grace_s) -> dict:
    if not heartbeat_s:
        return {}
    if hasattr(optuna.storages, "RetryHeartbeatStaleTrialCallback"):  # Optuna >= 4.9 names it so
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)
        return {"heartbeat_interval": heartbeat_s, "grace_period": grace_s, "heartbeat_stale_trial_callback": retry}
    retry = optuna.storages.RetryFailedTrialCallback(max_retry=MAX_RETRY)
    return {"heartbeat_interval": heartbeat_s, "grace_period": grace_s, "failed_trial_callback": retry}


def _sqlite_connector(url: str):
    """SQLite in WAL mode (cheap commits, readers beside the writer), with transactions that the
    engine's 'begin' hook starts IMMEDIATE (see open_storage)."""
    path = url.split(":///", 1)[1] if ":///" in url else ":memory:"

    def connect():
        conn = sqlite3.connect(path, timeout=120, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    return connect


def _load(name: str, url: str, *, heartbeat: bool, sampler=None):
    storage = open_storage(url)
    try:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    except KeyError:
        raise TunerError(f"no campaign '{name}' in {url} (start one with `tuner tune ... --workers N`)") from None
    if "campaign" not in study.user_attrs:
        raise TunerError(f"study '{name}' in {url} is not a distributed tuner campaign")
    camp = Campaign(**study.user_attrs["campaign"])
    if heartbeat:
        storage = open_storage(url, camp.heartbeat_s, camp.grace_s)
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    return study, camp


class _Codec(Codec):
    """The campaign's configs <-> Optuna params, encoded as the single-process strategy encodes them."""

    def __init__(self, searchspace):
        super().__init__(searchspace.tune_params)

    def config_of(self, trial) -> tuple | None:
        return self.decode(trial.params) or self.decode(trial.system_attrs.get("fixed_params") or {})


# ---------------------------------------------------------------------------------------------
# creating a campaign
# ---------------------------------------------------------------------------------------------
def create_campaign(req: CampaignRequest, name: str | None, url: str | None, *, heartbeat_s: int = HEARTBEAT_S,
                    grace_s: int = GRACE_S) -> tuple[Campaign, str]:
    """Create the study (or check that an existing one has the same settings). Returns the campaign and
    its storage URL. Resuming is running it again: the workers take what no trial holds yet."""
    workload = get_workload(req.workload)
    space = workload.space
    size_name, size = space.resolve_size(req.size, workload.parse_size)
    dtype = space.resolve_dtype(req.dtype)
    if req.strategy not in OPTUNA_SAMPLERS and req.strategy != "brute_force":
        raise TunerError(f"strategy '{req.strategy}': workers share Optuna's samplers ({', '.join(OPTUNA_SAMPLERS)}) "
                         "or brute_force; Kernel Tuner's strategies run in one process (drop --workers)")
    if req.backend not in kt.BACKENDS:
        raise TunerError(f"unknown backend '{req.backend}'; choose one of {', '.join(kt.BACKENDS)}")
    searchspace = kt.searchspace(space)
    if searchspace.size == 0:
        raise TunerError(f"{space.path}: the restrictions leave no valid configuration")
    root = Path(req.results or store.results_root())
    recording = str(find_recording(root, req.workload, size_name, dtype, req.gpu).resolve()) if req.simulate else None
    max_evals = req.max_evals or default_max_evals(req.strategy, searchspace.size, req.time_limit)
    name = name or default_name(req.workload, size_name, dtype, req.strategy, req.seed)
    camp = Campaign(name=name, workload=req.workload, size=size_name, size_vars=size, dtype=dtype, strategy=req.strategy,
                    max_evals=max_evals, time_limit=req.time_limit, seed=req.seed if req.seed is not None else 1,
                    backend=req.backend, timeout=req.timeout, kernel_hash=source_hash(space.source_text),
                    simulate=req.simulate, recording=recording, heartbeat_s=heartbeat_s, grace_s=grace_s)
    url = url or default_storage(root)
    study = optuna.create_study(storage=open_storage(url), study_name=name, direction="minimize", load_if_exists=True)
    existing = study.user_attrs.get("campaign")
    if existing is None:
        study.set_user_attr("campaign", asdict(camp))
    else:
        old = Campaign(**existing)
        if old.key() != camp.key():
            raise TunerError(f"campaign '{name}' exists in {url} with other settings ({old.workload} {old.size} "
                             f"{old.dtype} {old.strategy} seed {old.seed}): choose another --campaign name")
        camp = Campaign(**{**existing, "max_evals": max_evals, "time_limit": req.time_limit})
        study.set_user_attr("campaign", asdict(camp))
    if req.simulate and "gpu" not in study.user_attrs:
        from kernel_tuner.util import read_cache

        study.set_user_attr("gpu", read_cache(recording, open_cache=False)["device_name"])
    return camp, url


# ---------------------------------------------------------------------------------------------
# a worker
# ---------------------------------------------------------------------------------------------
def _claim_gpu(study, name: str, gpu: str, allow_mixed: bool) -> None:
    """The first worker sets the campaign's GPU model; the others must match it (timings are per model)."""
    if "gpu" not in study.user_attrs:
        study.set_user_attr("gpu", gpu)
    claimed = study.user_attrs["gpu"]
    if claimed != gpu and not allow_mixed:
        raise TunerError(f"campaign '{name}' runs on {claimed}, this worker's GPU is {gpu}: timings are per GPU "
                         "model, so the worker does not join (--allow-mixed-gpus to join anyway)")


def worker_id(device: int) -> str:
    return store._safe(f"{socket.gethostname()}-gpu{device}-{os.getpid()}")


def measuring_process(camp: Campaign, worker_target=None) -> dict:
    """What a worker's measuring process runs (IsolatedRunner.for_campaign's arguments, less the device): a
    replay of the recording for a simulated campaign, else Kernel Tuner on the GPU (or a test's stand-in,
    `worker_target` "module:function"). JSON, so that the parent can hand it to the workers it starts."""
    replay = "tuner.distributed:replay_worker_main"
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
    study, camp = _load(name, url, heartbeat=True)
    workload = get_workload(camp.workload)
    space = workload.space
    searchspace = kt.searchspace(space)
    timeline.mark("loaded")  # imports, the study, the search space
    if source_hash(space.source_text) != camp.kernel_hash:
        raise TunerError(f"campaign '{name}' tunes another version of {space.kernel_source.name} (kernel hash "
                         f"{camp.kernel_hash}): check out the same commit on every host")
    root = Path(results or store.results_root())
    if camp.simulate:  # replayed rows are kept apart from measured ones (the store's readers never see them)
        root = root / "simulated"
    process = measuring_process(camp, worker_target)
    me = worker_id(device)
    req = CampaignRequest(workload=camp.workload, size=camp.size, dtype=camp.dtype, strategy=camp.strategy,
                          backend=camp.backend, device=device, seed=camp.seed, timeout=camp.timeout, quiet=True,
                          worker_target=process["target"])
    part = f"{store._safe(name)}.{me}"
    session = open_session(req, workload, camp.size, camp.size_vars, camp.dtype, root, name, part=part,
                           cachefile=lambda gpu: _cache_part(root, gpu, camp, me),
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
                              [_cache_part(root, session.gpu["gpu"], camp, me)])
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
        self.codec = _Codec(searchspace)
        if camp.strategy != "brute_force":  # a sampler of its own, seeded apart from the other workers'
            study.sampler = make_sampler(camp.strategy, seed=(camp.seed * 1_000_003 + zlib.crc32(me.encode())) % 2**31, parallel=True)
        self.rng = random.Random(zlib.crc32(me.encode()))
        self.repair = Repair(searchspace, self.codec, self.rng)
        self.counts = {"measured": 0, "served": 0, "trials": 0}
        self.ok_costs = []
        self.last_row = None
        self.next_check = 0.0  # when to look for trials of dead workers next
        runner = session.runner
        runner.known = known_rows(store.load_evaluations(camp.workload, root), space, session.common, session.provenance)
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
        tally = _tally(self.study.get_trials(deepcopy=False), self.codec)
        for config in tally["held"]:
            self.repair.mark(config)
        if brute:
            wanted = tally["waiting"] + (self._feed(tally) if tally["waiting"] < FEED else 0) > 0
        else:
            wanted = len(tally["done"]) + tally["running"] < self.camp.max_evals and not self.repair.exhausted()
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
                                                         self.space, self.session.common, self.session.provenance))
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
                     + (f"  {value:.4g} {self.space.objective}" if value is not None else ""))
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
        picked = self.rng.sample(free, min(FEED, len(free)))
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
    """The campaign is done: re-measure its near-ties in this worker and record the choice (tuner/confirm.py).
    Every worker that finishes before a choice is recorded measures (workers that finish together do so
    side by side, each on its own GPU); the first choice recorded in the study stands, and each worker's
    measurements go to the store."""
    if "confirmed" in study.user_attrs:
        return
    codec = _Codec(searchspace)
    values = {}
    for config, t in _tally(study.get_trials(deepcopy=False), codec)["done"].items():
        info = t.user_attrs["tuner"]
        if info.get("status") == "ok" and config is not None:
            values[store.canonical_config(json.loads(info["config"]))] = info["objective"]
    record = confirm.confirm_and_save(session, space, searchspace, values, root, me, log)
    if record is None:
        return
    if "confirmed" not in study.user_attrs:  # Optuna has no compare-and-set: two workers may both get here
        study.set_user_attr("confirmed", {"config": record["chosen"], "seconds": record["seconds"], "worker": me,
                                          "finalists": len(record["finalists"]), "rule": record["rule"]})


def _tally(trials, codec) -> dict:
    done, held, running, waiting = {}, set(), 0, 0
    for t in trials:
        config = codec.config_of(t)
        if t.state == TrialState.RUNNING:
            running += 1
        elif t.state == TrialState.WAITING:
            waiting += 1
        elif t.state == TrialState.COMPLETE and t.user_attrs.get("tuner", {}).get("kind") in MEASURED:
            done.setdefault(config, t)
        else:
            continue
        if config is not None:
            held.add(config)
    return {"done": done, "held": held, "running": running, "waiting": waiting}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------------------------
# replay: Kernel Tuner's simulation mode behind the worker protocol
# ---------------------------------------------------------------------------------------------
def replay_worker_main(conn, spec):
    """A worker process that answers from a recorded Kernel Tuner cache (env TUNER_REPLAY) in Kernel
    Tuner's simulation mode, so a distributed campaign runs end to end without a GPU. TUNER_REPLAY_DELAY
    (seconds per evaluation) paces it, e.g. to rehearse killing a worker mid-way."""
    import traceback

    from kernel_tuner import util
    from kernel_tuner.interface import Options
    from kernel_tuner.runners.simulation import SimulationRunner

    from tuner.isolation import _evaluate

    os.environ.update(spec.env)
    recording = os.environ["TUNER_REPLAY"]
    delay = float(os.environ.get("TUNER_REPLAY_DELAY", "0"))
    try:
        space = get_workload(spec.workload).space
        kernel_options = kt.kernel_options(space, spec.size, spec.dtype, [], "nvcuda")
        runner = SimulationRunner(kernel_options.kernel_source, kernel_options, Options(quiet=True), space.iterations, None)
        tuning_options = kt.tuning_options(space, spec.size, spec.dtype, simulation=True, metrics=False)
        tuning_options["cache"] = util.process_cache(recording, kernel_options, tuning_options, runner)
    except Exception as e:  # noqa: BLE001  (reported to the parent, as the real worker does)
        conn.send(("fatal", f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    gpu = {"gpu": runner.dev.name, "compute_capability": "", "driver": "", "cuda": "", "replayed_from": recording}
    conn.send(("ready", {"gpu": gpu, "baselines": {}}))
    keys = list(tuning_options.tune_params)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if isinstance(msg, dict) and "cachefile" in msg:  # a replay writes no cache
            conn.send(("cache", None))
            continue
        if isinstance(msg, dict):  # configs in rounds: each round the median of a resample of its recorded times
            rows = []
            for values in msg["configs"]:
                row = _evaluate(runner, tuning_options, keys, values)
                if row["status"] == "ok":
                    rng = random.Random(zlib.crc32(",".join(map(str, values)).encode()))
                    row["rounds"] = [statistics.median(rng.choices(row["times"], k=len(row["times"])))
                                     for _ in range(msg["rounds"])]
                    row["references"] = {}
                rows.append(row)
            conn.send(("result", rows))
            continue
        time.sleep(delay)
        conn.send(("result", _evaluate(runner, tuning_options, keys, msg)))


# ---------------------------------------------------------------------------------------------
# Kernel Tuner's cache: one part per worker, merged into the shared file
# ---------------------------------------------------------------------------------------------
def _cache_part(root: Path, gpu: str, camp: Campaign, me: str) -> Path:
    main = store.cache_path(root, gpu, camp.workload, camp.size, camp.dtype)
    return main.parent / "cache-parts" / f"{main.name[:-len('.cache.json')]}.{me}.cache.json"


def merge_cache_parts(main: Path, parts: list[Path]) -> int:
    """Merge Kernel Tuner cache parts into `main` (under a file lock; first entry of a config wins) and
    delete them. Kernel Tuner appends to its cache without locking, so workers never share one file."""
    from kernel_tuner.util import ErrorConfig, NpEncoder, read_cache

    parts = [p for p in parts if Path(p).is_file()]
    if not parts:
        return 0
    main = Path(main)
    main.parent.mkdir(parents=True, exist_ok=True)
    with open(main.with_name(main.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        docs = [read_cache(str(p), open_cache=False) for p in [main, *parts] if p.is_file()]
        header = {k: v for k, v in docs[0].items() if k != "cache"}
        merged = {}
        for doc in docs:
            for key, entry in doc["cache"].items():
                merged.setdefault(key, {k: (str(v) if isinstance(v, ErrorConfig) else v) for k, v in entry.items()
                                        if not (k == "__error__" and not isinstance(v, str))})
        # Kernel Tuner's own layout (header, then one entry a line), so it can append to it later
        text = json.dumps({**header, "cache": {}}, cls=NpEncoder, indent="")[:-3]
        text += "".join("\n" + json.dumps({k: v}, cls=NpEncoder)[1:-1] + "," for k, v in merged.items())
        tmp = main.with_name(main.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, main)
        for p in parts:
            p.unlink()
    return len(merged)


# ---------------------------------------------------------------------------------------------
# status, and a whole campaign on one host
# ---------------------------------------------------------------------------------------------
def campaign_status(name: str, url: str) -> dict:
    study, camp = _load(name, url, heartbeat=False)
    space = get_workload(camp.workload).space
    searchspace = kt.searchspace(space)
    codec = _Codec(searchspace)
    trials = study.get_trials(deepcopy=False)
    tally = _tally(trials, codec)
    attrs = study.user_attrs
    workers = {k.split(":", 1)[1]: {**v, "done": 0, "running": 0} for k, v in attrs.items() if k.startswith("worker:")}
    failures, best = {}, None
    for t in tally["done"].values():
        info = t.user_attrs["tuner"]
        w = workers.setdefault(info["worker"], {"done": 0, "running": 0})
        w["done"] += 1
        if info.get("status") != "ok":
            failures[info.get("status")] = failures.get(info.get("status"), 0) + 1
        elif best is None or space.better(info["objective"], best["value"]):
            best = {"config": json.loads(info["config"]), "objective": space.objective, "value": info["objective"],
                    "time_ms": info.get("time_ms"), "worker": info["worker"], "trial": t.number}
    for t in trials:
        if t.state == TrialState.RUNNING and t.user_attrs.get("worker"):
            workers.setdefault(t.user_attrs["worker"], {"done": 0, "running": 0})["running"] += 1
    total = searchspace.size if camp.strategy == "brute_force" else min(camp.max_evals or searchspace.size, searchspace.size)
    return {"campaign": name, "storage": _redact(url), "workload": camp.workload, "size": camp.size, "dtype": camp.dtype,
            "strategy": camp.strategy, "gpu": attrs.get("gpu"), "simulated": camp.simulate, "total": total,
            "done": len(tally["done"]), "running": tally["running"], "waiting": tally["waiting"],
            "retried": sum(1 for t in trials if "failed_trial" in t.system_attrs),
            "lost_workers": len(lost_trials(trials)),
            "failures": failures, "best": best, "confirmed": attrs.get("confirmed"), "workers": workers}


def lost_trials(trials) -> set[int]:
    """The numbers of the trials given up for lost (their worker died) and retried. Not 'failed and never
    told': a worker killed between recording its result on the trial and telling the study leaves a
    trial with its result attached, and that one is lost and retried too (the retry serves the stored row)."""
    return {t.system_attrs["failed_trial"] for t in trials if "failed_trial" in t.system_attrs}


def format_status(s: dict) -> str:
    lines = [f"campaign {s['campaign']}: {s['workload']} {s['size']} {s['dtype']} [{s['strategy']}] on {s['gpu'] or '?'}"
             + (" (simulated)" if s["simulated"] else ""),
             f"done {s['done']}/{s['total']}, running {s['running']}, queued {s['waiting']}, "
             f"retried after a lost worker {s['retried']}"
             + (", failures: " + ", ".join(f"{k} {v}" for k, v in sorted(s["failures"].items())) if s["failures"] else "")]
    if s["best"]:
        b = s["best"]
        lines.append(f"best so far: {b['value']:.4g} {b['objective']}  {b['config']}  (by {b['worker']})")
    if s.get("confirmed"):
        c = s["confirmed"]
        lines.append(f"confirmed among {c['finalists']} finalists measured again ({c['seconds']:.1f} s): {c['config']}")
    for w, info in sorted(s["workers"].items()):
        where = f"{info.get('gpu', '?')} (host {info.get('host', '?')}, device {info.get('device', '?')})"
        lines.append(f"  worker {w}: {info['done']} done, {info['running']} running  {where}")
        if info.get("timeline_s"):  # seconds from the worker process's start to the end of each stage so far
            lines.append("    seconds after its start: " + ", ".join(f"{k} {v:.1f}" for k, v in info["timeline_s"].items()))
    return "\n".join(lines)


def _redact(url: str) -> str:
    """A storage URL without its password, for printing."""
    head, sep, tail = url.partition("@")
    if not sep or "://" not in head:
        return url
    scheme, _, cred = head.partition("://")
    return f"{scheme}://{cred.split(':', 1)[0]}:***@{tail}" if ":" in cred else url


def run_distributed(req: CampaignRequest, workers: int, *, devices: list[int] | None = None, name: str | None = None,
                    url: str | None = None, allow_mixed_gpus: bool = False, worker_target: str | None = None,
                    heartbeat_s: int = HEARTBEAT_S, grace_s: int = GRACE_S, log=print) -> CampaignResult:
    """`tuner tune ... --workers N`: create (or resume) the campaign and run N worker processes here,
    one per GPU; other hosts may join with `tuner worker`. Returns the campaign's result."""
    camp, url = create_campaign(req, name, url, heartbeat_s=heartbeat_s, grace_s=grace_s)
    devices = list(devices) if devices is not None else [req.device + i for i in range(workers)]
    if workers < 0 or len(devices) != workers:
        raise TunerError(f"--workers {workers} needs {workers} devices, got {devices}")
    log(f"campaign {camp.name} in {_redact(url)}; more workers: tuner worker {camp.name} --storage {_redact(url)} --device D")
    root = Path(req.results or store.results_root())
    if workers == 0:
        return campaign_result(camp.name, url, root)
    procs = []
    # each worker launches its measuring process first thing, so that its set-up (a CUDA context, the inputs)
    # overlaps the worker's own imports and study loading: seconds of a campaign's wall time
    launch = json.dumps(measuring_process(camp, worker_target))
    for d in devices:
        cmd = [sys.executable, "-m", "tuner", "--results", str(root), "worker", camp.name, "--storage", url,
               "--device", str(d), "--quiet", "--launch", launch] + (["--allow-mixed-gpus"] if allow_mixed_gpus else []) \
            + (["--worker-target", worker_target] if worker_target else [])
        procs.append(subprocess.Popen(cmd, stdout=2))  # their messages to our stderr: stdout may carry --json
    try:
        for p in procs:  # each wait returns as its worker exits (the campaign's end is not a polling period late)
            while True:
                try:
                    p.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    if not req.quiet:
                        s = campaign_status(camp.name, url)
                        log(f"{s['done']}/{s['total']} done, {s['running']} running"
                            + (f", best {s['best']['value']:.4g} {s['best']['objective']}" if s["best"] else ""))
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait()
    failed = [p.returncode for p in procs if p.returncode != 0]
    if len(failed) == len(procs):
        raise TunerError(f"every worker failed (exit codes {failed}); see their messages above")
    if not camp.simulate:  # parts of workers that died before merging their own
        for parts_dir in root.glob(f"*/{camp.workload}/cache-parts"):
            main = store.cache_path(root, "x", camp.workload, camp.size, camp.dtype)
            merge_cache_parts(parts_dir.parent / main.name, sorted(parts_dir.glob(f"{main.name[:-len('.cache.json')]}.*")))
    return campaign_result(camp.name, url, root)


def campaign_rows(name: str, root: Path, simulated: bool, workload: str | None = None):
    """The campaign's rows from every worker's part, one per config (the first written, should a worker
    have died between writing its row and telling the study)."""
    base = Path(root) / "simulated" if simulated else Path(root)
    df = store.read_parts(f"*/{workload or '*'}/evaluations/{store._safe(name)}.*.parquet", base)
    if df.empty:
        return df
    return df.sort_values("timestamp", kind="stable").drop_duplicates(["gpu", "config"], keep="first")


def campaign_result(name: str, url: str, root: Path) -> CampaignResult:
    s = campaign_status(name, url)
    rows = campaign_rows(name, root, s["simulated"], s["workload"])
    best = {k: v for k, v in s["best"].items() if k in ("config", "objective", "value", "time_ms")} if s["best"] else None
    if best and s["confirmed"] and s["confirmed"]["config"] != best["config"]:
        # the confirmation's choice among the near-ties, with its own campaign measurement
        chosen = rows[rows["config"] == store.canonical_config(s["confirmed"]["config"])] if not rows.empty else rows
        if not chosen.empty:
            r = chosen.iloc[0]
            best = {"config": s["confirmed"]["config"], "objective": best["objective"],
                    "value": float(r["objective_value"]), "time_ms": float(r["time_ms"])}
    if best:
        best["confirmed"] = bool(s["confirmed"])
    return CampaignResult(s["workload"], s["size"], s["dtype"], s["gpu"] or "?", s["strategy"], evaluated=s["done"],
                          measured=len(rows), failures=s["failures"], best=best, simulated=s["simulated"])

