"""A campaign request: one workload, size, dtype, strategy and budget, as the user gave them, checked once
for every kind of campaign (one process or distributed) before any GPU work."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tuner import store
from tuner.campaign.rdb_storage import open_storage
from tuner.errors import TunerError
from tuner.measure import kt, machine
from tuner.search.strategies import DEFAULT_STRATEGY, make_strategy

if TYPE_CHECKING:
    from kernel_tuner.searchspace import Searchspace

    from tuner.space import Space
    from tuner.workloads import Workload


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
    warm_start: bool = (
        True  # Optuna strategies first try the best configs of other stored sizes (tuner.search.warmstart)
    )
    first: tuple = ()  # configs (dicts) an Optuna strategy measures before anything else, e.g. a seed's own
    # Optuna strategies stop after this many evaluations without a 0.5% gain; None: DEFAULT_PATIENCE when no
    # budget is given (the default budget is a ceiling), none when one is (a budget asked for is used); 0: never
    patience: int | None = None
    confirm: bool = True  # re-measure the near-ties at the end and choose among them (tuner/campaign/confirmation.py)
    measure_target: Callable | str | None = (
        None  # the measuring process's main function; tests substitute a GPU-free one
    )


def parse_budget(text: str | None) -> tuple[int | None, float | None]:
    """'150' -> 150 evaluations; '90s', '10m', '2h' -> seconds."""
    if text is None:
        return None, None
    text = str(text).strip().lower()
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text[-1] in units:
            seconds = float(text[:-1]) * units[text[-1]]
        else:
            evals = int(text)
    except (ValueError, IndexError):
        raise TunerError(
            f"budget '{text}' is neither a number of evaluations (150) nor a duration (90s, 10m, 2h)"
        ) from None
    if text[-1] in units:  # a duration, but maybe none to run in
        if not 0.001 <= seconds < 1e9:  # also NaN and inf
            raise TunerError(f"budget '{text}': give a duration from 0.001s (1 ms; units s, m, h) to under 1e9 seconds")
        return None, seconds
    if evals < 1:  # a number, but no campaign
        raise TunerError(f"budget '{text}': give at least 1 evaluation (or a duration: 90s, 10m, 2h)")
    return evals, None


def check_options(req: CampaignRequest) -> None:
    """The request's options that every campaign (one process or distributed) takes the same way."""
    if req.backend not in kt.BACKENDS:
        raise TunerError(f"unknown backend '{req.backend}'; choose one of {', '.join(kt.BACKENDS)}")
    if req.patience is not None and req.patience < 0:
        raise TunerError(f"--patience {req.patience}: give a number of evaluations (0: never stop early)")
    if not (isinstance(req.timeout, (int, float)) and math.isfinite(req.timeout) and req.timeout > 0):
        raise TunerError(f"--timeout {req.timeout}: give the seconds one configuration may take, a number more than 0")
    if req.seed is not None and not 0 <= req.seed < 2**32:
        raise TunerError(f"--seed {req.seed}: give a whole number from 0 to {2**32 - 1} (the samplers' and the data's)")
    if req.device < 0:
        raise TunerError(f"--device {req.device}: give a CUDA device ordinal (0, 1, ...)")
    if req.storage:  # a wrong URL or a missing driver: said now, not after the GPU's set-up
        open_storage(req.storage)


def check_gpu(req: CampaignRequest, space: Space) -> None:
    """Before a live campaign: a GPU and the backend's package are there, else one line that says what is
    missing and offers a replay (tests that substitute a GPU-free measuring process skip it)."""
    if req.simulate or req.measure_target is not None or space.on_cpu:
        return
    missing = machine.gpu_missing(kt.effective_backend(space, req.backend))
    if missing:
        from tuner.store.recordings import sources

        if sources(Path(req.results or store.results_root()), req.workload):
            offer = f"`tuner tune {req.workload} --simulate` replays a recorded campaign"
        else:  # a replay would only say that nothing is recorded
            offer = (
                f"nothing of {req.workload} is recorded for --simulate to replay: tune it on a machine with a GPU "
                f"(`tuner tune {req.workload} --dry-run` checks it here first)"
            )
        raise TunerError(f"cannot measure here: {missing}; {offer}")


def default_name(workload: str, size_name: str, dtype: str, strategy: str, seed: int | None) -> str:
    """A campaign's name, and its Optuna study's, unless the user names it (distributed: --campaign)."""
    return store.safe_name(f"{workload}-{size_name}-{dtype}-{strategy}-s{seed}")


def default_max_evals(strategy: str, space_size: int, time_limit: float | None) -> int | None:
    """Brute force covers the space; other strategies get 100 evaluations unless a time budget is given."""
    if time_limit is not None:
        return None
    return space_size if strategy == "brute_force" else min(100, space_size)


@dataclass(frozen=True)
class Resolved:
    """A request's names resolved against its workload's space: what every campaign of it runs on."""

    workload: Workload
    space: Space
    size_name: str
    size: dict
    dtype: str
    searchspace: Searchspace
    max_evals: int | None


def resolve(req: CampaignRequest, *, distributed: bool = False) -> Resolved:
    """The request's workload, size, dtype and search space, and its options checked (one line for what is
    wrong, before any GPU work). `distributed`: the workers share Optuna's samplers or brute force."""
    from tuner.search.strategies import OPTUNA_SAMPLERS
    from tuner.workloads import get_workload

    workload = get_workload(req.workload)
    space = workload.space
    size_name, size = space.resolve_size(req.size, workload.parse_size)
    dtype = space.resolve_dtype(req.dtype)
    if distributed and req.strategy not in OPTUNA_SAMPLERS and req.strategy != "brute_force":
        raise TunerError(
            f"strategy '{req.strategy}': workers share Optuna's samplers ({', '.join(OPTUNA_SAMPLERS)}) "
            "or brute_force; Kernel Tuner's strategies run in one process (drop --workers)"
        )
    check_options(req)
    make_strategy(req.strategy)  # an unknown name fails here, before any GPU work
    searchspace = kt.searchspace(space, dtype)
    if searchspace.size == 0:
        raise TunerError(f"{space.path}: the restrictions leave no valid configuration")
    if not req.simulate and req.measure_target is None:  # a replay, or a stand-in measuring process, launches nothing
        _check_arguments(space, dtype)
    max_evals = req.max_evals or default_max_evals(req.strategy, searchspace.size, req.time_limit)
    return Resolved(workload, space, size_name, size, dtype, searchspace, max_evals)


def _check_arguments(space: Space, dtype: str) -> None:
    """Before a live campaign: the declared `arguments` fit the kernel's signature (the dry run's check,
    tuner.measure.dry_run.argument_mismatches), else one line. Launched with arguments it does not take, every
    config would fail (or read garbage and fail its verification): the whole budget spent to say what the
    source already says."""
    from tuner.measure.dry_run import argument_mismatches

    found = argument_mismatches(space, dtype)
    if found:
        more = (
            f" (and {len(found) - 1} more: `tuner tune {space.workload} --dry-run` lists them)"
            if len(found) > 1
            else ""
        )
        raise TunerError(f"{space.path}: the arguments do not fit {space.kernel_name}: {found[0]}{more}")
