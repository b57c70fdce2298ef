"""On the GPU: every spmv variant, through the same isolated worker as a campaign, verified against scipy on
small matrices of every class, empty rows, a single row, no nonzeros, a symmetric Matrix Market file, a
rectangular matrix and a dense row spread over many blocks, in float32 and float64. Skipped without a GPU."""

import random

import numpy as np
import pytest

from tests.gpu_checks import failed_configs
from tuner.measure import kt
from tuner.workloads import get_workload
from tuner.workloads.spmv_matrices import register_file, size_for

pytestmark = pytest.mark.gpu

SEED_CONFIGS = [{"variant": v, "block_size_x": b, "threads_per_row": 1, "row_iters": 1, "unroll": 1, "ldg": 0,
                 "stream": 0, "vec": 1, "full_occupancy": 0} for v in (0, 1) for b in (64, 1024)]


def sample_configs(space, seed=0):
    """The seed's two kernels, and a sample of every variant (more of the load-balanced ones)."""
    names = list(space.params)
    configs = [dict(zip(names, c)) for c in kt.searchspace(space).list]
    rnd = random.Random(seed)
    picked = list(SEED_CONFIGS)
    for variant, n in ((0, 2), (1, 2), (2, 6), (3, 5), (4, 7), (5, 10), (6, 10)):
        picked += rnd.sample([c for c in configs if c["variant"] == variant], n)
    return [tuple(c[n] for n in names) for c in picked]


def write_symmetric(path, n=300, density=0.02, seed=3):
    rng = np.random.default_rng(seed)
    entries = {(i, j) for i, j in zip(rng.integers(0, n, int(n * n * density)), rng.integers(0, n, int(n * n * density)))}
    lower = sorted({(max(i, j), min(i, j)) for i, j in entries})
    lines = [f"{i + 1} {j + 1} {rng.uniform(-1, 1):.6f}" for i, j in lower]
    path.write_text(f"%%MatrixMarket matrix coordinate real symmetric\n{n} {n} {len(lines)}\n" + "\n".join(lines) + "\n")
    return path


MATRICES = {
    "uniform (empty rows)": lambda tmp: size_for("uniform", 1000, 8),
    "powerlaw": lambda tmp: size_for("powerlaw", 5000, 8),
    "laplace2d": lambda tmp: size_for("laplace2d", 10000, 5),
    "banded": lambda tmp: size_for("banded", 3000, 7),
    "dense row over many blocks": lambda tmp: size_for("denserow", 200000, 4),
    "single row": lambda tmp: size_for("denserow", 1, 1, cols=5000),
    "rectangular": lambda tmp: size_for("uniform", 2000, 10, cols=700),
    "no nonzeros": lambda tmp: register_file(_write(tmp / "zero.mtx", "%%MatrixMarket matrix coordinate real general\n50 40 0\n")),
    "symmetric file": lambda tmp: register_file(write_symmetric(tmp / "sym.mtx")),
}


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("matrix", list(MATRICES))
def test_every_variant_matches_scipy(matrix, dtype, tmp_path):
    space = get_workload("spmv").space
    size = MATRICES[matrix](tmp_path)
    configs = sample_configs(space)
    bad = failed_configs("spmv", size, dtype, configs)
    assert not bad, f"{len(bad)} of {len(configs)} configs failed on {matrix} {dtype}: {bad[:5]}"


def test_cusparse_baseline_checks_and_times():
    workload = get_workload("spmv")
    size = size_for("powerlaw", 20000, 8)
    args = workload.arguments(size, "float32", np.random.default_rng(1))
    out = workload.baselines(args, size, "float32", repeats=5)
    assert set(out) == {"cusparse", "cupyx"} and all(len(t) == 5 and min(t) > 0 for t in out.values())
