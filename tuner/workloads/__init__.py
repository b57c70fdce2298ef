"""Workloads: each owns a kernel source, a YAML space and one module here with what YAML cannot say
(inputs for a size, the numpy reference, vendor baselines). Adding one is a line in WORKLOADS."""

from __future__ import annotations

import importlib
from functools import lru_cache

import numpy as np

from tuner.errors import TunerError
from tuner.space import SPACES_DIR, Space, load_space

WORKLOADS = {
    "reduction": "tuner.workloads.reduction",
    "spmv": "tuner.workloads.spmv",
    "gemm": "tuner.workloads.gemm",
    "floyd-warshall": "tuner.workloads.floyd_warshall",
    "floyd-warshall-small": "tuner.workloads.floyd_warshall_small",  # a reduced space to brute-force
    "locvolcalib": "tuner.workloads.locvolcalib",
}


class Workload:
    """Base class; a workload module defines a subclass named `WORKLOAD`."""

    name: str = ""
    # the baseline a regression check divides by, timed in the same round (a name from baselines())
    check_reference: str = ""
    # one line, set by workloads with a program users run: `tuner run <name> ...` (see add_run_arguments, run)
    run_help: str = ""
    # workloads whose recordings ran this workload's program (a reduced space of the same pipeline, say):
    # warm starts draw on them too (tuner.warmstart.warm_evaluations)
    shares_program_with: tuple = ()

    @property
    def space(self) -> Space:
        return load_space(SPACES_DIR / f"{self.name}.yaml")

    def parse_size(self, text: str) -> dict | None:
        """A workload's own size notation (e.g. 1024x512x2048), or None."""
        return None

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        """Kernel arguments (numpy arrays and scalars) for one problem size."""
        raise NotImplementedError

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
    def add_run_arguments(self, parser) -> None:
        """Arguments of `tuner run <name>` besides --config, --dtype and --gpu (which every program gets)."""

    def run(self, args) -> int:
        raise NotImplementedError

    def run_config(self, size: dict, dtype: str, given: dict | None = None, gpu: str | None = None, log=print) -> dict:
        """The config a program runs with: the one given (every parameter that has no default in the space,
        and valid), else the best stored for this GPU and size, with its fallback (nearest size, other GPU)
        said through `log`."""
        from tuner.query import best
        from tuner.space import format_size

        space = self.space
        if given:
            return space.checked(given, "--config")
        answer = best(self.name, format_size(size), dtype, gpu=gpu)
        for note in answer["notes"]:
            log(f"note: {note}")
        return answer["config"]


@lru_cache(maxsize=None)
def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise TunerError(f"unknown workload '{name}'; known: {', '.join(sorted(WORKLOADS))}")
    return importlib.import_module(WORKLOADS[name]).WORKLOAD


def all_workloads() -> list[Workload]:
    return [get_workload(n) for n in sorted(WORKLOADS)]
