"""`tuner tune ... --workers N`: a whole campaign on one host, one worker process per GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tuner import store
from tuner.campaign.distributed.cache_parts import merge_cache_parts, part_name
from tuner.campaign.distributed.status import campaign_result, campaign_status
from tuner.campaign.distributed.study import create_campaign
from tuner.campaign.distributed.worker import measuring_process, worker_id
from tuner.campaign.local import CampaignResult
from tuner.campaign.request import CampaignRequest, resolve
from tuner.campaign.storage import GRACE_S, HEARTBEAT_S, STORAGE_ENV, redact
from tuner.errors import TunerError
from tuner.formatting import readable
from tuner.store.recordings import replay_gpu, sources, unrecorded


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
    one per GPU; other hosts may join with `tuner worker`. Returns the campaign's result."""
    if req.simulate:  # said before any worker starts, as a single-process replay says it
        req = _replay_checked(req, log)
    camp, url = create_campaign(req, name, url, heartbeat_s=heartbeat_s, grace_s=grace_s)
    devices = list(devices) if devices is not None else [req.device + i for i in range(workers)]
    if workers < 0 or len(devices) != workers:
        raise TunerError(f"--workers {workers} needs {workers} devices, got {devices}")
    log(
        f"campaign {camp.name} in {redact(url)}; more workers: tuner worker {camp.name} --storage {redact(url)} --device D"
    )
    root = Path(req.results or store.results_root())
    if workers == 0:
        return campaign_result(camp.name, url, root)
    procs = []
    # each worker launches its measuring process first thing, so that its set-up (a CUDA context, the inputs)
    # overlaps the worker's own imports and study loading: seconds of a campaign's wall time
    launch = json.dumps(measuring_process(camp, measure_target))
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
        # the URL (it may hold a password) through the environment, which only this user can read, not the
        # command line, which every user sees in `ps`
        env = {**os.environ, STORAGE_ENV: url}
        procs.append(subprocess.Popen(cmd, stdout=2, env=env))  # their messages to our stderr: stdout may carry --json
    try:
        for p in procs:  # each wait returns as its worker exits (the campaign's end is not a polling period late)
            while True:
                try:
                    p.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    if not req.quiet:
                        s = campaign_status(camp.name, url)
                        log(
                            f"{s['done']}/{s['total']} done, {s['running']} running"
                            + (f", best {readable(s['best']['value'])} {s['best']['objective']}" if s["best"] else "")
                        )
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait()
    failed = [p.returncode for p in procs if p.returncode != 0]
    if len(failed) == len(procs):
        raise TunerError(f"every worker failed (exit codes {failed}); see their messages above")
    if not camp.simulate:  # the parts of our workers that died before merging their own (not other hosts')
        main = store.cache_path(root, "x", camp.workload, camp.size, camp.dtype).name
        for p, d in zip(procs, devices):
            for part in root.glob(f"*/{camp.workload}/cache-parts/{part_name(camp, worker_id(d, pid=p.pid))}"):
                merge_cache_parts(part.parent.parent / main, [part])
    return campaign_result(camp.name, url, root)


def _replay_checked(req: CampaignRequest, log: Callable[[str], object]) -> CampaignRequest:
    """A replay's --gpu as the recordings name it (`h200`: NVIDIA H200, said), or one line saying what is recorded
    where nothing records its workload, size and dtype."""
    root = Path(req.results or store.results_root())
    recorded = sources(root, req.workload)
    gpu, taken = replay_gpu(root, req.workload, req.gpu, recorded)
    if taken:
        log(taken)
    r = resolve(req, distributed=True)
    line = unrecorded(root, req.workload, r.size_name, r.dtype, gpu, recorded)
    if line:
        raise TunerError(line)
    return replace(req, gpu=gpu)
