"""Compiling ahead without a GPU: the compile pool's failure handling with a stand-in compiler that crashes,
hangs, errs and succeeds; a campaign's runner recording a crashed compile as a `compile` row and sending the
others' cubins with their requests; and, where cuda-python's NVRTC loads, a real compile to a cubin of a
built-in kernel config."""

import os
import time

import pytest

from tests.fake_worker import cubin_requests
from tuner.measure.compile_pool import CompileJob, CompilePool, nvrtc_cubin
from tuner.measure.pipeline import CompilePipeline, cubin_options, default_workers
from tuner.measure.protocol import MeasureRounds, MeasureSpec, Result

STAND_IN = "tests.test_compile_pool:stand_in"


def stand_in(job: CompileJob) -> tuple[bytes, str]:
    """A compiler that crashes, hangs or errs where the source says so, and else 'compiles'."""
    if "CRASH" in job.source or "#define block_size_x 64\n" in job.source:
        os._exit(7)
    if "HANG" in job.source:
        time.sleep(3600)
    if "ERROR" in job.source:
        raise RuntimeError("error: identifier 'oops' is undefined")
    return f"cubin of {job.source}".encode(), f"_lowered_{job.name}"


def job(source: str) -> CompileJob:
    return CompileJob(source, "k", ("--std=c++11",))


def test_a_crash_and_a_hang_fail_their_job_alone_and_the_pool_goes_on():
    pool = CompilePool(STAND_IN, workers=2, timeout=3)
    try:
        keys = {s: pool.submit(job(s)) for s in ["ok 1", "CRASH", "HANG", "ok 2", "ERROR", "ok 3"]}
        out = {s: pool.result(k) for s, k in keys.items()}
        for s in ["ok 1", "ok 2", "ok 3"]:
            assert out[s].binary == f"cubin of {s}".encode() and out[s].lowered_name == "_lowered_k"
            assert not out[s].error and not out[s].crashed
        assert out["CRASH"].crashed and "crashed" in out["CRASH"].error and "exit code 7" in out["CRASH"].error
        assert out["HANG"].crashed and "within 3 s" in out["HANG"].error and out["HANG"].seconds >= 3
        # a compile error is the compiler's verdict, not a crash: the measuring process raises it as Kernel Tuner
        assert not out["ERROR"].crashed and "oops" in out["ERROR"].error and out["ERROR"].binary is None
        assert pool.restarts == 2
        assert pool.result(pool.submit(job("ok after"))).binary == b"cubin of ok after"  # restarted, still compiles
    finally:
        pool.close()


def test_a_worker_slow_to_start_is_no_hang():
    """The time to a hang starts once the worker has started: its first job, sent as it was spawned, compiles."""
    pool = CompilePool("tests.slow_start_compiler:compile_quickly", workers=1, timeout=1)
    try:
        out = pool.result(pool.submit(job("first")))
        assert out.binary == b"cubin of first" and not out.crashed and pool.restarts == 0
    finally:
        pool.close()


def test_a_job_is_compiled_once_and_its_result_handed_out_once():
    pool = CompilePool(STAND_IN, workers=1, timeout=10)
    try:
        key = pool.submit(job("twice"))
        assert pool.submit(job("twice")) == key
        assert pool.result(key).binary == b"cubin of twice"
        with pytest.raises(KeyError):
            pool.result(key)
    finally:
        pool.close()


def test_compile_workers_from_the_environment(monkeypatch):
    monkeypatch.setenv("TUNER_COMPILE_WORKERS", "3")
    assert default_workers() == 3
    monkeypatch.setenv("TUNER_COMPILE_WORKERS", "0")
    assert default_workers() == 0
    monkeypatch.setenv("TUNER_COMPILE_WORKERS", "many")
    from tuner.errors import TunerError

    with pytest.raises(TunerError, match="TUNER_COMPILE_WORKERS"):
        default_workers()


def test_the_options_are_kernel_tuners_with_a_real_architecture():
    options = cubin_options(["-O3"], "90")
    assert options[:2] == ("-O3", "--std=c++11") and "--gpu-architecture=sm_90" in options
    assert cubin_options(["--gpu-architecture=compute_80"], "90") is None  # the space's own choice: Kernel Tuner's


