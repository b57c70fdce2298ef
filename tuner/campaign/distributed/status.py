"""A campaign's progress (`tuner status`) and its result, read from the study and the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from optuna.trial import TrialState

from tuner import store
from tuner.campaign.distributed.liveness import dead_trials, process_gone
from tuner.campaign.distributed.study import (
    TrialCodec,
    campaign_values,
    lost_trials,
    patience_spent,
    read_campaign,
    retry_of,
    tally_trials,
)
from tuner.campaign.local import CampaignResult
from tuner.campaign.rdb_storage import open_storage, redact, sqlite_path
from tuner.campaign.study_storages import SHARED_FILE
from tuner.campaign.summary import chosen_line, closing_notes, stopped_line
from tuner.formatting import config_text, readable
from tuner.measure import kt
from tuner.measure.replay import recording_searchspace
from tuner.search import trial_kinds
from tuner.workloads import get_workload

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    import pandas as pd
    from optuna.trial import FrozenTrial


def campaign_status(name: str, url: str, root: Path | None = None) -> dict:
    """The campaign's progress. `root`: its store, where known: a replay's recording, derived into this user's
    cache, is derived again from it where the cache lost it meanwhile (else from the store beside a default
    SQLite storage, or the project's, whichever holds the rows it was made from)."""
    study, storage, camp = read_campaign(name, url)
    space = get_workload(camp.workload).space
    # a replay searches the configs its recording holds
    searchspace = (
        recording_searchspace(space, camp.recording, camp.dtype, store_root=root, likely=_store_beside(url))
        if camp.simulate and camp.recording
        else kt.searchspace(space, camp.dtype)
    )
    codec = TrialCodec(searchspace)
    trials = study.get_trials(deepcopy=False)
    tally = tally_trials(trials, codec)
    attrs = study.user_attrs
    workers = {k.split(":", 1)[1]: {**v, "done": 0, "running": 0} for k, v in attrs.items() if k.startswith("worker:")}
    failures: dict[str | None, int] = {}
    best = None
    for t in tally["done"].values():
        info = trial_kinds.info(t)
        w = workers.setdefault(info["worker"], {"done": 0, "running": 0})
        w["done"] += 1
        if info.get("status") != "ok":
            failures[info.get("status")] = failures.get(info.get("status"), 0) + 1
        elif best is None or space.better(info["objective"], best["value"]):
            best = {
                "config": json.loads(info["config"]),
                "objective": space.objective,
                "value": info["objective"],
                "time_ms": info.get("time_ms"),
                "worker": info["worker"],
                "trial": t.number,
            }
    lost = lost_trials(trials)
    silent = dead_trials(storage, trials, camp.grace_s)  # running, but their worker stopped beating
    for w in workers.values():
        w.update(lost_trials=0, silent=0)
    # a trial that runs, but no worker has named itself on yet: Optuna's ask and the worker's `worker` tag are two
    # transactions (tuner.campaign.distributed.campaign_loop.CampaignLoop.started); silent past the grace period, its
    # worker died in between, and the next stale check fails and retries it (liveness.dead_trials)
    being_asked = orphaned = 0
    for t in trials:
        if not t.user_attrs.get("worker"):
            if t.state == TrialState.RUNNING:
                if t.number in silent:
                    orphaned += 1
                else:
                    being_asked += 1
            continue
        w = workers.setdefault(t.user_attrs["worker"], {"done": 0, "running": 0, "lost_trials": 0, "silent": 0})
        if t.state == TrialState.RUNNING:
            w["running"] += 1
            w["silent"] += t.number in silent
        elif t.number in lost:
            w["lost_trials"] += 1
    for w in workers.values():
        w["state"] = _worker_state(w)
        del w["silent"]
    total = min(camp.max_evals or searchspace.size, searchspace.size)
    return {
        "campaign": name,
        "storage": redact(url),
        "workload": camp.workload,
        "size": camp.size,
        "dtype": camp.dtype,
        "strategy": camp.strategy,
        "gpu": attrs.get("gpu"),
        "simulated": camp.simulate,
        "total": total,
        "done": len(tally["done"]),
        # every running trial: the workers' own (each worker's `running`), plus those being asked and orphaned
        "running": tally["running"],
        "being_asked": being_asked,
        "orphaned": orphaned,
        "waiting": tally["waiting"],
        "retried": sum(1 for t in trials if retry_of(t) is not None),
        "lost_trials": len(lost),  # given up for lost (their worker died) and retried
        "lost_workers": sum(w["state"] == "dead" for w in workers.values()),
        "grace_s": camp.grace_s,
        "failures": failures,
        "best": best,
        "confirmed": _confirmed(attrs.get("confirmed"), len(campaign_values(tally["done"]))),
        "stopped": _stopped(
            tally["done"].values(),
            camp.patience,
            total,
            searchspace.size,
            busy=bool(tally["running"]),
            workers=workers.values(),
        ),
        "workers": workers,
    }


def _confirmed(record: dict | None, measured: int) -> dict | None:
    """The study's `confirmed` record as `tuner status` shows it (`measured`: configs measured without error now).
    None where it chose nothing: the latest results had fewer than two finalists, or their confirmation failed (the
    campaign's own best stands). `measured_since`: configs measured after it was drawn (a resumed campaign, confirmed
    again when a worker finishes it); `drawn_from_unknown`: a record from before `drawn_from` was kept, which the
    next worker to finish confirms again as well (worker._stands)."""
    if not record or record.get("config") is None:
        return None
    if "drawn_from" not in record:
        return {**record, "drawn_from_unknown": True}
    since = measured - record["drawn_from"]
    return {**record, "measured_since": since} if since > 0 else record


def confirmation_current(confirmed: dict | None) -> bool:
    """Whether a confirmation (campaign_status' `confirmed`) was drawn from every config measured so far: one from
    before configs measured since chose among near-ties that may be near the best no longer, and of one that did not
    record what it was drawn from, that is not known."""
    return confirmed is not None and not confirmed.get("measured_since") and not confirmed.get("drawn_from_unknown")


def _stopped(
    done: Collection[FrozenTrial],
    patience: int | None,
    total: int,
    space_size: int,
    *,
    busy: bool = False,
    workers: Iterable[dict] = (),
) -> str | None:
    """Why the campaign's search stopped, as a single-process search says it (tuner.campaign.summary.STOP_REASONS):
    its patience spent, else its budget or every config of its space (or of the recording replayed) done, else its
    time limit, where no trial is `busy` (running) and the worker that closed last (of the `workers`' records)
    stopped on it: a run resumed later says how it ended instead (its budget, or nothing where it was stopped). Trials
    queued do not count: brute force keeps the queue topped up, and a time limit leaves some there. None while it
    has work."""
    if patience_spent(done, patience):
        return "patience"
    if len(done) >= total:
        return "budget" if total < space_size else "space exhausted"
    last = None if busy else _last_closed(workers)
    return "time limit" if last is not None and last.get("stopped") == "time limit" else None


def _last_closed(workers: Iterable[dict]) -> dict | None:
    """The record of the worker that closed last: its process's start (epoch seconds) plus its `closed` mark."""
    closed = [w for w in workers if "closed" in w.get("timeline_s", {}) and w.get("process_started") is not None]
    return max(closed, key=lambda w: w["process_started"] + w["timeline_s"]["closed"], default=None)


def _worker_state(w: dict) -> str:
    """A worker as `tuner status` shows it, from its record and its trials: how it ended (finished; stopped by
    Ctrl-C or SIGTERM, its trials given back; failed), where it did; else dead, where its process is known gone
    (on this host) or its trials went silent past the grace period or were lost, and none of its trials beats;
    else running (a trial of its beats) or idle (it holds none: waiting for others to finish, or gone without a
    trace, which only its trials' heartbeats would show)."""
    if w.get("ended"):
        return str(w["ended"])
    if "closed" in w.get("timeline_s", {}):  # a record from before `ended` was kept
        return "finished"
    beating = w["running"] - w["silent"]
    if process_gone(w.get("host"), w.get("pid"), w.get("process_started")) or (
        not beating and (w["silent"] or w["lost_trials"])
    ):
        return "dead"
    return "running" if beating else "idle"


def _store_beside(url: str) -> list[Path]:
    """The store whose default storage `url` is (`tune --workers` keeps its campaigns beside the store's parts:
    tuner.campaign.study_storages.default_storage), if it is one."""
    if not url.startswith("sqlite") or sqlite_path(url) == ":memory:":
        return []
    file = Path(sqlite_path(url))
    return [file.parent] if file.name == SHARED_FILE else []


def campaign_names(url: str) -> list[str]:
    """The tuner campaigns in a storage (its other Optuna studies, such as single-process searches, left out)."""
    import optuna

    return sorted(
        s.study_name
        for s in optuna.get_all_study_summaries(open_storage(url), include_best_trial=False)
        if "campaign" in s.user_attrs
    )


def running_text(s: dict) -> str:
    """`running N` and, where some running trials belong to no worker yet, what they are: the workers' trials, those
    just asked (no worker named on them yet) and those orphaned (their worker died while asking), which add up to N."""
    asked, orphaned = s.get("being_asked", 0), s.get("orphaned", 0)
    if not asked and not orphaned:
        return f"running {s['running']}"
    parts = [f"{s['running'] - asked - orphaned} by workers"]
    if asked:
        parts.append(f"{asked} being asked")
    if orphaned:
        parts.append(f"{orphaned} orphaned by a dead worker, to be retried")
    return f"running {s['running']} ({', '.join(parts)})"


def format_summary(s: dict) -> str:
    """One line of `tuner status` without a campaign name."""
    best = f", best {readable(s['best']['value'])} {s['best']['objective']}" if s["best"] else ""
    dead = s.get("lost_workers", 0)
    return (
        f"{s['campaign']}: {s['workload']} {s['size']} {s['dtype']} [{s['strategy']}] on {s['gpu'] or '?'}"
        f"{' (simulated)' if s['simulated'] else ''}: done {s['done']}/{s['total']}, {running_text(s)}{best}"
        + (", confirmed" if confirmation_current(s.get("confirmed")) else "")
        + (f", {dead} worker{'s' if dead > 1 else ''} dead" if dead else "")
    )


def format_status(s: dict) -> str:
    lines = [
        f"campaign {s['campaign']}: {s['workload']} {s['size']} {s['dtype']} [{s['strategy']}] on {s['gpu'] or '?'}"
        + (" (simulated)" if s["simulated"] else ""),
        f"done {s['done']}/{s['total']}, {running_text(s)}, queued {s['waiting']}"
        + (f", dead workers {s['lost_workers']}" if s.get("lost_workers") else "")
        + (f", lost trials {s['lost_trials']} (retried)" if s.get("lost_trials") else "")
        + (", failures: " + ", ".join(f"{k} {v}" for k, v in sorted(s["failures"].items())) if s["failures"] else ""),
    ]
    if s["best"]:
        b = s["best"]
        lines.append(
            f"best so far: {readable(b['value'])} {b['objective']}  {config_text(b['config'])}  (by {b['worker']})"
        )
    if s.get("confirmed"):
        c = s["confirmed"]
        # a simulated campaign's rounds are resampled from the recording's times (tuner.measure.replay), not measured
        again = "replayed from the recording" if s["simulated"] else "measured again"
        since = c.get("measured_since")
        lines.append(
            f"confirmed among {c['finalists']} finalists {again} ({c['seconds']:.1f} s): {config_text(c['config'])}"
            + (
                f"  (drawn before {since} configs measured since: the worker that finishes the campaign confirms again)"
                if since
                else "  (drawn from results it did not record, as before 2026-12-01: the worker that finishes the "
                "campaign confirms again)"
                if c.get("drawn_from_unknown")
                else ""
            )
        )
    for w, info in sorted(s["workers"].items()):
        # a replay's worker uses no GPU: the GPU named is the recording's
        on = "replaying" if s["simulated"] else f"device {info.get('device', '?')}"
        where = f"{info.get('gpu', '?')} (host {info.get('host', '?')}, {on})"
        state = info.get("state", "?")
        lost = info.get("lost_trials", 0)
        counts = f"{info['done']} done, {info['running']} running" + (f", {lost} lost and retried" if lost else "")
        if state == "dead" and info["running"]:
            counts += f" (retried once silent past the {s.get('grace_s', '?')}-s grace period)"
        lines.append(f"  worker {w}: {state}, {counts}  {where}")
        if info.get("timeline_s"):  # seconds from the worker process's start to the end of each stage so far
            lines.append(
                "    seconds after its start: " + ", ".join(f"{k} {v:.1f}" for k, v in info["timeline_s"].items())
            )
    lines += closing_notes(stopped_line(s.get("stopped")))  # why its search stopped, as `tune` ends with it
    return "\n".join(lines)


def campaign_rows(name: str, root: Path, simulated: bool, workload: str | None = None) -> pd.DataFrame:
    """The campaign's rows from every worker's part, one per config (the first written, should a worker
    have died between writing its row and telling the study)."""
    base = Path(root) / "simulated" if simulated else Path(root)
    df = store.read_parts(f"*/{workload or '*'}/evaluations/{store.safe_name(name)}.*.parquet", base)
    if df.empty:
        return df
    return df.sort_values("timestamp", kind="stable").drop_duplicates(["gpu", "config"], keep="first")


def campaign_result(name: str, url: str, root: Path, status: dict | None = None) -> CampaignResult:
    """The campaign's result as one process's run returns it; `status`: its campaign_status where just read (a
    second read of the study costs about a second on GEMM's space)."""
    s = status if status is not None else campaign_status(name, url, root)
    rows = campaign_rows(name, root, s["simulated"], s["workload"])
    best = (
        {k: v for k, v in s["best"].items() if k in ("config", "objective", "value", "time_ms")} if s["best"] else None
    )
    confirmed = s["confirmed"] if confirmation_current(s["confirmed"]) else None
    if best and confirmed and confirmed["config"] != best["config"]:
        # the confirmation's choice among the near-ties, with its own campaign measurement
        chosen = rows[rows["config"] == store.canonical_config(confirmed["config"])] if not rows.empty else rows
        if not chosen.empty:
            r = chosen.iloc[0]
            best = {
                "config": confirmed["config"],
                "objective": best["objective"],
                "value": float(r["objective_value"]),
                "time_ms": float(r["time_ms"]),
            }
    if best:
        best["confirmed"] = bool(confirmed)
    chosen_instead = chosen_line(best, s["best"], replayed=s["simulated"])
    return CampaignResult(
        s["workload"],
        s["size"],
        s["dtype"],
        s["gpu"] or "?",
        s["strategy"],
        evaluated=s["done"],
        measured=len(rows),
        failures=s["failures"],
        best=best,
        simulated=s["simulated"],
        stop_reason=s.get("stopped"),
        closing=closing_notes(stopped_line(s.get("stopped")), chosen_instead),
    )
