"""The one place that turns a Space into Kernel Tuner's option objects, so live runs (in a worker
process), simulation replays and strategy comparisons all configure Kernel Tuner the same way."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from kernel_tuner import util
from kernel_tuner.core import KernelSource
from kernel_tuner.interface import Options
from kernel_tuner.searchspace import Searchspace

from tuner.atomic import write_atomically
from tuner.space import Space

BACKENDS = {"nvcuda": "NVCUDA", "cupy": "CUPY", "pycuda": "CUDA"}
HOST_BACKEND = "host-nvcc"  # a 'host' space: nvcc builds a shared library, Kernel Tuner's C backend calls it
MAX_THREADS = 1024  # per block on every CUDA GPU since Fermi


def kt_lang(backend: str) -> str:
    return "C" if backend == HOST_BACKEND else BACKENDS[backend]


def effective_backend(space: Space, backend: str) -> str:
    """What really runs the space's code: the chosen CUDA backend, or nvcc + the C backend for host code.

    A host function (Kernel Tuner's host-code tuning) runs a whole multi-kernel pipeline and returns its
    time in ms, measured with CUDA events inside; a negative return means a CUDA error (see isolation)."""
    return HOST_BACKEND if space.lang == "host" else backend


def tune_params(space: Space) -> dict:
    return {k: list(v) for k, v in space.params.items()}


def searchspace(space: Space) -> Searchspace:
    return Searchspace(tune_params(space), list(space.restrictions), MAX_THREADS)


def kt_metrics(space: Space, size: dict, dtype: str) -> dict:
    """Kernel Tuner metrics computed by our Space, from the median of the repeats."""
    return {name: (lambda p, name=name: space.compute_metrics(p, size, dtype)[name]) for name in space.metrics}


def verify_function(rtol: float) -> Callable[..., bool]:
    # Kernel Tuner always passes atol (tuning_options.atol, a float); the default only marks it optional to
    # Kernel Tuner's util.normalize_verify_function, and numpy's stubs take no None
    def verify(answer: list, result_host: list, atol: Any = None) -> bool:
        for expected, got in zip(answer, result_host):
            if expected is None:
                continue
            got = np.asarray(got).reshape(np.shape(expected))
            if not atol and not rtol:  # an exact check (integers): one pass, no float temporaries
                if not np.array_equal(got, expected):
                    return False
            elif not np.all(np.isfinite(got)) or not np.allclose(got, expected, rtol=rtol, atol=atol):
                return False
        return True

    return verify


def kernel_options(
    space: Space, size: dict, dtype: str, arguments: list, backend: str, constant_memory: dict | None = None
) -> Options:
    """`constant_memory` ({symbol: numpy array}, Workload.constant_arguments) is copied to the kernel's
    `__constant__` variables after each compile, before it runs (Kernel Tuner's cmem_args)."""
    default_names = ["block_size_x", "block_size_y", "block_size_z"]
    block_names = (
        (list(space.block_names) + default_names[len(space.block_names) :]) if space.block_names else default_names
    )
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
        block_size_names=block_names[:3],
        defines=None,
    )


def device_options(space: Space, dtype: str, device: int) -> Options:
    return Options(
        device=device,
        platform=0,
        quiet=True,
        compiler="nvcc" if space.lang == "host" else None,
        compiler_options=list(space.compiler_options),
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
    objective = space.objective
    atol, rtol = tolerances or (space.atol, space.rtol)
    return Options(
        tune_params=tune_params(space),
        restrictions=list(space.restrictions),
        restrictions_unmodified=list(space.restrictions),
        answer=answer,
        atol=atol,
        verify=util.normalize_verify_function(verify_function(rtol)) if answer is not None else None,
        strategy=None,
        strategy_options=Options(strategy_options or {}),
        iterations=space.iterations,
        objective=[objective],
        objective_higher_is_better=[space.maximize],
        verbose=False,
        cache={},
        cachefile=None,
        metrics=kt_metrics(space, size, dtype) if metrics else None,
        simulation_mode=simulation,
        seed=seed,
        parallel=None,
        observers=None,
        simulated_time=0,
        budget=util.TuningBudget(time_limit, max_fevals),
    )


def aligned_cache(cachefile: str | Path, space: Space) -> dict | None:
    """The Kernel Tuner cache `cachefile` as if recorded with the space's parameters with defaults
    (Space.defaults), read and aligned in memory; None where it needs no aligning. Kernel Tuner keys every
    config by the full parameter list and refuses a cache whose list differs; anything else that differs is
    left for it to say."""
    path = Path(cachefile)
    if not space.defaults or not path.is_file():
        return None
    data = json.loads(util.correct_open_cache(str(path), open_cache=False))
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
