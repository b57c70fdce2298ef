"""A distributed campaign starts and stops its search as a single-process one does (a user audit found `tune
--workers` ignoring both): the warm start's configs queued in its study when it is created, marked so, and the
patience (the default where no budget is given, --patience, or none with a budget) kept among its settings and
applied to every worker's results in trial order (tuner.campaign.search_start)."""

import json

import optuna
import pytest

from tuner.campaign.distributed.study import Campaign
from tuner.cli import main
from tuner.search import trial_kinds
from tuner.search.early_stopping import Patience
from tuner.search.names import DEFAULT_PATIENCE


def _study(url: str) -> optuna.Study:
    (name,) = optuna.get_all_study_names(url)
    return optuna.load_study(study_name=name, storage=url)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project: the replays read the recordings the built-in workloads come with."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    return tmp_path


@pytest.mark.parametrize(
    ("options", "warm", "patience"),
    [
        ([], True, DEFAULT_PATIENCE),
        (["--no-warm-start", "--patience", "5"], False, 5),
        (["--budget", "30"], True, None),  # a budget asked for is used whole
        (["--patience", "0"], True, None),  # never
    ],
)
def test_a_new_campaign_queues_the_warm_start_and_keeps_its_patience(project, capsys, options, warm, patience):
    url = f"sqlite:///{project / 'c.db'}"
    argv = ["tune", "reduction", "--size", "16M", "--simulate", "--workers", "0", "--storage", url, *options]
    assert main(argv) == 0
    capsys.readouterr()
    study = _study(url)
    assert Campaign(**study.user_attrs["campaign"]).patience == patience
    queued = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert all(t.user_attrs.get(trial_kinds.WARM_START) for t in queued)
    assert (len(queued) > 0) == warm  # the best configs of the other recorded sizes
    assert main(argv) == 0  # resumed as it is: nothing queued twice
    assert len(_study(url).get_trials(states=(optuna.trial.TrialState.WAITING,))) == len(queued)


def test_workers_stop_on_the_campaigns_patience_and_say_so(project, capsys):
    url = f"sqlite:///{project / 'p.db'}"
    argv = ["tune", "reduction", "--size", "16M", "--simulate", "--workers", "2", "--patience", "5", "--storage", url]
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == "patience"
    assert result["evaluated"] < 40  # the default budget of this space is 100
    # the workers stopped where the single-process rule says, over every worker's results in trial order: once
    # the results that spend the patience were all in, no worker asked for another trial, but for one ask a
    # worker whose look at the study came just before (the trials already asked are measured: up to two a
    # worker, the one measuring and the one behind it, Scheduler._inflight)
    trials = _study(url).get_trials()
    done = sorted((t for t in trials if trial_kinds.holds_result(t)), key=lambda t: t.number)
    costs = [trial_kinds.cost(t) if trial_kinds.info(t).get("status") == "ok" else None for t in done]
    rule = Patience(5)
    fired = next((i + 1 for i, cost in enumerate(costs) if rule.update(cost)), None)
    assert fired is not None and fired <= len(costs)
    spent_at = max(t.datetime_complete for t in done[:fired])
    asked_after = [t.number for t in trials if t.datetime_start is not None and t.datetime_start > spent_at]
    assert len(asked_after) <= 2, (fired, len(costs), asked_after)


def test_a_finished_campaign_run_again_starts_no_workers_and_says_so(project, capsys):
    url = f"sqlite:///{project / 'f.db'}"
    argv = ["tune", "reduction", "--size", "16M", "--simulate", "--workers", "2", "--storage", url, "--json"]
    assert main([*argv, "--budget", "12"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["stop_reason"] == "budget"  # said as one process says it (it was null)
    assert main([*argv, "--budget", "12"]) == 0
    out, err = capsys.readouterr()
    assert "is finished (12/12 evaluated): nothing left to measure" in err
    assert not [line for line in err.splitlines() if line.startswith("worker ")]  # none started: no summary line
    assert json.loads(out)["best"] == first["best"]
    assert main([*argv, "--budget", "15"]) == 0  # a larger budget goes on with it
    assert json.loads(capsys.readouterr().out)["evaluated"] == 15


def test_a_distributed_brute_force_says_it_evaluated_the_whole_space(project, capsys):
    url = f"sqlite:///{project / 'b.db'}"
    argv = ["tune", "floyd-warshall-small", "--size", "5k", "--dtype", "int32", "--strategy", "brute_force",
            "--simulate", "--workers", "2", "--storage", url, "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evaluated"] == 56 and result["stop_reason"] == "space exhausted"  # as one process says it
