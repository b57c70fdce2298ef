"""What a campaign and its measuring process say to each other, over a multiprocessing pipe: the spec the
process starts from, the requests it takes and the replies it sends, each a small typed value. Nothing here
imports Kernel Tuner (the process hides torch from it first: tuner/measure/entry.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class MeasureSpec:
    """What a measuring process is started with: one workload, size and dtype on one GPU."""

    workload: str
    size: dict
    dtype: str
    backend: str
    device: int
    cachefile: str | None
    data_seed: int = 1234
    baseline_repeats: int = 50
    iterations: int | None = None  # timed launches per evaluation (default: the space's)
    env: dict = field(default_factory=dict)


# ---- requests: campaign -> measuring process ---------------------------------------------------
@dataclass(frozen=True)
class Measure:
    """Compile, run, time and verify one config (its parameter values in the space's order). `compiled`: its
    cubin from the compile pool (tuner/measure/compile_pool.Compiled), loaded instead of compiling it."""

    values: tuple
    compiled: tuple = ()
    pause: tuple = ()  # pids of the compile pool's workers: stopped while it times launches (measure/quiet.py)


@dataclass(frozen=True)
class MeasureRounds:
    """Several configs measured in alternation, `rounds` kept rounds each (tuner/measure/rounds.py), with the
    workload's references timed in the same rounds when `references`."""

    configs: tuple
    rounds: int
    references: bool = True
    compiled: tuple = ()  # cubins of the configs from the compile pool, as Measure's
    pause: tuple = ()  # as Measure's


@dataclass(frozen=True)
class UseCache:
    """Append what is measured from now on to Kernel Tuner's cache file at `path`."""

    path: str


@dataclass(frozen=True)
class Stop:
    """Exit cleanly."""


# ---- replies: measuring process -> campaign ----------------------------------------------------
@dataclass(frozen=True)
class Ready:
    """Set up: the GPU's identity, the vendor baselines measured, the timing protocol, where the start went."""

    setup: dict


@dataclass(frozen=True)
class Fatal:
    """The process cannot measure at all (no GPU, no backend, a cache it cannot use); it exits."""

    message: str
    traceback: str = ""


@dataclass(frozen=True)
class CacheReady:
    """The cache file of a UseCache is open."""


@dataclass(frozen=True)
class Result:
    """One row (Measure) or one row per config, or the first failure alone (MeasureRounds)."""

    rows: tuple
    paused_s: float = 0.0  # how long the compile pool's workers were kept stopped for this request

    @property
    def row(self) -> dict:
        return self.rows[0]


# the outcomes of one config (a row's `status`) after which the CUDA context is whole: after any other (runtime,
# wrong_answer, timeout) it may be broken, so the measuring process exits and the campaign starts a fresh one
SURVIVABLE = ("ok", "compile", "launch", "invalid")


class LaunchRefused(RuntimeError):
    """The driver refused a launch for its block size (more threads than the kernel's registers or its
    __launch_bounds__ allow): a `launch` failure, like the refusals Kernel Tuner itself skips."""


def config_key(values: Iterable) -> str:
    """Kernel Tuner's cache key of a configuration."""
    return ",".join(str(v) for v in values)
