"""Floyd-Warshall without a GPU: the course's graph format (round trip, every malformed kind of file), the
generator, the reference on awkward graphs, the space, and `tuner run floyd-warshall`'s handling of its
arguments and of a machine without a GPU."""

import json
import shutil

import numpy as np
import pytest

from tuner.cli import main
from tuner.errors import TunerError
from tuner.workloads import get_workload
from tuner.workloads.floyd_warshall import (
    dijkstra_rows,
    floyd_warshall_numpy,
    reference,
)
from tuner.workloads.graph_io import (
    INF,
    random_graph,
    read_distances,
    read_graph,
    write_distances,
    write_graph,
)

W = get_workload("floyd-warshall")
SEED_CONFIG = {"BLOCK": 64, "block_size_x": 32, "block_size_y": 32, "VEC": 0, "DPX": 0, "PAD": 0, "K_UNROLL": 64,
               "LOOKAHEAD": 0, "SPLIT": 100, "KCHUNK": 0, "MIN_BLOCKS": 0, "PRIORITY": 0}


def raw(path, *ints):
    path.write_bytes(np.array(ints, dtype="<i4").tobytes())
    return path


# ---- graph I/O ---------------------------------------------------------------------------------------
def test_round_trip(tmp_path):
    edges = random_graph(50, 300, seed=3)
    write_graph(tmp_path / "g", 50, edges)
    n, back = read_graph(tmp_path / "g")
    assert n == 50 and np.array_equal(back, edges) and back.dtype == np.int32
    assert (tmp_path / "g").stat().st_size == 8 + 12 * 300
    d = floyd_warshall_numpy(n, back)
    write_distances(tmp_path / "d", d)
    assert np.array_equal(read_distances(tmp_path / "d", 50), d)


@pytest.mark.parametrize("ints, message", [
    ((), "truncated: 0 bytes"),
    ((5,), "truncated: 4 bytes"),
    ((5, 2, 0, 1, 3), "truncated: m = 2 edges need 32 bytes"),
    ((5, 1, 0, 1, 3, 9), "4 bytes after the 1 edges"),
    ((0, 0), "n = 0"),
    ((-3, 0), "n = -3"),
    ((4, -1), "m = -1"),
    ((4, 2, 0, 1, 3, 2, 4, 1), r"edge 1 \(2 -> 4\) has a vertex out of range 0..3"),
    ((4, 1, -1, 1, 3), "vertex out of range"),
    ((4, 2, 0, 1, 3, 1, 2, -5), r"edge 1 has a negative weight \(-5\)"),
    ((3, 1, 0, 1, 2**29), "could make a path as long as INF"),
])
def test_malformed_files_get_a_clear_error(tmp_path, ints, message):
    with pytest.raises(TunerError, match=message):
        read_graph(raw(tmp_path / "bad", *ints))


def test_missing_file(tmp_path):
    with pytest.raises(TunerError, match="cannot read the graph"):
        read_graph(tmp_path / "nope")


def test_distances_of_the_wrong_size(tmp_path):
    raw(tmp_path / "d", 1, 2, 3)
    with pytest.raises(TunerError, match="3 distances, expected n \\* n = 4"):
        read_distances(tmp_path / "d", 2)


# ---- generator ---------------------------------------------------------------------------------------
def test_generator_is_deterministic_simple_and_in_range():
    a, b = random_graph(200, 5000, seed=1), random_graph(200, 5000, seed=1)
    assert np.array_equal(a, b) and not np.array_equal(a, random_graph(200, 5000, seed=2))
    assert a.shape == (5000, 3) and a.dtype == np.int32
    assert (a[:, 0] != a[:, 1]).all() and len({(s, d) for s, d, _ in a}) == 5000
    assert a[:, :2].min() >= 0 and a[:, :2].max() < 200 and a[:, 2].min() >= 0 and a[:, 2].max() <= 1000
    assert len(random_graph(1, 0)) == 0 and len(random_graph(30, 30 * 29)) == 870  # empty and complete


@pytest.mark.parametrize("n, m, message", [(0, 0, "n = 0"), (3, 7, "0..6"), (5, -1, "0..20")])
def test_generator_rejects_impossible_graphs(n, m, message):
    with pytest.raises(TunerError, match=message):
        random_graph(n, m)


def test_generator_command(tmp_path):
    from tuner.workloads.graph_io import main as generate

    assert generate(["100", "400", str(tmp_path / "g"), "--seed", "4"]) == 0
    n, edges = read_graph(tmp_path / "g")
    assert n == 100 and np.array_equal(edges, random_graph(100, 400, 4))
    assert generate(["3", "99", str(tmp_path / "h")]) == 2


