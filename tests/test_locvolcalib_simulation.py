"""The LocVolCalib campaign recorded on the H100 (course-large, float64, TPE), replayed without a GPU in
Kernel Tuner's simulation mode, and the stored best as `tuner run` would take it."""

import json

import pytest

from benchmarks.lvc_campaign import first_configs
from tuner.campaign import CampaignRequest, run_campaign
from tuner.cli import main
from tuner.query import best
from tuner.store import cache_path, load_evaluations, results_root
from tuner.workloads import get_workload

H100 = "NVIDIA H100 80GB HBM3"
pytestmark = pytest.mark.skipif(not cache_path(results_root(), H100, "locvolcalib", "course-large", "float64").is_file(),
                                reason="no recorded locvolcalib campaign in results/")


def recorded():
    df = load_evaluations("locvolcalib")
    return df[(df.gpu == H100) & (df["size"] == "course-large") & (df.dtype == "float64")]


def test_tpe_replay_retraces_the_recorded_campaign():
    """benchmarks/lvc_campaign.py measured its `first` configs, then TPE (no other recording to warm-start from)."""
    rows = recorded()
    out = run_campaign(CampaignRequest(workload="locvolcalib", size="course-large", dtype="float64", strategy="tpe",
                                       max_evals=len(rows), seed=1, simulate=True, quiet=True, warm_start=False,
                                       first=tuple(first_configs())))
    assert out.simulated and out.evaluated == len(rows)
    stored = best("locvolcalib", "course-large", "float64", gpu=H100)
    assert out.best["config"] == stored["config"]
    assert out.best["time_ms"] == pytest.approx(stored["value"])  # the median of the recorded repeats


def test_recording_holds_the_naive_point_and_only_verified_configs():
    rows = recorded()
    space = get_workload("locvolcalib").space
    configs = [json.loads(c) for c in rows.config]
    assert all(space.is_valid(c) for c in configs)
    assert (rows.status == "ok").all()  # every config matched the numpy reference within 1e-9 relative
    naive = rows[rows.p_STRUCTURE == 0]
    assert len(naive) == 1
    assert best("locvolcalib", "course-large", "float64", gpu=H100)["config"]["STRUCTURE"] == 2


def test_run_takes_the_stored_best_for_the_course_large_input():
    w = get_workload("locvolcalib")
    config = w.run_config(w.space.sizes["course-large"], "float64", gpu=H100, log=lambda m: None)
    assert config == best("locvolcalib", "course-large", "float64", gpu=H100)["config"]


def test_cli_best(capsys):
    assert main(["best", "locvolcalib", "--size", "course-large", "--dtype", "float64", "--gpu", H100, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["STRUCTURE"] == 2  # a warp per system
