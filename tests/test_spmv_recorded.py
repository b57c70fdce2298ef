"""spmv on the campaigns recorded on the H100 (results/): a recorded campaign replayed in Kernel Tuner's
simulation mode, and `tuner best spmv --matrix FILE` for a matrix that was never tuned."""

import importlib.util
import json

import numpy as np
import pytest
import scipy.io

from tuner.campaign import find_recording, replay
from tuner.cli import main
from tuner.query import best
from tuner.space import PROJECT_ROOT
from tuner.store import load_evaluations, results_root
from tuner.workloads import get_workload
from tuner.workloads import spmv_matrices as mats

H100 = "NVIDIA H100 80GB HBM3"
RECORDED = load_evaluations("spmv")
pytestmark = pytest.mark.skipif(RECORDED.empty, reason="no recorded spmv campaign in results/")
REPLAYED = "powerlaw-1M-8"


def campaign_script():
    spec = importlib.util.spec_from_file_location("spmv_campaigns", PROJECT_ROOT / "benchmarks" / "spmv_campaigns.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_replay_of_a_recorded_campaign_retraces_it():
    """The campaign's strategy (TPE, seed 1, the seed's kernels and the recipes first) replayed on its own
    recording asks for the same configs in the same order and finds the same best."""
    space = get_workload("spmv").space
    size = space.sizes[REPLAYED]
    rows = RECORDED[(RECORDED["size"] == REPLAYED) & (RECORDED["dtype"] == "float32")].sort_values("timestamp")
    strategy = campaign_script().seeded_make_strategy(size["mean"])("tpe", seed=1, storage=None, study_name=None)
    results, gpu = replay(space, size, "float32", find_recording(results_root(), "spmv", REPLAYED, "float32", H100),
                          strategy, max_evals=len(rows), seed=1)
    asked = [json.dumps({k: r[k] for k in space.params}, sort_keys=True, separators=(",", ":"))
             for r in results if r is not None]
    assert gpu == H100 and asked == list(rows.config)
    ok = [r for r in results if r is not None and "__error__" not in r]
    top = max(ok, key=lambda r: r["GB/s"])
    stored = best("spmv", REPLAYED, "float32", gpu=H100)
    assert {k: top[k] for k in space.params} == stored["config"] and top["GB/s"] == pytest.approx(stored["value"])


def test_best_for_a_never_tuned_matrix_file_picks_by_features(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(mats.FILES_ENV, raising=False)
    m = mats.generate(mats.size_for("powerlaw", 65536, 8, seed=7))
    path = tmp_path / "skewed.mtx"
    scipy.io.mmwrite(str(path), m)
    assert main(["best", "spmv", "--matrix", str(path), "--gpu", H100, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["fallback"] == "nearest-size" and "by features" in answer["notes"][0]
    assert mats.CLASS_NAMES[answer["size_vars"]["matrix"]] == "powerlaw"
    assert get_workload("spmv").space.is_valid(answer["config"]) and answer["baselines"]["cusparse"]["ratio"]["GB/s"] > 0


def test_best_for_a_stored_matrix_is_exact():
    answer = best("spmv", REPLAYED, "float32", gpu=H100)
    assert answer["fallback"] == "exact" and np.isfinite(answer["value"])
    assert set(answer["baselines"]) >= {"cusparse", "cupyx"}
