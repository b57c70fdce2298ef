"""A distributed campaign stopped by its time budget (`--budget 30s`: each worker's deadline) says so as one
process does, `stopped (time limit)`, where it said nothing (`"stopped": null`): each worker records that its search
ended at its deadline, and `tuner status` takes the word of the worker that closed last, so that a run resumed
later says how it ended instead (tuner.campaign.distributed.status._stopped)."""

import json
from types import SimpleNamespace

import pytest

from tests.test_distributed_search_start import _study, project, scheduler_for  # noqa: F401  (project: a fixture)
from tuner import store
from tuner.campaign.distributed import scheduler
from tuner.campaign.distributed.status import _stopped
from tuner.cli import main

TIME_LIMIT = "stopped (time limit): the time budget ran out (--budget)"


def _worker(started: float, closed: float | None, **fields) -> dict:
    """A worker's record: its process's start (epoch seconds), its `closed` mark (seconds after it)."""
    marks = {"searched": 1.0} if closed is None else {"searched": 1.0, "closed": closed}
    return {"process_started": started, "timeline_s": marks, **fields}


TIMED_OUT = {"ended": "finished", "stopped": "time limit"}


@pytest.mark.parametrize(
    ("workers", "done", "busy", "said"),
    [
        ([_worker(100, 10, **TIMED_OUT), _worker(100, 12, **TIMED_OUT)], 8, False, "time limit"),
        # the last to close decides: a resumed run stopped by Ctrl-C after a time-limited one
        ([_worker(100, 10, **TIMED_OUT), _worker(200, 5, ended="stopped")], 8, False, None),
        ([_worker(200, 5, ended="stopped"), _worker(100, 10, **TIMED_OUT)], 8, False, None),
        ([_worker(100, 30, ended="stopped"), _worker(120, 15, **TIMED_OUT)], 8, False, "time limit"),  # 135 > 130
        ([_worker(100, 10, **TIMED_OUT), _worker(100, None)], 8, False, "time limit"),  # one still starting
        ([_worker(100, 10, **TIMED_OUT)], 8, True, None),  # trials still running: the campaign goes on
        # a resumed run that used its budget, or the whole space, says so, not the old time limit
        ([_worker(100, 10, **TIMED_OUT), _worker(200, 10, ended="finished")], 10, False, "budget"),
        ([_worker(100, 10, **TIMED_OUT), _worker(200, 10, **TIMED_OUT)], 10, False, "budget"),
        ([], 8, False, None),
    ],
)
def test_the_worker_that_closed_last_says_whether_time_ran_out(workers, done, busy, said):
    assert _stopped([object()] * done, None, 10, 576, busy=busy, workers=workers) == said
    if said == "budget":
        assert _stopped([object()] * 10, None, 10, 10, busy=busy, workers=workers) == "space exhausted"


def test_a_campaign_out_of_time_says_time_limit(project, capsys):  # noqa: F811
    url = f"sqlite:///{project / 't.db'}"
    argv = ["tune", "reduction", "--size", "16M", "--strategy", "brute_force", "--simulate", "--workers", "2",
            "--budget", "3s", "--storage", url]
    rc = main([*argv, "--json"])
    result = json.loads(capsys.readouterr().out)
    # the space is far more than 3 s of replaying; a worker slow to start on a loaded machine may measure none (the
    # clock starts with its search), and then exits 1 as `tune` does when no config ran
    assert result["evaluated"] < 576 and rc == (0 if result["evaluated"] else 1)
    assert result["stop_reason"] == "time limit" and result["closing"][0] == TIME_LIMIT  # as `tune` ends
    name = _study(url).study_name
    assert main(["status", name, "--storage", url, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["stopped"] == "time limit" and status["running"] == 0
    assert [w["stopped"] for w in status["workers"].values()] == ["time limit", "time limit"]
    assert main(["status", name, "--storage", url]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == TIME_LIMIT


def test_a_workers_time_budget_starts_after_its_store_read(project, monkeypatch):  # noqa: F811
    """A worker's deadline starts where one process's time budget does (Kernel Tuner's TuningBudget, made in
    kt.tuning_options after the store read: tuner.campaign.local._run_session), not before its read of the store
    for rows measured before, which a store of many parts makes slow. The worker's clock is a stand-in that only
    the store's reads move."""
    clock = [1000.0]
    monkeypatch.setattr(scheduler, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    read = store.load_evaluations

    def slow_read(*args, **kwargs):
        clock[0] += 100.0
        return read(*args, **kwargs)

    monkeypatch.setattr(store, "load_evaluations", slow_read)
    worker = scheduler_for(project, time_limit=30.0)
    try:
        assert worker.deadline == clock[0] + 30.0  # the worker's read was the last: its time starts after it
    finally:
        worker.loop.close()
