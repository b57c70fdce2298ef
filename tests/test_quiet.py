"""No compile inside a timed window, without a GPU: real processes stopped and continued (their state read from
/proc), with their children; continued when the timed part raises; a campaign's compile pool stopped by a
measuring process for its timed part (a compiler that ticks every millisecond ticks never inside it), and
continued by the campaign when the measuring process dies with them stopped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fake_worker import cubin_requests
from tuner.measure.compile_pool import CompileJob
from tuner.measure.protocol import Measure, MeasureSpec, Result
from tuner.measure.quiet import Pauser, proc_stat

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")

TICKER = "tests.test_quiet:ticking_compiler"



def state(pid: int) -> str:
    st = proc_stat(pid)
    return st[0] if st else "gone"


def group_members(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[2]) == pgid:
                out.append(int(entry))
    return out


@pytest.fixture
def groups():
    """Two process groups of this process's children, each a shell with a `sleep` of its own (as a pool worker
    with its compiler)."""
    procs = [
        subprocess.Popen(["sh", "-c", "sleep 60 & while :; do :; done"], process_group=0) for _ in range(2)
    ]
    deadline = time.monotonic() + 10
    while any(len(group_members(p.pid)) < 2 for p in procs) and time.monotonic() < deadline:
        time.sleep(0.01)
    yield procs
    for p in procs:
        os.killpg(p.pid, 9)
        p.wait()


def test_a_window_stops_each_group_and_continues_it(groups):
    pauser = Pauser(parent=os.getpid())
    pauser.watch([p.pid for p in groups])
    members = [m for p in groups for m in group_members(p.pid)]
    assert len(members) == 4
    with pauser.window():
        # the leaders are waited for; a member not on a CPU just now takes the stop when it is next scheduled
        # (it runs nothing meanwhile), which on a loaded machine can be a while after the window opens
        deadline = time.monotonic() + 5
        while {state(m) for m in members} != {"T"} and time.monotonic() < deadline:
            time.sleep(0.005)
        assert {state(m) for m in members} == {"T"}
    time.sleep(0.05)
    assert all(state(m) in "RS" for m in members)
    assert pauser.windows == 1 and pauser.take_paused_s() > 0 and pauser.paused_s == 0


def test_a_window_continues_them_when_the_timed_part_raises(groups):
    pauser = Pauser(parent=os.getpid())
    pauser.watch([p.pid for p in groups])

    def timed_part() -> None:
        assert state(groups[0].pid) == "T"
        raise RuntimeError("a launch failed")

    with pytest.raises(RuntimeError, match="a launch failed"):
        pauser.timed(timed_part)()
    time.sleep(0.05)
    assert all(state(m) in "RS" for p in groups for m in group_members(p.pid))


def test_only_the_campaigns_children_are_signalled(groups):
    """A pid whose parent is not the campaign (a worker's pid taken by another process) is left alone."""
    pauser = Pauser(parent=os.getppid())  # as if this test's parent were the campaign: its children are not ours
    pauser.watch([p.pid for p in groups])
    assert pauser.pids == ()
    with pauser.window():
        assert state(groups[0].pid) in "RS"


# ---- a campaign's pool, stopped by its measuring process -------------------------------------------
def ticking_compiler(job: CompileJob) -> tuple[bytes, str]:
    """A 'compiler' that, for block_size_x 256, writes the time every millisecond until told to stop (a file)."""
    if re.search(r"#define block_size_x (\d+)\n", job.source).group(1) == "256":  # Kernel Tuner's, first
        path = Path(os.environ["TUNER_TEST_TICKS"])
        end = time.monotonic() + 60
        with open(path, "a") as f:
            while time.monotonic() < end and not path.with_suffix(".stop").exists():
                f.write(f"{time.monotonic()}\n")
                f.flush()
                time.sleep(0.001)
    return b"binary", "_k"


def pausing_measuring_main(conn, spec) -> None:
    """A measuring process whose 'benchmark' is a 0.3 s window with the pool's workers stopped, which it
    reports; for block_size_x 512 it dies inside the window, leaving them stopped."""
    pauser = Pauser()
    keys = ["variant", "block_size_x", "items_per_thread", "vector", "shuffle", "finish"]
    for request in cubin_requests(conn):
        assert isinstance(request, Measure)
        params = dict(zip(keys, request.values))
        pauser.watch(request.pause)
        with pauser.window():
            if params["block_size_x"] == 512:
                os._exit(3)
            t0 = time.monotonic()
            time.sleep(0.3)
            t1 = time.monotonic()
        row = {**params, "status": "ok", "error": "", "times": [1.0], "window": [t0, t1],
               "stopped": list(pauser.pids), "compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0}
        conn.send(Result((row,), pauser.take_paused_s()))


def test_the_pool_compiles_between_timed_windows_and_is_continued_if_the_measurer_dies(tmp_path, monkeypatch):
    from tuner.measure import kt
    from tuner.measure.runner import IsolatedRunner
    from tuner.workloads import get_workload

    ticks = tmp_path / "ticks"
    monkeypatch.setenv("TUNER_TEST_TICKS", str(ticks))  # the pool's workers are spawned with this environment
    space = get_workload("reduction").space
    size = {"n": 1 << 20}
    by_block = {}
    for c in kt.searchspace(space).sorted_list():
        by_block.setdefault(dict(zip(space.params, c))["block_size_x"], []).append(c)
    runner = IsolatedRunner(MeasureSpec("reduction", size, "float32", "nvcuda", 0, None), timeout=30,
                            target=pausing_measuring_main, compile_workers=3)
    runner.compiler = TICKER
    rows = []
    runner.on_row = lambda row, fresh: rows.append(row)
    options = kt.tuning_options(space, size, "float32")
    try:
        runner.start()
        runner.prefetch([by_block[256][0]])  # compiles (ticks) while the next configs are measured
        deadline = time.monotonic() + 60
        while not ticks.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ticks.exists(), "the ticking compiler never started"
        runner.run(by_block[128][:2], options)  # two timed windows of 0.3 s while it ticks
        time.sleep(0.1)
        pids = runner.pipeline().pool.pids
        runner.run([by_block[512][0]], options)  # the measuring process dies with the workers stopped
        time.sleep(0.05)
        assert all(state(p) in "RS" for p in pids), [state(p) for p in pids]  # the campaign continued them
        ticks.with_suffix(".stop").touch()
        assert runner.pipeline().take(by_block[256][0]).binary == b"binary"  # the compile went on to its end
    finally:
        runner.shutdown()
    times = [float(t) for t in ticks.read_text().split()]
    windows = [r["window"] for r in rows if r["status"] == "ok"]
    assert len(windows) == 2 and all(set(r["stopped"]) == set(pids) for r in rows[:2])
    for t0, t1 in windows:
        assert any(t < t0 for t in times) and any(t > t1 for t in times)  # it ticked before and after ...
        assert not [t for t in times if t0 < t < t1]  # ... and never inside
    assert rows[2]["status"] == "runtime" and "died" in rows[2]["error"]
    assert runner.paused_s >= 0.6  # reported by the measuring process, credited to the pool


def test_a_frozen_pool_starts_and_reaps_no_worker_until_the_request_is_over():
    """While a request is out, the pids the measuring process was given are all the workers there are, and
    each stays its worker's (a crashed one is not reaped, so its pid cannot be reused) until it is over."""
    from tuner.measure.compile_pool import CompilePool

    pool = CompilePool("tests.test_compile_pool:stand_in", workers=2, timeout=30)
    try:
        first = pool.result(pool.submit(CompileJob("warm", "k", ())))
        assert first.binary == b"cubin of warm" and len(pool.pids) == 1
        with pool.frozen() as pids:
            crash = pool.submit(CompileJob("CRASH", "k", ()))  # to the idle worker, which dies of it
            queued = pool.submit(CompileJob("queued", "k", ()))  # would start a second worker
            time.sleep(1.5)
            assert pool.pids == pids and len(pids) == 1
            assert state(pids[0]) == "Z"  # ended, not reaped: no other process can have its pid
            assert not pool._results
        assert pool.result(crash).crashed and pool.result(queued).binary == b"cubin of queued"
        assert pids[0] not in pool.pids
    finally:
        pool.close()


@pytest.mark.gpu
def test_on_the_gpu_the_pool_is_stopped_for_each_timed_benchmark():
    """The real measuring process on the GPU with NVRTC in the pool: every config measured from its cubin, the
    workers stopped while Kernel Tuner's benchmark runs (once per config and for its warm-up)."""
    from tuner.measure import kt
    from tuner.measure.runner import IsolatedRunner
    from tuner.workloads import get_workload

    space = get_workload("reduction").space
    size = {"n": 1 << 22}
    configs = [list(c) for c in kt.searchspace(space).sorted_list()[:: 40][:8]]
    spec = MeasureSpec("reduction", size, "float32", "nvcuda", 0, None, baseline_repeats=0)
    runner = IsolatedRunner(spec, timeout=120, compile_workers=2)
    rows = []
    runner.on_row = lambda row, fresh: rows.append(row)
    try:
        runner.start()
        runner.run(configs, kt.tuning_options(space, size, "float32"))
        assert runner.pipeline() is not None and runner.pipeline().pool.pids
    finally:
        runner.shutdown()
    assert [r["status"] for r in rows] == ["ok"] * len(configs), [r.get("error") for r in rows]
    assert runner.paused_s > 0


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
