"""A campaign in one process: one workload, one GPU, one problem size and dtype, one strategy and a budget.
Kernel Tuner measures (in an isolated measuring process), the strategy picks, the store keeps every row;
at the end the near-ties are measured again and one chosen (tuner/campaign/confirmation.py)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner import store
from tuner.campaign import confirmation
from tuner.campaign.progress import CampaignProgress, counted
from tuner.campaign.rdb_storage import open_storage
from tuner.campaign.request import CampaignRequest, Resolved, check_gpu, default_name, resolve
from tuner.campaign.search_start import first_configs, patience_of
from tuner.campaign.session import Session, baseline_medians, known_rows, open_session, store_row
from tuner.campaign.study_storages import local_storage
from tuner.campaign.summary import chosen_line, closing_notes, replay_line, stopped_line
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.provenance import local_device_name
from tuner.measure.replay import replay_recording
from tuner.search.strategies import make_strategy
from tuner.space import Space
from tuner.space.model import row_time
from tuner.store import gpu_slug
from tuner.store.recording_choice import choose_recording

if TYPE_CHECKING:
    import pandas as pd
    from kernel_tuner.searchspace import Searchspace


@dataclass
class CampaignResult:
    workload: str
    size: str
    dtype: str
    gpu: str
    strategy: str
    evaluated: int
    measured: int
    failures: dict
    best: dict | None
    baselines: dict = field(default_factory=dict)
    simulated: bool = False
    replayed: str | None = None  # a replay: over how many of the space's configs the recording held
    notes: list[str] = field(default_factory=list)  # a replay: which GPU's recording, where chosen among several
    stop_reason: str | None = None  # why the search stopped: budget, time limit, patience, space exhausted
    # the closing summary, to print after the best (tuner/campaign/summary.py): why the search stopped (from
    # stop_reason), and where `tuner best` answers another config than the campaign's top row, why
    closing: list[str] = field(default_factory=list)


# `tuner best`'s answer for a workload, size, dtype and GPU in a results folder (tuner.answers.best_config.best),
# handed down by a caller above the answers stage; TunerError where nothing is stored
StoredBest = Callable[[str, str, str, str, Path], dict]


def run_campaign(req: CampaignRequest, *, stored_best: StoredBest | None = None) -> CampaignResult:
    """Run the campaign `req` asks for, live or replayed. `stored_best`: where given, a replay's closing notes
    say where `tuner best` answers another config than the replay's top row, and why."""
    r = resolve(req)
    root = Path(req.results or store.results_root())
    if req.simulate:
        return _simulate(req, r, root, stored_best)
    check_gpu(req, r.space)
    session = open_session(req, r.workload, r.size_name, r.size, r.dtype, root, store.new_campaign_id())
    try:
        return _run_session(req, r, root, session)
    finally:  # whatever happens, the measuring process stops and every measured row is on disk
        session.runner.shutdown()
        session.writer.flush()


