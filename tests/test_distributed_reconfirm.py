"""A distributed campaign resumed with more budget confirms its near-ties again (tuner/campaign/distributed/worker.py
_confirm_campaign): its first confirmation stood before, and `tuner status` and the resumed `tune` showed a choice
among the first run's near-ties, 3% slower than the best found since. Run again with nothing new, it measures
nothing again. Replays of floyd-warshall-small 5k recorded on the H100, one worker, its configs queued in the
study (a worker takes queued trials in order): each run measures the configs the test means."""

import json
import shutil
from pathlib import Path

import pytest

from tuner import locations
from tuner.campaign.distributed import campaign_status, create_campaign
from tuner.campaign.distributed import worker as worker_module
from tuner.campaign.distributed.study import read_campaign
from tuner.campaign.request import CampaignRequest
from tuner.cli import main
from tuner.measure.replay import recording_searchspace
from tuner.workloads import get_workload

GPU = "nvidia-h100-80gb-hbm3"
WORKLOAD = "floyd-warshall-small"
NAME = "fw-resumed"
_BASE = {"BLOCK": 64, "DPX": 0, "KCHUNK": 0, "K_UNROLL": 16, "LOOKAHEAD": 0, "MIN_BLOCKS": 0, "PAD": 4,
         "PRIORITY": 0, "SPLIT": 100, "VEC": 1, "block_size_x": 16, "block_size_y": 8}
# the first run's two: 13.29 and 13.32 ms in the recording, near-ties of each other (0.2% apart)
FIRST = ({**_BASE, "VEC": 0}, {**_BASE, "LOOKAHEAD": 2})
# the resumed run's two: the space's best (12.87 ms) and its one near-tie (13.04 ms), both faster than FIRST's
BEST = ({**_BASE}, {**_BASE, "block_size_y": 16})


@pytest.fixture
def campaign(results: Path) -> str:
    """A new campaign's storage URL, its first run's configs (FIRST) and then BEST's queued, the recording in the
    store."""
    shutil.copytree(locations.BUILTIN_RESULTS / GPU / WORKLOAD, results / GPU / WORKLOAD)
    url = f"sqlite:///{results / 'c.db'}"
    req = CampaignRequest(workload=WORKLOAD, size="5k", dtype="int32", strategy="random", max_evals=2,
                          simulate=True, warm_start=False, first=(*FIRST, *BEST), results=results)
    create_campaign(req, NAME, url)
    return url


def _tune(url: str, budget: int, capsys: pytest.CaptureFixture) -> dict:
    argv = ["tune", WORKLOAD, "--size", "5k", "--dtype", "int32", "--strategy", "random", "--simulate",
            "--workers", "1", "--no-warm-start", "--campaign", NAME, "--storage", url, "--budget", str(budget),
            "--quiet", "--json"]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _confirmations(results: Path) -> list[Path]:
    return sorted((results / "simulated").glob(f"*/{WORKLOAD}/confirmations/*.parquet"))


