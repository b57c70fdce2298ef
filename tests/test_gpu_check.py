"""On the GPU: a regression check's measurement (`measure_rounds`) in the real isolated worker, for a device
kernel (reduction) and a host-code pipeline (Floyd-Warshall, Kernel Tuner's C backend): every round times
the binary compiled and verified in the first one. Skipped where no CUDA GPU is found."""

import pytest

from tests.test_floyd_warshall_gpu import SEED_CONFIG
from tuner.measure.protocol import MeasureSpec
from tuner.measure.runner import IsolatedRunner
from tuner.workloads import get_workload

pytestmark = pytest.mark.gpu

CASES = [
    ("reduction", {"n": 2**22 + 123}, "float32",
     {"variant": 7, "block_size_x": 256, "items_per_thread": 8, "vector": 4, "shuffle": 1, "finish": 1}),
    ("floyd-warshall", {"n": 1000, "m": 6000, "gpus": 1}, "int32", SEED_CONFIG),
]


@pytest.mark.parametrize("workload, size, dtype, config", CASES, ids=[c[0] for c in CASES])
def test_measure_rounds_compiles_once_and_times_every_round(workload, size, dtype, config):
    params = list(get_workload(workload).space.params)
    runner = IsolatedRunner(MeasureSpec(workload, size, dtype, "nvcuda", 0, None, baseline_repeats=0, iterations=5),
                            timeout=120)
    runner.start()
    try:
        row = runner.measure_rounds([config[k] for k in params], params, 6)
        assert row["status"] == "ok", row.get("error")
        assert len(row["rounds"]) == 6 and all(t > 0 for t in row["rounds"])
        assert all(len(v) == 6 for v in row["references"].values())
        # the last round re-ran the first round's binary: no compile, no verification of its own
        assert row["verification_time"] == 0
        # the worker compiles and verifies its next config as usual
        again = runner.measure_rounds([config[k] for k in params], params, 1)
        assert again["status"] == "ok"
    finally:
        runner.shutdown()


@pytest.mark.parametrize("workload, size, dtype, config", CASES, ids=[c[0] for c in CASES])
def test_interleaved_configs_each_keep_their_own_binary(workload, size, dtype, config):
    """Two configs in alternation, as the confirmation step measures near-ties: device code keeps both
    binaries, host code (one library at a time in Kernel Tuner's C backend) compiles again at each turn."""
    params = list(get_workload(workload).space.params)
    other = dict(config, block_size_x=128) if workload == "reduction" else dict(config, block_size_x=16, block_size_y=16)
    runner = IsolatedRunner(MeasureSpec(workload, size, dtype, "nvcuda", 0, None, baseline_repeats=0, iterations=5),
                            timeout=120)
    runner.start()
    try:
        rows = runner.measure_interleaved([[c[k] for k in params] for c in (config, other)], params, 4, references=False)
        assert [r["status"] for r in rows] == ["ok", "ok"], [r.get("error") for r in rows]
        assert [r["block_size_x"] for r in rows] == [config["block_size_x"], other["block_size_x"]]
        assert all(len(r["rounds"]) == 4 and not r["references"] for r in rows)
    finally:
        runner.shutdown()
