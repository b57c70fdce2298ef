"""Every kernel compiles alone with nvcc for sm_90, for every stored best config and a sample of each
space, so a broken kernel fails CI on a machine without a GPU (nvcc is there).

The builds are the test's time (one to three seconds each): a test of many is split into parametrized parts
(every config in exactly one part, `part::PARTS`), so that pytest-xdist spreads them over the cores instead of
one process compiling a hundred while the others wait at the end of the run. Within a test, its builds run
side by side (`BUILDS_AT_ONCE` nvcc processes, each still one config alone in a folder of its own): a core left
idle by the other test process (a test waiting on its workers, the end of the run) compiles too."""

import json
import os
import random
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import pytest
import yaml

from tuner.locations import builtin_space
from tuner.measure import kt
from tuner.store import config_medians, load_evaluations
from tuner.workloads import BUILTINS, get_workload

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


BUILDS_AT_ONCE = min(4, os.cpu_count() or 1)  # nvcc is one process a build, on one core


def build_command(space, dtype, config, folder, spills=False) -> list[str]:
    """What Kernel Tuner does: the config as #defines in front of the source; the dtype's defines too; built to
    a cubin for sm_90, as its pycuda backend builds a kernel (`nvcc --cubin`: the device code only; `-c` would
    also build the host side, 4x the time for nothing a kernel runs). CPU code (a space with `compiler: g++`)
    is built by the system compiler, as its campaigns build it. `spills`: ptxas says what it used (-v)."""
    folder.mkdir(parents=True, exist_ok=True)
    if space.on_cpu:
        src = folder / "k.cpp"
        src.write_text(space.source_for(dtype, config))
        return [shutil.which(space.compiler) or space.compiler, "-c", "-o", str(folder / "k.o"), str(src),
                *space.compiler_options]
    src = folder / "k.cu"
    src.write_text(space.source_for(dtype, config))
    return [NVCC, "-arch=sm_90", "-cubin", "-o", str(folder / "k.cubin"), str(src), *space.compiler_options,
            *(["-Xptxas", "-v"] if spills else []), "-Werror", "all-warnings"]


def build_all(space, builds, tmp_path, spills=False) -> None:
    """Each (dtype, config) of `builds` built alone (build_command), in a folder of its own, BUILDS_AT_ONCE at a
    time; every one must build, and with `spills` none may spill registers. Every failure is named, in order."""
    builds = list(builds)
    commands = [build_command(space, dtype, config, tmp_path / str(i), spills)
                for i, (dtype, config) in enumerate(builds)]
    with ThreadPoolExecutor(BUILDS_AT_ONCE) as pool:
        outs = list(pool.map(lambda cmd: subprocess.run(cmd, capture_output=True, text=True), commands))
    failed = []
    for (dtype, config), out in zip(builds, outs):
        if out.returncode != 0:
            failed.append(f"{space.workload} {dtype} {config} does not compile:\n{out.stderr[-3000:]}")
        elif spills and "0 bytes spill stores, 0 bytes spill loads" not in out.stderr:
            failed.append(f"{space.workload} {dtype} {config} spills:\n{out.stderr}")
    assert not failed, "\n".join(failed)


def sample(space, k, seed=0, dtype=None):
    """`k` configs of the dtype's search space (GEMM's int32 has no variant 5: its build fails on purpose, below)."""
    configs = [dict(zip(space.params, c)) for c in kt.searchspace(space, dtype).list]
    return random.Random(seed).sample(configs, min(k, len(configs)))


# each built-in workload and dtype, read from the space files (loading a space counts its configs)
DTYPES = [(n, d) for n in sorted(BUILTINS) for d in yaml.safe_load(builtin_space(n).read_text())["dtypes"]]


@pytest.mark.parametrize("name, dtype", DTYPES)  # a workload's dtypes apart: each dtype's sample is its own
def test_sample_of_space_compiles(name, dtype, tmp_path):
    space = get_workload(name).space
    build_all(space, [(dtype, config) for config in sample(space, 6, dtype=dtype)], tmp_path)


@cache
def gemm_configs() -> tuple[dict, ...]:
    """GEMM's valid configs (whatever the dtype), listed once a process for the tests that pick from them."""
    space = get_workload("gemm").space
    return tuple(dict(zip(space.params, c)) for c in kt.searchspace(space).list)


@cache
def stored_bests(name: str, dtype: str) -> tuple[str, ...]:
    """The stored best config of each size and GPU of `name` in `dtype` (canonical JSON), each once, sorted."""
    df = load_evaluations(name)
    ok = df[df.status == "ok"] if not df.empty else df
    ok = ok[ok.dtype == dtype] if not ok.empty else ok
    if ok.empty:
        return ()
    space = get_workload(name).space
    bests = set()  # many sizes and GPUs share a best config: each is compiled once
    for _, group in ok.groupby(["size_vars", "gpu"]):
        bests.add(config_medians(group, space.maximize).index[0])
    return tuple(sorted(bests))


BEST_PARTS = {("gemm", "float32"): 4}  # GEMM float32 has some 50 stored bests; any other, a few


