"""A campaign: one workload, one GPU, one problem size and dtype, one strategy and a budget.
Kernel Tuner measures (in an isolated worker), the strategy picks, the store keeps every row."""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from kernel_tuner import util
from kernel_tuner.interface import Options
from kernel_tuner.runners.simulation import SimulationRunner

from tuner import confirm, kt, store
from tuner.errors import TunerError
from tuner.isolation import IsolatedRunner, config_key
from tuner.progress import CampaignProgress
from tuner.provenance import gpu_slug, software, source_hash
from tuner.strategies import (
    DEFAULT_PATIENCE,
    DEFAULT_STRATEGY,
    OPTUNA_SAMPLERS,
    make_strategy,
)
from tuner.warmstart import warm_configs, warm_evaluations
from tuner.workloads import get_workload


@dataclass
class CampaignRequest:
    workload: str
    size: str | None = None
    dtype: str | None = None
    strategy: str = DEFAULT_STRATEGY
    max_evals: int | None = None
    time_limit: float | None = None
    backend: str = "nvcuda"
    device: int = 0
    seed: int | None = 1
    timeout: float = 60.0
    storage: str | None = None
    results: Path | None = None
    simulate: bool = False
    gpu: str | None = None  # which recorded GPU a simulation replays
    quiet: bool = False
    warm_start: bool = True  # Optuna strategies first try the best configs of other stored sizes (tuner.warmstart)
    first: tuple = ()  # configs (dicts) an Optuna strategy measures before anything else, e.g. a seed's own
    # Optuna strategies stop after this many evaluations without a 0.5% gain; None: DEFAULT_PATIENCE when no
    # budget is given (the default budget is a ceiling), none when one is (a budget asked for is used); 0: never
    patience: int | None = None
    confirm: bool = True  # re-measure the near-ties at the end and choose among them (tuner/confirm.py)
    worker_target: object = None  # the worker process's main function; tests substitute a GPU-free one


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


def parse_budget(text: str | None) -> tuple[int | None, float | None]:
    """'150' -> 150 evaluations; '90s', '10m', '2h' -> seconds."""
    if text is None:
        return None, None
    text = str(text).strip().lower()
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text[-1] in units:
            seconds = float(text[:-1]) * units[text[-1]]
            if not 0.001 <= seconds < 1e9:  # also NaN and inf
                raise ValueError
            return None, seconds
        evals = int(text)
        if evals <= 0:
            raise ValueError
        return evals, None
    except (ValueError, IndexError):
        raise TunerError(f"budget '{text}' is neither a number of evaluations (150) nor a duration (90s, 10m, 2h)") from None


def check_options(req: CampaignRequest) -> None:
    """The request's options that every campaign (one process or distributed) takes the same way."""
    if req.backend not in kt.BACKENDS:
        raise TunerError(f"unknown backend '{req.backend}'; choose one of {', '.join(kt.BACKENDS)}")
    if req.patience is not None and req.patience < 0:
        raise TunerError(f"--patience {req.patience}: give a number of evaluations (0: never stop early)")
    if not req.timeout or req.timeout <= 0:
        raise TunerError(f"--timeout {req.timeout}: give the seconds one configuration may take, more than 0")
    if req.storage:  # a wrong URL or a missing driver: said now, not after the GPU's set-up
        open_storage(req.storage)


def open_storage(url: str):
    """Optuna's storage at `url`, its errors said in one line (tuner.distributed.storage)."""
    from tuner.distributed.storage import open_storage as opened  # the package imports this module

    return opened(url)


