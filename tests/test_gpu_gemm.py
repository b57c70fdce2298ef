"""On the GPU: the seeds' versions, a sample of the register-tiled variant and all its 64x64 tiles, through
the same isolated worker as a campaign, verified against numpy at awkward shapes (not multiples of any tile, unaligned
rows, K smaller than a tile, 1x1x1) for float32 and int32; then split-K (every split, both reductions), the tiles
below 64x64 and K split inside the block (k_groups), and split-K's workspace launch after launch. Skipped where no CUDA GPU is found."""

import random

import pytest

from tests.gpu_checks import failed_configs
from tuner.measure import kt
from tuner.workloads import get_workload

pytestmark = pytest.mark.gpu

SHAPES = [(1000, 1000, 1000), (777, 1025, 333), (1, 1, 1), (300, 260, 3)]


def sample_configs(space, seed=0):
    """8 configs of variants 1-2, 6 of variant 3, 12 of variant 4 (4 with scalar loads or one stage), and
    every 64x64 block tile (4x4 outputs per thread, the small shapes' tile)."""
    names = list(space.params)
    configs = [tuple(c) for c in kt.searchspace(space).list if dict(zip(names, c))["split_k"] == 1]
    by_variant = {v: [c for c in configs if dict(zip(names, c))["variant"] == v] for v in (1, 2, 3, 4)}
    rnd = random.Random(seed)
    v4 = by_variant[4]
    edges = [c for c in v4 if dict(zip(names, c))["vector"] == 1 or dict(zip(names, c))["double_buffer"] == 0]
    small_tiles = [c for c in v4 if dict(zip(names, c))["tile_m"] == 4 and dict(zip(names, c))["block_size_y"] == 16]
    sampled = rnd.sample(by_variant[1] + by_variant[2], 8) + rnd.sample(by_variant[3], 6) + rnd.sample(v4, 8) + rnd.sample(edges, 4)
    return sampled + [c for c in small_tiles if c not in sampled]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_sampled_configs_match_numpy(m, n, k, dtype):
    space = get_workload("gemm").space
    size = {"m": m, "n": n, "k": k}
    configs = sample_configs(space)
    bad = failed_configs("gemm", size, dtype, configs)
    assert not bad, f"{len(bad)} of {len(configs)} configs failed at {m}x{n}x{k} {dtype}: {bad[:5]}"


def test_cublas_baseline_is_fp32_and_verified():
    """The baseline checks cuBLAS's product against the float64 reference (TF32 would fail it)."""
    workload = get_workload("gemm")
    size = {"m": 512, "n": 256, "k": 1024}
    import numpy as np

    args = workload.arguments(size, "float32", np.random.default_rng(0))
    out = workload.baselines(args, size, "float32", repeats=3)
    assert len(out["cublas"]) == 3 and all(t > 0 for t in out["cublas"])


# ---- split-K and the tiles below 64x64 ------------------------------------------------------------------

SPLIT_SHAPES = [(777, 1025, 333), (300, 260, 3), (33, 31, 1000)]


