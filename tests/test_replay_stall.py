"""A replayed strategy that evaluates nothing new for long is stopped (tuner.measure.replay.StallGuard):
Kernel Tuner's greedy_ils circled for ever on a recording that holds part of its space (GEMM 2048^3 since
split-K), because its budget counts only new configs."""

import pytest
from kernel_tuner.util import StopCriterionReached

from tests.recorded import is_recorded
from tuner.measure.replay import STALL, StallGuard

H100 = "NVIDIA H100 80GB HBM3"
GEMM = (H100, "gemm", "2048x2048x2048", "float32")


class Runner:
    dev = "the device"

    def __init__(self):
        self.calls = 0

    def run(self, configs, options):
        self.calls += 1
        return [{"config": tuple(c)} for c in configs]


def test_a_runner_asked_only_for_seen_configs_stops_the_strategy_and_new_ones_reset_the_count():
    guard = StallGuard(Runner())
    assert guard.dev == "the device"  # everything else is the runner's
    guard.run([[1, 2]], None)
    for _ in range(STALL - 2):
        guard.run([[1, 2]], None)
    guard.run([[3, 4]], None)  # something new: counting starts again
    for _ in range(STALL - 1):
        guard.run([[3, 4]], None)
    with pytest.raises(StopCriterionReached, match="no configuration not evaluated before"):
        guard.run([[1, 2]], None)


@pytest.mark.skipif(not is_recorded(*GEMM), reason="no GEMM 2048^3 recording")
def test_greedy_ils_on_a_partial_recording_ends():
    from tuner.answers.compare import load_recording, strategy_trace

    rec = load_recording("gemm", "2048x2048x2048", "float32")
    trace = strategy_trace(rec, "kt:greedy_ils", 0, 29)
    assert 0 < len(trace) <= 29
