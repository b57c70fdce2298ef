"""Faults of distributed campaigns found by a user audit: a resumed campaign that waited for ever on a trial
nobody held, a replay's measuring process that printed tracebacks on Ctrl-C, `tuner status` creating the
database of a mistyped URL, and its line on a simulated campaign's confirmation."""

import threading
import warnings
from multiprocessing import Pipe
from types import SimpleNamespace

import optuna
import pytest
import sqlalchemy

from tests.recorded import is_recorded
from tests.test_distributed import SEED, two_config_campaign
from tuner.cli import main


@pytest.mark.skipif(not is_recorded(*SEED), reason="no recorded reduction campaign in results/")
def test_a_dead_trial_without_a_worker_tag_does_not_block_a_retry_and_is_retried(results):
    """The audit's hang, built directly: trial A was asked (and beat once) by a worker killed before it tagged
    A with its name; trial B, lost too, held the same config and its retry is queued. The retry asked before
    the next stale check reached A: A, silent past the grace period, must not make the retry step aside as
    `taken` (its config then had no live holder, and the campaign waited on A). A is then retried, and the
    campaign finishes with the config measured once."""
    from tuner.campaign.distributed.campaign_loop import CampaignLoop
    from tuner.campaign.distributed.study import TrialCodec
    from tuner.search import optuna_private

    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)  # asking outside Study.optimize
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    study, storage, camp, space = two_config_campaign(results, "untagged")
    codec = TrialCodec(space)
    config, other = (tuple(c) for c in space.list)
    study.enqueue_trial(codec.encode(config))
    study.enqueue_trial(codec.encode(config))
    untagged, lost = study.ask(), study.ask()  # both the dead workers'; A never got its `worker` attribute
    lost.set_user_attr("worker", "gone")
    for t in (untagged, lost):
        storage.record_heartbeat(optuna_private.trial_id(t))
    with storage.engine.begin() as conn:  # both silent for 94 s, past the 30-s grace
        conn.execute(sqlalchemy.text("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-94 seconds')"))
    storage.set_trial_state_values(optuna_private.trial_id(lost), optuna.trial.TrialState.FAIL)  # another's check
    storage.get_heartbeat_stale_trial_callback()(study, storage.get_trial(optuna_private.trial_id(lost)))

    loop = CampaignLoop(study, storage, camp, space, "me")
    loop.liveness.next_check = float("inf")  # this worker's own stale check not due yet (the race)
    kinds = []
    try:
        retry = loop.propose()
        assert retry is not None and retry.config == config and loop.settled == 0  # measured, not `taken`
        loop.record(retry.trial, retry.config, 1.0, "measured")
        loop.release(retry.trial)
        loop.liveness.next_check = 0.0  # the check is due: A is failed and retried like any dead worker's trial
        while (p := loop.propose()) is not None:
            loop.record(p.trial, p.config, 1.0, "measured")
            loop.release(p.trial)
        assert loop.running == 0  # the campaign is done: nothing left running anywhere
        kinds = [t.user_attrs.get("tuner", {}).get("kind") for t in study.get_trials()]
    finally:
        loop.close()
    assert study.trials[untagged.number].state == optuna.trial.TrialState.FAIL
    (again,) = [t for t in study.get_trials() if t.system_attrs.get("failed_trial") == untagged.number]
    assert again.user_attrs["tuner"]["kind"] == "repeat"  # told the retry's value, not measured twice
    assert kinds.count("measured") == 2  # each config once
    assert {
        codec.config_of(t) for t in study.get_trials() if t.user_attrs.get("tuner", {}).get("kind") == "measured"
    } == {config, other}


def test_a_replay_process_exits_quietly_when_its_parent_goes(monkeypatch, capsys):
    """Ctrl-C or a dead parent closes the pipe: the replaying process returns instead of raising EOFError."""
    from tuner.measure import replay

    class Stub:
        setup: dict = {}

        def __init__(self, *args):
            pass

    monkeypatch.setattr(replay, "ReplayMeasurer", Stub)
    monkeypatch.setenv("TUNER_REPLAY", "recording.json")
    parent, child = Pipe()
    errors = []

    def run():
        try:
            replay.replay_main(child, SimpleNamespace(env={}))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    parent.recv()  # Ready
    parent.close()
    thread.join(timeout=10)
    assert not thread.is_alive() and errors == []


def test_status_on_a_missing_sqlite_file_is_an_error_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "typo.sqlite3"
    assert main(["status", "--storage", f"sqlite:///{missing}"]) == 2
    assert "error: no campaign database at" in capsys.readouterr().err
    assert not missing.exists()


def test_status_of_a_simulated_campaign_says_its_confirmation_was_replayed():
    from tuner.campaign.distributed import format_status

    s = {
        "campaign": "c",
        "workload": "reduction",
        "size": "seed",
        "dtype": "float32",
        "strategy": "brute_force",
        "gpu": "G",
        "simulated": True,
        "done": 1,
        "total": 1,
        "running": 0,
        "waiting": 0,
        "retried": 0,
        "failures": {},
        "best": None,
        "workers": {},
        "confirmed": {"finalists": 8, "seconds": 0.0, "config": {"a": 1}},
    }
    assert "finalists replayed from the recording" in format_status(s)
    assert "measured again" in format_status({**s, "simulated": False})
