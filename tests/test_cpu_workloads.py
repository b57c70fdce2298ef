"""The CPU workloads (floyd-warshall-cpu, gemm-cpu) without a GPU: listed, built by the system compiler,
checked against numpy on small sizes (the seeds' configurations, every variant, the naive baselines),
the CPU named in the provenance, and a short real tuning campaign."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tuner.measure import kt
from tuner.measure.hostcode import build
from tuner.measure.provenance import cpu_info, device_info, local_device_name
from tuner.store import gpu_slug
from tuner.workloads import get_workload
from tuner.workloads.floyd_warshall import floyd_warshall_numpy
from tuner.workloads.floyd_warshall_cpu import SEED_CONFIGS as FW_SEEDS
from tuner.workloads.gemm_cpu import SEED_CONFIGS as GEMM_SEEDS
from tuner.workloads.graph_io import random_graph

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
CPU_WORKLOADS = ("floyd-warshall-cpu", "gemm-cpu")
# the real measuring process, named: a campaign then skips its check for a CUDA GPU, which CPU code does not
# need (until tuner/campaign/request.py's check_gpu knows CPU spaces: docs/results/cpu.md)
REAL_PROCESS = "tuner.measure.entry:process_entry"


# the suite's cache folder (tests/conftest.py), read before a test points TUNER_CACHE at its own
SUITE_CACHE = os.environ.get("TUNER_CACHE")


@pytest.fixture(autouse=True)
def _own_build_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def _module_builds(tmp_path_factory):
    """One build cache for the tests that check built configs against numpy: a library (named by the hash of
    its source and flags) built for one test is not built again for the next (each run builds them afresh)."""
    return tmp_path_factory.mktemp("builds")


def _built(space, configs: list[dict], dtype: str) -> list:
    """Each config's entry point, the libraries built side by side (the build pool has a compiler per core)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(lambda config: build(space, config, dtype), configs))


def test_listed_and_marked_as_cpu_code():
    # `tuner list` with the suite's cache, not this test's empty one: there it derives the recording of every
    # workload's every size and dtype first (half a minute; what this test checks needs none of it), and the
    # other tests that list share what it derives
    env = {**os.environ, **({"TUNER_CACHE": SUITE_CACHE} if SUITE_CACHE else {})}
    out = subprocess.run([sys.executable, "-m", "tuner", "list"], capture_output=True, text=True, timeout=120, env=env)
    for name in CPU_WORKLOADS:
        assert name in out.stdout
        space = get_workload(name).space
        assert space.on_cpu and space.compiler == "g++"
        assert kt.effective_backend(space, "nvcuda") == kt.CPU_BACKEND
        assert kt.device_options(space, space.resolve_dtype(None), 0).compiler == "g++"
    gpu_pipeline = get_workload("floyd-warshall").space
    assert not gpu_pipeline.on_cpu and kt.device_options(gpu_pipeline, "int32", 0).compiler == "nvcc"


def _configs(space, seeds: dict, per_group: tuple[str, ...]) -> list[dict]:
    """The seeds' configs, and for each value of the `per_group` parameters one valid config (threads: 2)."""
    out = [dict(c) for c in seeds.values()]
    configs = [dict(zip(space.params, values)) for values in kt.searchspace(space).list]
    rng = np.random.default_rng(0)
    for name in per_group:
        for value in space.params[name]:
            pool = [c for c in configs if c[name] == value and c["THREADS"] in (0, 8)]
            out.append(pool[int(rng.integers(len(pool)))])
    return out


@needs_gxx
@pytest.mark.parametrize("n", [1, 70, 150])
def test_floyd_warshall_cpu_matches_numpy(n, _module_builds, monkeypatch):
    monkeypatch.setenv("TUNER_CACHE", str(_module_builds))
    workload = get_workload("floyd-warshall-cpu")
    space = workload.space
    edges = random_graph(n, min(6 * n, n * (n - 1)), 3)
    expected = floyd_warshall_numpy(n, edges)
    configs = _configs(space, FW_SEEDS, ("BLOCK", "VEC", "RJ", "LAYOUT", "PIN")) if n == 150 else [FW_SEEDS["hw3-1"]]
    for config, fn in zip(configs, _built(space, configs, "int32"), strict=True):
        dist = np.zeros((n, n), dtype=np.int32)
        ms = fn(edges.ctypes, dist.ctypes, n, len(edges))
        assert ms >= 0
        np.testing.assert_array_equal(dist, expected, err_msg=str(config))


