"""The one place that turns a Space into Kernel Tuner's option objects, so live runs (in a worker
process), simulation replays and strategy comparisons all configure Kernel Tuner the same way."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from kernel_tuner import util
from kernel_tuner.core import KernelSource
from kernel_tuner.interface import Options
from kernel_tuner.searchspace import Searchspace

from tuner.atomic import write_atomically
from tuner.errors import TunerError
from tuner.measure.backends import BACKENDS, CPU_BACKEND, HOST_BACKEND
from tuner.measure.evaluate import ERROR_CONFIGS
from tuner.measure.kt_restrictions import restrictions_for_kernel_tuner
from tuner.space import Space
from tuner.space.model import MAX_THREADS, kt_block_names, row_time  # the space's count applies the same thread limit


def kt_lang(backend: str) -> str:
    return "C" if backend in (HOST_BACKEND, CPU_BACKEND) else BACKENDS[backend]


def effective_backend(space: Space, backend: str) -> str:
    """What really runs the space's code: the chosen CUDA backend, or nvcc + the C backend for host code.

    A host function (Kernel Tuner's host-code tuning) runs a whole multi-kernel pipeline and returns its
    time in ms, measured with CUDA events inside; a negative return means a CUDA error (see isolation)."""
    if space.lang != "host":
        return backend
    return CPU_BACKEND if space.on_cpu else HOST_BACKEND


def tune_params(space: Space) -> dict:
    return {k: list(v) for k, v in space.params.items()}


def searchspace(space: Space, dtype: str | None = None) -> Searchspace:
    """The valid configs of a campaign of `dtype` (Space.restrictions_for); None: the space's whatever the dtype.
    The restrictions as kt_restrictions gives them, and at most MAX_THREADS threads a block, the product of the
    parameters Kernel Tuner launches as the block (kt_block_names): what the space counted on loading. Each call
    gets one of its own (a strategy changes the one it walks), unpickled from the one built for this space object
    and dtype where it pickles: the same restrictions, lists and lookups, nothing walked yet, built again in a
    fraction of the time (GEMM's in 1 ms, not 1 s: a campaign's request and its replay each ask for one)."""
    built = _built(space, dtype)
    if built is None:
        return _remember(space, dtype, _searchspace(space, dtype), shared=False)
    return pickle.loads(built.pickled) if built.pickled is not None else _searchspace(space, dtype)


def shared_searchspace(space: Space, dtype: str | None = None) -> Searchspace:
    """searchspace's, one kept for every caller of this space object and dtype: to read only (its list, size and
    lookups), never to hand to a strategy. The replays read it for every run (a copy of Floyd-Warshall's 438,648
    configs is 0.4 s of unpickling)."""
    built = _built(space, dtype)
    if built is None:
        return _remember(space, dtype, _searchspace(space, dtype), shared=True)
    if built.shared is None:
        built.shared = searchspace(space, dtype)
    return built.shared


@dataclass
class _Built:
    space: Space  # the object it was built for (a space is not changed once loaded: an edited file is another one)
    pickled: bytes | None  # None: a restriction pickle cannot carry, so each copy is built again
    shared: Searchspace | None = None  # shared_searchspace's, once asked for


# searchspace's last builds, by (id of the space, dtype)
_BUILT: dict[tuple[int, str | None], _Built] = {}


def _built(space: Space, dtype: str | None) -> _Built | None:
    built = _BUILT.get((id(space), dtype))
    return built if built is not None and built.space is space else None  # an id may be reused once one is gone


def _remember(space: Space, dtype: str | None, made: Searchspace, shared: bool) -> Searchspace:
    """`made` (just built) pickled for the copies to come, and kept as the shared one where it is that."""
    try:
        pickled: bytes | None = pickle.dumps(made)
    except (pickle.PicklingError, TypeError, AttributeError):
        pickled = None
    while len(_BUILT) >= 2:  # the oldest out: Floyd-Warshall's pickles to 20 MB, its searchspace a few hundred MB
        del _BUILT[next(iter(_BUILT))]
    _BUILT[(id(space), dtype)] = _Built(space, pickled, made if shared else None)
    return made


def _searchspace(space: Space, dtype: str | None) -> Searchspace:
    return Searchspace(
        tune_params(space),
        kt_restrictions(space, dtype),
        MAX_THREADS,
        block_size_names=kt_block_names(space.block_names),
    )


def kt_restrictions(space: Space, dtype: str | None = None) -> list:
    """The restrictions of a campaign of `dtype` (Space.restrictions_for) as Kernel Tuner is given them, wherever
    it is (its Searchspace, the tuning options its runners check): restrictions_for_kernel_tuner."""
    return restrictions_for_kernel_tuner(space.restrictions_for(dtype), space.params)


def kt_metrics(space: Space, size: dict, dtype: str) -> dict:
    """Kernel Tuner metrics computed by our Space, from the median of the repeats."""
    return {name: (lambda p, name=name: space.compute_metrics(p, size, dtype)[name]) for name in space.metrics}


def median_time(result: dict) -> float:
    """A config's `time` as the store ranks it: the median of its launches (Kernel Tuner's observer gives their
    mean). As the first of Kernel Tuner's metrics it replaces `time` in every result and cache entry Kernel
    Tuner writes, so a plain Kernel Tuner replay of our caches ranks as `tuner best` does (row_time)."""
    return row_time(result)


def verify_function(rtol: float, answer: Sequence | None = None) -> Callable[..., bool]:
    """Kernel Tuner's `verify`: each expected array against the result, |got - expected| <= atol + rtol |expected|
    (numpy's isclose) and finite, or equal where both tolerances are 0 (integers). Given the `answer` here, it
    checks against that and ignores the one Kernel Tuner passes (answer_markers, below); without, against what
    Kernel Tuner passes, its bounds computed at each call."""
    if answer is not None:
        checks = [None if a is None else _Expected(np.asarray(a), rtol) for a in answer]

        def verify_held(markers: list, result_host: list, atol: Any = None) -> bool:
            return all(c is None or c.holds(got, atol) for c, got in zip(checks, result_host))

        return verify_held

    # Kernel Tuner always passes atol (tuning_options.atol, a float); the default only marks it optional to
    # Kernel Tuner's util.normalize_verify_function
    def verify(answer: list, result_host: list, atol: Any = None) -> bool:
        return all(e is None or _Expected(np.asarray(e), rtol).holds(got, atol) for e, got in zip(answer, result_host))

    return verify


# What Kernel Tuner is given in place of each expected array. It copies its answer (np.array) before every
# verification and reads it only to know which arguments to copy back; GEMM 2048^3's float64 reference made
# that copy 14 ms of every config, and numpy's allclose on it 100 ms more (measured on the H200, 2026-11-28,
# benchmarks/throughput.py --parts timeline): the arrays stay with verify_function, which computes the bounds
# once and compares in buffers allocated once.
_MARKER = np.zeros(0, np.int8)


def answer_markers(answer: Sequence) -> list:
    return [None if a is None else _MARKER for a in answer]


class _Expected:
    """One expected array, its bound atol + rtol |expected| (computed for the first atol, Kernel Tuner's
    tuning_options.atol, which stays the same) and the buffers of the comparison."""

    def __init__(self, expected: np.ndarray, rtol: float) -> None:
        self.expected, self.rtol = expected, rtol
        self._atol: float | None = None

    def holds(self, got: Any, atol: Any) -> bool:
        got = np.asarray(got).reshape(self.expected.shape)
        atol = float(atol or 0.0)
        if not atol and not self.rtol:  # an exact check (integers): one pass, no float temporaries
            return bool(np.array_equal(got, self.expected))
        if self._atol != atol:
            self.bound = atol + self.rtol * np.abs(self.expected, dtype=np.result_type(self.expected, 1.0))
            self.diff = np.empty(self.expected.shape, np.result_type(got, self.expected, 1.0))
            self.ok = np.empty(self.expected.shape, bool)
            self._atol = atol
        # as numpy's isclose, and a NaN or infinity anywhere fails (NaN <= bound is False): the old isfinite
        np.subtract(got, self.expected, out=self.diff)
        np.abs(self.diff, out=self.diff)
        np.less_equal(self.diff, self.bound, out=self.ok)
        return bool(self.ok.all())


def kernel_options(
    space: Space, size: dict, dtype: str, arguments: list, backend: str, constant_memory: dict | None = None
) -> Options:
    """`constant_memory` ({symbol: numpy array}, Workload.constant_arguments) is copied to the kernel's
    `__constant__` variables after each compile, before it runs (Kernel Tuner's cmem_args)."""
    lang = kt_lang(effective_backend(space, backend))
    return Options(
        kernel_name=space.kernel_name,
        kernel_source=KernelSource(space.kernel_name, space.source_for(dtype), lang),
        lang=lang,
        problem_size=lambda config: space.grid_dims(config, size),  # grid = problem size, divisors of 1
        arguments=arguments,
        grid_div_x=[],
        grid_div_y=[],
        grid_div_z=[],
        smem_args=None,
        cmem_args=dict(constant_memory) if constant_memory else None,
        texmem_args=None,
        block_size_names=kt_block_names(space.block_names),
        defines=None,
    )


def device_options(space: Space, dtype: str, device: int) -> Options:
    return Options(
        device=device,
        platform=0,
        quiet=True,
        compiler=space.compiler if space.lang == "host" else None,
        compiler_options=space.build_flags,
    )


def tuning_options(
    space: Space,
    size: dict,
    dtype: str,
    *,
    answer: list | None = None,
    strategy_options: dict[str, Any] | None = None,
    max_fevals: int | None = None,
    time_limit: float | None = None,
    simulation: bool = False,
    seed: int | None = None,
    metrics: bool = True,
    tolerances: tuple | None = None,
) -> Options:
    """`tolerances` (atol, rtol) overrides the space's verify block (a workload may fit them to the size)."""
    atol, rtol = tolerances or (space.atol, space.rtol)
    options = _options(
        tune_params(space),
        space.objective,
        space.maximize,
        restrictions=kt_restrictions(space, dtype),
        iterations=space.iterations,
        strategy_options=strategy_options,
        budget=util.TuningBudget(time_limit, max_fevals),
        simulation=simulation,
        seed=seed,
    )
    options.update(
        answer=answer_markers(answer) if answer is not None else None,
        atol=atol,
        verify=util.normalize_verify_function(verify_function(rtol, answer)) if answer is not None else None,
        metrics={"time": median_time, **(kt_metrics(space, size, dtype) if metrics else {})},
    )
    return options


def recording_options(
    recorded_params: dict, objective: str, maximize: bool, cache: dict, *, max_fevals: int | None, seed: int | None
) -> Options:
    """Kernel Tuner's options for a simulated replay of a recording that has no Space here (a Kernel Tuner
    file from anywhere): its own parameters, objective and cache; the configs it holds are the space."""
    options = _options(recorded_params, objective, maximize, budget=util.TuningBudget(None, max_fevals), seed=seed)
    options.update(cache=cache, simulation_mode=True)
    return options


def _options(
    params: dict,
    objective: str,
    maximize: bool,
    *,
    restrictions: list | None = None,
    iterations: int = 1,
    strategy_options: dict[str, Any] | None = None,
    budget: Any = None,
    simulation: bool = False,
    seed: int | None = None,
) -> Options:
    return Options(
        tune_params=params,
        restrictions=restrictions or [],
        restrictions_unmodified=list(restrictions or []),
        answer=None,
        atol=1e-6,
        verify=None,
        strategy=None,
        strategy_options=Options(strategy_options or {}),
        iterations=iterations,
        objective=[objective],
        objective_higher_is_better=[maximize],
        verbose=False,
        cache={},
        cachefile=None,
        metrics=None,
        simulation_mode=simulation,
        seed=seed,
        parallel=None,
        observers=None,
        simulated_time=0,
        budget=budget,
    )


def aligned_cache(cachefile: str | Path, space: Space) -> dict | None:
    """The Kernel Tuner cache `cachefile` as if recorded with the space's parameters with defaults
    (Space.defaults), read and aligned in memory; None where it needs no aligning. Kernel Tuner keys every
    config by the full parameter list and refuses a cache whose list differs; anything else that differs is
    left for it to say."""
    path = Path(cachefile)
    if not path.is_file():
        return None
    data = _read_cache(path)  # checked, whether it needs aligning or not: one clear line naming it if damaged
    if not space.defaults:
        return None
    have, want = data["tune_params_keys"], list(space.params)
    added = [k for k in want if k not in have]
    if not added or [k for k in want if k in have] != have or not set(added) <= set(space.defaults):
        return None
    cache = {}
    for entry in data["cache"].values():
        values = {**{k: space.defaults[k] for k in added}, **entry}
        cache[",".join(str(values[k]) for k in want)] = {**{k: values[k] for k in want}, **entry}
    data.update(
        tune_params_keys=want, tune_params={k: data["tune_params"].get(k, space.params[k]) for k in want}, cache=cache
    )
    return data


# Kernel Tuner's failures: 1.5 writes them as an entry's "__error__" (and so does evaluate.record_failure_in_cache),
# its older versions as the entry's "time"
_KT_FAILURES = tuple(kind.__name__ for kind in ERROR_CONFIGS.values())


def _read_cache(path: Path) -> dict:
    """A Kernel Tuner cache file, read (an interrupted run's open cache closed in memory) and checked: the
    keys Kernel Tuner reads, and every entry's time a number or one of its failures, its times numbers. A
    damaged file (unreadable, truncated, garbage, mistyped) is a TunerError naming it, not a traceback."""
    try:
        data = json.loads(util.correct_open_cache(str(path), open_cache=False))
    except OSError as e:
        raise TunerError(f"{path}: cannot read this Kernel Tuner cache ({e.strerror})") from None
    except (ValueError, IndexError) as e:  # JSONDecodeError, a file cut short, not UTF-8
        raise TunerError(f"{path}: not a readable Kernel Tuner cache (truncated or not JSON: {e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cache"), dict):
        raise TunerError(f"{path}: not a Kernel Tuner cache (no 'cache' of configurations)")
    if not isinstance(data.get("tune_params_keys"), list) or not isinstance(data.get("tune_params"), dict):
        raise TunerError(f"{path}: not a Kernel Tuner cache (no 'tune_params_keys' and 'tune_params')")
    for key, entry in data["cache"].items():
        entry = entry if isinstance(entry, dict) else {}
        time, times = entry.get("time"), entry.get("times", [])
        numbers = isinstance(times, list) and all(_is_number(t) for t in times)
        failed = time in _KT_FAILURES or entry.get("__error__") in _KT_FAILURES
        if not (_is_number(time) or failed) or not numbers:
            raise TunerError(
                f"{path}: config {key} has no valid time (a number) or times (a list of numbers), nor a Kernel "
                "Tuner failure"
            )
    return data


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def align_cache(cachefile: str | Path, space: Space) -> None:
    """A live campaign's own cache recorded before the space gained parameters with defaults: rewrite it in
    place, losslessly, as if recorded with them (aligned_cache), so Kernel Tuner appends to it. A replay
    never does: it aligns a copy (tuner.measure.replay)."""
    path = Path(cachefile)
    data = aligned_cache(path, space)
    if data is None:
        return
    # a closed cache: Kernel Tuner reopens it for appending
    write_atomically(path, lambda tmp: tmp.write_text(json.dumps(data, indent="")))