@pytest.mark.parametrize(  # one test a workload, dtype and part: xdist spreads the builds
    "name, dtype, part", [(n, d, p) for n, d in DTYPES for p in range(BEST_PARTS.get((n, d), 1))]
)
def test_stored_best_configs_compile(name, dtype, part, tmp_path):
    bests = stored_bests(name, dtype)
    if not bests:
        pytest.skip(f"nothing of {name} {dtype} stored yet")
    space = get_workload(name).space
    build_all(space, [(dtype, json.loads(best)) for best in bests[part :: BEST_PARTS.get((name, dtype), 1)]], tmp_path)


@pytest.mark.parametrize("tile", [(32, 32), (32, 64), (64, 32), (128, 128)])
def test_gemm_split_k_and_small_tile_corners_compile(tile, tmp_path):
    """GEMM's corners a sample may miss: each tile below 64x64 unsplit, and split-K at its largest split
    with each reduction (atomics, in-order partials) on each small tile and on 128x128; int32 for 32x32."""
    space = get_workload("gemm").space
    most = max(space.params["split_k"])
    of_tile = [c for c in gemm_configs() if c["variant"] == 4 and (c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"]) == tile]
    corners = [c for c in of_tile if c["split_k"] == 1][:1] if tile != (128, 128) else []
    corners += [next(c for c in of_tile if (c["split_k"], c["split_reduce"]) == (most, r)) for r in (0, 1)]
    build_all(space, [(dtype, config) for config in corners
                      for dtype in (("float32", "int32") if tile == (32, 32) else ("float32",))], tmp_path)


def k_group_picks() -> list[dict]:
    """Each k-grouped shape's config with the most shared memory (test_gemm_k_groups_compile_without_spills)."""
    configs = [c for c in gemm_configs() if c["k_groups"] > 1]
    picks = {}
    for c in sorted(configs, key=lambda c: (c["split_k"], c["tile_k"], c["pad_a"])):
        shape = (c["variant"], c["k_groups"], c["block_size_x"], c["block_size_y"], c["tile_m"], c["tile_n"], c["split_k"] > 1)
        picks[shape] = c  # the last of each: the largest split, BK and padding (the most shared memory)
    assert {(v, k) for v, k, *_ in picks} == {(4, 2), (4, 4), (4, 8), (5, 2)} and len(picks) >= 12
    return list(picks.values())


K_GROUP_PARTS = 3


@pytest.mark.parametrize("part", range(K_GROUP_PARTS))
def test_gemm_k_groups_compile_without_spills(part, tmp_path):
    """K split inside the block (k_groups 2, 4 and 8; 2 on the tensor cores): each block tile and thread shape
    it allows, unsplit and at its largest split, float32 (and int32 for 32x32), to a cubin for sm_90 within 48 KB
    of static shared memory (the groups' tiles, then their outputs summed) and without spilling (512 threads at
    most)."""
    space = get_workload("gemm").space

    def dtypes(c):  # int32 too for the 32x32 block tile
        tile = (c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"])
        return ("float32", "int32") if tile == (32, 32) else ("float32",)

    build_all(space, [(dtype, c) for c in k_group_picks()[part::K_GROUP_PARTS] for dtype in dtypes(c)], tmp_path,
              spills=True)


def variant_5_picks() -> list[dict]:
    """Each variant 5 shape's config with the deepest pipeline (test_gemm_variant_5_compiles_without_spills)."""
    configs = [c for c in gemm_configs() if c["variant"] == 5]
    picks = {}
    for c in sorted(configs, key=lambda c: (c["stages"] * c["tile_k"], c["rn_sum"], -c["split_k"])):
        shape = (c["block_size_x"], c["block_size_y"], c["tile_m"], c["tile_n"], c["split_k"] > 1, c["k_groups"])
        picks[shape] = c  # the last of each: deepest pipeline, rn_sum 1 if any, the smallest split
    assert len(picks) >= 15
    return list(picks.values())


VARIANT_5_PARTS = 2


@pytest.mark.parametrize("part", range(VARIANT_5_PARTS))
def test_gemm_variant_5_compiles_without_spills(part, tmp_path):
    """Variant 5 (3xTF32 tensor cores, 64-255 registers a thread): each block and warp tile at the largest
    pipeline the space gives it, rn_sum 1 where allowed, and a split of each split tile, to a cubin for sm_90
    without spilling (ptxas -v). benchmarks/gemm_dev.py measures them all; all 119 ungrouped ones were compiled so too."""
    space = get_workload("gemm").space
    build_all(space, [("float32", config) for config in variant_5_picks()[part::VARIANT_5_PARTS]], tmp_path,
              spills=True)


def test_gemm_variant_5_int32_build_fails_naming_why(tmp_path):
    """int32's restrictions leave variant 5 out of its campaigns; built anyway, it fails saying why."""
    space = get_workload("gemm").space
    config = next(c for c in gemm_configs() if c["variant"] == 5)
    src = tmp_path / "k.cu"
    src.write_text(space.source_for("int32", config))
    out = subprocess.run([NVCC, "-arch=sm_90", "-c", "-o", str(tmp_path / "k.o"), str(src), *space.compiler_options],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "variant 5 (3xTF32 tensor cores) is float32 only" in out.stderr
