"""Trials outlive their workers: a worker beats for the trials it holds, and every worker now and then
fails the trials of workers that stopped beating, which Optuna's RetryFailedTrialCallback (configured on the
storage, tuner.campaign.rdb_storage) queues again for a worker still alive. Whether a worker is alive, for
`tuner status`: its trials' heartbeats, and on its own host its process."""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import optuna
import sqlalchemy
from optuna.storages import RDBStorage
from optuna.trial import Trial, TrialState

from tuner.search import optuna_private


class Heartbeat:
    """A trial's heartbeat, recorded at once and then every `interval` seconds until `stop()`: what
    Study.optimize does for its trials, for a worker that asks and tells on its own."""

    def __init__(self, storage: RDBStorage, trial_id: int, interval: float):
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self._stopped = threading.Event()
        storage.record_heartbeat(trial_id)  # before anything else: a trial that never beat is an orphan
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{trial_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stopped.wait(self.interval):
            self.storage.record_heartbeat(self.trial_id)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


class Liveness:
    """One worker's part: heartbeats for its own trials, and the periodic look for others' lost ones."""

    def __init__(self, study: optuna.Study, storage: RDBStorage, heartbeat_s: float, grace_s: float):
        self.study, self.storage, self.heartbeat_s, self.grace_s = study, storage, heartbeat_s, grace_s
        self.next_check = 0.0  # when to look for trials of dead workers next

    def beat(self, trial: Trial) -> Heartbeat:
        return Heartbeat(self.storage, optuna_private.trial_id(trial), self.heartbeat_s)

    def check(self) -> None:
        """At most every heartbeat (and four times a grace period): a dead worker's trial goes back to the queue."""
        if time.monotonic() < self.next_check:
            return
        adopt_orphans(self.study, self.storage, self.grace_s)
        optuna.storages.fail_stale_trials(self.study)
        self.next_check = time.monotonic() + min(self.heartbeat_s, self.grace_s / 4)


def adopt_orphans(study: optuna.Study, storage: RDBStorage, grace_s: float) -> None:
    """A worker killed between taking a trial and its first heartbeat leaves a RUNNING trial that Optuna's
    stale check never fails (it looks at heartbeats only). Once such a trial is older than the grace period,
    give it one heartbeat: nobody renews it, so the next check fails it and it is retried like any other."""
    old = datetime.now() - timedelta(seconds=grace_s)  # Optuna stamps datetime_start in local time
    candidates = [
        optuna_private.trial_id(t)
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if t.datetime_start is not None and t.datetime_start < old
    ]
    for trial_id in optuna_private.never_beat(storage, candidates):
        storage.record_heartbeat(trial_id)


def dead_trials(storage: RDBStorage, trials: list, grace_s: float) -> set[int]:
    """The numbers of RUNNING trials whose worker is gone: silent for longer than the grace period, or never
    beat and older than it. Such a trial (one killed between its ask and its `worker` tag included) is failed
    and retried by the next stale check, so it must not hold its config against the retry of an older lost
    trial, which would be told `taken` and leave the config to a trial nobody measures."""
    running = {optuna_private.trial_id(t): t for t in trials if t.state == TrialState.RUNNING}
    if not running:
        return set()
    with storage.engine.connect() as conn:  # Optuna's schema; both times from the database clock, as its check
        now = conn.execute(sqlalchemy.select(sqlalchemy.func.now())).scalar()
        beats: dict[int, datetime | str] = dict(
            conn.execute(
                sqlalchemy.text("SELECT trial_id, heartbeat FROM trial_heartbeats WHERE trial_id IN :ids").bindparams(
                    sqlalchemy.bindparam("ids", expanding=True)
                ),
                {"ids": list(running)},
            ).all()
        )
    if isinstance(now, str):  # SQLite answers text
        now = datetime.fromisoformat(now)
    if now is None:
        return set()
    now = now.replace(tzinfo=None)
    started_before = datetime.now() - timedelta(seconds=grace_s)  # Optuna stamps datetime_start in local time
    dead = set()
    for tid, t in running.items():
        beat = beats.get(tid)
        if isinstance(beat, str):
            beat = datetime.fromisoformat(beat)
        if beat is not None:
            if now - beat.replace(tzinfo=None) > timedelta(seconds=grace_s):
                dead.add(t.number)
        elif t.datetime_start is not None and t.datetime_start < started_before:
            dead.add(t.number)
    return dead


def process_started(pid: int) -> float | None:
    """When process `pid` of this host started (epoch seconds, from /proc/PID/stat's start in clock ticks since
    boot); None where that cannot be read (no such process, not Linux) or it is a zombie (it has exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):  # exited, not reaped yet
            return None
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def process_gone(host: str | None, pid: int | None, started: float | None) -> bool:
    """Whether a worker's process (as its `worker:` record names it: host, pid, start in epoch seconds) is known to
    be gone: it ran on this host and no process `pid` is there, or another one has taken its pid since. Workers on
    other hosts are never known gone here (their trials' heartbeats say it, after the grace period)."""
    if host != socket.gethostname() or not pid:
        return False
    if Path("/proc/self/stat").is_file():  # Linux: the start time tells a later process given the same pid
        now = process_started(pid)
        return now is None or (started is not None and abs(now - started) > 2.0)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # someone else's process now holds it
        return True
    return False
