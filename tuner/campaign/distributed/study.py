"""A campaign is an Optuna study: its settings, creating and loading it, and reading its trials."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState

from tuner import store
from tuner.campaign.rdb_storage import GRACE_S, HEARTBEAT_S, open_storage, redact, sqlite_path
from tuner.campaign.request import CampaignRequest, default_name, resolve
from tuner.campaign.study_storages import default_storage
from tuner.errors import TunerError
from tuner.measure.provenance import kernel_hash
from tuner.search import trial_kinds
from tuner.search.codec import Codec
from tuner.search.optuna_private import fixed_params
from tuner.search.studies import check_form, open_study
from tuner.store.recording_choice import find_recording

if TYPE_CHECKING:
    from kernel_tuner.searchspace import Searchspace
    from optuna.samplers import BaseSampler


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
    space_hash: str = ""  # Space.space_hash_for(dtype) ("" in campaigns created before it was recorded)

    def key(self) -> tuple:
        return (
            self.workload,
            json.dumps(self.size_vars, sort_keys=True),
            self.dtype,
            self.strategy,
            self.seed,
            self.kernel_hash,
            self.space_hash,
            self.simulate,
            self.backend,
        )


def load_campaign(
    name: str, url: str, *, heartbeat: bool, sampler: BaseSampler | None = None
) -> tuple[optuna.Study, Campaign]:
    """The campaign's study and settings; `heartbeat`: on a storage that records workers' heartbeats."""
    study, _, camp = _load(name, url, heartbeat, sampler)
    return study, camp


def join_campaign(name: str, url: str) -> tuple[optuna.Study, RDBStorage, Campaign]:
    """What a worker joins: the study on a storage with heartbeats, that storage, the settings."""
    return _load(name, url, True, None)


def _load(
    name: str, url: str, heartbeat: bool, sampler: BaseSampler | None
) -> tuple[optuna.Study, RDBStorage, Campaign]:
    storage = open_storage(url)
    try:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    except KeyError:
        raise TunerError(
            f"no campaign '{name}' in {redact(url)} (start one with `tuner tune ... --workers N`)"
        ) from None
    if "campaign" not in study.user_attrs:
        raise TunerError(f"study '{name}' in {redact(url)} is not a distributed tuner campaign")
    check_form(study, redact(url))
    camp = Campaign(**study.user_attrs["campaign"])
    if heartbeat:
        storage = open_storage(url, camp.heartbeat_s, camp.grace_s)
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    return study, storage, camp


class TrialCodec(Codec):
    """The campaign's configs <-> Optuna params, as the single-process strategy stores and samples them."""

    def __init__(self, searchspace: Searchspace) -> None:
        super().__init__(searchspace.tune_params)

    def config_of(self, trial: FrozenTrial) -> tuple | None:
        """A trial's config: its params, or those it was queued with (a WAITING trial has no params yet)."""
        return self.decode(trial.params) or self.decode(fixed_params(trial) or {})