# ---- reference -----------------------------------------------------------------------------------------
def test_reference_by_hand():
    edges = np.array([[0, 1, 4], [1, 2, 0], [0, 2, 9], [2, 0, 1], [0, 1, 2]], np.int32)  # parallel 0->1 edges
    d = floyd_warshall_numpy(4, edges)  # vertex 3 isolated
    assert d.tolist() == [[0, 2, 2, INF], [1, 0, 0, INF], [1, 3, 0, INF], [INF, INF, INF, 0]]


def awkward_graphs():
    zero = random_graph(120, 700, 3)
    zero[::3, 2] = 0
    two_parts = np.concatenate([random_graph(40, 200, 1), random_graph(37, 150, 2) + [40, 40, 0]]).astype(np.int32)
    parallel = np.concatenate([random_graph(70, 300, 4), random_graph(70, 300, 4) * [1, 1, 0] + [0, 0, 7]])
    return [(1, np.zeros((0, 3), np.int32)), (1, np.array([[0, 0, 5]], np.int32)), (120, zero), (83, two_parts),
            (30, random_graph(30, 870, 5)), (70, parallel.astype(np.int32))]


@pytest.mark.parametrize("n, edges", awkward_graphs(), ids=["n=1", "self-loop", "zero weights", "disconnected",
                                                              "complete", "parallel edges"])
def test_floyd_warshall_and_dijkstra_references_agree(n, edges):
    fw = floyd_warshall_numpy(n, edges)
    assert np.array_equal(fw, dijkstra_rows(n, edges, 0, n))
    assert (np.diag(fw) == 0).all() and fw.max() <= INF


def test_large_reference_runs_dijkstra_in_subprocesses_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path))
    monkeypatch.setattr("tuner.workloads.floyd_warshall.DENSE_REFERENCE_MAX_N", 100)
    edges = random_graph(300, 1500, 9)
    got = reference(300, edges)
    assert np.array_equal(got, floyd_warshall_numpy(300, edges))
    assert len(list((tmp_path / "fw-reference").glob("*.npy"))) == 1
    assert np.array_equal(reference(300, edges), got)  # from the cache


# ---- the workload and its space --------------------------------------------------------------------------
def test_space_holds_the_seeds_configuration():
    space = W.space
    assert space.lang == "host" and space.is_valid(SEED_CONFIG)
    assert space.resolve_size("11k", W.parse_size)[1] == {"n": 11000, "m": 66000, "gpus": 1}
    assert not space.is_valid({**SEED_CONFIG, "BLOCK": 128, "block_size_x": 8, "block_size_y": 8})  # 256 elements
    assert not space.is_valid({**SEED_CONFIG, "VEC": 1, "PAD": 1})


def test_sizes_given_by_n_alone():
    space = W.space
    assert space.resolve_size("n=777", W.parse_size) == ("n=777,m=4662,gpus=1", {"n": 777, "m": 4662, "gpus": 1})
    assert space.resolve_size("n=11000,gpus=2", W.parse_size) == ("11k-2gpu", {"n": 11000, "m": 66000, "gpus": 2})
    assert space.resolve_size("n=3", W.parse_size)[1]["m"] == 6  # capped at n (n - 1)
    with pytest.raises(TunerError, match="impossible size"):
        space.resolve_size("n=0", W.parse_size)


def test_arguments_and_answer_for_a_size():
    size = {"n": 200, "m": 1200, "gpus": 1}
    args = W.arguments(size, "int32", np.random.default_rng(0))
    assert [a.dtype for a in args] == [np.int32] * 5 and args[1].shape == (200, 200)
    assert np.array_equal(args[0], W.arguments(size, "int32", np.random.default_rng(1))[0])  # the size decides
    ans = W.answer(args, size, "int32")
    assert ans[0] is None and np.array_equal(ans[1], floyd_warshall_numpy(200, args[0]))
    assert W.tolerances(size, "int32") == (0.0, 0.0)


# ---- tuner run floyd-warshall ------------------------------------------------------------------------------
def test_run_needs_input_and_output(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "floyd-warshall"])
    assert e.value.code == 2 and "input" in capsys.readouterr().err


