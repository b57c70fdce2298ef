"""Campaigns spread over many GPUs and hosts, on Optuna's distributed storage.

One campaign is one Optuna study in a shared database (SQLite on one host, PostgreSQL across hosts); its
settings (workload, size, dtype, strategy, budget, GPU model) are the study's user attributes. Any number
of workers join it, each a process bound to one GPU with its own isolated worker process
(tuner/measure/runner.py) and its own Parquet part in the store (merged on read):

- a worker asks the study for a trial, measures its config, writes the row, then tells the study; its
  bookkeeping runs on a scheduler thread that asks for the next trial while the current one measures, and
  sends the configs it asks ahead to its runner's compile pool (tuner.search.ahead), as a single-process
  search does;
- brute force enqueues the configs no trial holds yet, a few at a time: Optuna hands each WAITING trial
  to exactly one worker (the queue stays short: each pop reads every waiting trial);
- TPE samples with a constant liar, so workers do not all try the same region;
- a worker records a heartbeat while it measures. A killed worker's trial goes stale after the grace
  period; the next worker to look fails it and Optuna's RetryFailedTrialCallback enqueues it again (in
  between, the failed trial still holds its config: study.in_limbo). The retry first looks in the store, so a
  row written just before the kill is served, never measured twice;
- a worker that stops (Ctrl-C, SIGTERM, an error, its time limit) gives back the trials it holds unmeasured:
  told FAIL at once (trial kind `given_back`), so none is left running for the stale check to count as lost;
- of trials that drew the same config, the lowest-numbered live one measures it; the others are told
  its value (or step aside), and the search goes on from the nearest unclaimed config.

Workers stay until no trial is running anywhere, so a trial left by a worker that dies is always retried.

Modules: study (a campaign's settings and trials), worker (one GPU's process), campaign_loop (the search
loop of tuner/search/loop.py with the workers' claims and brute force's queue), scheduler (measuring on one
thread, the bookkeeping on another), liveness (heartbeats, stale and orphaned trials, a worker's process gone;
what reaches past Optuna's public API is in tuner/search/optuna_private.py, and why), cache_parts (Kernel
Tuner's cache, a part per worker), status (progress and result, each worker's state), launch (a whole campaign
on one host), signals (how its workers stop: SIGTERM, the death of the `tune` that started them). The database is opened by
tuner/campaign/rdb_storage.py; a replayed campaign measures with tuner/measure/replay.py.
"""

from tuner.campaign.distributed.cache_parts import merge_cache_parts
from tuner.campaign.distributed.launch import run_distributed
from tuner.campaign.distributed.status import (
    campaign_names,
    campaign_result,
    campaign_rows,
    campaign_status,
    format_status,
    format_summary,
)
from tuner.campaign.distributed.study import (
    Campaign,
    create_campaign,
    default_name,
    lost_trials,
)
from tuner.campaign.distributed.worker import measuring_process, run_worker
from tuner.campaign.rdb_storage import open_storage
from tuner.campaign.study_storages import default_storage

__all__ = [
    "Campaign",
    "campaign_names",
    "campaign_result",
    "campaign_rows",
    "campaign_status",
    "create_campaign",
    "default_name",
    "default_storage",
    "format_status",
    "format_summary",
    "lost_trials",
    "measuring_process",
    "merge_cache_parts",
    "open_storage",
    "run_distributed",
    "run_worker",
]