def run_campaign(req: CampaignRequest) -> CampaignResult:
    workload = get_workload(req.workload)
    space = workload.space
    size_name, size = space.resolve_size(req.size, workload.parse_size)
    dtype = space.resolve_dtype(req.dtype)
    check_options(req)
    make_strategy(req.strategy)  # an unknown name fails here, before any GPU work
    root = Path(req.results or store.results_root())
    searchspace = kt.searchspace(space)
    if searchspace.size == 0:
        raise TunerError(f"{space.path}: the restrictions leave no valid configuration")
    if req.simulate:
        return _simulate(req, space, size_name, size, dtype, root, searchspace)

    session = open_session(req, workload, size_name, size, dtype, root, store.new_campaign_id())
    try:
        return _run_session(req, workload, space, size_name, size, dtype, root, searchspace, session)
    finally:  # whatever happens, the worker stops and every measured row is on disk
        session.runner.shutdown()
        session.writer.flush()


def _run_session(req, workload, space, size_name, size, dtype, root, searchspace, session) -> CampaignResult:
    runner, gpu, common, provenance, writer = (session.runner, session.gpu, session.common, session.provenance,
                                               session.writer)
    kernel_hash, wdir = provenance["kernel_hash"], session.wdir
    previous = store.load_evaluations(req.workload, root)  # read once: resume, then the warm start
    known = known_rows(previous, space, common, provenance, req.timeout)
    max_evals = req.max_evals or default_max_evals(req.strategy, searchspace.size, req.time_limit)
    total = min(max_evals or searchspace.size, searchspace.size)
    progress = CampaignProgress(f"{req.workload} {size_name} {dtype} [{req.strategy}]", total, req.time_limit,
                                space.objective, space.maximize, quiet=req.quiet)

    def on_row(row, fresh):
        value = None
        if row["status"] == "ok":
            value = space.objective_value(row, size, dtype)
        progress.advance(row["status"], value, fresh)
        if fresh:
            writer.append(store_row(row, space, size, dtype, common, provenance, req))

    runner.known, runner.on_row = known, on_row
    storage = open_storage(req.storage or f"sqlite:///{wdir / 'optuna.sqlite3'}")  # shared by campaigns of this GPU
    study_name = (f"{req.workload}/{size_name}/{dtype}/{gpu_slug(gpu['gpu'])}/{req.strategy}/{kernel_hash}-{space.space_hash}"
                  f"/{req.seed}")
    strategy = campaign_strategy(req, space, size, dtype, gpu["gpu"], root, storage=storage, study_name=study_name,
                                 evaluations=previous)
    tuning_options = kt.tuning_options(space, size, dtype, max_fevals=max_evals, time_limit=req.time_limit, seed=req.seed)
    log = (lambda msg: None) if req.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    with progress:
        results = strategy.tune(searchspace, runner, tuning_options)
    chosen = _confirm_best(space, searchspace, results, session, root, log) if req.confirm else None
    summary = _summarize(results, space)
    best = summary["best"]
    if best is not None:
        if chosen is not None and chosen != best["config"]:  # the choice among near-ties, with its campaign value
            r = next(r for r in results if r is not None and r.get("__error__") is None
                     and {k: r[k] for k in space.params} == chosen)
            best = _best_entry(r, space)
        best["confirmed"] = chosen is not None
    return CampaignResult(req.workload, size_name, dtype, gpu["gpu"], req.strategy, evaluated=summary["unique"],
                          measured=len(writer.rows), failures=progress.failures, best=best,
                          baselines=_baseline_medians(session.baselines))


def _confirm_best(space, searchspace, results, session, root, log) -> dict | None:
    """The campaign is done: its near-ties measured again side by side and one chosen (tuner/confirm.py),
    stored under confirmations/ so that `tuner best` answers it. The chosen config, or None (one finalist)."""
    values = {store.canonical_config({k: r[k] for k in space.params}): r[space.objective] for r in results
              if r is not None and r.get("__error__") is None and r.get(space.objective) is not None}
    record = confirm.confirm_and_save(session, space, searchspace, values, root, "tune", log)
    return record and record["chosen"]


@dataclass
class Session:
    """A worker process started on one GPU, and where the rows it measures go."""
    runner: IsolatedRunner
    gpu: dict
    wdir: Path
    common: dict  # the campaign's columns of every row
    provenance: dict
    writer: store.PartWriter
    baselines: dict


