"""What every workload's GPU test does: run configurations through the same isolated Kernel Tuner worker as
a campaign, each verified against the workload's numpy reference before its time counts."""

from tuner.measure import kt
from tuner.measure.protocol import MeasureSpec
from tuner.measure.runner import IsolatedRunner
from tuner.workloads import get_workload


def failed_configs(workload: str, size: dict, dtype: str, configs: list, timeout: float = 60) -> list:
    """(status, config, error) of every config that did not run and verify; raises if any went missing."""
    space = get_workload(workload).space
    runner = IsolatedRunner(MeasureSpec(workload, size, dtype, "nvcuda", 0, None, baseline_repeats=0), timeout=timeout)
    rows = []
    runner.on_row = lambda row, fresh: rows.append(row)
    runner.start()
    try:
        runner.run([list(c) for c in configs], kt.tuning_options(space, size, dtype))
    finally:
        runner.shutdown()
    assert len(rows) == len(configs), f"{len(rows)} results for {len(configs)} configs"
    return [(r["status"], {k: r[k] for k in space.params}, r.get("error", "")[:300]) for r in rows if r["status"] != "ok"]


def device_count() -> int:
    try:
        from cuda.bindings import runtime

        err, count = runtime.cudaGetDeviceCount()
        return count if int(err) == 0 else 0
    except ImportError:  # no cuda-python: no GPU here
        return 0
