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
}


class Workload:
    """Base class; a workload module defines a subclass named `WORKLOAD`."""

    name: str = ""
    # the baseline a regression check divides by, timed in the same round (a name from baselines())
    check_reference: str = ""

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

    def baselines(self, args: list, size: dict, dtype: str, repeats: int) -> dict:
        """Vendor references timed on the GPU: {name: {"times": [ms, ...], "bytes"/"flops": ...}}."""
        return {}

    def baseline_metrics(self, name: str, times_median_ms: float, size: dict, dtype: str) -> dict:
        return {}


@lru_cache(maxsize=None)
def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise TunerError(f"unknown workload '{name}'; known: {', '.join(sorted(WORKLOADS))}")
    return importlib.import_module(WORKLOADS[name]).WORKLOAD


def all_workloads() -> list[Workload]:
    return [get_workload(n) for n in sorted(WORKLOADS)]