def open_session(req: CampaignRequest, workload, size_name: str, size: dict, dtype: str, root: Path, campaign_id: str, *,
                 part: str | None = None, cachefile=None, check_gpu=None, env: dict | None = None,
                 launched: IsolatedRunner | None = None) -> Session:
    """Start the worker process, learn its GPU, store the baselines it measured, and open the Parquet part
    (evaluations/<part or campaign_id>.parquet) and Kernel Tuner's cache file (a path, or a function of the
    GPU's name; default: the shared one of this GPU, size and dtype). `check_gpu(gpu)` may refuse the GPU
    before anything is written. `launched`: a worker process launched early for this session (used if it is
    the one the session needs, else shut down)."""
    runner = IsolatedRunner.for_campaign(req.workload, size, dtype, req.backend, req.device, timeout=req.timeout,
                                         env=env, target=req.worker_target)
    if launched is not None:
        if launched.same_as(runner):
            runner = launched
        else:
            launched.shutdown()
    setup = runner.start()  # tells us which GPU we are on, before anything is written
    try:
        return _session(runner, setup, req, workload, size_name, size, dtype, root, campaign_id, part=part,
                        cachefile=cachefile, check_gpu=check_gpu)
    except BaseException:  # nothing keeps a worker running for a session that did not open
        runner.shutdown()
        raise


def _session(runner, setup, req, workload, size_name, size, dtype, root, campaign_id, *, part, cachefile,
             check_gpu) -> Session:
    space = workload.space
    gpu = setup["gpu"]
    if check_gpu is not None:
        check_gpu(gpu)
    wdir = store.workload_dir(root, gpu["gpu"], req.workload)
    wdir.mkdir(parents=True, exist_ok=True)
    runner.spec.baseline_repeats = 0  # measured once, above; restarted workers skip them
    cachefile = cachefile(gpu["gpu"]) if callable(cachefile) else cachefile
    cachefile = cachefile or store.cache_path(root, gpu["gpu"], req.workload, size_name, dtype)
    kt.align_cache(cachefile, space)
    runner.use_cachefile(str(cachefile))
    provenance = {**gpu, "backend": kt.effective_backend(space, req.backend), "timing": setup.get("timing", "plain"),
                  "compiler_options": json.dumps(space.build_options(dtype)),
                  "kernel_hash": source_hash(space.source_text), **software()}
    common = {"campaign_id": campaign_id, "workload": req.workload, "kernel": space.kernel_name, "size": size_name,
              "size_vars": json.dumps(size, sort_keys=True), "dtype": dtype}
    _store_baselines(workload, setup["baselines"], size, dtype, wdir, common, provenance, part=part)
    writer = store.PartWriter(wdir / "evaluations" / f"{part or campaign_id}.parquet")
    return Session(runner, gpu, wdir, common, provenance, writer, setup["baselines"])


def known_rows(previous, space, common, provenance, timeout: float | None = None) -> dict:
    """Rows measured before with the same GPU, kernel source, compiler options, backend and parameters: resumed,
    not re-run.
    A time taken another way (another number of launches, or another timing protocol: tuner/timing.py) is
    measured again, and so is a timeout under a shorter `timeout` than this one's (or an unrecorded one)."""
    if previous.empty:
        return {}
    same = previous[(previous["gpu"] == provenance["gpu"]) & (previous["size_vars"] == common["size_vars"])
                    & (previous["dtype"] == common["dtype"]) & (previous["kernel_hash"] == provenance["kernel_hash"])
                    & (previous["compiler_options"] == provenance["compiler_options"])
                    & (previous["backend"] == provenance["backend"])]
    known = {}
    for rec in same.to_dict("records"):
        if rec["status"] == "ok" and not store.same_protocol(rec, space, provenance.get("timing")):
            continue
        if rec["status"] == "timeout" and timeout and not rec.get("timeout_s", 0) >= timeout:  # NaN: unrecorded
            continue
        config = json.loads(rec["config"])
        if set(config) != set(space.params):  # measured with parameters the space has no more, or lacks one it has
            continue
        values = [config[k] for k in space.params]
        row = {**config, "status": rec["status"], "error": rec["error"],
               "compile_time": rec["compile_ms"], "verification_time": rec["verify_ms"],
               "benchmark_time": rec["benchmark_ms"]}
        if rec["status"] == "ok":
            row["times"] = list(rec["times"])
        known[config_key(values)] = row
    return known


