"""`tuner run WORKLOAD ...` on a machine without a GPU: once the program has read and checked its inputs and
its config (given or stored), one line from the tool says what the machine lacks (tuner.measure.machine.gpu_missing,
the words of `tuner tune`), before anything is built or run: no CUDA error of the built program, no notes of a
lookup whose config cannot run. Bad inputs get their own error first, GPU or not. The machine's lack is stood in
for (gpu_missing), so that the tests say the same on a machine with a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import tuner.measure.hostcode
import tuner.workloads.floyd_warshall as fw
from tests.test_floyd_warshall import SEED_CONFIG
from tuner.cli import main
from tuner.measure import machine
from tuner.workloads.graph_io import random_graph, write_graph

OUTSIDE = {**SEED_CONFIG, "BLOCK": 48}  # every parameter set, one value the space lacks
LACKS = "no CUDA driver on this machine (libcuda.so.1 not found)"


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> list:
    """No GPU here, and nothing may be built or run: the calls that would, recorded."""
    built: list = []
    monkeypatch.setattr(machine, "gpu_missing", lambda backend: LACKS)
    monkeypatch.setattr(tuner.measure.hostcode, "build", lambda *a, **k: built.append(a) or "pipeline")
    monkeypatch.setattr(fw, "run_pipeline", lambda *a, **k: built.append(a) or -1.0)
    return built


@pytest.fixture
def graph(tmp_path):
    path = tmp_path / "g.bin"
    write_graph(path, 200, random_graph(200, 1200, 0))
    return path


@pytest.fixture
def finpar(tmp_path):
    path = tmp_path / "input.data"  # Finpar's format: OUTER NUM_X NUM_Y NUM_T S0 T ALPHA NU BETA
    path.write_text("16\n32\n256\n256\n0.03\n5.0\n0.2\n0.6\n0.5\n")  # Finpar's Small
    return path


def _said(capsys: pytest.CaptureFixture) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.mark.parametrize("workload", ["floyd-warshall", "floyd-warshall-small"])
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_floyd_warshall_without_a_gpu_is_one_line_before_any_build(
    workload, json_flag, no_gpu, graph, tmp_path, capsys
):
    out = tmp_path / "d.bin"
    assert main(["run", workload, str(graph), str(out), *json_flag]) == 2
    assert _said(capsys) == [f"error: cannot run {workload} here: {LACKS}"]
    assert not no_gpu and not out.exists()


def test_a_given_config_without_a_gpu_is_the_same_line(no_gpu, graph, tmp_path, capsys):
    cfg = [f"{k}={v}" for k, v in SEED_CONFIG.items()]
    assert main(["run", "floyd-warshall", str(graph), str(tmp_path / "d.bin"), "--config", *cfg]) == 2
    assert _said(capsys) == [f"error: cannot run floyd-warshall here: {LACKS}"] and not no_gpu


def test_locvolcalib_without_a_gpu_is_one_line_before_any_build(no_gpu, finpar, capsys):
    assert main(["run", "locvolcalib", str(finpar)]) == 2
    assert _said(capsys) == [f"error: cannot run locvolcalib here: {LACKS}"] and not no_gpu


@pytest.mark.parametrize(
    "argv, message",
    [
        (["floyd-warshall", "{graph}", "{out}", "--gpus", "0"], "--gpus 0: at least one GPU"),
        (["floyd-warshall", "{bad}", "{out}"], "vertex out of range"),
        (["floyd-warshall", "{graph}", "{out}", "--config", "BLOCK=64"], "--config must set the parameters"),
        (
            ["floyd-warshall", "{graph}", "{out}", "--config", *[f"{k}={v}" for k, v in OUTSIDE.items()]],
            "values outside the space: BLOCK=48",
        ),
        (["floyd-warshall", "{graph}", "{out}", "--dtype", "float64"], "float64"),
        (["locvolcalib", "{finpar}", "--precision", "float32", "--dtype", "float64"], "disagree"),
        (["locvolcalib", "{out}"], "cannot read"),
    ],
)
def test_bad_inputs_get_their_own_error_first_without_a_gpu(argv, message, no_gpu, graph, finpar, tmp_path, capsys):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(np.array([3, 1, 0, 5, 1], dtype=np.int32).tobytes())  # an edge to vertex 5 of 3
    names = {"{graph}": str(graph), "{out}": str(tmp_path / "d.bin"), "{bad}": str(bad), "{finpar}": str(finpar)}
    assert main(["run", *[names.get(a, a) for a in argv]]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message in err and "cannot run" not in err and "CUDA" not in err, err
    assert not no_gpu


def test_with_a_gpu_the_lookups_notes_are_said_and_the_program_runs(monkeypatch, graph, tmp_path, capsys):
    """The check passes where a GPU is (stood in): the notes of the stored config's lookup are said as before,
    then the program runs."""
    monkeypatch.setattr(machine, "gpu_missing", lambda backend: None)
    monkeypatch.setattr(tuner.measure.hostcode, "build", lambda space, config, dtype: "pipeline")

    def pipeline(fn, n, edges, dist, gpus=1):
        dist[:] = 0
        return 1.0

    monkeypatch.setattr(fw, "run_pipeline", pipeline)
    assert main(["run", "floyd-warshall", str(graph), str(tmp_path / "d.bin"), "--gpu", "h100"]) == 0
    err = capsys.readouterr().err
    assert "note: size n=200,m=1200,gpus=1 was never measured" in err and "vertices" in err
    assert err.index("note:") < err.index("vertices") and (tmp_path / "d.bin").exists()
