"""A campaign is an Optuna study: its settings, creating and loading it, and reading its trials."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState

from tuner import store
from tuner.campaign.rdb_storage import GRACE_S, HEARTBEAT_S, open_storage, redact, sqlite_path
from tuner.campaign.request import CampaignRequest, Resolved, default_name, resolve
from tuner.campaign.search_start import first_configs, patience_of
from tuner.campaign.study_storages import default_storage
from tuner.errors import TunerError
from tuner.measure.provenance import kernel_hash, local_device_name
from tuner.search import trial_kinds
from tuner.search.codec import Codec
from tuner.search.early_stopping import Patience
from tuner.search.optuna_private import fixed_params
from tuner.search.studies import check_form, open_study
from tuner.store.recording_choice import choose_recording

if TYPE_CHECKING:
    from kernel_tuner.searchspace import Searchspace


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
    # stop once this many evaluations in a row (in trial order, over every worker's) gained no 0.5%; None: never.
    # Like the budget, it may change when the campaign is resumed (tuner.campaign.search_start.patience_of)
    patience: int | None = None

    def key(self) -> tuple:
        """The settings a campaign is resumed with only as they were (the budget may change)."""
        return tuple(mine for mine, _ in self._settings(self).values())

    def differences(self, asked: Campaign) -> list[str]:
        """The settings in which `asked` differs from this campaign, each as `name: this one's (asked: other)`."""
        theirs = self._settings(asked)
        said = []
        for name, (mine, shown) in self._settings(self).items():
            other, other_shown = theirs[name]
            if mine != other:
                if shown == other_shown:  # a size's name kept, its values changed
                    shown, other_shown = str(mine), str(other)
                said.append(f"{name} {shown} (asked: {other_shown})".lstrip())
        return said

    @staticmethod
    def _settings(c: Campaign) -> dict[str, tuple[object, str]]:
        """Each setting of the key by name (the option that sets it): its value, and as it is shown."""
        vars_text = json.dumps(c.size_vars, sort_keys=True)
        return {
            "workload": (c.workload, c.workload),
            "--size": (vars_text, c.size),
            "--dtype": (c.dtype, c.dtype),
            "--strategy": (c.strategy, c.strategy),
            "--seed": (c.seed, str(c.seed)),
            # a campaign's trials decode by its parameters, and its values belong to one kernel
            "kernel hash": (c.kernel_hash, c.kernel_hash),
            "search space hash": (c.space_hash, c.space_hash or "none (an older campaign)"),
            "": (c.simulate, "replayed" if c.simulate else "measured on GPUs"),  # --simulate
            "--backend": (c.backend, c.backend),
        }


def join_campaign(name: str, url: str) -> tuple[optuna.Study, RDBStorage, Campaign]:
    """What a worker joins: the study on a storage with heartbeats, that storage, the settings."""
    return _load(name, url, True)


def read_campaign(name: str, url: str) -> tuple[optuna.Study, RDBStorage, Campaign]:
    """What `tuner status` reads: the study, its storage (the trials' heartbeats), the settings."""
    return _load(name, url, False)


def _load(name: str, url: str, heartbeat: bool) -> tuple[optuna.Study, RDBStorage, Campaign]:
    """The study, the storage it was loaded from (`heartbeat`: one that records workers' heartbeats), the settings."""
    storage = open_storage(url)
    try:
        study = optuna.load_study(study_name=name, storage=storage)
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
        study = optuna.load_study(study_name=name, storage=storage)
    return study, storage, camp


class TrialCodec(Codec):
    """The campaign's configs <-> Optuna params, as the single-process strategy stores and samples them."""

    def __init__(self, searchspace: Searchspace) -> None:
        super().__init__(searchspace.tune_params)

    def config_of(self, trial: FrozenTrial) -> tuple | None:
        """A trial's config: its params, or those it was queued with (a WAITING trial has no params yet)."""
        return self.decode(trial.params) or self.decode(fixed_params(trial) or {})


def create_campaign(
    req: CampaignRequest,
    name: str | None,
    url: str | None,
    *,
    heartbeat_s: int = HEARTBEAT_S,
    grace_s: int = GRACE_S,
    say: Callable[[str], object] | None = None,
) -> tuple[Campaign, str]:
    """Create the study (or check that an existing one has the same settings). Returns the campaign and
    its storage URL. Resuming is running it again: the workers take what no trial holds yet. `say`: told the
    line a replay says about its recording where it was chosen among several GPUs' (as a replay on one process
    says it)."""
    r = resolve(req, distributed=True)
    space, size_name, size, dtype, max_evals = r.space, r.size_name, r.size, r.dtype, r.max_evals
    root = Path(req.results or store.results_root())
    recording, note = None, None
    if req.simulate:
        # chosen as a replay on one process chooses (tuner.campaign.local._simulate): --gpu, else this machine's
        # GPU where it has a recording, else the GPU with the most measurements at this size
        here = functools.partial(local_device_name, space)
        chosen, note = choose_recording(root, req.workload, size_name, dtype, req.gpu, size=size, here=here)
        recording = str(chosen.resolve())
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
        patience=patience_of(req),
    )
    url = url or default_storage(root)
    if url.startswith("sqlite") and sqlite_path(url) != ":memory:":  # SQLite makes the file, not its folder
        Path(sqlite_path(url)).parent.mkdir(parents=True, exist_ok=True)
    study = open_study(open_storage(url), name, maximize=space.maximize, metric=space.objective, where=redact(url))
    replayed = _recording_gpu(recording) if recording is not None else None
    existing = study.user_attrs.get("campaign")
    if existing is None:
        study.set_user_attr("campaign", asdict(camp))
        _queue_first(study, req, r, root, replayed)
    else:
        old = Campaign(**existing)
        differences = old.differences(camp)
        if replayed is not None and old.simulate and req.gpu and study.user_attrs.get("gpu") != replayed:
            differences.append(f"--gpu {study.user_attrs.get('gpu')} (asked: {replayed})")  # its recording's
        if differences:
            raise TunerError(
                f"campaign '{name}' exists in {redact(url)} with other settings: {'; '.join(differences)}; "
                "resume it with its own, or choose another --campaign name"
            )
        if replayed is not None and study.user_attrs.get("gpu") not in (None, replayed):
            # a recording chosen since (another GPU's recorded meanwhile): the campaign goes on with its own
            note = (
                f"replaying the recording from {study.user_attrs['gpu']}, the one campaign '{name}' was created with "
                f"(a new campaign would replay {replayed}'s; choose with --gpu and another --campaign name)"
            )
        camp = Campaign(**{**existing, "max_evals": max_evals, "time_limit": req.time_limit, "patience": camp.patience})
        study.set_user_attr("campaign", asdict(camp))
    if replayed is not None and "gpu" not in study.user_attrs:  # a simulated campaign
        study.set_user_attr("gpu", replayed)
    if note and say is not None:
        say(note)
    return camp, url


