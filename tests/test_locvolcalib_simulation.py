"""The LocVolCalib campaign recorded on the H100 (course-large, float64, TPE), replayed without a GPU in
Kernel Tuner's simulation mode, and the stored best as `tuner run` would take it."""

import json

import pytest

from tests.recorded import is_recorded
from tuner.answers.best_config import best, run_config
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.cli import main
from tuner.store import load_evaluations
from tuner.workloads import get_workload

H100 = "NVIDIA H100 80GB HBM3"
pytestmark = pytest.mark.skipif(not is_recorded(H100, "locvolcalib", "course-large", "float64"),
                                reason="no recorded locvolcalib campaign in results/")


def recorded(newest=False):
    """course-large float64 on the H100; newest: the rows of the current kernel code only."""
    df = load_evaluations("locvolcalib")
    df = df[(df.gpu == H100) & (df["size"] == "course-large") & (df.dtype == "float64")].sort_values("timestamp")
    return df[df.kernel_hash == df.kernel_hash.iloc[-1]] if newest else df


def test_replay_of_the_recorded_configs_finds_the_stored_best():
    """The newest campaign's configs, replayed in their order from Kernel Tuner's cache: the replay's best is
    the stored best, at the recorded median."""
    rows = recorded(newest=True)
    configs = [json.loads(c) for c in dict.fromkeys(rows.config)]
    out = run_campaign(CampaignRequest(workload="locvolcalib", size="course-large", dtype="float64", strategy="tpe",
                                       max_evals=len(configs), seed=1, simulate=True, quiet=True, warm_start=False,
                                       first=tuple(configs), patience=0))
    assert out.simulated and out.evaluated == len(configs)
    stored = best("locvolcalib", "course-large", "float64", gpu=H100)
    assert out.best["config"] == stored["config"]
    assert out.best["time_ms"] == pytest.approx(stored["value"])  # the median of the recorded repeats


def test_recording_holds_the_naive_point_and_only_verified_configs():
    rows = recorded()  # every campaign's kernel code, each measuring the naive point once
    space = get_workload("locvolcalib").space
    configs = [json.loads(c) for c in rows.config]
    assert all(space.is_valid(c) for c in configs)
    assert (rows.status == "ok").all()  # every config matched the numpy reference within 1e-9 relative
    naive = rows[rows.p_STRUCTURE == 0]
    assert len(naive) >= 1 and not naive.kernel_hash.duplicated().any()
    assert (recorded(newest=True).p_STRUCTURE == 0).sum() == 1  # the naive point beside the newest kernel code's best
    assert best("locvolcalib", "course-large", "float64", gpu=H100)["config"]["STRUCTURE"] == 2


def test_run_takes_the_stored_best_for_the_course_large_input():
    w = get_workload("locvolcalib")
    config = run_config(w.name, w.space.sizes["course-large"], "float64", gpu=H100, log=lambda m: None)
    assert config == best("locvolcalib", "course-large", "float64", gpu=H100)["config"]


def test_cli_best(capsys):
    assert main(["best", "locvolcalib", "--size", "course-large", "--dtype", "float64", "--gpu", H100, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["STRUCTURE"] == 2  # a warp per system