@needs_gxx
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_gemm_cpu_matches_numpy(dtype, _module_builds, monkeypatch):
    monkeypatch.setenv("TUNER_CACHE", str(_module_builds))
    workload = get_workload("gemm-cpu")
    space = workload.space
    size = space.sizes["test"]  # 67 x 93 x 45: every edge path
    args = workload.arguments(size, dtype, np.random.default_rng(1))
    expected = workload.answer(args, size, dtype)[2]
    atol = workload.tolerances(size, dtype)[0]
    configs = _configs(space, GEMM_SEEDS, ("VARIANT", "VEC", "MR", "NRV", "PIN"))
    for config, fn in zip(configs, _built(space, configs, dtype), strict=True):
        c = np.zeros_like(args[2])
        assert fn(args[0].ctypes, args[1].ctypes, c.ctypes, *(int(a) for a in args[3:])) >= 0
        assert np.allclose(c, expected, rtol=0, atol=atol), config


@needs_gxx
def test_a_wrong_answer_is_caught():
    """The check the baselines pass is real: a perturbed output fails it."""
    workload = get_workload("gemm-cpu")
    size = workload.space.sizes["test"]
    args = workload.arguments(size, "int32", np.random.default_rng(1))
    timers = workload.reference_timers(args, size, "int32")
    assert set(timers) == {"naive-omp"}
    times = timers["naive-omp"](2)
    assert len(times) == 2 and all(t >= 0 for t in times)
    assert not np.array_equal(args[2] + 1, workload.answer(args, size, "int32")[2])


@needs_gxx
def test_baselines_naive_and_blas():
    gemm = get_workload("gemm-cpu")
    size = gemm.space.sizes["test"]
    args = gemm.arguments(size, "float32", np.random.default_rng(2))
    base = gemm.baselines(args, size, "float32", 3)
    assert set(base) == {"naive-omp", "numpy-blas"} and all(len(t) == 3 for t in base.values())
    assert "GFLOP/s" in gemm.baseline_metrics("numpy-blas", 1.0, size, "float32")
    fw = get_workload("floyd-warshall-cpu")
    fsize = fw.space.sizes["test"]
    fargs = fw.arguments(fsize, "int32", np.random.default_rng(0))
    assert set(fw.baselines(fargs, fsize, "int32", 2)) == {"naive-omp"}


def test_cpu_provenance():
    info = cpu_info("g++")
    assert info["gpu"] not in ("", "unknown") and info["cpu_threads"] >= 1 and info["cpu_cores"] >= 1
    if shutil.which("g++"):
        assert "g++" in info["compiler"] or "GCC" in info["compiler"]
    space = get_workload("gemm-cpu").space
    assert device_info(space)["gpu"] == info["gpu"]
    assert local_device_name(space) == info["gpu"]
    assert gpu_slug(info["gpu"]) == gpu_slug(info["gpu"]).lower()


@needs_gxx
def test_short_campaign_and_best(tmp_path):
    """A real campaign on the small size: the seeds' config first, rows and the naive baseline stored,
    and `tuner best` answering from them."""
    import tuner

    results = tmp_path / "results"
    seed = FW_SEEDS["hw3-1"]
    out = tuner.tune(
        "floyd-warshall-cpu",
        size="test",
        budget=3,
        results=results,
        first=(seed,),
        warm_start=False,
        timeout=60,
        measure_target=REAL_PROCESS,
    )
    assert out["evaluated"] == 3 and not out["failures"]
    assert set(out["baselines"]) == {"naive-omp"}
    best = tuner.best("floyd-warshall-cpu", size="test", results=results)
    assert best["provenance"]["backend"] == kt.CPU_BACKEND
    assert "naive-omp" in best["baselines"] and "Grelax/s" in best["baselines"]["naive-omp"]["ratio"]
    stored = tuner.results("floyd-warshall-cpu", size="test", results=results)
    assert seed in [json.loads(c) for c in stored["config"]]
    assert set(stored["backend"]) == {kt.CPU_BACKEND} and set(stored["status"]) == {"ok"}


@needs_gxx
def test_campaign_rows_are_keyed_by_the_cpu(tmp_path):
    import tuner

    results = tmp_path / "results"
    out = tuner.tune(
        "gemm-cpu", size="test", budget=1, results=results, warm_start=False, timeout=60, measure_target=REAL_PROCESS
    )
    model = cpu_info()["gpu"]
    assert out["gpu"] == model
    assert (results / gpu_slug(model) / "gemm-cpu").is_dir()