def test_run_rejects_a_malformed_graph(tmp_path, capsys):
    assert main(["run", "floyd-warshall", str(raw(tmp_path / "g", 3, 1, 0, 5, 1)), str(tmp_path / "o")]) != 0
    assert "vertex out of range" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_run_rejects_a_bad_config(tmp_path, capsys):
    write_graph(tmp_path / "g", 10, random_graph(10, 20))
    assert main(["run", "floyd-warshall", str(tmp_path / "g"), str(tmp_path / "o"), "--config", "BLOCK=64"]) != 0
    assert "--config must set the parameters of floyd-warshall" in capsys.readouterr().err
    cfg = [f"{k}={v}" for k, v in {**SEED_CONFIG, "BLOCK": 48}.items()]
    assert main(["run", "floyd-warshall", str(tmp_path / "g"), str(tmp_path / "o"), "--config", *cfg]) != 0
    assert "values outside the space: BLOCK=48" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to build the pipeline")
def test_run_without_a_gpu_says_so(tmp_path, capsys, monkeypatch):
    from tests.conftest import _has_gpu

    if _has_gpu():
        pytest.skip("this machine has a GPU")
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    write_graph(tmp_path / "g", 10, random_graph(10, 20))
    cfg = [f"{k}={v}" for k, v in SEED_CONFIG.items()]
    assert main(["run", "floyd-warshall", str(tmp_path / "g"), str(tmp_path / "o"), "--config", *cfg]) != 0
    err = capsys.readouterr().err
    # one line of the tool's, before anything is built: not the built pipeline's CUDA error
    assert err.startswith("error: cannot run floyd-warshall here: ") and len(err.strip().splitlines()) == 1, err
    assert "CUDA driver version" not in err and "Traceback" not in err and not (tmp_path / "o").exists()


# ---- the campaign recorded on the H100, replayed -------------------------------------------------------------
H100 = "NVIDIA H100 80GB HBM3"


def _recorded(size):
    from tests.recorded import is_recorded

    return is_recorded(H100, "floyd-warshall", size, "int32")


@pytest.mark.skipif(not _recorded("11k"), reason="no recorded floyd-warshall campaign in results/")
def test_recorded_campaign_replays_to_the_stored_best(monkeypatch):
    """The 11k campaign in simulation mode: the recorded configs, in their order (a TPE search does not
    cover the space, so the replay is given them first), served from Kernel Tuner's cache; the replay's best
    is the stored best, and the tuned best beats the seed's configuration."""
    from tuner.answers.best_config import best
    from tuner.campaign import local, search_start
    from tuner.campaign.request import CampaignRequest
    from tuner.store import canonical_config, load_evaluations

    df = load_evaluations("floyd-warshall")
    df = df[(df.gpu == H100) & (df["size"] == "11k")].sort_values("timestamp")
    # the newest recording (the cache holds it alone; older rows ran older kernel code, read with the
    # defaults of the parameters added since)
    df = df[df.kernel_hash == df.kernel_hash.iloc[-1]]
    configs = [json.loads(c) for c in dict.fromkeys(df.config)]
    monkeypatch.setattr(search_start, "warm_configs", lambda *a, **kw: configs)
    out = local.run_campaign(CampaignRequest(workload="floyd-warshall", size="11k", strategy="tpe",
                                                         max_evals=len(configs), seed=1, simulate=True, quiet=True,
                                                         patience=0))
    stored = best("floyd-warshall", "11k", "int32", gpu=H100, evaluations=df)
    assert out.simulated and out.evaluated == len(configs)
    assert out.best["config"] == stored["config"] and out.best["value"] == pytest.approx(stored["value"], rel=0.02)  # mean vs median of the repeats
    seed = df[(df.status == "ok") & (df.config == canonical_config(SEED_CONFIG))]
    assert len(seed) and stored["value"] < seed.time_ms.median()


def test_reduced_space_is_a_brute_forceable_part_of_the_full_one():
    """floyd-warshall-small (the strategy comparison's complete recording) runs the same pipeline: each of
    its configs is a valid config of the full space, and there are few enough to brute-force in minutes."""
    from tuner.measure import kt

    small = get_workload("floyd-warshall-small").space
    assert small.kernel_source == W.space.kernel_source and list(small.params) == list(W.space.params)
    configs = [dict(zip(small.params, c)) for c in kt.searchspace(small).list]
    assert 20 <= len(configs) <= 100
    assert all(W.space.is_valid(c) and all(c[k] in W.space.params[k] for k in c) for c in configs)
    assert {c["BLOCK"] for c in configs} == {64, 128} and {c["KCHUNK"] for c in configs} == {0, 16}
