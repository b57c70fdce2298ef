"""spmv on the campaigns recorded on the H100 (results/): a recorded campaign replayed in Kernel Tuner's
simulation mode, and `tuner best spmv --matrix FILE` for a matrix that was never tuned."""

import json

import numpy as np
import pytest
import scipy.io

from tuner.answers.best_config import best
from tuner.cli import main
from tuner.measure.replay import replay
from tuner.store import load_evaluations, results_root
from tuner.store.recording_choice import find_recording
from tuner.workloads import get_workload
from tuner.workloads import spmv_matrices as mats

H100 = "NVIDIA H100 80GB HBM3"
RECORDED = load_evaluations("spmv")
pytestmark = pytest.mark.skipif(RECORDED.empty, reason="no recorded spmv campaign in results/")
REPLAYED = "powerlaw-1M-8"


class Retrace:
    """A strategy that asks for given configs in order (the recorded campaign's)."""

    def __init__(self, configs):
        self.configs = configs

    def tune(self, searchspace, runner, tuning_options):
        return runner.run([list(c) for c in self.configs], tuning_options)


def test_replay_of_a_recorded_campaign_gives_its_measurements():
    """Kernel Tuner's simulation mode, fed the recorded campaign's configs, returns the stored figures. (A TPE
    campaign records only what it measured, so another search would ask for configs the recording lacks.)"""
    space = get_workload("spmv").space
    size = space.sizes[REPLAYED]
    rows = RECORDED[(RECORDED["size"] == REPLAYED) & (RECORDED["dtype"] == "float32")].sort_values("timestamp")
    # the cache file keeps one measurement per config, the latest: a config measured again for a newer kernel
    # version replays with its new figure, so the newest kernel's campaign is the one replayed
    rows = rows[rows["kernel_hash"] == rows["kernel_hash"].iloc[-1]]
    configs = [[json.loads(c)[k] for k in space.params] for c in rows.config]
    cachefile = find_recording(results_root(), "spmv", REPLAYED, "float32", H100)
    results, gpu = replay(space, size, "float32", cachefile, Retrace(configs))
    assert gpu == H100 and len(results) == len(rows)
    np.testing.assert_allclose([r["GB/s"] for r in results], rows.objective_value, rtol=1e-9)


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