def _run_session(req: CampaignRequest, r: Resolved, root: Path, session: Session) -> CampaignResult:
    space, size, dtype = r.space, r.size, r.dtype
    gpu, kernel_hash = session.gpu["gpu"], session.provenance["kernel_hash"]
    previous = store.load_evaluations(req.workload, root)  # read once: resume, then the warm start
    known = known_rows(previous, space, session.common, session.provenance, req.timeout)
    total = min(r.max_evals or r.searchspace.size, r.searchspace.size)
    progress = CampaignProgress(
        f"{req.workload} {r.size_name} {dtype} [{req.strategy}]",
        total,
        req.time_limit,
        space.objective,
        space.maximize,
        quiet=req.quiet,
    )

    def on_row(row: dict, fresh: bool) -> None:
        value = None
        if row["status"] == "ok":
            value = space.objective_value(row, size, dtype)
        progress.advance(row["status"], value, fresh)
        if fresh:
            session.writer.append(store_row(row, space, size, dtype, session.common, session.provenance, req))

    session.runner.known, session.runner.on_row = known, on_row
    # one SQLite file shared by the campaigns of this GPU
    storage = open_storage(req.storage or local_storage(session.wdir))
    # the campaign's name, and what it must not be mixed with: this GPU, this kernel and space
    study_name = f"{study_title(req, r)}@{gpu_slug(gpu)}/{kernel_hash}-{space.space_hash_for(dtype)}"
    strategy = campaign_strategy(
        req, space, size, dtype, gpu, root, storage=storage, study_name=study_name, evaluations=previous
    )
    tuning_options = kt.tuning_options(
        space, size, dtype, max_fevals=r.max_evals, time_limit=req.time_limit, seed=req.seed
    )
    log = (lambda msg: None) if req.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    with progress:
        results = strategy.tune(r.searchspace, session.runner, tuning_options)
    chosen = _confirm_best(space, r.searchspace, results, session, root, log) if req.confirm else None
    summary = _summarize(results, space)
    best = summary["best"]
    if best is None:
        _refuse_broken_kernel(space, session.writer.rows)
    if best is not None:
        if chosen is not None and chosen != best["config"]:  # the choice among near-ties, with its campaign value
            row = next(
                x
                for x in results
                if x is not None and x.get("__error__") is None and {k: x[k] for k in space.params} == chosen
            )
            best = _best_entry(row, space)
        best["confirmed"] = chosen is not None
    return CampaignResult(
        req.workload,
        r.size_name,
        dtype,
        gpu,
        req.strategy,
        evaluated=summary["unique"],
        measured=len(session.writer.rows),
        failures=progress.failures,
        best=best,
        baselines=baseline_medians(session.baselines),
        stop_reason=getattr(strategy, "stop_reason", None),
        closing=closing_notes(stopped_line(getattr(strategy, "stop_reason", None)), chosen_line(best, summary["best"])),
    )


# failures that say the kernel or its reference is wrong, not one config: if every config failed so, it is bad input
_KERNEL_FAILURES = {"compile": "does not compile", "wrong_answer": "disagrees with the reference"}


def _refuse_broken_kernel(space: Space, rows: list[dict]) -> None:
    """No config succeeded, and every one failed the same way that says the kernel (or its reference) is wrong:
    one line naming the kernel file and the first error, instead of a table of identical failures. The
    failures stay in the store as measurements."""
    statuses = {row["status"] for row in rows}
    if len(statuses) != 1 or (status := statuses.pop()) not in _KERNEL_FAILURES:
        return
    first = next((line for line in str(rows[0].get("error", "")).splitlines() if line.strip()), "")
    raise TunerError(
        f"{space.kernel_source}: {space.kernel_name} {_KERNEL_FAILURES[status]} for any of the "
        f"{len(rows)} configs measured; the first: {first[:300]}"
    )


def _confirm_best(
    space: Space,
    searchspace: Searchspace,
    results: list[dict | None],
    session: Session,
    root: Path,
    log: Callable[[str], object],
) -> dict | None:
    """The campaign is done: its near-ties measured again side by side and one chosen (tuner/campaign/confirmation.py),
    stored under confirmations/ so that `tuner best` answers it. The chosen config, or None (one finalist)."""
    values = {
        store.canonical_config({k: r[k] for k in space.params}): r[space.objective]
        for r in results
        if r is not None and r.get("__error__") is None and r.get(space.objective) is not None
    }
    record = confirmation.confirm_and_save(session, space, searchspace, values, root, "tune", log)
    return record and record["chosen"]


def _summarize(results: list[dict | None], space: Space) -> dict:
    failures: dict[str, int] = {}
    best, best_value = None, None
    for r in results:
        if r is None:
            continue
        err = r.get("__error__")
        if err is not None:
            name = type(err).__name__
            failures[name] = failures.get(name, 0) + 1
            continue
        value = r.get(space.objective)
        if value is not None and (best_value is None or space.better(value, best_value)):
            best_value, best = value, r
    if best is not None:
        best = _best_entry(best, space)
    unique = {tuple(r[k] for k in space.params) for r in results if r is not None}
    return {"failures": failures, "best": best, "unique": len(unique)}


