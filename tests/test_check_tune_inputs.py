"""What `tuner check --simulate`, `tuner tune` and `tuner compare-strategies` say to a user without a GPU: a plant
or re-tune the replay cannot honour is refused or done, never silently dropped; a replay with nothing to replay
says what is recorded; a confirmation's choice among near-ties is explained on every path."""

import json
import re
from pathlib import Path

import pytest

from tests.recorded import is_recorded
from tuner.answers.baseline import load_check_baselines
from tuner.answers.check_replay import simulate_check
from tuner.campaign.summary import chosen_line
from tuner.cli import main
from tuner.errors import TunerError
from tuner.store import gpu_slug, results_root

H100 = "NVIDIA H100 80GB HBM3"
BASELINES = load_check_baselines(results_root())
REDUCTION = BASELINES[BASELINES["workload"] == "reduction"]
needs_baselines = pytest.mark.skipif(REDUCTION.empty, reason="no reduction baseline committed")


def one_line_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def checks(argv, capsys) -> tuple[int, list[dict]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)["checks"]


# ---- tuner check --simulate --plant ------------------------------------------------------------------------
@needs_baselines
def test_a_plant_outside_the_space_is_refused_naming_the_values_and_workloads(capsys):
    err = one_line_error(["check", "--simulate", "--plant", "variant=99"], capsys)
    assert "variant=99 is not a value of variant in" in err and "reduction (it has 1, 2, 3, 4, 5, 6, 7)" in err
    if set(BASELINES["workload"]) >= {"floyd-warshall", "reduction"}:  # the check covers workloads without it
        assert "floyd-warshall" in err and "no parameter variant: name the workloads it applies to" in err
    err = one_line_error(["check", "reduction", "--simulate", "--plant", "nope=1"], capsys)
    assert "reduction has no parameter nope (it has variant, block_size_x, items_per_thread" in err


@needs_baselines
def test_a_plant_in_the_space_is_replayed_from_the_stores_campaigns(capsys):
    """finish=0 took 3-42% longer than each best reduction config in the H100 campaigns: each kernel's replayed
    times are scaled by that ratio, which it says, and a plant of 10% or more is a regression."""
    code, done = checks(["check", "reduction", "--simulate", "--plant", "finish=0"], capsys)
    assert code == 1 and len(done) == len(REDUCTION)
    assert all("planted finish=0: its median time over the baseline config's" in c["reason"] for c in done)
    scaled = [float(re.search(r"scaled by ([0-9.]+)", c["reason"]).group(1)) for c in done]
    assert all(factor > 1 for factor in scaled) and any(factor >= 1.1 for factor in scaled)
    assert all(c["verdict"] == "regression" for c, factor in zip(done, scaled) if factor >= 1.1)
    code, done = checks(["check", "reduction", "--simulate", "--plant", "finish=1"], capsys)  # their own value
    assert code == 0 and all("nothing planted" in c["reason"] for c in done)


@needs_baselines
def test_a_planted_config_the_store_never_measured_is_refused_not_passed(results, capsys):
    """Only the baseline in the store, no campaign: there is no time to replay the planted kernel from."""
    row = REDUCTION.iloc[[0]]
    folder = results / gpu_slug(row["gpu"].iloc[0]) / "reduction" / "check"
    folder.mkdir(parents=True)
    row.to_parquet(folder / "baseline.parquet", index=False)
    code, done = checks(["check", "--simulate", "--plant", "finish=0"], capsys)
    assert code == 2 and done[0]["verdict"] == "refused"
    assert "never measured on" in done[0]["reason"] and "--plant-slowdown" in done[0]["reason"]
    import shutil

    from tuner.locations import BUILTIN_RESULTS

    others = [g for g in ("nvidia-h200", "nvidia-h100-80gb-hbm3") if g != gpu_slug(row["gpu"].iloc[0])]
    evaluations = BUILTIN_RESULTS / others[0] / "reduction" / "evaluations"  # campaigns of another GPU only
    shutil.copytree(evaluations, results / others[0] / "reduction" / "evaluations")
    code, done = checks(["check", "--simulate", "--plant", "finish=0"], capsys)
    assert code == 2 and done[0]["verdict"] == "refused" and "never measured on" in done[0]["reason"]


