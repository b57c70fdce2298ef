"""A worker: one process bound to one GPU, taking trials from the campaign's study until it is done."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tuner import store
from tuner.campaign import confirmation
from tuner.campaign.distributed.cache_parts import cache_part, merge_cache_parts
from tuner.campaign.distributed.liveness import process_started
from tuner.campaign.distributed.scheduler import Scheduler
from tuner.campaign.distributed.signals import PARENT_ENV, stopped_like_ctrl_c
from tuner.campaign.distributed.study import Campaign, TrialCodec, campaign_values, join_campaign, tally_trials
from tuner.campaign.request import CampaignRequest
from tuner.campaign.session import open_session
from tuner.errors import ReplayInterrupted, TunerError
from tuner.measure import kt
from tuner.measure.provenance import kernel_hash
from tuner.measure.replay import recording_searchspace
from tuner.measure.runner import IsolatedRunner
from tuner.workloads import get_workload

if TYPE_CHECKING:
    import optuna
    from kernel_tuner.searchspace import Searchspace

    from tuner.campaign.session import Session
    from tuner.space import Space


def _claim_gpu(study: optuna.Study, name: str, gpu: str, allow_mixed: bool) -> None:
    """The first worker sets the campaign's GPU model; the others must match it (timings are per model)."""
    if "gpu" not in study.user_attrs:
        study.set_user_attr("gpu", gpu)
    claimed = study.user_attrs["gpu"]
    if claimed != gpu and not allow_mixed:
        raise TunerError(
            f"campaign '{name}' runs on {claimed}, this worker's GPU is {gpu}: timings are per GPU "
            "model, so the worker does not join (--allow-mixed-gpus to join anyway)"
        )


def worker_id(device: int, pid: int | None = None, *, replay: bool = False) -> str:
    """This host's worker process `pid` (default: this one) on GPU `device`; `replay`: one replaying a recording,
    which uses no GPU (named so in `tuner status` and the store's `worker` column)."""
    return store.safe_name(f"{socket.gethostname()}-{'replay' if replay else 'gpu'}{device}-{pid or os.getpid()}")


def measuring_process(camp: Campaign, measure_target: str | None = None) -> dict:
    """What a worker's measuring process runs (IsolatedRunner.for_campaign's arguments, less the device): a
    replay of the recording for a simulated campaign, else Kernel Tuner on the GPU (or a test's stand-in,
    `measure_target` "module:function"). JSON, so that the parent can hand it to the workers it starts."""
    replay = "tuner.measure.replay:replay_main"
    return {
        "workload": camp.workload,
        "size": camp.size_vars,
        "dtype": camp.dtype,
        "backend": camp.backend,
        "timeout": camp.timeout,
        "env": {"TUNER_REPLAY": camp.recording} if camp.simulate else {},
        "target": replay if camp.simulate else measure_target,
    }


