"""On the GPU: every reduction variant, through the same isolated worker as a campaign, verified against
numpy at awkward sizes. Skipped where no CUDA GPU is found; run on the GPU machine through the device tool."""

import random

import pytest

from tests.gpu_checks import failed_configs
from tuner.measure import kt
from tuner.workloads import get_workload

pytestmark = pytest.mark.gpu


def sample_configs(space, seed=0):
    """Every variant with every block size and finish; a random sample of variant 7's other options."""
    configs = [tuple(c) for c in kt.searchspace(space).list]
    names = list(space.params)
    base = [c for c in configs if dict(zip(names, c))["variant"] < 7]
    v7 = [c for c in configs if dict(zip(names, c))["variant"] == 7]
    v7_edges = [c for c in v7 if dict(zip(names, c))["block_size_x"] in (32, 1024)]
    return base + random.Random(seed).sample(v7, 40) + random.Random(seed).sample(v7_edges, 16)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("n", [1, 31, 2**22 + 123])
def test_every_variant_matches_numpy(n, dtype):
    space = get_workload("reduction").space
    configs = sample_configs(space)
    bad = failed_configs("reduction", {"n": n}, dtype, configs)
    assert not bad, f"{len(bad)} of {len(configs)} configs failed at n={n} {dtype}: {bad[:5]}"
