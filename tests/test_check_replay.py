"""`tuner check --simulate` (issue 22): the regression gate replayed from the committed baselines' recorded
rounds, each baseline's last worker session playing the fresh measurement; no GPU needed."""

import json

import pytest

from tuner.answers.baseline import load_check_baselines
from tuner.answers.check_replay import held_out, simulate_check
from tuner.cli import main
from tuner.store import results_root

BASELINES = load_check_baselines(results_root())
needs_baselines = pytest.mark.skipif(BASELINES.empty, reason="no baseline committed")


@needs_baselines
def test_unchanged_kernels_pass_and_each_result_says_it_was_replayed(capsys):
    assert main(["check", "--simulate", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["checks"]) == len(BASELINES) and {c["verdict"] for c in doc["checks"]} == {"pass"}
    assert all(c["reason"].startswith("replayed: sessions 1-") for c in doc["checks"])


@needs_baselines
def test_a_planted_slowdown_is_a_regression_and_exit_1(capsys):
    assert main(["check", "--simulate", "--plant-slowdown", "0.1", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert {c["verdict"] for c in doc["checks"]} == {"regression"}
    assert all(c["raw"]["change"] > 0.05 for c in doc["checks"])


@needs_baselines
def test_the_held_out_session_is_the_last_one_and_the_baseline_the_others():
    base = BASELINES.iloc[0].to_dict()
    earlier, now = held_out(base)
    per = len(base["rounds"]) // int(base["sessions"])
    assert earlier["sessions"] == base["sessions"] - 1 and len(now["rounds"]) == per
    assert list(earlier["rounds"]) + list(now["rounds"]) == list(base["rounds"])
    one = {**base, "sessions": 1}
    assert held_out(one) is None


@needs_baselines
def test_a_one_session_baseline_is_refused_not_passed(results):
    import shutil

    from tuner.store import gpu_slug

    row = BASELINES.iloc[[0]].copy()
    row["sessions"] = 1
    folder = results / gpu_slug(row["gpu"].iloc[0]) / row["workload"].iloc[0] / "check"
    folder.mkdir(parents=True)
    row.to_parquet(folder / "baseline.parquet", index=False)
    (res,) = simulate_check(root=results, log=lambda _: None)
    assert res.verdict == "refused" and res.exit_code == 2 and "two sessions" in res.reason
    shutil.rmtree(folder)


def test_plant_slowdown_needs_simulate(capsys):
    assert main(["check", "--plant-slowdown", "0.1"]) == 2
    assert "--plant-slowdown is for --simulate" in capsys.readouterr().err
