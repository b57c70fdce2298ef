"""`tuner tune ... --workers N`: a whole campaign on one host, one worker process per GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tuner import store
from tuner.campaign.distributed.cache_parts import merge_cache_parts, part_name
from tuner.campaign.distributed.signals import PARENT_ENV, stopped_like_ctrl_c
from tuner.campaign.distributed.status import campaign_result, campaign_status, confirmation_current
from tuner.campaign.distributed.study import create_campaign
from tuner.campaign.distributed.worker import measuring_process, worker_id
from tuner.campaign.local import CampaignResult
from tuner.campaign.rdb_storage import GRACE_S, HEARTBEAT_S, redact
from tuner.campaign.request import CampaignRequest
from tuner.campaign.study_storages import STORAGE_ENV
from tuner.errors import TunerError
from tuner.formatting import readable

STOP_S = 30.0  # how long a stopped worker has to store its last row and stop its measuring process before SIGKILL


def run_distributed(
    req: CampaignRequest,
    workers: int,
    *,
    devices: list[int] | None = None,
    name: str | None = None,
    url: str | None = None,
    allow_mixed_gpus: bool = False,
    measure_target: str | None = None,
    heartbeat_s: int = HEARTBEAT_S,
    grace_s: int = GRACE_S,
    log: Callable[[str], object] = print,
) -> CampaignResult:
    """`tuner tune ... --workers N`: create (or resume) the campaign and run N worker processes here,
    one per GPU; other hosts may join with `tuner worker`. Returns the campaign's result. A SIGTERM stops it as
    Ctrl-C does (KeyboardInterrupt: the workers stopped, what they measured stored, resumed by running it again);
    should this process be killed outright, its workers stop on their own (signals.stopped_like_ctrl_c)."""
    notes: list[str] = []  # a replay's recording, where chosen among several: said with the result, as on one process
    camp, url = create_campaign(req, name, url, heartbeat_s=heartbeat_s, grace_s=grace_s, say=notes.append)
    devices = list(devices) if devices is not None else [req.device + i for i in range(workers)]
    if workers < 0 or len(devices) != workers:
        raise TunerError(f"--workers {workers} needs {workers} devices, got {devices}")
    log(f"campaign {camp.name} in {redact(url)}; more workers: {_worker_command(camp.name, url)}")
    root = Path(req.results or store.results_root())
    if workers == 0:
        return replace(campaign_result(camp.name, url, root), notes=notes)
    status = campaign_status(camp.name, url, root)
    finished = _finished(status)
    if finished:  # run again as it was: nothing for workers to do (16 s of starting them to say so)
        log(
            f"campaign {camp.name} is finished ({finished}): nothing left to measure; a larger --budget goes on with it"
        )
        return replace(campaign_result(camp.name, url, root, status), notes=notes)
    procs: list[subprocess.Popen] = []
    # each worker launches its measuring process first thing, so that its set-up (a CUDA context, the inputs)
    # overlaps the worker's own imports and study loading: seconds of a campaign's wall time
    launch = json.dumps(measuring_process(camp, measure_target))
    # the URL (it may hold a password) through the environment, which only this user can read, not the command
    # line, which every user sees in `ps`; our pid, so that a worker stops when this process dies, SIGKILL included
    env = {**os.environ, STORAGE_ENV: url, PARENT_ENV: str(os.getpid())}
    # a SIGTERM stops the campaign as Ctrl-C does: the workers are stopped (_stop), what they measured is stored.
    # The workers are started and waited for on this one thread: on Linux a worker's signal on its parent's death
    # comes when the parent's thread that started it ends (signals._signal_on_parent_death)
    with stopped_like_ctrl_c():
        try:
            for d in devices:
                cmd = (
                    [
                        sys.executable,
                        "-m",
                        "tuner",
                        "--results",
                        str(root),
                        "worker",
                        camp.name,
                        "--device",
                        str(d),
                        "--quiet",
                        "--launch",
                        launch,
                    ]
                    + (["--allow-mixed-gpus"] if allow_mixed_gpus else [])
                    + (["--measure-target", measure_target] if measure_target else [])
                )
                # their messages to our stderr: stdout may carry --json
                procs.append(subprocess.Popen(cmd, stdout=2, env=env))
            for p in procs:  # each wait returns as its worker exits (the campaign's end is not a polling period late)
                while True:
                    try:
                        p.wait(timeout=10)
                        break
                    except subprocess.TimeoutExpired:
                        if not req.quiet:
                            s = campaign_status(camp.name, url, root)
                            log(
                                f"{s['done']}/{s['total']} done, {s['running']} running"
                                + (
                                    f", best {readable(s['best']['value'])} {s['best']['objective']}"
                                    if s["best"]
                                    else ""
                                )
                                + (f", dead workers {s['lost_workers']}" if s["lost_workers"] else "")
                            )
        finally:
            _stop(procs)
    failed = [p.returncode for p in procs if p.returncode != 0]
    if len(failed) == len(procs):
        raise TunerError(f"every worker failed (exit codes {failed}); see their messages above")
    if not camp.simulate:  # the parts of our workers that died before merging their own (not other hosts')
        main = store.cache_path(root, "x", camp.workload, camp.size, camp.dtype).name
        for p, d in zip(procs, devices):
            for part in root.glob(f"*/{camp.workload}/cache-parts/{part_name(camp, worker_id(d, pid=p.pid))}"):
                merge_cache_parts(part.parent.parent / main, [part])
    return replace(campaign_result(camp.name, url, root), notes=notes)


def _finished(s: dict) -> str | None:
    """How a campaign `s` (campaign_status) finished, where it did: its budget or space done, or its patience spent,
    nothing running or queued, and a worker finished it (the confirmation ran). None where workers have work: one
    stopped by its time limit (`stopped (time limit)`) goes on, each worker with the time budget again, and one whose
    confirmation was drawn before configs measured since (or from results it did not record) is confirmed again."""
    if s["running"] or s["waiting"] or not any(w.get("state") == "finished" for w in s["workers"].values()):
        return None
    # a confirmation not drawn from every result (measured since, and stopped before another; or from before what
    # it was drawn from was kept): the workers started find nothing to measure and confirm every result's near-ties
    if s.get("confirmed") and not confirmation_current(s["confirmed"]):
        return None
    if s.get("stopped") == "patience":
        return f"{s['done']} evaluated, stopped ({s['stopped']})"
    return f"{s['done']}/{s['total']} evaluated" if s["done"] >= s["total"] else None


def _stop(procs: list[subprocess.Popen], wait_s: float = STOP_S) -> None:
    """The workers still running (this process interrupted, or failed): each is sent SIGTERM, which stops it as
    Ctrl-C does (one that a Ctrl-C reached already ignores it, its clean-up going on), and given `wait_s` in all to
    exit before it is killed."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        p.terminate()
    deadline = time.monotonic() + wait_s
    for p in live:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _worker_command(name: str, url: str) -> str:
    """How another GPU joins the campaign: the storage as this command found it (tuner.cli.common.storage_url). A
    URL from $TUNER_STORAGE stays there: shown, its password would be *** anyway."""
    if os.environ.get(STORAGE_ENV) == url:
        return f"tuner worker {name} --device D (with ${STORAGE_ENV} as here)"
    return f"tuner worker {name} --storage {redact(url)} --device D"