# ---- a campaign's runner with the pool -----------------------------------------------------------
def cubin_measuring_main(conn, spec):
    """A measuring process that says it takes cubins, and reports per config whether one came."""
    for request in cubin_requests(conn):
        configs = request.configs if isinstance(request, MeasureRounds) else [request.values]
        came = {c.lowered_name for c in request.compiled}
        keys = ["variant", "block_size_x", "items_per_thread", "vector", "shuffle", "finish"]
        rows = [{**dict(zip(keys, config)), "status": "ok", "error": "", "times": [1.0], "cubin": bool(came), "compiled": len(came),
                 "compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0} for config in configs]
        conn.send(Result(tuple(rows)))


def test_brute_force_through_the_runner_compiles_ahead_and_records_a_crashed_compile(tmp_path):
    from kernel_tuner import util

    from tuner.measure import kt
    from tuner.measure.runner import IsolatedRunner
    from tuner.workloads import get_workload

    space = get_workload("reduction").space
    size, dtype = {"n": 1 << 20}, "float32"
    spec = MeasureSpec("reduction", size, dtype, "nvcuda", 0, None)
    runner = IsolatedRunner(spec, timeout=20, target=cubin_measuring_main, compile_workers=2)
    runner.compiler = STAND_IN
    options = kt.tuning_options(space, size, dtype, max_fevals=None)
    all_configs = kt.searchspace(space).sorted_list()
    configs = [c for c in all_configs if c[list(space.params).index("block_size_x")] in (64, 128)]
    configs = configs[:6] + [c for c in configs if c[list(space.params).index("block_size_x")] == 64][:1]
    rows = []
    runner.on_row = lambda row, fresh: rows.append(row)
    try:
        runner.start()
        results = runner.run(configs, options)
        assert runner.pipeline() is not None
        # rounds (a check, a confirmation): compiled in the pool for the first round, cubins sent along, but
        # not for a config this process measured already (it has the binary); a crash is a compile row
        ok = next(c for c in configs if dict(zip(space.params, c))["block_size_x"] == 128)
        new = next(c for c in all_configs if dict(zip(space.params, c))["block_size_x"] == 128 and c not in configs)
        again, fresh = runner.measure_interleaved([ok, new], list(space.params), 3)
        (crashed,) = runner.measure_interleaved([configs[-1], new], list(space.params), 3)
    finally:
        runner.shutdown()
    by_bs = [dict(zip(space.params, c))["block_size_x"] for c in configs]
    for bs, row, result in zip(by_bs, rows, results):
        if bs == 64:  # the stand-in compiler dies on these: a compile failure, never sent to the GPU
            assert row["status"] == "compile" and "crashed" in row["error"]
            assert isinstance(result["__error__"], util.CompilationFailedConfig)
        else:
            assert row["status"] == "ok" and row["cubin"], row
    assert any(bs == 64 for bs in by_bs) and any(bs == 128 for bs in by_bs)
    assert again["compiled"] == fresh["compiled"] == 1  # one cubin sent: the new config's
    assert crashed["status"] == "compile" and crashed["block_size_x"] == 64


def test_a_lone_config_is_compiled_where_it_runs(tmp_path):
    """An Optuna strategy asks one config at a time: nothing to overlap, the measuring process compiles it."""
    from tuner.measure import kt
    from tuner.measure.runner import IsolatedRunner
    from tuner.workloads import get_workload

    space = get_workload("reduction").space
    size = {"n": 1 << 20}
    runner = IsolatedRunner(MeasureSpec("reduction", size, "float32", "nvcuda", 0, None), timeout=20,
                            target=cubin_measuring_main, compile_workers=2)
    runner.compiler = STAND_IN
    rows = []
    runner.on_row = lambda row, fresh: rows.append(row)
    config = [c for c in kt.searchspace(space).sorted_list() if dict(zip(space.params, c))["block_size_x"] == 256][0]
    try:
        runner.start()
        runner.run([config], kt.tuning_options(space, size, "float32"))
        runner.known.clear()  # as if not measured: the same config again
        runner.prefetch([config])  # unless announced ahead (an ask-ahead): then it comes from the pool
        runner.run([config], kt.tuning_options(space, size, "float32"))
    finally:
        runner.shutdown()
    assert rows[0]["status"] == "ok" and not rows[0]["cubin"]
    assert rows[1]["status"] == "ok" and rows[1]["cubin"]


def test_brute_force_writes_each_row_while_the_next_is_measured_and_all_of_them_when_stopped(monkeypatch):
    """Each row reaches on_row (the store) while the next config is with the measuring process, before that
    one's result comes back; stopped mid-way (Ctrl-C), every row measured is handed over."""
    from tuner.measure import kt
    from tuner.measure.runner import IsolatedRunner
    from tuner.workloads import get_workload

    space = get_workload("reduction").space
    size = {"n": 1 << 20}
    runner = IsolatedRunner(MeasureSpec("reduction", size, "float32", "nvcuda", 0, None), timeout=20,
                            target=cubin_measuring_main, compile_workers=2)
    runner.compiler = STAND_IN
    configs = [c for c in kt.searchspace(space).sorted_list() if dict(zip(space.params, c))["block_size_x"] == 256]
    replies, written_at = [], []  # results received so far; how many had come when each row was written
    runner.on_row = lambda row, fresh: written_at.append(len(replies))
    reply = runner._reply

    def counted(timeout):
        if len(replies) == 5:
            raise KeyboardInterrupt
        replies.append(reply(timeout))
        return replies[-1]

    monkeypatch.setattr(runner, "_reply", counted)
    try:
        runner.start()
        with pytest.raises(KeyboardInterrupt):
            runner.run(configs[:8], kt.tuning_options(space, size, "float32"))
    finally:
        runner.shutdown()
    assert written_at == [1, 2, 3, 4, 5]  # row i written before result i + 1 came; the five measured, all


# ---- the real compiler ---------------------------------------------------------------------------
def _nvrtc_loads() -> bool:
    try:
        from cuda.bindings import nvrtc

        return nvrtc.nvrtcVersion()[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS
    except Exception:  # noqa: BLE001  (not installed, or its library not found)
        return False


@pytest.mark.skipif(not _nvrtc_loads(), reason="cuda-python's NVRTC does not load here")
@pytest.mark.parametrize("workload", ["reduction", "gemm"])
def test_nvrtc_compiles_a_built_in_config_to_a_cubin_for_the_gpu(workload):
    from tuner.measure import kt
    from tuner.workloads import get_workload

    space = get_workload(workload).space
    size = dict(next(iter(space.sizes.values())))
    pipeline = CompilePipeline.for_space(workload, size, "float32", "nvcuda", {"cc": "90", "compiler_options":
                                         list(space.compiler_options)}, workers=1, timeout=120)
    try:
        config = kt.searchspace(space).sorted_list()[0]
        made = pipeline.job(config)
        assert "#define kernel_tuner 1" in made.source and made.name.startswith(space.kernel_name)
        cubin, lowered = nvrtc_cubin(made)
        assert cubin[:4] == b"\x7fELF" and lowered
        pipeline.ahead([config])
        pooled = pipeline.take(config)
        assert pooled.binary == cubin and pooled.lowered_name == lowered and not pooled.error
        broken = CompileJob(made.source + "\n#error planted\n", made.name, made.options)
        with pytest.raises(RuntimeError, match="planted"):
            nvrtc_cubin(broken)
    finally:
        pipeline.close()


def test_compiling_ahead_off_keeps_the_pools_binaries(monkeypatch):
    """TUNER_COMPILE_AHEAD=0: each config compiled in the pool just before it is measured (the parallel run's
    binaries in a serial run), an announced one too, none ahead."""
    from tuner.measure import kt
    from tuner.measure.runner import IsolatedRunner
    from tuner.workloads import get_workload

    monkeypatch.setenv("TUNER_COMPILE_AHEAD", "0")
    space = get_workload("reduction").space
    size = {"n": 1 << 20}
    configs = [c for c in kt.searchspace(space).sorted_list() if dict(zip(space.params, c))["block_size_x"] == 256]
    runner = IsolatedRunner(MeasureSpec("reduction", size, "float32", "nvcuda", 0, None), timeout=20,
                            target=cubin_measuring_main, compile_workers=2)
    runner.compiler = STAND_IN
    rows = []
    runner.on_row = lambda row, fresh: rows.append(row)
    try:
        runner.start()
        runner.prefetch(configs[3:5])
        assert runner.pipeline().depth == 0 and not runner.pipeline().started(configs[3])
        runner.run(configs[:3], kt.tuning_options(space, size, "float32"))
        assert not any(runner.pipeline().started(c) for c in configs)  # nothing compiled ahead
        runner.run([configs[3]], kt.tuning_options(space, size, "float32"))
    finally:
        runner.shutdown()
    assert [r["status"] for r in rows] == ["ok"] * 4 and all(r["cubin"] and r["compiled"] == 1 for r in rows)
