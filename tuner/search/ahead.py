"""Asking ahead: the search loop (tuner.search.loop) proposes trials before the earlier ones are told, and their
configs go to the runner's compile pool (IsolatedRunner.prefetch, tuner/measure/pipeline.py), which compiles
them while the GPU measures. The sampler counts the trials in flight (TPE's constant liar: make_sampler's
`parallel`), as it counts other workers' trials in a distributed campaign.

How far ahead adapts (Pace): about a config's compile time over its measure time (the median of the last few
evaluations), at least 1 and at most the pool's workers. Where compiling is cheap next to measuring, one trial
is in flight and the search learns from every result before it asks again; where compiling dominates, enough
are in flight that the GPU rarely waits for a binary. Where the runner compiles nothing ahead (a replay, cupy
or pycuda, no compile workers), one trial is in flight and the search is exactly the sequential one.

A trial asked ahead and not measured (the budget or the time ran out, patience stopped the search, a
measurement raised) is told FAIL (`AskAhead.drop`): none is left running, none is counted by the budget."""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from tuner.search.loop import Proposal, SearchLoop

WINDOW = 8  # evaluations the pace is taken over: recent enough to follow the search into slower regions

Prefetch = Callable[[list[tuple]], object]


def compile_ahead(runner: Any) -> tuple[int, Prefetch | None]:
    """How many trials may be in flight with this runner, and its prefetch: the compile pool's workers and the
    runner's `prefetch` where it compiles ahead (IsolatedRunner with a compile pipeline); else (1, None).
    TUNER_COMPILE_AHEAD=0 keeps the pool's binaries but asks one at a time."""
    pipeline = getattr(runner, "pipeline", None)
    made = pipeline() if callable(pipeline) else None
    if made is None:
        return 1, None
    workers = int(getattr(runner, "compile_workers", 1))
    return max(1, min(workers, int(getattr(made, "depth", workers)))), runner.prefetch


class Pace:
    """The number of trials to keep in flight, from Kernel Tuner's results as they come (`observe`)."""

    def __init__(self, limit: int, window: int = WINDOW) -> None:
        self.limit = max(1, limit)
        self._compile: deque[float] = deque(maxlen=window)  # ms
        self._measure: deque[float] = deque(maxlen=window)  # ms: the benchmark and the verification

    def observe(self, result: Mapping[str, Any]) -> None:
        """One evaluation's times (Kernel Tuner's result or a runner's row; ms). One that compiled nothing or
        measured nothing (a failure, a config served with no times) says nothing of the pace."""
        compile_ms = _ms(result.get("compile_time"))
        measure_ms = _ms(result.get("benchmark_time")) + _ms(result.get("verification_time"))
        if compile_ms > 0 and measure_ms > 0:
            self._compile.append(compile_ms)
            self._measure.append(measure_ms)

    @property
    def depth(self) -> int:
        if self.limit == 1 or not self._compile:
            return 1
        ratio = statistics.median(self._compile) / statistics.median(self._measure)
        return max(1, min(self.limit, math.ceil(ratio)))


def _ms(value: Any) -> float:
    try:
        ms = float(value)
    except (TypeError, ValueError):
        return 0.0
    return ms if math.isfinite(ms) and ms > 0 else 0.0


class AskAhead:
    """The loop's proposals, up to `pace.depth` in flight (the one measuring included) and no more than `room()`
    (the evaluations the budget has left). `next()` tops the queue up, sends what it asked to `prefetch`, and
    hands out the oldest; the caller measures and tells it (loop.record or loop.abandon)."""

    def __init__(
        self,
        loop: SearchLoop,
        pace: Pace,
        prefetch: Prefetch | None = None,
        room: Callable[[], float] = lambda: math.inf,
    ) -> None:
        self.loop, self.pace, self.prefetch, self.room = loop, pace, prefetch, room
        self.queue: deque[Proposal] = deque()

    def next(self) -> Proposal | None:
        """The next trial to measure, or None when the loop wants no more."""
        want = max(1, min(self.pace.depth, self.room()))
        asked: list[tuple] = []
        while len(self.queue) < want and (proposal := self.loop.propose()) is not None:
            self.queue.append(proposal)
            asked.append(proposal.config)
        if asked and self.prefetch is not None:
            self.prefetch(asked)
        return self.queue.popleft() if self.queue else None

    def drop(self) -> None:
        """Tell every trial still queued FAIL: asked ahead, never measured."""
        while self.queue:
            trial = self.queue.popleft().trial
            try:
                self.loop.abandon(trial)
            finally:
                self.loop.release(trial)