def store_row(row, space, size, dtype, common, provenance, req) -> dict:
    config = {k: row[k] for k in space.params}
    ok = row["status"] == "ok"
    times = list(row.get("times") or []) if ok else []
    metrics = space.compute_metrics(row, size, dtype) if ok else {}
    return {
        **common,
        "config": store.canonical_config(config),
        **{f"p_{k}": v for k, v in config.items()},
        "status": row["status"],
        "error": row.get("error", ""),
        "times": times,
        "time_ms": statistics.median(times) if times else float("nan"),
        "objective": space.objective,
        "objective_value": space.objective_value(row, size, dtype) if ok else float("nan"),
        "metrics": json.dumps(metrics),
        "compile_ms": float(row.get("compile_time", 0.0)),
        "verify_ms": float(row.get("verification_time", 0.0)),
        "benchmark_ms": float(row.get("benchmark_time", 0.0)),
        "timeout_s": float(req.timeout) if req.timeout else float("nan"),  # a timeout under a longer one is re-run
        "strategy": req.strategy,
        "seed": req.seed if req.seed is not None else -1,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        **provenance,
    }


def _store_baselines(workload, baselines, size, dtype, wdir, common, provenance, part=None):
    if not baselines:
        return
    writer = store.PartWriter(wdir / "baselines" / f"{part or common['campaign_id']}.parquet")
    for name, times in baselines.items():
        median = statistics.median(times)
        writer.rows.append({**common, "baseline": name, "times": list(times), "time_ms": median,
                            "metrics": json.dumps(workload.baseline_metrics(name, median, size, dtype)),
                            "timestamp": datetime.now(timezone.utc).isoformat(), **provenance})
    writer.flush()


def _baseline_medians(baselines) -> dict:
    return {name: statistics.median(times) for name, times in (baselines or {}).items()}


def _summarize(results, space) -> dict:
    failures, best, best_value = {}, None, None
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


def _best_entry(r: dict, space) -> dict:
    """A campaign's answer from one Kernel Tuner result: its config, objective value and median time."""
    return {"config": {k: r[k] for k in space.params}, "objective": space.objective, "value": r[space.objective],
            "time_ms": statistics.median(r["times"]) if r.get("times") else r.get("time")}


def default_max_evals(strategy: str, space_size: int, time_limit: float | None) -> int | None:
    """Brute force covers the space; other strategies get 100 evaluations unless a time budget is given."""
    if time_limit is not None:
        return None
    return space_size if strategy == "brute_force" else min(100, space_size)


def find_recording(root, workload: str, size_name: str, dtype: str, gpu: str | None = None) -> Path:
    """The Kernel Tuner cache recorded for this workload, size and dtype (on `gpu`, or the only GPU)."""
    name = store.cache_path(root, "x", workload, size_name, dtype).name
    candidates = sorted(Path(root).glob(f"*/{workload}/{name}"))
    if gpu:
        candidates = [c for c in candidates if c.parent.parent.name == gpu_slug(gpu)]
    if not candidates:
        raise TunerError(f"nothing recorded to replay for {workload} {size_name} {dtype}"
                         f"{' on ' + gpu if gpu else ''}: run `tuner tune` on a GPU first")
    if len(candidates) > 1:
        raise TunerError("recordings from several GPUs: choose one with --gpu ("
                         + ", ".join(c.parent.parent.name for c in candidates) + ")")
    return candidates[0]