def split_configs(space, seed=1):
    """One config of each split_k > 1 with each split_reduce, each tile below 64x64 unsplit and split, and each
    k_groups > 1 with each tile it allows, unsplit and split (variant 4: int32 too; variant 5 has its own tests
    below)."""
    configs = [dict(zip(space.params, c)) for c in kt.searchspace(space).list if dict(zip(space.params, c))["variant"] == 4]
    rnd = random.Random(seed)
    picked = []
    for split in space.params["split_k"][1:]:
        for reduce in (0, 1):
            picked.append(rnd.choice([c for c in configs if (c["split_k"], c["split_reduce"]) == (split, reduce)]))
    for tile in ((32, 32), (32, 64), (64, 32)):
        of_tile = [c for c in configs if c["variant"] == 4 and (c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"]) == tile]
        picked += [rnd.choice([c for c in of_tile if c["split_k"] == 1]), rnd.choice([c for c in of_tile if c["split_k"] > 1])]
    grouped = {}
    for c in configs:
        if c["k_groups"] > 1:
            tile = (c["block_size_y"] * c["tile_m"], c["block_size_x"] * c["tile_n"])
            grouped.setdefault((c["k_groups"], tile, c["split_k"] > 1), []).append(c)
    picked += [rnd.choice(group) for _, group in sorted(grouped.items())]
    return [tuple(c[p] for p in space.params) for c in picked]


@pytest.mark.parametrize("m, n, k", SPLIT_SHAPES)
def test_split_k_and_small_tiles_match_numpy(m, n, k):
    """Slices that are empty (K = 3), unaligned rows, more slices than output tiles; float32 at every shape,
    int32 (exact: a lost or doubled partial shows) at the first."""
    space = get_workload("gemm").space
    configs = split_configs(space)
    for dtype in ("float32", "int32") if (m, n, k) == SPLIT_SHAPES[0] else ("float32",):
        bad = failed_configs("gemm", {"m": m, "n": n, "k": k}, dtype, configs)
        assert not bad, f"{len(bad)} of {len(configs)} configs failed at {m}x{n}x{k} {dtype}: {bad[:5]}"


# ---- variant 5: 3xTF32 tensor cores (float32 only) ------------------------------------------------------


def variant_5_configs(space):
    """Each block and warp tile with each BK (the pipeline varies along), rn_sum 1 where allowed, each split with
    a small tile, and 2 groups over K of each tile that allows them."""
    configs = [dict(zip(space.params, c)) for c in kt.searchspace(space).list]
    v5 = [c for c in configs if c["variant"] == 5]
    picks = {}
    for c in v5:
        shape = (c["block_size_x"], c["block_size_y"], c["tile_m"], c["tile_n"], c["tile_k"], c["rn_sum"], c["split_k"] > 1,
                 c["k_groups"])
        picks.setdefault(shape, c)
    splits = {}
    for c in v5:
        if c["split_k"] > 1:
            splits.setdefault(c["split_k"], c)
    return [tuple(c[p] for p in space.params) for c in [*picks.values(), *splits.values()]]


@pytest.mark.parametrize("m, n, k", SHAPES + [(130, 70, 2048)])
def test_variant_5_matches_numpy(m, n, k):
    """Every edge: unaligned rows (K, N not multiples of 4: 4-byte copies), partial tiles, K below a tile,
    1x1x1; and a long K, where 3xTF32's error would show first, against the same K-fitted tolerance."""
    space = get_workload("gemm").space
    configs = variant_5_configs(space)
    bad = failed_configs("gemm", {"m": m, "n": n, "k": k}, "float32", configs)
    assert not bad, f"{len(bad)} of {len(configs)} configs failed at {m}x{n}x{k}: {bad[:5]}"


def test_variant_5_int32_is_a_recorded_failure():
    space = get_workload("gemm").space
    config = variant_5_configs(space)[0]
    bad = failed_configs("gemm", {"m": 64, "n": 64, "k": 64}, "int32", [config])
    assert len(bad) == 1 and bad[0][0] != "ok"


@pytest.mark.parametrize("variant, split_reduce", [(4, 0), (4, 1), (5, 1)])
def test_split_k_launch_after_launch_leaves_the_workspace_zero(variant, split_reduce):
    """A campaign times many launches on the same buffers: each must give C afresh (C filled with NaN before
    each) and leave accum and the counters zero for the next."""
    cp = pytest.importorskip("cupy")
    import numpy as np

    workload = get_workload("gemm")
    space = workload.space
    config = {"variant": 4, "block_size_x": 16, "block_size_y": 16, "tile_m": 4, "tile_n": 4, "tile_k": 16,
              "warp_x": 8, "double_buffer": 1, "pad_a": 4, "vector": 4, "unroll": 0, "split_k": 8,
              "split_reduce": split_reduce, "stages": 0, "rn_sum": 0, "k_groups": 1}
    if variant == 5:  # 2 x 2 warps of 32 x 32: a 64 x 64 tile
        config.update(variant=5, block_size_x=8, block_size_y=16, tile_n=8, double_buffer=0, pad_a=0, vector=1,
                      stages=2)
    assert space.is_valid(config)
    size = {"m": 200, "n": 300, "k": 1500}
    args = workload.arguments(size, "float32", np.random.default_rng(2))
    expected = workload.answer(args, size, "float32")[2]
    atol = workload.tolerances(size, "float32")[0]
    source = space.source_for("float32", config)
    kernel = cp.RawModule(code=source, options=tuple(space.compiler_options)).get_function("gemm")
    dev = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    grid = tuple(space.grid_dims(config, size))
    for _ in range(3):
        dev[2].fill(cp.nan)
        kernel(grid, space.block_dims(config), tuple(dev))
        cp.cuda.Device().synchronize()
        assert np.allclose(cp.asnumpy(dev[2]), expected, rtol=0, atol=atol)
        assert not cp.asnumpy(dev[6]).any() and not cp.asnumpy(dev[8]).any()