def test_a_campaign_resumed_with_a_larger_budget_confirms_its_new_near_ties(campaign, results, capsys):
    _tune(campaign, 2, capsys)
    first = campaign_status(NAME, campaign, results)
    assert first["done"] == 2 and first["best"]["config"] in FIRST
    assert first["confirmed"]["config"] in FIRST and first["confirmed"]["finalists"] == 2
    resumed = _tune(campaign, 4, capsys)
    s = campaign_status(NAME, campaign, results)
    assert s["done"] == 4 and s["best"]["config"] == BEST[0]  # the resumed run measured a new best
    assert s["confirmed"]["config"] in BEST and s["confirmed"]["drawn_from"] == 4  # not the first run's choice
    assert resumed["best"]["config"] in BEST and resumed["best"]["confirmed"]
    assert len(_confirmations(results)) == 2  # each run's worker's re-measurement stored
    # `tuner best` on the replays' store answers the new confirmation's choice (it took no stale one before either:
    # the first one's finalists do not hold the new leader)
    assert main(["--results", str(results / "simulated"), "best", WORKLOAD, "--size", "5k", "--dtype", "int32",
                 "--gpu", "h100", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["config"] == s["confirmed"]["config"]
    assert any("chosen among 2 near-ties" in note for note in answer["notes"])


def test_a_campaign_with_nothing_new_keeps_its_confirmation_and_workers_finishing_together_the_first(
    campaign, results, capsys, monkeypatch
):
    _tune(campaign, 2, capsys)
    study, _, camp = read_campaign(NAME, campaign)
    before, parts = study.user_attrs["confirmed"], _confirmations(results)
    assert before["drawn_from"] == 2
    # a worker joining the finished campaign (another host's, or one resumed on its time limit): nothing new measured
    assert main(["worker", NAME, "--storage", campaign, "--quiet"]) == 0
    assert study.user_attrs["confirmed"] == before and _confirmations(results) == parts  # nothing measured again

    # the record's rules, without a measuring process: a stand-in for the confirmation counts its measurements and
    # records another worker's choice while it measures, where the test says
    space = get_workload(WORKLOAD).space
    searchspace = recording_searchspace(space, camp.recording, camp.dtype, store_root=results)
    measured: list[dict | None] = []

    def confirm_and_save(*args, other=None) -> dict:
        measured.append(other)
        if other is not None:
            study.set_user_attr("confirmed", other)
        return {"chosen": FIRST[0], "seconds": 0.2, "rule": "r", "finalists": [{}, {}]}

    def confirm(other: dict | None = None) -> dict:
        monkeypatch.setattr(worker_module.confirmation, "confirm_and_save", lambda *a: confirm_and_save(*a, other=other))
        worker_module._confirm_campaign(study, space, searchspace, None, results, "me", print)
        return study.user_attrs["confirmed"]

    old = {"config": FIRST[1], "worker": "old", "finalists": 2, "seconds": 0.1, "rule": "r"}  # no `drawn_from`
    # a record from before `drawn_from` was kept: what it was drawn from is unknown, so it is confirmed again
    study.set_user_attr("confirmed", old)
    assert confirm() == {**old, "config": FIRST[0], "worker": "me", "seconds": 0.2, "drawn_from": 2}
    assert len(measured) == 1
    assert confirm()["worker"] == "me" and len(measured) == 1  # drawn from these results: not measured again
    # two workers finishing together: the choice recorded first for the same results stands
    study.set_user_attr("confirmed", old)
    other = {**old, "worker": "other", "drawn_from": 2}
    assert confirm(other) == other and len(measured) == 2


@pytest.mark.parametrize("drawn_from", [2, None])
def test_a_finished_campaign_whose_confirmation_is_out_of_date_is_confirmed_again(campaign, results, capsys, drawn_from):
    """A resumed run that measured everything but was stopped before its confirmation (here: its record set back to
    fewer results): run again, it starts a worker, which measures nothing and confirms every result's near-ties;
    before, the campaign counted as finished (a worker had finished it once) and no worker started. So too a record
    from before `drawn_from` was kept (`drawn_from` None: the key removed), which `tuner status` showed as current."""
    _tune(campaign, 4, capsys)
    study, _, _ = read_campaign(NAME, campaign)
    record = {k: v for k, v in study.user_attrs["confirmed"].items() if k != "drawn_from"}
    study.set_user_attr("confirmed", record if drawn_from is None else {**record, "drawn_from": drawn_from})
    status = campaign_status(NAME, campaign, results)["confirmed"]
    if drawn_from is None:
        assert status["drawn_from_unknown"] and "measured_since" not in status
        assert main(["status", NAME, "--storage", campaign]) == 0
        assert "drawn from results it did not record" in " ".join(capsys.readouterr().out.split())
        assert main(["status", "--storage", campaign]) == 0  # a line for each campaign: not said to be confirmed
        assert ", confirmed" not in capsys.readouterr().out
    else:
        assert status["measured_since"] == 2
    again = _tune(campaign, 4, capsys)
    assert again["evaluated"] == 4 and again["best"]["confirmed"]
    assert study.user_attrs["confirmed"]["drawn_from"] == 4 and len(_confirmations(results)) == 2
