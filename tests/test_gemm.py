"""GEMM workload without a GPU: the space and the seeds' points in it, split-K and the small tiles (their
restrictions, launch geometry and workspace, a numpy model of the K slices), the MxNxK sizes, the K-fitted
tolerance, the numpy reference, and the brute force recorded on the H100 replayed in simulation mode."""

import importlib.util
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from tests.recorded import is_recorded, recording
from tuner.answers.best_config import best
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.cli import main
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.replay import recording_searchspace
from tuner.store import confirmations as stored_confirmations
from tuner.store import load_baselines, load_evaluations, results_root
from tuner.workloads import get_workload
from tuner.workloads.gemm import SEED_VERSIONS, SPLIT_TILE, float32_tolerance, k_slices, split_k_product

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
BRUTE = "2048x2048x2048"
GEMM = get_workload("gemm")
RECORDED = is_recorded(H100, "gemm", BRUTE, "float32")


def test_space_holds_the_seeds_versions_and_only_sound_variant_4_configs():
    space = GEMM.space
    configs = [dict(zip(space.params, c)) for c in kt.searchspace(space).list]
    simt = [c for c in configs if c["variant"] <= 4]
    unsplit = [c for c in simt if c["split_k"] == 1 and c["k_groups"] == 1]
    # TPE's space. Variant 5 (tensor cores) adds 151 (test below); K split inside the block, 995 (32 of them on
    # the tensor cores)
    assert 300 <= len(unsplit) <= 320 and len(simt) == 2233 and len(configs) == 2384
    assert sum(c["k_groups"] > 1 for c in configs) == 995
    for name, seed in SEED_VERSIONS.items():
        assert seed in configs, name
    for c in simt:
        threads = c["block_size_x"] * c["block_size_y"]
        assert threads * c["k_groups"] <= 1024
        if c["variant"] == 4:
            bm, bn = c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"]
            smem = (1 + c["double_buffer"]) * c["tile_k"] * c["k_groups"] * (bm + c["pad_a"] + bn) * 4
            assert smem <= 48 * 1024 and threads in (64, 128, 256)
            assert (c["k_groups"] - 1) * bm * bn * 4 <= 48 * 1024  # the groups' outputs, summed at the end
            if c["k_groups"] == 1:  # with groups, BK 8 leaves some threads idle on the loads
                assert (bm * c["tile_k"] // c["vector"]) % threads == 0 and (bn * c["tile_k"] // c["vector"]) % threads == 0
            assert bm * bn >= 4096 or (c["tile_m"], c["tile_n"], c["double_buffer"], c["vector"]) == (4, 4, 1, 4)
        elif c["variant"] == 3:
            assert c["block_size_y"] * c["tile_m"] == c["block_size_x"]
        if c["split_k"] > 1:  # register-tiled, double-buffered, vector loads, at most 128x128, 32x32 at least
            assert c["variant"] == 4 and c["double_buffer"] == 1 and c["vector"] == 4
            assert SPLIT_TILE <= min(bm, bn) and bm * bn <= 128 * 128
        else:
            assert c["split_reduce"] == 0
        if c["k_groups"] > 1 and c["variant"] == 4:  # double-buffered, vector loads, at most 64x128, 512 threads
            assert c["double_buffer"] == 1 and c["vector"] == 4
            assert bm * bn <= 64 * 128 and threads * c["k_groups"] <= 512
    tiles = {(c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"]) for c in configs if c["variant"] == 4}
    assert {(32, 32), (32, 64), (64, 32)} <= tiles  # below 64x64
    splits = {(c["split_k"], c["split_reduce"]) for c in simt}
    assert {(s, r) for s in space.params["split_k"] for r in (0, 1) if s > 1} <= splits


def test_variant_5_configs_are_whole_warp_tiles_of_mma_tiles_in_static_shared_memory():
    """Variant 5 (3xTF32 tensor cores): 4 or 8 warps of 4 x 8 threads, warp tiles of 32 or 64 x 32 or 64
    outputs (whole m16n8 tiles; columns in 32s for the B swizzle), the cp.async ring within 48 KB of static
    shared memory (less split-K's flag; two groups' rings with k_groups 2, of 4 warps each), variant 4's
    options at their first values and its own at theirs elsewhere; a sub-space of about 150 configs, split
    and grouped ones among them."""
    space = GEMM.space
    configs = [dict(zip(space.params, c)) for c in kt.searchspace(space).list]
    v5 = [c for c in configs if c["variant"] == 5]
    assert len(v5) == 151 and sum(c["split_k"] > 1 for c in v5) == 65 and sum(c["k_groups"] > 1 for c in v5) == 32
    for c in configs:
        if c["variant"] != 5:
            assert (c["stages"], c["rn_sum"]) == (0, 0)
            continue
        warps_m, warps_n = c["block_size_y"] / 8, c["block_size_x"] / 4
        assert warps_m == int(warps_m) and warps_n == int(warps_n) and warps_m * warps_n in (4, 8)
        wtm, wtn = 8 * c["tile_m"], 4 * c["tile_n"]
        assert wtm in (32, 64) and wtn in (32, 64)
        bm, bn = c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"]
        assert (bm, bn) == (warps_m * wtm, warps_n * wtn) and bm * bn <= 256 * 128
        assert c["stages"] * c["tile_k"] * c["k_groups"] * (bm + bn) * 4 + 128 * (c["split_k"] > 1) <= 48 * 1024
        assert c["k_groups"] == 1 or (c["k_groups"] == 2 and warps_m * warps_n == 4)
        assert (c["warp_x"], c["double_buffer"], c["pad_a"], c["vector"], c["unroll"]) == (8, 0, 0, 1, 0)
        assert c["rn_sum"] == 0 or wtm * wtn <= 64 * 32
        if c["split_k"] > 1:
            assert c["split_reduce"] == 1 and bm * bn <= 128 * 128 and SPLIT_TILE <= min(bm, bn)
    tiles = {(c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"]) for c in v5}
    assert tiles == {(64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128)}
    assert {(c["tile_k"], c["stages"]) for c in v5} >= {(8, 4), (16, 2), (16, 3), (32, 2)}


def test_the_defaults_keep_every_stored_config_in_the_space():
    """Every config the store holds from before split-K existed reads as split_k 1, split_reduce 0, the kernel
    it ran, and is still a valid config of the space (but one: scalar loads without the padded layout,
    measured before a restriction older than split-K left them out); those measured since are configs of it."""
    from tuner.store import read_parts, results_root

    space = GEMM.space
    assert space.defaults == {"split_k": 1, "split_reduce": 0, "stages": 0, "rn_sum": 0, "k_groups": 1}
    stored = read_parts("*/gemm/evaluations/*.parquet", results_root()).config.unique()
    if not len(stored):
        pytest.skip("nothing stored")
    before = [json.loads(t) for t in stored if '"split_k"' not in t]
    assert before
    for config in before:
        completed = space.complete(config)
        assert completed["split_k"] == 1 and completed["split_reduce"] == 0 and completed["stages"] == 0
        if config["vector"] == 1 and config["pad_a"] == 0 and config["variant"] == 4:
            continue
        assert space.checked(config) == completed, config
    for text in (t for t in stored if '"split_k"' in t):
        assert space.checked(json.loads(text)) == space.complete(json.loads(text))
    source = space.source_for("float32", {})
    for name, value in space.defaults.items():  # the kernel's own defaults
        assert f"#define {name} {value}\n" in source


def test_grid_covers_the_matrix_for_every_variant():
    space = GEMM.space
    size = {"m": 777, "n": 1025, "k": 333}
    for c in (SEED_VERSIONS["naive"], SEED_VERSIONS["merged x16"]):
        gx, gy, _ = space.grid_dims(c, size)
        assert gx * c["block_size_x"] * c["tile_n"] >= 1025 and gy * c["block_size_x"] >= 777
    tiled = {**SEED_VERSIONS["naive"], "variant": 4, "block_size_x": 32, "block_size_y": 8, "tile_m": 16,
             "tile_n": 8, "tile_k": 8, "double_buffer": 1, "vector": 4}
    assert space.grid_dims(tiled, size) == [5, 7, 1]  # ceil(1025 / 256), ceil(777 / 128)
    tensor = {**tiled, "variant": 5, "block_size_x": 16, "block_size_y": 16, "tile_m": 8, "tile_n": 16, "tile_k": 16,
              "double_buffer": 0, "vector": 1, "stages": 2}  # 2 x 4 warps of 64 x 64: a 128 x 256 block tile
    assert space.is_valid(tensor) and space.grid_dims(tensor, size) == [5, 7, 1]


def test_split_k_launch_geometry_and_workspace_cover_every_tile_and_slice():
    """A split config launches split_k blocks per output tile (grid z), and the workspace the workload makes
    holds a counter for every tile and a partial matrix for every slice, for every split config and shape."""
    space = GEMM.space
    split = [dict(zip(space.params, c)) for c in kt.searchspace(space).list if dict(zip(space.params, c))["split_k"] > 1]
    for m, n in ((1, 1), (777, 1025), (256, 2048), (33, 31)):
        size = {"m": m, "n": n, "k": 64}
        accum, partials, counters = GEMM.split_workspace(m, n, "float32")
        assert accum.shape == (m, n) and not accum.any() and not counters.any() and counters.dtype == np.int32
        for c in split:
            gx, gy, gz = space.grid_dims(c, size)
            assert gz == c["split_k"] and gz * m * n <= partials.size
            assert gx * c["block_size_x"] * c["tile_n"] >= n and gy * c["block_size_y"] * c["tile_m"] >= m
            assert gx * gy <= counters.size
    tiled = {**SEED_VERSIONS["naive"], "variant": 4, "block_size_x": 16, "block_size_y": 16, "tile_m": 4, "tile_n": 4,
             "tile_k": 16, "double_buffer": 1, "vector": 4, "split_k": 8, "split_reduce": 1}
    assert space.is_valid(tiled) and space.grid_dims(tiled, {"m": 256, "n": 256, "k": 2048}) == [4, 4, 8]


@pytest.mark.parametrize("k, tile_k, split_k", [(2048, 16, 8), (1000, 8, 3), (333, 16, 16), (3, 8, 4), (1, 16, 2),
                                                 (4096, 8, 16), (257, 8, 4)])
def test_k_slices_cover_k_once_in_whole_tiles(k, tile_k, split_k):
    slices = k_slices(k, tile_k, split_k)
    assert len(slices) == split_k and slices[0][0] == 0 and slices[-1][1] == k
    for (b0, e0), (b1, _) in zip(slices, slices[1:]):
        assert e0 == b1 and b0 <= e0  # contiguous, in order; a slice may be empty
    assert all((b % tile_k == 0 or b == k) and (e % tile_k == 0 or e == k) for b, e in slices)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_split_k_model_agrees_with_the_reference_and_a_lost_slice_fails(dtype):
    """The kernel's decomposition in numpy (each slice's partial product, summed in slice order) passes the
    check a campaign makes; the same with one slice's partial lost (a wrong reduction) fails it."""
    size = {"m": 65, "n": 70, "k": 1000}
    args = GEMM.arguments(size, dtype, np.random.default_rng(5))
    expected = GEMM.answer(args, size, dtype)[2]
    atol, _ = GEMM.tolerances(size, dtype)
    for tile_k, split in ((8, 3), (16, 16), (16, 2)):
        got = split_k_product(args[0], args[1], tile_k, split)
        assert got.dtype == np.dtype(dtype) and np.allclose(got, expected, rtol=0, atol=atol)
        begin, end = k_slices(1000, tile_k, split)[1]
        lost = got - args[0][:, begin:end] @ args[1][begin:end, :]
        assert not np.allclose(lost, expected, rtol=0, atol=atol)


def test_sizes_in_mxnxk_notation():
    space = GEMM.space
    assert space.resolve_size("1024x512x2048", GEMM.parse_size) == ("1024x512x2048", {"m": 1024, "n": 512, "k": 2048})
    assert space.resolve_size("13X7x5", GEMM.parse_size)[1] == {"m": 13, "n": 7, "k": 5}
    assert sum(1 for name in space.sizes if set(name.split("x")) <= {"256", "512", "1024", "2048"}) == 64
    with pytest.raises(TunerError, match="impossible size"):
        space.resolve_size("0x5x5", GEMM.parse_size)
    with pytest.raises(TunerError, match="unknown size"):
        space.resolve_size("1024x512", GEMM.parse_size)


def test_reference_matches_numpy_and_int32_is_exact():
    rng = np.random.default_rng(3)
    size = {"m": 37, "n": 29, "k": 53}
    args = GEMM.arguments(size, "int32", rng)
    a, b, c, m, n, k = args[:6]
    assert (a.shape, b.shape, c.shape, int(m), int(n), int(k)) == ((37, 53), (53, 29), (37, 29), 37, 29, 53)
    answer = GEMM.answer(args, size, "int32")
    expected = answer[2]
    # split-K's workspace: accum and counters checked to be zero again after a launch, partials not checked
    assert len(answer) == len(args) == 9 and answer[7] is None
    assert not answer[6].any() and answer[6].shape == (37, 29) and not answer[8].any()
    assert expected.dtype == np.int32
    assert np.array_equal(expected, a.astype(np.int64) @ b.astype(np.int64))
    assert GEMM.tolerances(size, "int32") == (0.0, 0.0)
    args = GEMM.arguments(size, "float32", rng)
    assert np.allclose(GEMM.answer(args, size, "float32")[2], args[0].astype(np.float64) @ args[1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("k", [1, 3, 333, 2048, 4096])
def test_float32_tolerance_accepts_float32_sums_and_catches_a_dropped_term(k):
    rng = np.random.default_rng(k)
    size = {"m": 64, "n": 48, "k": k}
    a, b, *_ = GEMM.arguments(size, "float32", rng)
    atol, rtol = GEMM.tolerances(size, "float32")
    assert atol == float32_tolerance(k) and rtol == 0.0
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # float32 accumulation in the plain order a kernel uses: one term at a time
    acc = np.zeros((64, 48), dtype=np.float32)
    for i in range(k):
        acc += np.outer(a[:, i], b[i, :]).astype(np.float32)
    assert np.allclose(acc, exact, rtol=0, atol=atol)
    dropped = acc - np.outer(a[:, k // 2], b[k // 2, :]).astype(np.float32)
    assert not np.allclose(dropped, exact, rtol=0, atol=atol)


@pytest.mark.skipif(not RECORDED, reason="no recorded gemm brute force in results/")
def test_brute_force_replay_finds_the_stored_best():
    out = run_campaign(CampaignRequest(workload="gemm", size=BRUTE, strategy="brute_force", simulate=True, quiet=True))
    space = GEMM.space
    assert out.simulated and out.gpu == H100
    stored = best("gemm", BRUTE, "float32", gpu=H100)
    held = recording_searchspace(space, recording(H100, "gemm", BRUTE, "float32")).size
    assert out.evaluated == held  # recorded before split-K: the configs it holds, split_k 1
    if any("near-ties" in note for note in stored["notes"]):
        # a confirmation chose among the near-ties since: the replay's top row is the leader it measured again
        from tuner.campaign.confirmation import FINALIST_WITHIN

        assert stored["value"] <= out.best["value"] <= stored["value"] / (1 - FINALIST_WITHIN)
    else:
        assert out.best["config"] == stored["config"]
        assert out.best["value"] == pytest.approx(stored["value"])


@pytest.mark.skipif(not RECORDED, reason="no recorded gemm brute force in results/")
def test_tpe_replay_stays_in_the_space():
    out = run_campaign(CampaignRequest(workload="gemm", size=BRUTE, strategy="tpe", max_evals=25, seed=1,
                                       simulate=True, quiet=True))
    assert 0 < out.evaluated <= 25 and GEMM.space.is_valid(out.best["config"])


@pytest.mark.skipif(not RECORDED, reason="no recorded gemm campaign in results/")
def test_cli_best_answers_for_a_grid_shape(capsys):
    assert main(["best", "gemm", "--size", "1024x512x2048", "--gpu", H100, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpu"] == H100 and doc["dtype"] == "float32" and doc["fallback"] == "exact"
    assert doc["size_vars"] == {"m": 1024, "n": 512, "k": 2048}
    assert GEMM.space.is_valid(doc["config"]) and doc["value"] > 0 and "cublas" in doc["baselines"]


@pytest.mark.skipif(not RECORDED, reason="no recorded gemm campaign in results/")
@pytest.mark.parametrize("gpu", [H100, H200])
def test_every_grid_shape_has_its_own_tuned_best(gpu):
    """The seeds' 64 shapes were each tuned on the H100 and on the H200 (benchmarks/gemm/grid.py: at least 12
    configs each), so `tuner best` answers each from its own measurements, with cuBLAS of the same shape."""
    evaluations, baselines = load_evaluations("gemm"), load_baselines("gemm")
    confirmations = stored_confirmations.load("gemm", results_root())
    ok = evaluations[(evaluations.gpu == gpu) & (evaluations.dtype == "float32") & (evaluations.status == "ok")]
    dims = (256, 512, 1024, 2048)
    for m, n, k in itertools.product(dims, dims, dims):
        size = {"m": m, "n": n, "k": k}
        assert ok[ok.size_vars == json.dumps(size, sort_keys=True)].config.nunique() >= 12, size
        doc = best("gemm", f"{m}x{n}x{k}", "float32", gpu=gpu, evaluations=evaluations, baselines=baselines,
                   confirmations=confirmations)
        assert doc["fallback"] == "exact" and doc["size_vars"] == size
        assert GEMM.space.is_valid(doc["config"]) and doc["value"] > 0
        assert doc["baselines"]["cublas"]["ratio"]["GFLOP/s"] > 0


def grid_module():
    """benchmarks/gemm/grid.py, a script outside the package, as a module."""
    spec = importlib.util.spec_from_file_location("grid", Path(__file__).parents[1] / "benchmarks/gemm/grid.py")
    grid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grid)
    return grid


@pytest.mark.skipif(not RECORDED, reason="no recorded gemm campaign in results/")
def test_the_grid_starts_a_thin_shape_with_small_tiles_split_over_k():
    """benchmarks/gemm/grid.py: a thin shape's campaign begins with valid, distinct configs that fill the SMs
    by splitting K (the small register tiles, over 2 and 4 thread groups inside the block too, and the tensor
    cores' 64x64 tile among them); a square shape whose tiles fill the SMs gets no small tiles and no groups."""
    grid = grid_module()
    evaluations = load_evaluations("gemm")
    thin = grid.first_configs(evaluations, {"m": 256, "n": 256, "k": 2048}, H200, GEMM.space)
    assert thin and all(GEMM.space.is_valid(c) for c in thin)
    assert len({json.dumps(c, sort_keys=True) for c in thin}) == len(thin)
    split = [c for c in thin if c["split_k"] > 1]
    assert {grid.tile(c) for c in split if c["variant"] == 4} >= set(grid.SMALL_TILES)
    assert any(c["variant"] == 5 and grid.tile(c) == (64, 64) for c in split)
    grouped = {(grid.tile(c), c["k_groups"]) for c in split if c["k_groups"] > 1}
    assert {(t, 2) for t in grid.SMALL_TILES} <= grouped and ((32, 32), 4) in grouped
    tiles = {grid.tile(c): (256 // grid.tile(c)[0]) * (256 // grid.tile(c)[1]) for c in split}
    assert all(tiles[grid.tile(c)] * c["split_k"] >= 0.9 * grid.SMS for c in split)  # every SM busy
    square = grid.first_configs(evaluations, {"m": 2048, "n": 2048, "k": 2048}, H200, GEMM.space)
    assert square and not {grid.tile(c) for c in square if c["variant"] == 4} & {(32, 32), (32, 64), (64, 32)}
    assert all(c["k_groups"] == 1 for c in square)


def test_k_groups_launch_as_the_third_block_dimension():
    """launch.block names k_groups third: Kernel Tuner launches the groups as threadIdx.z, and so do the tools
    that launch a config themselves (Space.block_dims); a recording without it reads as one group."""
    space = GEMM.space
    grouped = {"block_size_x": 8, "block_size_y": 8, "k_groups": 4}
    assert space.block_names == ["block_size_x", "block_size_y", "k_groups"]
    assert space.block_dims(grouped) == (8, 8, 4)
    assert space.block_dims(space.complete({"block_size_x": 16, "block_size_y": 8})) == (16, 8, 1)


@pytest.mark.skipif(not RECORDED, reason="no recorded gemm campaign in results/")
def test_the_grid_groups_a_shapes_own_best_on_a_rerun():
    """grid.py's grouped_counterparts: a 64x128 config on a thin shape, with 2 groups over K: at its BK 16 (which
    fills shared memory unsplit) and at the first BK that can also split (8), split to fill the SMs; none on a
    square shape."""
    grid = grid_module()
    wide = GEMM.space.complete({"variant": 4, "block_size_x": 32, "block_size_y": 8, "tile_m": 8, "tile_n": 4,
                                "tile_k": 16, "warp_x": 16, "double_buffer": 1, "pad_a": 0, "vector": 4,
                                "unroll": 0})
    assert GEMM.space.is_valid(wide)
    thin = {"m": 512, "n": 512, "k": 2048}
    grouped = grid.grouped_counterparts(wide, thin, GEMM.space)
    assert grouped and all(GEMM.space.is_valid(c) and c["k_groups"] > 1 for c in grouped)
    assert {(c["k_groups"], c["tile_k"], c["split_k"] > 1) for c in grouped} == {(2, 16, False), (2, 8, True)}
    split = [c for c in grouped if c["split_k"] > 1]
    assert all(grid.output_tiles(thin, 64, 128) * c["split_k"] >= 0.9 * grid.SMS for c in split)
    assert grid.grouped_counterparts(wide, {"m": 2048, "n": 2048, "k": 2048}, GEMM.space) == []
    evaluations = load_evaluations("gemm")
    own = grid.own_best(evaluations, thin, H200)
    assert len(own) == 1 and GEMM.space.is_valid(GEMM.space.complete(own[0]))
    assert grid.own_best(evaluations, {"m": 3, "n": 5, "k": 7}, H200) == []
