"""Host code compiled ahead, without a GPU: the CPU workload gemm-cpu measured by its real measuring process
(Kernel Tuner's C backend) with its configs' shared libraries built by g++ in the compile pool. The measuring
process is given a g++ that refuses to compile, so every config that passes verification ran the pool's
library; the same configs compiled in place pass alike. A compiler that crashes or hangs in the pool is a
`compile` failure of its config; a compiler error is one too, with the compiler's message."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from tuner.measure import kt
from tuner.measure.library_backend import build_library, plan
from tuner.measure.pipeline import CompilePipeline
from tuner.measure.protocol import MeasureSpec
from tuner.measure.runner import IsolatedRunner
from tuner.workloads import get_workload

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")

WORKLOAD, DTYPE = "gemm-cpu", "int32"
TARGET = {"compiler": "g++", "compiler_options": ["-O2", "-fopenmp", "-std=gnu++17"], "nvcc_available": False}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Kernel Tuner and the pool write their temporary sources in the current folder


def configs(n: int) -> list[list]:
    space = get_workload(WORKLOAD).space
    small = [c for c in kt.searchspace(space).sorted_list() if dict(zip(space.params, c))["THREADS"] in (0, 2)]
    return [list(c) for c in small[:: max(1, len(small) // n)][:n]]


def refusing_gxx(folder: Path) -> dict:
    """An environment whose g++ answers --version (Kernel Tuner asks it at start) and refuses to compile."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "g++"
    script.write_text(f'#!/bin/sh\n[ "$1" = --version ] && exec {shutil.which("g++")} --version\n'
                      'echo "the measuring process may not compile" >&2\nexit 1\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def measure(space_configs: list[list], workers: int, env: dict) -> tuple[list[dict], IsolatedRunner]:
    size = dict(get_workload(WORKLOAD).space.sizes["test"])
    spec = MeasureSpec(WORKLOAD, size, DTYPE, "nvcuda", 0, None, baseline_repeats=0, iterations=3, env=env)
    runner = IsolatedRunner(spec, timeout=300, compile_workers=workers)
    rows: list[dict] = []
    runner.on_row = lambda row, fresh: rows.append(row)
    try:
        setup = runner.start()
        assert setup["library"] and setup["library"]["compiler"] == "g++" and setup["cubin"] is None
        runner.run(space_configs, kt.tuning_options(get_workload(WORKLOAD).space, size, DTYPE))
    finally:
        runner.shutdown()
    return rows, runner


def test_gemm_cpu_measured_from_the_pools_libraries_as_from_its_own(tmp_path):
    chosen = configs(3)
    refused = refusing_gxx(tmp_path / "bin")
    pooled, runner = measure(chosen, workers=1, env=refused)
    assert [r["status"] for r in pooled] == ["ok"] * 3, [r.get("error") for r in pooled]  # verified against numpy
    assert runner.paused_s > 0  # the pool's worker was stopped for each timed part
    in_place, _ = measure(chosen, workers=0, env={})
    assert [r["status"] for r in in_place] == ["ok"] * 3
    keys = list(get_workload(WORKLOAD).space.params)
    assert [[r[k] for k in keys] for r in pooled] == [[r[k] for k in keys] for r in in_place] == chosen
    # and the refusing compiler is real: compiled in place with it, the configs fail to compile
    (failed, *_), _ = measure(chosen[:1], workers=0, env=refused)
    assert failed["status"] == "compile" and "may not compile" in failed["error"]


def test_kernel_tuners_choices_for_a_host_source():
    job = plan("float f(int *a) { return 1.0f; }", "f", TARGET)
    assert job is not None and job.compiler == "g++" and job.suffix == ".cc" and job.options[0] == "-fPIC"
    cuda = plan("__global__ void k() {}\nfloat f() { return 0; }", "f", {**TARGET, "compiler": "nvcc"})
    assert cuda is not None and cuda.suffix == ".cu" and cuda.options[0] == "-Xcompiler=-fPIC"
    # g++ given CUDA code: Kernel Tuner turns to nvcc for good, which it then does itself
    assert plan("#include <cuda_runtime.h>\nfloat f() { return 0; }", "f", {**TARGET, "nvcc_available": True}) is None
    assert plan("subroutine f\nend", "f", {**TARGET, "compiler": "gfortran"}) is None


def test_a_compile_error_crash_and_hang_in_the_pool_are_compile_failures(tmp_path, monkeypatch):
    """Through the pool: g++'s error (its message kept), a compiler that dies, one that hangs (killed with the
    g++ it ran); each fails its config alone."""
    space = get_workload(WORKLOAD).space
    size = dict(space.sizes["test"])
    pipeline = CompilePipeline.for_space(WORKLOAD, size, DTYPE, "nvcuda", TARGET, workers=2, timeout=20)
    assert pipeline is not None
    try:
        good = configs(1)[0]
        made = pipeline.job(good)
        assert made is not None and made.compiler == "g++"
        binary, name = build_library(made)
        assert binary[:4] == b"\x7fELF" and name == space.kernel_name
        broken = made.__class__(made.source + "\n#error planted\n", made.name, made.options, made.compiler, made.suffix)
        with pytest.raises(RuntimeError, match="planted"):
            build_library(broken)
        pipeline.ahead([good])
        out = pipeline.take(good)
        assert out.binary is not None and not out.error and not out.crashed
    finally:
        pipeline.close()


def crashing_or_hanging_gxx(job):  # a pool compiler that runs g++ and dies, or hangs while a g++ runs
    import subprocess
    import time

    if "HANG" in job.source:
        child = subprocess.Popen(["sleep", "300"])  # the compiler's own child: killed with the worker's group
        Path(os.environ["TUNER_TEST_CHILD"]).write_text(str(child.pid))
        time.sleep(300)
    os._exit(9)


def test_a_crashing_or_hanging_host_compiler_is_a_compile_failure(tmp_path, monkeypatch):
    from tuner.measure.compile_pool import CompileJob, CompilePool
    from tuner.measure.quiet import proc_stat

    monkeypatch.setenv("TUNER_TEST_CHILD", str(tmp_path / "child"))

    pool = CompilePool("tests.test_host_ahead:crashing_or_hanging_gxx", workers=2, timeout=3)
    try:
        crash = pool.result(pool.submit(CompileJob("int f();", "f", (), "g++", ".cc")))
        hang = pool.result(pool.submit(CompileJob("HANG", "f", (), "g++", ".cc")))
    finally:
        pool.close()
    assert crash.crashed and "exit code 9" in crash.error
    assert hang.crashed and "within 3 s" in hang.error
    child = int((tmp_path / "child").read_text())
    assert proc_stat(child) is None or proc_stat(child)[0] in "ZX"  # not left running on its own


def test_tuner_runs_build_is_the_campaigns(tmp_path, monkeypatch):
    """`tuner run`'s library for a config (hostcode.build) is the build the campaign's pool ran when it timed
    it: the same source, compiler and options, through the same pool."""
    import ctypes

    from tuner.measure.hostcode import build, close_build_pool, config_job

    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    space = get_workload(WORKLOAD).space
    size = dict(space.sizes["test"])
    values = configs(1)[0]
    config = dict(zip(space.params, values))
    target = {"compiler": "g++", "compiler_options": list(space.compiler_options), "nvcc_available": False}
    pipeline = CompilePipeline.for_space(WORKLOAD, size, DTYPE, "nvcuda", target, workers=1, timeout=120)
    try:
        assert config_job(space, config, DTYPE) == pipeline.job(values)
    finally:
        pipeline.close()
    workload = get_workload(WORKLOAD)
    import numpy as np

    args = workload.arguments(size, DTYPE, np.random.default_rng(1))
    try:
        fn = build(space, config, DTYPE)
    finally:
        close_build_pool()  # its compiler process is not left to the tests that follow
    assert fn(args[0].ctypes, args[1].ctypes, args[2].ctypes, *(ctypes.c_int(int(a)) for a in args[3:])) >= 0
    assert np.array_equal(args[2], workload.answer(args, size, DTYPE)[2])
