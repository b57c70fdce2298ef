"""On the GPU: the Floyd-Warshall pipeline on awkward graphs against the numpy reference, for configs that
cover every parameter; the campaign path (Kernel Tuner's C backend in the isolated worker); two GPUs where
the machine has them. Skipped where no CUDA GPU is found."""


import numpy as np
import pytest

from tests.gpu_checks import device_count
from tuner.measure import kt
from tuner.measure.hostcode import build
from tuner.measure.protocol import MeasureSpec
from tuner.measure.runner import IsolatedRunner
from tuner.workloads import get_workload
from tuner.workloads.floyd_warshall import floyd_warshall_numpy, run_pipeline
from tuner.workloads.graph_io import random_graph

pytestmark = pytest.mark.gpu

SEED_CONFIG = {"BLOCK": 64, "block_size_x": 32, "block_size_y": 32, "VEC": 0, "DPX": 0, "PAD": 0, "K_UNROLL": 64, "LOOKAHEAD": 0, "SPLIT": 100, "KCHUNK": 0, "MIN_BLOCKS": 0, "PRIORITY": 0}
CONFIGS = [
    SEED_CONFIG,
    dict(SEED_CONFIG, block_size_x=16, block_size_y=16, VEC=1, DPX=1, PAD=4, K_UNROLL=4, LOOKAHEAD=1),
    dict(SEED_CONFIG, BLOCK=128, block_size_x=16, block_size_y=16, VEC=1, DPX=0, PAD=0, K_UNROLL=16, LOOKAHEAD=1),
    dict(SEED_CONFIG, BLOCK=96, block_size_x=16, block_size_y=16, VEC=0, DPX=1, PAD=1, K_UNROLL=4, LOOKAHEAD=1),
    dict(SEED_CONFIG, BLOCK=96, block_size_x=8, block_size_y=32, VEC=1, DPX=0, PAD=4, K_UNROLL=1),
    dict(SEED_CONFIG, BLOCK=16, block_size_x=8, block_size_y=8, VEC=0, DPX=1, PAD=1, K_UNROLL=1),
    dict(SEED_CONFIG, BLOCK=32, block_size_x=32, block_size_y=4, VEC=1, DPX=1, PAD=4, K_UNROLL=64, LOOKAHEAD=1),
    # phase 3 streaming its pivot tiles in chunks (cp.async, 16-byte pieces with PAD 4, 4-byte ones without)
    # and the bulk of phase 3 on its own stream (LOOKAHEAD 2)
    dict(SEED_CONFIG, BLOCK=128, block_size_x=16, block_size_y=16, VEC=1, PAD=4, K_UNROLL=16, LOOKAHEAD=2, KCHUNK=32),
    dict(SEED_CONFIG, BLOCK=64, block_size_x=8, block_size_y=16, VEC=0, PAD=1, K_UNROLL=4, LOOKAHEAD=2, KCHUNK=16),
    dict(SEED_CONFIG, BLOCK=96, block_size_x=32, block_size_y=8, VEC=0, PAD=0, K_UNROLL=16, LOOKAHEAD=1, KCHUNK=32),
    dict(SEED_CONFIG, BLOCK=32, block_size_x=16, block_size_y=8, VEC=1, PAD=4, K_UNROLL=1, KCHUNK=16),
    dict(SEED_CONFIG, BLOCK=16, block_size_x=8, block_size_y=8, VEC=0, PAD=0, K_UNROLL=4, LOOKAHEAD=2),
    # the critical path's stream first (PRIORITY), with either look-ahead; MIN_BLOCKS as tuned at 11k
    dict(SEED_CONFIG, block_size_y=4, VEC=1, PAD=4, K_UNROLL=16, LOOKAHEAD=2, MIN_BLOCKS=5, PRIORITY=1),
    dict(SEED_CONFIG, BLOCK=32, block_size_x=16, block_size_y=8, VEC=1, PAD=4, K_UNROLL=4, LOOKAHEAD=1, PRIORITY=1),
    # the bulk of phase 3 in two halves of rows on two streams
    dict(SEED_CONFIG, block_size_y=4, VEC=1, PAD=4, K_UNROLL=16, LOOKAHEAD=3, MIN_BLOCKS=5, PRIORITY=1),
    dict(SEED_CONFIG, BLOCK=16, block_size_x=8, block_size_y=8, K_UNROLL=4, LOOKAHEAD=3),
]