def create_campaign(
    req: CampaignRequest, name: str | None, url: str | None, *, heartbeat_s: int = HEARTBEAT_S, grace_s: int = GRACE_S
) -> tuple[Campaign, str]:
    """Create the study (or check that an existing one has the same settings). Returns the campaign and
    its storage URL. Resuming is running it again: the workers take what no trial holds yet."""
    r = resolve(req, distributed=True)
    space, size_name, size, dtype, max_evals = r.space, r.size_name, r.size, r.dtype, r.max_evals
    root = Path(req.results or store.results_root())
    recording = str(find_recording(root, req.workload, size_name, dtype, req.gpu).resolve()) if req.simulate else None
    name = name or default_name(req.workload, size_name, dtype, req.strategy, req.seed)
    camp = Campaign(
        name=name,
        workload=req.workload,
        size=size_name,
        size_vars=size,
        dtype=dtype,
        strategy=req.strategy,
        max_evals=max_evals,
        time_limit=req.time_limit,
        seed=req.seed if req.seed is not None else 1,
        backend=req.backend,
        timeout=req.timeout,
        kernel_hash=kernel_hash(space),
        simulate=req.simulate,
        recording=recording,
        heartbeat_s=heartbeat_s,
        grace_s=grace_s,
        space_hash=space.space_hash_for(dtype),
    )
    url = url or default_storage(root)
    if url.startswith("sqlite") and sqlite_path(url) != ":memory:":  # SQLite makes the file, not its folder
        Path(sqlite_path(url)).parent.mkdir(parents=True, exist_ok=True)
    study = open_study(open_storage(url), name, maximize=space.maximize, metric=space.objective, where=redact(url))
    existing = study.user_attrs.get("campaign")
    if existing is None:
        study.set_user_attr("campaign", asdict(camp))
    else:
        old = Campaign(**existing)
        if old.key() != camp.key():
            changed = (
                "; its kernel or search space has changed since"
                if (old.kernel_hash, old.space_hash) != (camp.kernel_hash, camp.space_hash)
                else ""
            )
            raise TunerError(
                f"campaign '{name}' exists in {redact(url)} with other settings "
                f"({old.workload} {old.size} {old.dtype} {old.strategy} seed {old.seed}{changed}): "
                "choose another --campaign name"
            )
        camp = Campaign(**{**existing, "max_evals": max_evals, "time_limit": req.time_limit})
        study.set_user_attr("campaign", asdict(camp))
    if recording is not None and "gpu" not in study.user_attrs:  # a simulated campaign
        from kernel_tuner.util import read_cache

        # the store's name of the GPU (a host-code space's cache names the CPU that ran its host code)
        study.set_user_attr(
            "gpu", store.recorded_gpu(Path(recording)) or read_cache(recording, open_cache=False)["device_name"]
        )
    return camp, url


def tally_trials(trials: list[FrozenTrial], codec: TrialCodec, limbo_s: float = 0.0) -> dict:
    """The configs held by trials: done (measured or served, the first trial of each), running, waiting, and
    in limbo (lost trials whose retry is not queued yet, see in_limbo; none unless `limbo_s`)."""
    done: dict[tuple | None, FrozenTrial] = {}
    held: set[tuple] = set()
    limbo = {t.number for t in in_limbo(trials, limbo_s)} if limbo_s else set()
    running = waiting = 0
    for t in trials:
        config = codec.config_of(t)
        if t.state == TrialState.RUNNING:
            running += 1
        elif t.state == TrialState.WAITING:
            waiting += 1
        elif trial_kinds.holds_result(t):
            done.setdefault(config, t)
        elif t.number not in limbo:
            continue
        if config is not None:
            held.add(config)
    return {"done": done, "held": held, "running": running, "waiting": waiting, "limbo": len(limbo)}


def in_limbo(trials: list[FrozenTrial], window_s: float, now: datetime | None = None) -> list[FrozenTrial]:
    """Trials failed less than `window_s` ago while holding their config (given up for lost, or abandoned; not
    told `taken` or `surplus`) whose retry is not queued yet. Optuna's stale check fails a lost trial, then queues its retry in another
    transaction: in between, no live trial holds the config, and another worker feeding brute force's queue
    (or sampling) could take it, leaving the retry `taken`. So a trial in limbo still holds its config. The
    window bounds it for a trial no retry follows (its measurement raised; its retries used up; the process
    failing it died): its config is free again after it."""
    retried = {n for t in trials if (n := retry_of(t)) is not None}
    since = (now or datetime.now()) - timedelta(seconds=window_s)  # Optuna stamps times in local time
    return [
        t
        for t in trials
        if t.state == TrialState.FAIL
        and t.number not in retried
        and trial_kinds.kind_of(t) not in trial_kinds.HOLDS_NOTHING
        and t.datetime_complete is not None
        and t.datetime_complete > since
    ]


def lost_trials(trials: list[FrozenTrial]) -> set[int]:
    """The numbers of the trials given up for lost (their worker died) and retried. Not 'failed and never
    told': a worker killed between recording its result on the trial and telling the study leaves a
    trial with its result attached, and that one is lost and retried too (the retry serves the stored row)."""
    return {n for t in trials if (n := retry_of(t)) is not None}


def retry_of(trial: FrozenTrial) -> int | None:
    """The number of the lost trial that `trial` retries, or None. What RetryFailedTrialCallback's
    retried_trial_number reads, without the experimental-feature warning that it gives on every call."""
    return trial.system_attrs.get("failed_trial")
