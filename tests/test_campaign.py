"""Campaigns end to end without a GPU: a stand-in worker (tests/fake_worker.py) misbehaves on purpose
(wrong answers, hangs, crashes); every failure becomes a row with its class, and a re-run resumes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fake_worker import fake_worker_main
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest, parse_budget
from tuner.errors import TunerError
from tuner.store import load_baselines, load_evaluations

PROJECT = Path(__file__).resolve().parent.parent


def request(**kw):
    """A campaign of the stand-in worker; its hanging config is killed at the timeout, 1 s (the stand-in answers
    the others at once: a longer one was only time spent waiting on the hang, as in tests/test_check.py)."""
    base = dict(workload="reduction", size="seed", dtype="float32", strategy="brute_force", timeout=1.0,
                quiet=True, measure_target=fake_worker_main)
    base.update(kw)
    return CampaignRequest(**base)


def test_failures_are_rows_with_their_class_and_never_best(results):
    out = run_campaign(request(max_evals=14))
    df = load_evaluations("reduction")
    assert len(df) == 14 and out.measured == 14
    counts = df["status"].value_counts().to_dict()
    # variant 1: block 64 gives wrong answers (2 finishes), block 128 + atomic hangs, block 256 + atomic crashes
    assert counts == {"ok": 10, "wrong_answer": 2, "timeout": 1, "runtime": 1}
    assert df.loc[df.status == "timeout", "error"].str.contains("no result within 1 s").all()
    assert df.loc[df.status == "runtime", "error"].str.contains("died").all()
    assert out.best is not None and out.best["config"]["block_size_x"] not in (64,)
    ok = df[df.status == "ok"]
    best_row = ok.loc[ok.objective_value.idxmax()]
    assert json.loads(best_row.config) == out.best["config"]
    # provenance on every row
    for col in ("gpu", "driver", "cuda", "backend", "compiler_options", "kernel_hash", "package_version", "git_commit"):
        assert df[col].notna().all() and (df[col] != "").all(), col
    assert set(df.gpu) == {"Fake GPU 9000"}
    assert load_baselines("reduction").baseline.tolist() == ["copy"]


def test_rerun_resumes_without_measuring_twice(results):
    run_campaign(request(max_evals=20))
    second = run_campaign(request(max_evals=30))
    assert second.measured == 10 and second.evaluated == 30
    df = load_evaluations("reduction")
    assert len(df) == 30 and df.config.is_unique


def test_an_optuna_rerun_counts_what_it_resumed_toward_the_budget_and_the_best(results):
    first = run_campaign(request(strategy="tpe", max_evals=12, size="16M", patience=0))
    again = run_campaign(request(strategy="tpe", max_evals=12, size="16M", patience=0))
    assert again.measured == 0 and again.evaluated == 12 and again.best == first.best
    more = run_campaign(request(strategy="tpe", max_evals=20, size="16M", patience=0))
    df = load_evaluations("reduction")
    assert more.measured == 8 and len(df) == 20 and df.config.is_unique
    ok = df[df.status == "ok"]
    assert json.loads(ok.loc[ok.objective_value.idxmax()].config) == more.best["config"]  # the earlier runs' too


def test_an_optuna_study_is_named_by_its_search_space(results):
    """A study's distributions are its space's values, and its sampler learned that space's restrictions: a
    study resumed under a changed space would mix two searches, so another space (values or restrictions) gets
    a study of its own, named as the campaign and then by the GPU, kernel and space."""
    import dataclasses

    import optuna

    from tuner.workloads import get_workload

    space = get_workload("reduction").space
    widened = dataclasses.replace(space, params={**space.params, "block_size_x": [16, *space.params["block_size_x"]]})
    stricter = dataclasses.replace(space, restrictions=[*space.restrictions, "block_size_x >= 128"])
    assert len({space.space_hash, widened.space_hash, stricter.space_hash}) == 3
    run_campaign(request(strategy="tpe", max_evals=4, size="16M", patience=0))
    (db,) = results.rglob("optuna.sqlite3")
    (study,) = optuna.get_all_study_summaries(f"sqlite:///{db}")
    assert study.study_name.startswith("reduction-16M-float32-tpe") and study.study_name.endswith(space.space_hash)


@pytest.mark.parametrize("how", ["refused", "die"])
def test_a_cache_the_worker_cannot_open_is_one_clear_error_and_no_worker_is_left(results, monkeypatch, how):
    import multiprocessing

    monkeypatch.setenv("FAKE_BAD_CACHE", how)
    before = set(multiprocessing.active_children())  # another test on this xdist worker may have left its own
    with pytest.raises(TunerError, match="cache .* cannot be used: .*move it aside"):
        run_campaign(request(max_evals=4))
    assert not set(multiprocessing.active_children()) - before


def test_an_error_after_the_worker_started_stops_it(results, monkeypatch):
    import multiprocessing

    import tuner.campaign.local

    def broken(*a, **kw):
        raise TunerError("the store cannot be read")

    monkeypatch.setattr(tuner.campaign.local, "known_rows", broken)
    before = set(multiprocessing.active_children())  # another test on this xdist worker may have left its own
    with pytest.raises(TunerError, match="cannot be read"):
        run_campaign(request(max_evals=4))
    assert not set(multiprocessing.active_children()) - before


def test_kill_midway_then_resume_loses_nothing(results):
    """SIGKILL the campaign process mid-way; the rerun measures only what was missing."""
    script = "from tests.test_campaign import request; from tuner.campaign.local import run_campaign; run_campaign(request(max_evals=40))"
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "FAKE_DELAY": "0.1"}
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=PROJECT, env=env, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        df = load_evaluations("reduction")
        if len(df) >= 5:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = load_evaluations("reduction")
    assert 5 <= len(before) < 40
    again = run_campaign(request(max_evals=40))
    after = load_evaluations("reduction")
    assert after.config.is_unique and len(after) == 40
    assert again.measured == 40 - len(before)


def test_optuna_campaign_never_measures_invalid_or_repeated_configs(results):
    out = run_campaign(request(strategy="tpe", max_evals=60, size="16M"))
    df = load_evaluations("reduction")
    assert out.measured == 60 and df.config.is_unique
    from tuner.workloads import get_workload

    space = get_workload("reduction").space
    assert all(space.is_valid(json.loads(c)) for c in df.config)


def test_budget_parsing():
    assert parse_budget("150") == (150, None)
    assert parse_budget("90s") == (None, 90)
    assert parse_budget("10m") == (None, 600)
    with pytest.raises(TunerError):
        parse_budget("lots")
    with pytest.raises(TunerError):
        parse_budget("0")


def test_time_budget_stops(results):
    t0 = time.time()
    out = run_campaign(request(strategy="random", max_evals=None, time_limit=4.0))
    assert time.time() - t0 < 30
    assert 0 < out.evaluated < 576


def test_a_time_budget_spent_before_the_first_config_says_so(results, capsys):
    """Not "no configuration ran successfully": none ran at all (the search's set-up took the whole budget)."""
    import shutil

    from tuner import locations
    from tuner.cli import main

    shutil.copytree(locations.BUILTIN_RESULTS / "nvidia-h100-80gb-hbm3" / "floyd-warshall-small",
                    results / "nvidia-h100-80gb-hbm3" / "floyd-warshall-small")
    assert main(["tune", "floyd-warshall-small", "--size", "5k", "--simulate", "--budget", "0.001s"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "0 configs evaluated" in out and "no configuration ran successfully" not in out
    assert "the time budget (0.001s) ran out before any configuration was measured" in out
    assert out.endswith("stopped (time limit): the time budget ran out (--budget)")


def test_times_taken_another_way_are_measured_again(results):
    """Times taken over another number of launches, or with another timing protocol (tuner/measure/timing.py), are
    not resumed."""
    import dataclasses

    from tuner.campaign.session import known_rows
    from tuner.workloads import get_workload

    run_campaign(request(max_evals=6))
    df = load_evaluations("reduction")
    space = get_workload("reduction").space
    common = {"size_vars": df.size_vars.iloc[0], "dtype": "float32"}
    provenance = df.iloc[0][["gpu", "kernel_hash", "compiler_options", "backend", "timing"]].to_dict()
    assert provenance["timing"] == "delayed-start" and len(known_rows(df, space, common, provenance)) == 6
    failures = sorted(df.status[df.status != "ok"])  # resumed whatever the protocol
    again = known_rows(df, dataclasses.replace(space, iterations=space.iterations + 25), common, provenance)
    assert sorted(r["status"] for r in again.values()) == failures
    again = known_rows(df, space, common, {**provenance, "timing": "plain"})
    assert sorted(r["status"] for r in again.values()) == failures
    older = df.drop(columns=["timing"])  # rows from before the column: taken "plain"
    assert len(known_rows(older, space, common, {**provenance, "timing": "plain"})) == 6


def test_rows_measured_with_other_parameters_are_not_resumed(results):
    """A parameter promoted from a macro (the source, hence its hash, unchanged) or one dropped from the
    space: the stored rows name other kernels, and neither crash the resume nor stand in for today's configs."""
    import dataclasses

    from tuner.campaign.session import known_rows
    from tuner.workloads import get_workload

    run_campaign(request(max_evals=6))
    df = load_evaluations("reduction")
    space = get_workload("reduction").space
    common = {"size_vars": df.size_vars.iloc[0], "dtype": "float32"}
    provenance = df.iloc[0][["gpu", "kernel_hash", "compiler_options", "backend", "timing"]].to_dict()
    gained = dataclasses.replace(space, params={**space.params, "UNROLL": [1, 2]})
    assert known_rows(df, gained, common, provenance) == {}
    lost = dataclasses.replace(space, params={k: v for k, v in space.params.items() if k != "shuffle"})
    assert known_rows(df, lost, common, provenance) == {}


def test_a_config_measured_again_under_the_current_protocol_supersedes_the_older_time(results):
    """Both recordings stay on disk; queries read only the times taken over the space's number of launches,
    including for a config that only the older way measured (one ranking never mixes the two)."""
    from tuner.store import PartWriter, read_parts

    run_campaign(request(max_evals=6))
    first = load_evaluations("reduction")
    older = first[first.status == "ok"].head(3).copy()  # as if timed over 3 launches before
    older["times"] = [[9.0, 9.0, 9.0]] * 3
    older["campaign_id"] = "older"
    lone = json.loads(older["config"].iloc[2])
    lone["block_size_x"] = 1024 if lone["block_size_x"] != 1024 else 512  # a config measured only then
    older.iloc[2, older.columns.get_loc("config")] = json.dumps(lone, sort_keys=True, separators=(",", ":"))
    assert older["config"].iloc[2] not in set(first["config"])
    folder = next(results.glob("*/reduction/evaluations"))
    writer = PartWriter(folder / "older.parquet")
    writer.rows.extend(older.to_dict("records"))
    writer.flush()
    assert (read_parts("*/reduction/evaluations/*.parquet", results)["campaign_id"] == "older").sum() == 3
    df = load_evaluations("reduction")
    assert len(df) == len(first) and "older" not in set(df.campaign_id)


def test_a_session_uses_the_measuring_process_launched_early_for_it_and_only_that(tmp_path):
    """A distributed worker launches its measuring process before its own imports (tuner worker --launch);
    the session takes it if it is the process it needs, and shuts it down otherwise."""
    from tuner.campaign.session import open_session
    from tuner.measure.runner import IsolatedRunner
    from tuner.workloads import get_workload

    w = get_workload("reduction")
    size_name, size = w.space.resolve_size("seed", w.parse_size)
    req = request()

    def launch(dtype):
        return IsolatedRunner.for_campaign("reduction", size, dtype, req.backend, req.device, timeout=req.timeout,
                                           target=fake_worker_main).launch()

    same, other = launch("float32"), launch("int32")
    for launched, used in ((same, True), (other, False)):
        session = open_session(req, w, size_name, size, "float32", tmp_path, "c", launched=launched)
        try:
            assert (session.runner is launched) == used
            assert session.gpu["gpu"] == "Fake GPU 9000"
            if not used:
                assert launched._proc is None  # the wrong one does not linger
        finally:
            session.runner.shutdown()
            session.writer.flush()


def test_kernel_tuner_ranks_by_the_median_time_as_the_store_does():
    """A strategy's cost and a campaign's best (on `time`, the objective of the host-code workloads) are the
    median of the launches, as `tuner best` ranks: one slow launch does not decide it."""
    from tuner.measure.evaluate import kt_result
    from tuner.measure.runner import _Opts

    row = {"variant": 7, "status": "ok", "times": [1.0, 1.0, 1.0, 10.0]}
    assert kt_result(row, ["variant"], _Opts(metrics=None))["time"] == 1.0


def test_a_timeout_is_resumed_only_under_a_timeout_no_longer_than_its_own(results):
    """A config killed after --timeout 3 is not a failure for good: a campaign with a longer timeout (or a
    row whose timeout was not recorded) measures it again; one with the same or a shorter one resumes it."""
    from tuner.campaign.session import known_rows
    from tuner.workloads import get_workload

    run_campaign(request(max_evals=4, timeout=3.0))
    df = load_evaluations("reduction")
    assert (df.timeout_s == 3.0).all()
    df.loc[0, "status"] = "timeout"
    space = get_workload("reduction").space
    common = {"size_vars": df.size_vars.iloc[0], "dtype": "float32"}
    provenance = df.iloc[0][["gpu", "kernel_hash", "compiler_options", "backend", "timing"]].to_dict()

    def resumed(rows, timeout):
        return {r["status"] for r in known_rows(rows, space, common, provenance, timeout).values()}

    assert "timeout" in resumed(df, 3.0) and "timeout" in resumed(df, 1.0) and "timeout" not in resumed(df, 60.0)
    assert "timeout" not in resumed(df.drop(columns=["timeout_s"]), 3.0)


def test_a_measuring_process_that_dies_in_rounds_marks_no_config_failed_in_the_recording(tmp_path, monkeypatch):
    """Rounds of several configs (a confirmation, a check) that end with the process dead are one failure of
    the rounds, not of the first config: Kernel Tuner's cache, which --simulate replays, is left alone."""
    from tuner.measure.protocol import MeasureSpec
    from tuner.measure.runner import IsolatedRunner

    monkeypatch.setenv("FAKE_DIE_ON_ROUNDS", "1")
    cache = tmp_path / "recording.cache.json"
    header = '{\n"device_name": "Fake GPU 9000",\n"cache": {\n'  # Kernel Tuner's layout: entries are appended
    cache.write_text(header)
    spec = MeasureSpec(workload="reduction", size={"n": 4194304}, dtype="float32", backend="nvcuda", device=0,
                      cachefile=str(cache))
    runner = IsolatedRunner(spec, timeout=10, target=fake_worker_main)
    runner.start()
    try:
        keys = ["variant", "block_size_x", "items_per_thread", "vector", "shuffle", "finish"]
        rows = runner.measure_interleaved([[7, 256, 16, 4, 1, 1], [7, 256, 8, 4, 1, 1]], keys, rounds=3)
    finally:
        runner.shutdown()
    assert [r["status"] for r in rows] == ["runtime"] and cache.read_text() == header


def test_a_ctrl_c_is_the_campaigns_to_act_on_not_the_measuring_processs(capfd):
    """Ctrl-C reaches the whole process group: the measuring process must neither die of it (the campaign could
    then store the config it was measuring as a failure) nor print a traceback; the campaign stops it."""
    import os
    import signal

    from tuner.measure.protocol import MeasureSpec
    from tuner.measure.runner import IsolatedRunner

    spec = MeasureSpec(workload="reduction", size={"n": 4194304}, dtype="float32", backend="nvcuda", device=0,
                       cachefile=None)
    runner = IsolatedRunner(spec, timeout=10, target=fake_worker_main)
    runner.start()
    try:
        os.kill(runner._proc.pid, signal.SIGINT)
        keys = ["variant", "block_size_x", "items_per_thread", "vector", "shuffle", "finish"]
        rows = runner.measure_interleaved([[7, 256, 16, 4, 1, 1]], keys, rounds=2)
        assert [r["status"] for r in rows] == ["ok"] and runner._proc.is_alive()
    finally:
        runner.shutdown()
    assert "KeyboardInterrupt" not in capfd.readouterr().err


@pytest.mark.parametrize("failure, said", [("compile", "does not compile"), ("wrong_answer", "disagrees with the reference")])
def test_a_kernel_that_fails_every_config_the_same_way_is_one_line(results, monkeypatch, failure, said):
    """A kernel that does not compile, or a reference that disagrees with every config: bad input, said in
    one line naming the kernel file, not a campaign of identical failures; the failures stay stored."""
    monkeypatch.setenv("FAKE_EVERY_CONFIG", failure)
    with pytest.raises(TunerError, match=rf"reduce.cu: reduce {said} for any of the 3 configs measured; the first: "):
        run_campaign(request(max_evals=3, confirm=False))
    stored = load_evaluations("reduction", results)
    assert len(stored) == 3 and set(stored["status"]) == {failure}
