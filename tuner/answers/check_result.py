"""`tuner check`'s results: a kernel's verdict (CheckResult), a check's results with whose baselines they
compared with (CheckRun), and the exit code of them all."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class CheckResult:
    workload: str
    size: str
    dtype: str
    config: dict
    verdict: str  # pass, faster, regression, failed, refused, stale, invalid (no finite comparison)
    reason: str = ""
    reference: str = ""
    baseline_ms: float | None = None
    now_ms: float | None = None
    raw: dict = field(default_factory=dict)  # change and confidence interval of raw times
    normalised: dict = field(default_factory=dict)  # the same, in units of the reference
    retuned: dict | None = None  # a re-tune's best (config, time_ms), and whether it recovers the baseline (recovery)
    noise_floor: float | None = None  # the slowdown this kernel must show to be flagged on this runner
    rounds: list = field(default_factory=list)  # this check's per-round medians (ms), for a closer look
    decided_by: str = ""  # "normalised" or "raw": whose verdict is the check's
    stored_best: dict | None = None  # the stored best config, where the baseline's is no longer it (StoreRows)

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "faster": 0, "regression": 1, "failed": 1}.get(self.verdict, 2)


PROJECT, SHIPPED = "project", "shipped"  # whose baselines a check compared with (CheckRun.baselines)


class CheckRun(list[CheckResult]):
    """A check's results, in order, with what its reports say beside them: whose baselines were checked
    (`baselines`: "project", the project's own, or "shipped", those shipped with the built-in workloads, a demo),
    and notes on what the gate did not check (baselines of other GPUs, say)."""

    def __init__(self, results: Iterable[CheckResult] = (), *, baselines: str = PROJECT) -> None:
        super().__init__(results)
        self.baselines = baselines
        self.notes: list[str] = []


def note(res: CheckResult, text: str) -> None:
    """`text` added to the result's reason."""
    res.reason = (res.reason + "; " if res.reason else "") + text


def exit_code(results: list[CheckResult]) -> int:
    codes = [r.exit_code for r in results]
    return 1 if 1 in codes else (2 if 2 in codes else 0)
