"""Replay of a recording that has no space here: a Kernel Tuner cache or T4 results file from any kernel and
GPU (tuner.store.kt_files.FileRecording), in Kernel Tuner's simulation mode. Its restrictions are inferred
from which configs it holds: those are the search space, a config it lacks is one the strategy never sees."""

from __future__ import annotations

from typing import Any

from kernel_tuner import util
from kernel_tuner.interface import Options
from kernel_tuner.runners.simulation import SimulationRunner
from kernel_tuner.searchspace import Searchspace

from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.replay import StallGuard
from tuner.store.kt_files import FileRecording


def _cache(rec: FileRecording) -> dict:
    """The recording as the simulation runner reads a cache: keyed as Kernel Tuner keys configs."""
    keys = list(rec.tune_params)
    cache = {}
    # in the order of the parameters' values, as Kernel Tuner sorts a search space it builds
    index = [{v: i for i, v in enumerate(rec.tune_params[k])} for k in keys]
    ordered = sorted(rec.configs, key=lambda c: [at.get(v, len(at)) for at, v in zip(index, c)])
    for values in ordered:
        value = rec.configs[values]
        entry: dict = dict(zip(keys, values))
        if value is None:
            entry["__error__"] = util.RuntimeFailedConfig()
        else:
            entry[rec.objective] = value
        entry.update(compile_time=0, verification_time=0, benchmark_time=0)
        cache[",".join(str(v) for v in values)] = entry
    return cache


def replay_file(rec: FileRecording, strategy: Any, *, max_evals: int, seed: int | None = None) -> list:
    """Run `strategy` over the recording: its results in the order evaluated (as tuner.measure.replay's)."""
    cache = _cache(rec)
    searchspace = Searchspace(None, None, None, from_cache={"tune_params": rec.tune_params, "cache": cache})
    runner = SimulationRunner(None, Options(kernel_name=rec.kernel or "recording"), Options(quiet=True), 1, None)
    options = kt.recording_options(rec.tune_params, rec.objective, rec.maximize, cache, max_fevals=max_evals, seed=seed)
    try:
        return list(strategy.tune(searchspace, StallGuard(runner), options))
    except ValueError as e:  # a strategy that asks for a config outside the recording
        raise TunerError(f"{rec.path}: {e}") from None