def _queue_first(study: optuna.Study, req: CampaignRequest, r: Resolved, root: Path, replayed: str | None) -> None:
    """A new campaign's configs to measure first, queued in its study (Optuna serves queued trials before it
    samples, to whichever worker asks): `req.first`, then the warm start, as a single-process campaign tries them
    (tuner.campaign.search_start), each marked a warm start's (the `auto` sampler then skips its covering start).
    The warm start's GPU: the recording's for a replay, else this host's (the workers' model)."""
    gpu = replayed or (None if req.simulate else local_device_name(r.space))
    codec = TrialCodec(r.searchspace)
    for config in first_configs(req, r.space, r.size, r.dtype, gpu, root):
        levels = tuple(config.get(n) for n in codec.names)
        if None not in levels and r.searchspace.is_param_config_valid(levels):
            attrs = {trial_kinds.WARM_START: True}
            study.enqueue_trial(codec.encode(levels), user_attrs=attrs, skip_if_exists=True)


def patience_spent(done: Iterable[FrozenTrial], patience: int | None) -> bool:
    """Whether the campaign's results (`done`: tally_trials' each config's first trial), in trial order, have gone
    `patience` evaluations without a 0.5% gain (tuner.search.early_stopping, the single-process rule): then no
    worker asks for more."""
    if patience is None:
        return False
    rule = Patience(patience)
    for t in sorted(done, key=lambda t: t.number):
        ok = trial_kinds.info(t).get("status") == "ok"
        if rule.update(trial_kinds.cost(t) if ok else None):
            return True
    return False


def _recording_gpu(recording: str) -> str:
    """The store's name of the GPU a recording was made on (a host-code space's cache names the CPU that ran its
    host code)."""
    from kernel_tuner.util import read_cache

    return store.recorded_gpu(Path(recording)) or read_cache(recording, open_cache=False)["device_name"]


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


def campaign_values(done: dict[tuple | None, FrozenTrial]) -> dict[str, float]:
    """{config key (canonical JSON): campaign objective} of the configs measured without error (tally_trials'
    `done`): what a confirmation draws its finalists from; how many, what it was drawn from (`drawn_from`)."""
    values = {}
    for config, t in done.items():
        info = trial_kinds.info(t)
        if info.get("status") == "ok" and config is not None:
            values[store.canonical_config(json.loads(info["config"]))] = info["objective"]
    return values


def in_limbo(trials: list[FrozenTrial], window_s: float, now: datetime | None = None) -> list[FrozenTrial]:
    """Trials failed less than `window_s` ago while holding their config (given up for lost; not told `taken` or
    `surplus`, nor given back by their worker: `given_back`) whose retry is not queued yet. Optuna's stale check
    fails a lost trial, then queues its retry in another transaction: in between, no live trial holds the config,
    and another worker feeding brute force's queue (or sampling) could take it, leaving the retry `taken`. So a
    trial in limbo still holds its config. The window bounds it for a trial no retry follows (its retries used
    up; the process failing it died): its config is free again after it."""
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