# ---- tuner check --simulate --retune -------------------------------------------------------------------------
@needs_baselines
def test_retune_in_a_simulated_check_replays_a_campaign_for_each_regression(capsys):
    seed = REDUCTION[REDUCTION["size"] == "seed"]
    if seed.empty or not is_recorded(H100, "reduction", "seed", "float32"):
        pytest.skip("no recorded reduction seed campaign")
    code, done = checks(["check", "reduction", "--simulate", "--plant-slowdown", "0.1", "--retune", "3"], capsys)
    assert code == 1 and {c["verdict"] for c in done} == {"regression"}
    assert all(c["retuned"] and set(c["retuned"]["config"]) >= {"variant", "finish"} for c in done)


@needs_baselines
def test_a_retune_with_nothing_to_replay_keeps_the_verdict_and_says_why(results):
    row = REDUCTION.iloc[[0]]
    folder = results / gpu_slug(row["gpu"].iloc[0]) / "reduction" / "check"
    folder.mkdir(parents=True)
    row.to_parquet(folder / "baseline.parquet", index=False)
    (res,) = simulate_check(slowdown=0.2, retune=3, root=results, log=lambda _: None)
    assert res.verdict == "regression" and res.retuned is None
    assert "not re-tuned: nothing recorded to replay for reduction" in res.reason
    with pytest.raises(TunerError, match="--retune -1"):
        simulate_check(retune=-1, root=results, log=lambda _: None)


