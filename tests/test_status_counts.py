"""`tuner status`'s numbers add up: every running trial is a worker's, one being asked (Optuna's ask and the worker's
`worker` tag are two transactions), or one orphaned (its worker died in between); and a worker's timeline is in the
study stage by stage, not only once the worker ends."""

import json
import warnings

import optuna
import sqlalchemy

from tests.fake_worker import fake_worker_main
from tuner.campaign.distributed import campaign_status, create_campaign, format_status, format_summary, run_worker
from tuner.campaign.distributed.study import join_campaign
from tuner.campaign.request import CampaignRequest
from tuner.cli import main
from tuner.search import optuna_private

STAGES = ["loaded", "joined", "ready", "searched", "confirmed", "closed"]


def campaign(results, name, **settings):
    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random", max_evals=4,
                          timeout=3.0, results=results, **settings)
    _, url = create_campaign(req, name, None, heartbeat_s=1, grace_s=30)
    return url


def test_running_trials_add_up_to_the_workers_and_those_being_asked_or_orphaned(results, capsys):
    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)  # asking outside Study.optimize
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    url = campaign(results, "counts")
    study, storage, _ = join_campaign("counts", url)
    for w in ("w1", "w2"):  # on another host: its process is not looked for here
        study.set_user_attr(f"worker:{w}", {"host": "elsewhere", "pid": 1, "timeline_s": {"loaded": 1.0}})
    mine, theirs, asking, orphan = (study.ask() for _ in range(4))
    mine.set_user_attr("worker", "w1")
    theirs.set_user_attr("worker", "w2")
    for t in (mine, theirs, asking, orphan):
        storage.record_heartbeat(optuna_private.trial_id(t))
    with storage.engine.begin() as conn:  # the orphan's worker died after its first beat, before it tagged it
        conn.execute(sqlalchemy.text("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-94 seconds') "
                                     "WHERE trial_id = :t"), {"t": optuna_private.trial_id(orphan)})

    s = campaign_status("counts", url)
    workers = sum(w["running"] for w in s["workers"].values())
    assert (s["running"], workers, s["being_asked"], s["orphaned"]) == (4, 2, 1, 1)
    assert s["running"] == workers + s["being_asked"] + s["orphaned"]
    assert {w: info["state"] for w, info in s["workers"].items()} == {"w1": "running", "w2": "running"}
    said = "running 4 (2 by workers, 1 being asked, 1 orphaned by a dead worker, to be retried)"
    assert f"done 0/4, {said}, queued 0" in format_status(s)
    assert f"done 0/4, {said}" in format_summary(s)
    # the JSON is the table's numbers
    assert main(["status", "counts", "--storage", url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {k: doc[k] for k in ("running", "being_asked", "orphaned")} == {"running": 4, "being_asked": 1,
                                                                          "orphaned": 1}
    assert main(["status", "counts", "--storage", url]) == 0
    assert said in capsys.readouterr().out

    # once each is tagged and the orphan is gone, the plain line again
    asking.set_user_attr("worker", "w1")
    study.tell(orphan, state=optuna.trial.TrialState.FAIL)
    s = campaign_status("counts", url)
    assert (s["running"], s["being_asked"], s["orphaned"]) == (3, 0, 0)
    assert "done 0/4, running 3, queued 0" in format_status(s)
    assert sorted((w, info["running"]) for w, info in s["workers"].items()) == [("w1", 2), ("w2", 1)]


def test_a_workers_timeline_is_in_the_study_as_it_goes(results):
    """While it measures, its record already says it is ready; when it ends, every stage and how it ended, in the
    same write (a status never sees `closed` without `ended`)."""
    url = campaign(results, "timeline")
    seen = []

    def log(msg):  # called as each trial is told, on the worker's scheduler thread
        if ": ok" in msg:
            study = optuna.load_study(study_name="timeline", storage=url)
            (record,) = [v for k, v in study.user_attrs.items() if k.startswith("worker:")]
            seen.append((list(record["timeline_s"]), record.get("ended")))

    summary = run_worker("timeline", url, 0, results=results, measure_target=fake_worker_main, log=log)
    assert summary["measured"] == 4 and seen
    assert all(stages == ["loaded", "joined", "ready"] and ended is None for stages, ended in seen), seen
    (worker,) = campaign_status("timeline", url)["workers"].values()
    assert list(worker["timeline_s"]) == STAGES and worker["ended"] == worker["state"] == "finished"