def replay(space, size: dict, dtype: str, cachefile: Path, strategy, *, max_evals=None, time_limit=None,
           seed=None) -> tuple[list, str]:
    """Run `strategy` in Kernel Tuner's simulation mode on a recording; returns the results in the order
    the strategy evaluated them (repeats included, None where the budget ran out) and the recorded GPU."""
    kernel_options = kt.kernel_options(space, size, dtype, [], "nvcuda")
    runner = SimulationRunner(kernel_options.kernel_source, kernel_options, Options(quiet=True), space.iterations, None)
    tuning_options = kt.tuning_options(space, size, dtype, max_fevals=max_evals, time_limit=time_limit,
                                       simulation=True, seed=seed)
    kt.align_cache(cachefile, space)
    try:
        tuning_options["cache"] = util.process_cache(str(cachefile), kernel_options, tuning_options, runner)
    except ValueError as e:
        raise TunerError(f"{cachefile}: cannot replay it with the current space: {e}") from None
    for entry in tuning_options["cache"].values():  # a config's time is its launches' median, as in the store
        times = entry.get("times")
        if isinstance(times, list) and times and isinstance(entry.get("time"), (int, float)):
            entry["time"] = statistics.median(times)  # recordings before it hold Kernel Tuner's mean
            if tuning_options.metrics:
                util.process_metrics(entry, tuning_options.metrics)
    try:
        results = strategy.tune(kt.searchspace(space), runner, tuning_options)
    except ValueError as e:
        raise TunerError(f"{cachefile}: the recording does not cover the space: {e}") from None
    return results, store.recorded_gpu(cachefile) or runner.dev.name


def campaign_strategy(req: CampaignRequest, space, size: dict, dtype: str, gpu: str | None, root: Path, *,
                      evaluations=None, **kw):
    """The request's strategy; an Optuna one warm-started from the store (`evaluations`, if the caller has
    read them already) and with the request's patience (both measured by `tuner compare-strategies`; see the
    README's strategy comparison)."""
    if req.strategy not in OPTUNA_SAMPLERS:
        if req.first:
            raise TunerError(f"configs to measure first need an Optuna strategy ({', '.join(OPTUNA_SAMPLERS)})")
        return make_strategy(req.strategy, seed=req.seed, **kw)
    warm = []
    if req.warm_start:
        warm = warm_configs(warm_evaluations(req.workload, root, own=evaluations), space, size, dtype, gpu)
    first = [space.checked(c, "a config to measure first") for c in req.first]  # not silently skipped
    warm = first + [c for c in warm if c not in first]
    patience = req.patience
    if patience is None:
        patience = DEFAULT_PATIENCE if req.max_evals is None and req.time_limit is None else None
    return make_strategy(req.strategy, seed=req.seed, warm_start=warm, patience=patience or None, **kw)


def _simulate(req, space, size_name, size, dtype, root, searchspace) -> CampaignResult:
    """Replay the campaign in Kernel Tuner's simulation mode from a recorded cache: no GPU needed."""
    cachefile = find_recording(root, req.workload, size_name, dtype, req.gpu)
    gpu = store.recorded_gpu(cachefile) or req.gpu  # --gpu may be the folder's name: the warm start needs the GPU's
    strategy = campaign_strategy(req, space, size, dtype, gpu, root, storage=req.storage and open_storage(req.storage),
                                 study_name=None)
    results, gpu = replay(space, size, dtype, cachefile, strategy, seed=req.seed, time_limit=req.time_limit,
                          max_evals=req.max_evals or default_max_evals(req.strategy, searchspace.size, req.time_limit))
    summary = _summarize(results, space)
    return CampaignResult(req.workload, size_name, dtype, gpu, req.strategy, evaluated=summary["unique"],
                          measured=0, failures=summary["failures"], best=summary["best"], simulated=True)