def _best_entry(r: dict, space: Space) -> dict:
    """A campaign's answer from one Kernel Tuner result: its config, objective value and median time."""
    return {
        "config": {k: r[k] for k in space.params},
        "objective": space.objective,
        "value": r[space.objective],
        "time_ms": row_time(r) if r.get("times") or "time" in r else None,
    }


def campaign_strategy(
    req: CampaignRequest,
    space: Space,
    size: dict,
    dtype: str,
    gpu: str | None,
    root: Path,
    *,
    evaluations: pd.DataFrame | None = None,
    **kw: Any,
) -> Any:
    """The request's strategy; an Optuna one warm-started from the store (`evaluations`, if the caller has
    read them already) and with the request's patience (both measured by `tuner compare-strategies`; see the
    README's strategy comparison): tuner.campaign.search_start."""
    # for Kernel Tuner's strategies both are empty (first_configs refuses configs to measure first there)
    first = first_configs(req, space, size, dtype, gpu, root, evaluations)
    return make_strategy(req.strategy, seed=req.seed, warm_start=first, patience=patience_of(req), **kw)


def _simulate(req: CampaignRequest, r: Resolved, root: Path, stored_best: StoredBest | None) -> CampaignResult:
    """Replay the campaign in Kernel Tuner's simulation mode from a recorded cache: no GPU needed. Without
    --gpu and with several GPUs recorded, the recording is chosen as `tuner best` chooses, and said."""
    here = functools.partial(local_device_name, r.space)  # the CPU's model for host code, as `tuner best`
    cachefile, note = choose_recording(root, req.workload, r.size_name, r.dtype, req.gpu, size=r.size, here=here)
    gpu = store.recorded_gpu(cachefile) or req.gpu  # --gpu may be the folder's name: the warm start needs the GPU's
    strategy = campaign_strategy(
        req,
        r.space,
        r.size,
        r.dtype,
        gpu,
        root,
        storage=req.storage and open_storage(req.storage),
        study_name=f"{study_title(req, r)}-replay",
    )
    progress = CampaignProgress(  # no time left shown: a replay's time budget is the recording's simulated time
        f"{req.workload} {r.size_name} {r.dtype} [{req.strategy}, replay]",
        min(r.max_evals or r.searchspace.size, r.searchspace.size),
        None,
        r.space.objective,
        r.space.maximize,
        quiet=req.quiet,
    )
    run = replay_recording(
        r.space,
        r.size,
        r.dtype,
        cachefile,
        counted(strategy, progress, r.space.objective),
        seed=req.seed,
        time_limit=req.time_limit,
        max_evals=r.max_evals,
    )
    summary = _summarize(run.results, r.space)
    answer = None
    if stored_best is not None and summary["best"] is not None:
        try:
            answer = stored_best(req.workload, r.size_name, r.dtype, run.gpu, root)
        except TunerError:  # nothing stored to compare with (a recording without its rows)
            pass
    closing = [  # the closing summary (tuner/campaign/summary.py): why it stopped, why `tuner best` differs
        stopped_line(getattr(strategy, "stop_reason", None)),
        replay_line(answer, summary["best"], run.results),
    ]
    return CampaignResult(
        req.workload,
        r.size_name,
        r.dtype,
        run.gpu,
        req.strategy,
        evaluated=summary["unique"],
        measured=0,
        failures=summary["failures"],
        best=summary["best"],
        simulated=True,
        replayed=run.coverage,
        notes=[note] if note else [],
        closing=closing_notes(*closing),
        stop_reason=getattr(strategy, "stop_reason", None),
    )


def study_title(req: CampaignRequest, r: Resolved) -> str:
    """A single-process campaign's Optuna study is named as a distributed one would be by default."""
    return default_name(req.workload, r.size_name, r.dtype, req.strategy, req.seed)