# ---- tuner tune: nothing to replay ------------------------------------------------------------------------
@pytest.mark.skipif(not is_recorded("NVIDIA H200", "reduction", "n=8388608", "float32"), reason="no H200 recording")
def test_a_replay_of_an_unrecorded_gpu_or_size_lists_what_is_recorded(capsys):
    for argv in (["--gpu", "a100"], ["--gpu", "a100", "--workers", "1"]):  # one process, or workers: alike
        err = one_line_error(["tune", "reduction", "--simulate", *argv], capsys)
        assert "nothing recorded to replay for reduction on a100; it is recorded on" in err
        assert "NVIDIA H200 (--gpu nvidia-h200)" in err and f"{H100} (--gpu nvidia-h100-80gb-hbm3)" in err
    for argv in (["--gpu", "h200"], ["--gpu", "h200", "--workers", "1"]):  # whole words of a recorded GPU's name
        assert main(["tune", "reduction", "--simulate", "--size", "seed", *argv]) == 2
        err = capsys.readouterr().err
        assert "for reduction seed float32 on NVIDIA H200; recorded on NVIDIA H200: " in err
        assert "n=8388608 float32" in err and "--size and --dtype" in err
    assert main(["tune", "reduction", "--simulate", "--gpu", "h200", "--size", "n=8388608", "--budget", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpu"] == "NVIDIA H200" and "GPU 'h200' taken as NVIDIA H200" in doc["notes"][0]


def test_a_workload_with_nothing_recorded_is_not_offered_a_replay(results, tmp_path, monkeypatch, capsys):
    from tuner.measure import machine
    from tuner.workloads.scaffold import init_workload

    init_workload("saxpy", tmp_path / "workloads")
    monkeypatch.setenv("TUNER_WORKLOADS", str(tmp_path / "workloads"))
    monkeypatch.setattr(machine, "gpu_missing", lambda backend: "no CUDA GPU on this machine")
    err = one_line_error(["tune", "saxpy", "--quiet"], capsys)
    assert "no CUDA GPU on this machine; nothing of saxpy is recorded for --simulate to replay" in err
    assert "tuner tune saxpy --simulate" not in err
    err = one_line_error(["tune", "saxpy", "--simulate"], capsys)
    assert "nothing recorded to replay for saxpy: a replay needs a campaign measured on a GPU first" in err


def test_a_recorded_workload_without_a_gpu_is_offered_its_replay(monkeypatch, capsys):
    from tuner.measure import machine

    if not is_recorded(H100, "reduction", "seed", "float32"):
        pytest.skip("no recorded reduction campaign")
    monkeypatch.setattr(machine, "gpu_missing", lambda backend: "no CUDA GPU on this machine")
    err = one_line_error(["tune", "reduction", "--size", "seed", "--quiet"], capsys)
    assert "`tuner tune reduction --simulate` replays a recorded campaign" in err


# ---- tuner tune --workers: the confirmation's choice ---------------------------------------------------------
def test_a_distributed_campaign_says_that_its_confirmation_chose_among_near_ties(monkeypatch):
    """campaign_result (what `tune --workers` prints) says, as a single-process campaign does, that the best it
    answers is the confirmation's choice among near-ties, not the top row."""
    import pandas as pd

    from tuner import store
    from tuner.campaign.distributed import status

    top = {"config": {"vector": 2}, "objective": "GB/s", "value": 3050.0, "time_ms": 0.35}
    doc = {"workload": "reduction", "size": "large", "dtype": "float32", "gpu": H100, "strategy": "auto", "done": 20,
           "failures": {}, "best": top, "confirmed": {"config": {"vector": 4}}, "simulated": True}
    rows = pd.DataFrame([{"config": store.canonical_config({"vector": 4}), "objective_value": 3034.0, "time_ms": 0.354}])
    monkeypatch.setattr(status, "campaign_status", lambda name, url, root=None: doc)
    monkeypatch.setattr(status, "campaign_rows", lambda *args: rows)
    result = status.campaign_result("c", "sqlite:///unused", Path("."))
    assert result.best["config"] == {"vector": 4} and result.best["value"] == 3034.0
    said = " ".join(" ".join(result.closing).split())
    assert "the campaign's top row was vector=2 (3050 GB/s)" in said and "resampled from their recorded times" in said
    assert "the confirmation chose the best above" in said and "`tuner best` answers" not in said  # a replay's
    line = chosen_line(result.best, top)
    assert line and line.endswith("which `tuner best` answers")  # a live campaign's choice is the store's
    assert chosen_line(top, top) is None


# ---- tuner compare-strategies: an unknown strategy ----------------------------------------------------------
def test_an_unknown_strategy_lists_the_default_ones_on_one_line(capsys):
    err = one_line_error(["compare-strategies", "reduction", "--strategies", "tpe,nope"], capsys)
    assert "unknown strategy 'nope'" in err and "choose one of: default, default-cold, auto, tpe" in err
    err = one_line_error(["compare-strategies", "reduction", "--strategies", "default+stop"], capsys)
    assert "default takes no modifiers (default is auto+warm" in err
    err = one_line_error(["compare-strategies", "reduction", "--size", "huge"], capsys)  # no bar's blank line
    assert "unknown size" in err


def test_the_checks_markdown_is_not_wrapped_when_piped(capsys):
    """`tuner check --simulate > summary.md`: the table's rows stay whole (rich would wrap them at 80 columns)."""
    main(["check", "reduction", "--simulate"])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(table) >= 3 and all(line.endswith("|") for line in table), table[:3]
    assert len(table[0]) > 80 and all(line.count("|") == table[0].count("|") for line in table)


def test_a_damaged_baseline_is_said_and_fails_the_gate_unless_allowed(tmp_path, capsys):
    """A baseline part that cannot be read leaves its kernels out of the check: a gate that passed without them
    says so and exits 3 (as `tuner best` does), 0 with --allow-degraded."""
    import shutil

    from tuner.locations import BUILTIN_RESULTS

    root, folder = tmp_path / "results", gpu_slug(H100)
    for workload in ("reduction", "gemm"):
        shutil.copytree(BUILTIN_RESULTS / folder / workload / "check", root / folder / workload / "check")
    (root / folder / "gemm" / "check" / "baseline.parquet").write_bytes(b"not parquet")
    capsys.readouterr()
    assert main(["--results", str(root), "check", "--simulate"]) == 3
    err = capsys.readouterr().err
    assert "degraded store: 1 part(s) left out" in err and "gemm/check/baseline.parquet" in err, err
    assert main(["--results", str(root), "check", "--simulate", "--allow-degraded"]) == 0
    capsys.readouterr()
    assert main(["--results", str(root), "check", "--simulate", "--plant-slowdown", "0.2"]) == 1  # the verdict first
    assert "degraded store: 1 part(s) left out" in capsys.readouterr().err  # and the damage said all the same
