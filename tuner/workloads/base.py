"""The workload base class: what a kernel needs besides its space (inputs for a size, the reference,
vendor baselines, a size notation, a program for `tuner run`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tuner import locations
from tuner.space import Space, load_space

if TYPE_CHECKING:
    import argparse


def _load_space_cached(path: Path, within: Path | None) -> Space:
    try:  # a space edited meanwhile (between campaigns of one notebook, say) is read again
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = None  # load_space says the file is missing
    return _load_space(path, within, stamp)


@lru_cache(maxsize=64)
def _load_space(path: Path, within: Path | None, stamp: int | None) -> Space:
    return load_space(path, sources_within=within)


class Workload:
    """Base class; a workload module defines a subclass named `WORKLOAD`."""

    name: str = ""
    # the baseline a regression check divides by, timed in the same round (a name from baselines())
    check_reference: str = ""
    # one line, set by workloads with a program users run: `tuner run <name> ...` (see add_run_arguments, run)
    run_help: str = ""
    # workloads whose recordings ran this workload's program (a reduced space of the same pipeline, say):
    # warm starts draw on them too (tuner.search.warmstart.warm_evaluations)
    shares_program_with: tuple = ()

    # where the space file is, and the folder its kernel sources must lie in (set by the registry)
    space_path: Path | None = None
    sources_within: Path | None = None
    origin: str = ""  # where the registry found it: "built-in", a folder, or an installed package
    device: int = 0  # the GPU the measuring process runs on (set by it)

    @property
    def space(self) -> Space:
        if self.space_path is None:  # a built-in's module used directly (not through the registry)
            return _load_space_cached(locations.builtin_space(self.name), locations.BUILTIN_ROOT)
        return _load_space_cached(self.space_path, self.sources_within)

    def parse_size(self, text: str) -> dict | None:
        """A workload's own size notation (e.g. 1024x512x2048), or None."""
        return None

    def nearest_size(self, size: dict, measured: dict) -> str | None:
        """Of the measured sizes (their `size_vars` key -> the size's variables), the one nearest `size` by the
        workload's own features (spmv: a matrix's rows and nonzeros per row), or None: the nearest by the
        log-distance of the size variables (`tuner best` at a size never measured)."""
        return None

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        """Kernel arguments (numpy arrays and scalars) for one problem size."""
        raise NotImplementedError

    def constant_arguments(self, args: list, size: dict, dtype: str) -> dict:
        """The kernel's constant memory for the arguments `args` (as arguments() made them): {symbol: numpy
        array}, each array copied to the kernel's `__constant__` variable of that name after every compile,
        before the kernel runs (Kernel Tuner's `cmem_args`; 64 KiB in all at most). The measuring process
        asks for it after arguments() and answer(), so the data must be what answer() computed the reference
        from. Default: none."""
        return {}

    def answer(self, args: list, size: dict, dtype: str) -> list:
        """The numpy reference: one entry per argument, None where the output is not checked."""
        raise NotImplementedError

    def tolerances(self, size: dict, dtype: str) -> tuple[float, float]:
        """(atol, rtol) of the check against the reference; override to fit them to the size (e.g. to K)."""
        return self.space.atol, self.space.rtol

    def reference_timers(self, args: list, size: dict, dtype: str) -> dict:
        """Vendor references on the GPU, their inputs copied there and their answers checked once:
        {name: timer}, where timer(repeats) returns [ms, ...]. A regression check times them every round,
        so the preparation (a 1 GB copy, a host-side reference) must not be repeated per round."""
        return {}

    def baselines(self, args: list, size: dict, dtype: str, repeats: int) -> dict:
        """Vendor references timed on the GPU: {name: [ms, ...]}."""
        return {name: timer(repeats) for name, timer in self.reference_timers(args, size, dtype).items()}

    def baseline_metrics(self, name: str, times_median_ms: float, size: dict, dtype: str) -> dict:
        return {}

    # ---- `tuner run <workload>`: the program users run, on the best stored config ------------------
    def add_run_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Arguments of `tuner run <name>` besides --config, --dtype and --gpu (which every program gets)."""

    def run(self, args: argparse.Namespace, config_for: Callable[[dict, str], dict]) -> int:
        """Run the program on `args`; `config_for(size, dtype)` is the config to run with (the one given on
        the command line, else the best stored for this GPU and size, its fallbacks said on stderr)."""
        raise NotImplementedError