def run_worker(
    name: str,
    url: str,
    device: int = 0,
    *,
    results: Path | None = None,
    allow_mixed_gpus: bool = False,
    measure_target: str | None = None,
    launched: IsolatedRunner | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Join campaign `name` on GPU `device`; take trials until the campaign is done. Returns a summary.
    `launched`: its measuring process, launched early by the caller (used if it is the one this needs).
    A SIGTERM stops it as Ctrl-C does; so does the death of the `tuner tune` that started it (PARENT_ENV)."""
    parent = os.environ.pop(PARENT_ENV, None)  # not for the processes this one starts
    with stopped_like_ctrl_c(int(parent) if parent else None):
        return _run_worker(
            name,
            url,
            device,
            results=results,
            allow_mixed_gpus=allow_mixed_gpus,
            measure_target=measure_target,
            launched=launched,
            log=log,
        )


def _run_worker(
    name: str,
    url: str,
    device: int,
    *,
    results: Path | None,
    allow_mixed_gpus: bool,
    measure_target: str | None,
    launched: IsolatedRunner | None,
    log: Callable[[str], None] | None,
) -> dict:
    log = log or (lambda msg: None)
    marks: dict[str, float] = {}
    info = {"host": socket.gethostname(), "device": device, "pid": os.getpid(), "started": _now(), "timeline_s": marks}
    timeline = _Timeline(marks)
    info["process_started"] = round(timeline.t0, 3)  # epoch seconds
    study, storage, camp = join_campaign(name, url)
    workload = get_workload(camp.workload)
    space = workload.space
    # a replay searches the configs its recording holds
    searchspace = (
        recording_searchspace(space, camp.recording, camp.dtype, store_root=Path(results or store.results_root()))
        if camp.simulate and camp.recording
        else kt.searchspace(space, camp.dtype)
    )
    timeline.mark("loaded")  # imports, the study, the search space
    if kernel_hash(space) != camp.kernel_hash:
        raise TunerError(
            f"campaign '{name}' tunes another version of {space.kernel_source.name} (kernel hash "
            f"{camp.kernel_hash}): check out the same commit on every host"
        )
    if camp.space_hash and camp.space_hash != space.space_hash_for(camp.dtype):  # trials would decode otherwise
        raise TunerError(
            f"campaign '{name}' tunes another version of {space.path.name} (its parameters or "
            "restrictions differ): check out the same commit on every host"
        )
    root = Path(results or store.results_root())
    if camp.simulate:  # replayed rows are kept apart from measured ones (the store's readers never see them)
        root = root / "simulated"
    process = measuring_process(camp, measure_target)
    me = worker_id(device, replay=camp.simulate)
    req = CampaignRequest(
        workload=camp.workload,
        size=camp.size,
        dtype=camp.dtype,
        strategy=camp.strategy,
        backend=camp.backend,
        device=device,
        seed=camp.seed,
        timeout=camp.timeout,
        quiet=True,
        measure_target=process["target"],
    )
    part = f"{store.safe_name(name)}.{me}"
    session = open_session(
        req,
        workload,
        camp.size,
        camp.size_vars,
        camp.dtype,
        root,
        name,
        part=part,
        cachefile=lambda gpu: cache_part(root, gpu, camp, me),
        check_gpu=lambda gpu: _claim_gpu(study, name, gpu["gpu"], allow_mixed_gpus),
        env=process["env"],
        launched=launched,
    )
    timeline.mark("joined")  # the measuring process started (its set-up in setup_s), baselines stored
    info["gpu"], info["launched_early"] = session.gpu["gpu"], launched is not None and session.runner is launched
    info["setup_s"] = {**session.runner.lifecycle_s, **(session.runner.setup or {}).get("setup_s", {})}
    study.set_user_attr(f"worker:{me}", info)
    # from here on each stage's end is recorded as it comes (`tuner status` shows how far the worker got), not only
    # when the worker ends
    timeline.publish = lambda: _record_worker(study, me, info, log)
    log(f"worker {me} on {session.gpu['gpu']} joined campaign {name}")
    ended = "failed"  # how it ended, for `tuner status`: a worker that stopped is not one that died
    # why its search stopped, where its time ran out or the campaign's patience was spent: `tuner status` says it of
    # the campaign (Scheduler._stopped)
    stopped: str | None = None
    try:
        worker = Scheduler(study, storage, camp, space, searchspace, session, me, root, req, log)
        timeline.mark("ready")  # the store read for configs measured before
        summary = worker.run()
        stopped = summary["stopped"]
        timeline.mark("searched")  # the last trial told, and none running anywhere
        _confirm_campaign(study, space, searchspace, session, root, me, log)
        timeline.mark("confirmed")
        ended = "finished"
        return summary
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, or the `tune` that started it gone: its trials were given back
        ended = "stopped"
        if camp.simulate:  # the CLI says a replay's interrupt without "everything measured is stored"
            raise ReplayInterrupted from None
        raise
    finally:
        session.runner.shutdown()
        session.writer.flush()
        if not camp.simulate:
            merge_cache_parts(
                store.cache_path(root, session.gpu["gpu"], camp.workload, camp.size, camp.dtype),
                [cache_part(root, session.gpu["gpu"], camp, me)],
            )
        # recorded with the last stage, in one write: never `closed` without how it ended (and why its search stopped)
        info["ended"] = ended
        if stopped:
            info["stopped"] = stopped
        timeline.mark("closed")


def _record_worker(study: optuna.Study, me: str, info: dict, log: Callable[[str], None]) -> None:
    """This worker's record (`worker:<me>`: where it runs, its timeline so far, how it ended, `stopped` where its
    search stopped on its time limit or the campaign's patience) written whole: one user attribute set in one
    transaction, so `tuner status` reads the previous record or this one, never a part. Where the time goes is not
    worth failing a worker over: a write that fails is said and skipped (the next stage's writes it again)."""
    try:
        study.set_user_attr(f"worker:{me}", info)
    except Exception as e:  # noqa: BLE001
        # the error's type only: a driver's message may quote the storage URL
        log(f"{me}: its progress not recorded in the study ({type(e).__name__}); tried again at its next stage")


class _Timeline:
    """Seconds from this process's start (Python's start-up and imports included) to each stage's end, into
    `marks`: a campaign's wall time that more workers do not divide (start-up, confirmation, shutdown) shows.
    Once `publish` is set (the worker's record is in the study), each mark is written as it comes: a handful of
    writes a worker, one at each stage's end."""

    def __init__(self, marks: dict):
        self.marks = marks
        self.t0 = process_started(os.getpid()) or time.time()
        self.publish: Callable[[], None] | None = None

    def mark(self, stage: str) -> None:
        self.marks[stage] = round(time.time() - self.t0, 2)
        if self.publish is not None:
            self.publish()


def _confirm_campaign(
    study: optuna.Study,
    space: Space,
    searchspace: Searchspace,
    session: Session,
    root: Path,
    me: str,
    log: Callable[[str], None],
) -> None:
    """The campaign is done: re-measure its near-ties in this worker and record the choice (tuner/campaign/confirmation.py).
    Every worker that finishes before a choice is recorded for the results it sees measures (workers that finish
    together do so side by side, each on its own GPU); the first choice recorded for the same results stands, and
    each worker's measurements go to the store. A campaign resumed with more budget or time is confirmed again when
    it has measured more: the record says what it was drawn from (`drawn_from`, the number of configs measured)."""
    values = campaign_values(tally_trials(study.get_trials(deepcopy=False), TrialCodec(searchspace))["done"])
    if _stands(study.user_attrs.get("confirmed"), len(values)):
        return
    record = confirmation.confirm_and_save(session, space, searchspace, values, root, me, log)
    # Optuna has no compare-and-set: two workers may both get here; the window is the read and the write below
    if _stands(study.user_attrs.get("confirmed"), len(values)):
        return
    # none chosen (fewer than two finalists, or the confirmation failed) is recorded too: a choice among the near-ties
    # of fewer results is not these results' (`tuner status` shows none; the campaign's best stands)
    near = len(confirmation.finalists(values, [], space.maximize))  # how many: their order does not change it
    confirmed: dict = {"config": None, "worker": me, "finalists": near, "drawn_from": len(values)}
    if record is not None:
        confirmed.update(config=record["chosen"], seconds=record["seconds"], rule=record["rule"])
    study.set_user_attr("confirmed", confirmed)


def _stands(record: dict | None, measured: int) -> bool:
    """Whether the study's `confirmed` record stands for the campaign's results, `measured` configs without error:
    drawn from these (results only grow, so the same count is the same results) or more (a worker that stopped on
    its time limit while others measured finishes with fewer), and a choice, or none to make (fewer than two
    finalists); a failed one is tried again by the next worker to finish. A record from before `drawn_from` was
    kept does not stand: what it was drawn from is unknown, and the campaign may have been resumed since and found a
    new best away from its finalists (its choice was then taken for the campaign's best, 4% slower than the best in
    a brute force resumed to the end). Confirming again costs one confirmation, once; a stale choice would stay."""
    if not record or "drawn_from" not in record:
        return False
    return bool(record["drawn_from"] >= measured and (record["config"] is not None or record["finalists"] < 2))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
