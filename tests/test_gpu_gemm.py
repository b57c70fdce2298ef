"""On the GPU: the seeds' versions, a sample of the register-tiled variant and all its 64x64 tiles, through
the same isolated worker as a campaign, verified against numpy at awkward shapes (not multiples of any tile, unaligned
rows, K smaller than a tile, 1x1x1) for float32 and int32. Skipped where no CUDA GPU is found."""

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
    configs = [tuple(c) for c in kt.searchspace(space).list]
    names = list(space.params)
    by_variant = {v: [c for c in configs if dict(zip(names, c))["variant"] == v] for v in (1, 2, 3, 4)}
    rnd = random.Random(seed)
    v4 = by_variant[4]
    edges = [c for c in v4 if dict(zip(names, c))["vector"] == 1 or dict(zip(names, c))["double_buffer"] == 0]
    small_tiles = [c for c in v4 if dict(zip(names, c))["tile_m"] == 4]
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
