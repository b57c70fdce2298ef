"""A distributed campaign starts and stops its search as a single-process one does (a user audit found `tune
--workers` ignoring both): the warm start's configs queued in its study when it is created, marked so, and the
patience (the default where no budget is given, --patience, or none with a budget) kept among its settings and
applied to every worker's results in trial order (tuner.campaign.search_start)."""

import json
import threading
import warnings
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest

from tuner.campaign.distributed import create_campaign
from tuner.campaign.distributed.scheduler import Scheduler
from tuner.campaign.distributed.study import Campaign, join_campaign
from tuner.campaign.request import CampaignRequest
from tuner.cli import main
from tuner.measure import kt
from tuner.search import trial_kinds
from tuner.search.early_stopping import Patience
from tuner.search.loop import FAILED
from tuner.search.names import DEFAULT_PATIENCE
from tuner.workloads import get_workload


def _study(url: str) -> optuna.Study:
    (name,) = optuna.get_all_study_names(url)
    return optuna.load_study(study_name=name, storage=url)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project: the replays read the recordings the built-in workloads come with."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    return tmp_path


def scheduler_for(root: Path, **request) -> Scheduler:
    """A worker's Scheduler on a new replayed campaign of reduction 16M (`request`: its CampaignRequest's other
    fields), made as run_worker makes it, but for its session: a stand-in that measures nothing (a test gives it
    `cost_func`) and keeps the rows it is given in `writer.rows`."""
    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)  # asking outside Study.optimize
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    req = CampaignRequest(
        workload="reduction", size="16M", strategy="random", simulate=True, warm_start=False, results=root, **request
    )
    camp, url = create_campaign(req, "stand-in", f"sqlite:///{root / 'stand-in.db'}")
    study, storage, camp = join_campaign(camp.name, url)
    space = get_workload("reduction").space
    rows: list[dict] = []
    session = SimpleNamespace(
        runner=SimpleNamespace(),  # no compile pool: nothing compiled ahead
        gpu={"gpu": "stand-in"},
        # a GPU the store has no rows of: nothing is served from before
        common={"size_vars": json.dumps(camp.size_vars, sort_keys=True), "dtype": camp.dtype},
        provenance={"gpu": "stand-in", "kernel_hash": camp.kernel_hash, "compiler_options": "", "backend": "cuda"},
        writer=SimpleNamespace(append=rows.append, rows=rows),
    )
    searchspace = kt.searchspace(space, camp.dtype)
    return Scheduler(study, storage, camp, space, searchspace, session, "w", root, req, lambda msg: None)


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


def test_a_worker_gives_back_the_trials_asked_ahead_once_it_finds_the_patience_spent(project, monkeypatch):
    """As one process drops the trials it asked ahead when its patience stops the search (tuner.search.ahead), a
    worker gives back, unmeasured, those it takes after its scheduler's look at the study found the campaign's
    patience spent (as at its time limit), and says it stopped on the patience, as `tuner status` says it of the
    campaign. The order is made so: three trials asked (a compile pool's depth), the first told (a failure: a
    patience of 1 is spent) and looked at while the second measures; the third is then given back."""
    worker = scheduler_for(project, patience=1)
    monkeypatch.setattr(worker, "_inflight", lambda: 3)
    asked, looked = threading.Event(), threading.Event()
    proposed: list[tuple] = []
    numbers: list[int] = []  # of the trials proposed (the sampler's invalid configs are told at once, apart)
    propose, wanted = worker.loop.propose, worker.loop.wanted

    def proposing():
        proposal = propose()
        if proposal is not None:
            proposed.append(proposal.config)
            numbers.append(proposal.trial.number)
        if len(proposed) == 3:
            asked.set()
        return proposal

    def looking() -> bool:
        more = wanted()
        if not more:
            looked.set()
        return more

    measured: list[tuple] = []

    def measure(config: list, check_restrictions: bool = False) -> float:
        measured.append(tuple(config))
        # the first waits for the three to be asked; the second, for the look after the first was told
        assert (asked if len(measured) == 1 else looked).wait(30)
        worker._on_row({"status": "compile", "error": "stand-in"}, False)  # served: a failure, no gain
        return FAILED

    monkeypatch.setattr(worker.loop, "propose", proposing)
    monkeypatch.setattr(worker.loop, "wanted", looking)
    worker.cost_func = measure
    summary = worker.run()
    assert len(proposed) == 3 and measured == proposed[:2]  # the third, taken after the look, was not measured
    assert summary["stopped"] == "patience" and summary["served"] == 2
    trials = [worker.study.trials[n] for n in numbers]
    assert [trial_kinds.kind_of(t) for t in trials] == ["served", "served", "given_back"]
    assert trials[-1].state == optuna.trial.TrialState.FAIL  # its config free again: nothing holds it