def graphs():
    rng = np.random.default_rng(5)
    two_parts = np.concatenate([random_graph(40, 200, 1), random_graph(37, 150, 2) + [40, 40, 0]])  # + isolated
    zero = random_graph(90, 500, 3)
    zero[::3, 2] = 0  # zero-weight edges, zero cycles among them
    parallel = np.concatenate([random_graph(70, 300, 4), random_graph(70, 300, 4) * [1, 1, 0] + [0, 0, 7]])
    return {
        "n=1": (1, np.zeros((0, 3), np.int32)),
        "n=1 self-loop": (1, np.array([[0, 0, 5]], np.int32)),
        "n=2": (2, np.array([[1, 0, 3]], np.int32)),
        "n=131 (not a multiple of any BLOCK)": (131, random_graph(131, 700, 6)),
        "disconnected + isolated vertices": (83, two_parts.astype(np.int32)),
        "zero weights": (90, zero),
        "complete": (45, random_graph(45, 45 * 44, 7)),
        "parallel edges": (70, parallel.astype(np.int32)),
        "sparse 300": (300, random_graph(300, int(rng.integers(300, 600)), 8)),
    }


def distances(fn, n, edges, gpus=1):
    dist = np.full((n, n), -7, dtype=np.int32)
    ms = run_pipeline(fn, n, edges, dist, gpus)
    assert ms >= 0, "the pipeline reported a CUDA error"
    return dist


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_awkward_graphs_match_numpy(config):
    space = get_workload("floyd-warshall").space
    assert space.is_valid(config)
    fn = build(space, config, "int32")
    for name, (n, edges) in graphs().items():
        expected = floyd_warshall_numpy(n, edges)
        got = distances(fn, n, edges)
        assert np.array_equal(got, expected), f"{name}: {np.count_nonzero(got != expected)} entries differ"


def test_campaign_path_verifies_and_times(tmp_path):
    """What a campaign does: Kernel Tuner's C backend calls the pipeline, checks it against answer()."""
    w = get_workload("floyd-warshall")
    space, size = w.space, {"n": 1000, "m": 6000, "gpus": 1}
    runner = IsolatedRunner(MeasureSpec("floyd-warshall", size, "int32", "nvcuda", 0, None, baseline_repeats=0),
                            timeout=120)
    rows = []
    runner.on_row = lambda row, fresh: rows.append(row)
    runner.start()
    try:
        runner.run([tuple(c.values()) for c in CONFIGS[:3]], kt.tuning_options(space, size, "int32", tolerances=(0, 0)))
    finally:
        runner.shutdown()
    assert [r["status"] for r in rows] == ["ok"] * 3, [r.get("error", "")[:300] for r in rows]
    assert all(len(r["times"]) == space.iterations and min(r["times"]) > 0 for r in rows)


@pytest.mark.skipif(device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("config", [dict(SEED_CONFIG, BLOCK=16, block_size_x=8, block_size_y=8, SPLIT=s, LOOKAHEAD=la)
                                    for s in (90, 100, 110) for la in (0, 1, 2, 3)] + CONFIGS[1:3] + CONFIGS[7:8])
def test_two_gpus_match_numpy(config):
    fn = build(get_workload("floyd-warshall").space, config, "int32")
    for name, (n, edges) in graphs().items():
        got = distances(fn, n, edges, gpus=2)
        assert np.array_equal(got, floyd_warshall_numpy(n, edges)), f"two GPUs, {name}"


def test_tuner_run_writes_the_distances(tmp_path, capsys):
    from tuner.cli import main
    from tuner.workloads.graph_io import read_distances, write_graph

    n, edges = graphs()["n=131 (not a multiple of any BLOCK)"]
    write_graph(tmp_path / "g", n, edges)
    config = [f"{k}={v}" for k, v in CONFIGS[1].items()]
    assert main(["run", "floyd-warshall", str(tmp_path / "g"), str(tmp_path / "d"), "--config", *config]) == 0
    assert np.array_equal(read_distances(tmp_path / "d", n), floyd_warshall_numpy(n, edges))
    assert "T relaxations/s" in capsys.readouterr().err
