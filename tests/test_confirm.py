"""The confirmation step after a campaign (tuner/campaign/confirmation.py): finalists, the tie rule, and, on the GEMM
2048^3 space recorded on the H100 (replayed: each round resamples a config's recorded times), one worker
and two workers choosing the same config among the near-ties; a single-process campaign confirming too."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.recorded import is_recorded, recording
from tuner.campaign import confirmation
from tuner.campaign.distributed import default_name, default_storage
from tuner.cli import main
from tuner.measure.replay import recording_searchspace
from tuner.store import cache_path, canonical_config, read_parts, results_root
from tuner.workloads import get_workload

H100 = "NVIDIA H100 80GB HBM3"
GEMM = ("gemm", "2048x2048x2048", "float32")
RECORDED = is_recorded(H100, *GEMM)


def key(i):
    return json.dumps({"x": i})


def test_finalists_are_the_near_ties_nearest_first_and_capped():
    order = [key(i) for i in range(10)]
    times = {key(0): 1.05, key(1): 1.0, key(2): 1.015, key(3): 1.03, key(4): 1.0}
    assert confirmation.finalists(times, order, maximize=False) == [key(1), key(4), key(2)]
    assert confirmation.finalists(times, order, maximize=False, most=2) == [key(1), key(4)]
    gflops = {key(0): 100.0, key(1): 99.0, key(2): 90.0}
    assert confirmation.finalists(gflops, order, maximize=True) == [key(0), key(1)]
    assert confirmation.finalists({}, order, maximize=True) == []


def test_a_measuring_process_keeps_the_compiled_kernels_of_as_many_configs_as_are_finalists():
    from tuner.measure.process import Fastest

    assert Fastest.KEEP == confirmation.MAX_FINALISTS


def test_finalists_are_measured_in_the_space_order_whatever_their_campaign_ranking():
    class Recorder:
        def measure_interleaved(self, configs, params, rounds, references=True):
            self.configs = configs
            return [{"status": "ok", "rounds": [1.0 + 0.001 * c[0]] * rounds} for c in configs]

    order = [key(i) for i in range(5)]
    runner = Recorder()
    record = confirmation.confirm(runner, ["x"], {key(3): 1.0, key(1): 1.001, key(4): 1.002}, order, False, log=lambda m: None)
    assert runner.configs == [[1], [3], [4]] and record["chosen"] == {"x": 1}


def test_ties_resolve_to_the_first_in_space_order_a_clear_winner_stands():
    rng = np.random.default_rng(0)
    noisy = lambda ms: list(ms * np.exp(rng.normal(0, 0.002, 15)))
    order = [key(i) for i in range(3)]
    # key(0) 0.2% slower than key(1): a tie, and first in the space's order
    chosen, table = confirmation.choose({key(1): noisy(1.0), key(0): noisy(1.002), key(2): noisy(1.05)}, order)
    assert chosen == key(0) and table[key(0)]["tie"] and not table[key(2)]["tie"]
    # 3% slower is no tie, however early in the order
    chosen, table = confirmation.choose({key(0): noisy(1.03), key(1): noisy(1.0)}, order)
    assert chosen == key(1) and table[key(0)]["change"] > 0.02


# benchmark records, not the store: benchmarks/common/distributed_speedup.sh keeps each run's confirmations there
H200_RECORDS = Path(__file__).resolve().parent.parent / "results" / "records" / "gemm" / "nvidia-h200" / "distributed"
H200_CONFIRMATIONS = sorted(H200_RECORDS.glob("*-confirmations-*.parquet"))


@pytest.mark.skipif(not H200_CONFIRMATIONS, reason="no recorded H200 confirmations in results/records/")
def test_the_tie_rule_chooses_one_config_in_every_recorded_confirmation_on_the_h200():
    """Five pairs of GEMM 2048^3 campaigns on two H200s, each of their workers' confirmation replayed
    from its recorded rounds: the near-ties' gaps repeat within 0.2% from run to run, so the rule must
    land on one config every time (a band of 0.5% cut through a config at +0.33..+0.54%)."""
    import pandas as pd

    confirmations = [rows for path in H200_CONFIRMATIONS for _, rows in pd.read_parquet(path).groupby("worker")]

    def choices(tie):  # rows come in the space's order, as they were measured
        return [confirmation.choose({k: list(r) for k, r in zip(rows.config, rows.rounds_ms)}, list(rows.config), tie)[0]
                for rows in confirmations]

    assert len(confirmations) >= 12 and len(set(choices(confirmation.TIE))) == 1
    assert len(set(choices(0.005))) == 2


class _Failing:
    def measure_interleaved(self, configs, params, rounds, references=True):
        return [{"status": "wrong_answer", "error": "verification failed"}]


def test_a_finalist_that_fails_again_leaves_the_campaign_unconfirmed():
    said = []
    values = {json.dumps({"x": 1}): 1.0, json.dumps({"x": 2}): 1.001}
    assert confirmation.confirm(_Failing(), ["x"], values, list(values), False, log=said.append) is None
    assert "wrong_answer" in said[0]


@pytest.mark.skipif(not RECORDED, reason="no recorded GEMM 2048^3 campaign in results/")
def test_a_worker_that_cannot_start_again_leaves_the_campaign_unconfirmed():
    from tuner.errors import TunerError

    class DeadRunner:
        def measure_interleaved(self, *a, **kw):
            raise TunerError("the worker did not get ready within 900 s (GPU busy or hung?)")

    said = []
    values = {json.dumps({"x": 0}): 1.0, json.dumps({"x": 1}): 1.001}
    assert confirmation.confirm(DeadRunner(), ["x"], values, list(values), maximize=False, log=said.append) is None
    assert said and "confirmation skipped" in said[0] and "did not get ready" in said[0]


def test_one_and_two_workers_confirm_the_same_best(tmp_path, monkeypatch, capsys):
    bests = {}
    # the configs the recording holds (both campaigns replay copies of it): GEMM's searchspace built once
    held = recording_searchspace(get_workload("gemm").space, recording(H100, *GEMM)).size
    for workers in (1, 2):
        root = tmp_path / f"w{workers}"
        target = cache_path(root, H100, *GEMM)
        target.parent.mkdir(parents=True)
        shutil.copy(recording(H100, *GEMM), target)
        monkeypatch.setenv("TUNER_RESULTS", str(root))
        rc = main(["tune", "gemm", "--size", GEMM[1], "--dtype", GEMM[2], "--strategy", "brute_force", "--simulate",
                   "--workers", str(workers), "--quiet", "--json"])
        assert rc == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["evaluated"] == held and doc["best"]["confirmed"]
        bests[workers] = doc["best"]["config"]
        rows = read_parts("*/gemm/confirmations/*.parquet", root / "simulated")
        assert not rows.empty and rows.chosen.sum() == rows.campaign_id.nunique() * rows.worker.nunique()
        first = rows[rows.worker == rows.worker.iloc[0]]
        assert len(first) >= 2 and json.loads(first[first.chosen].config.iloc[0]) == doc["best"]["config"]
        assert all(len(r) == confirmation.ROUNDS for r in first.rounds_ms)
        assert (first.campaign_value >= first.campaign_value.max() * (1 - confirmation.FINALIST_WITHIN)).all()
        name = default_name("gemm", GEMM[1], GEMM[2], "brute_force", 1)
        assert main(["status", name, "--storage", default_storage(root)]) == 0
        assert f"confirmed among {len(first)} finalists" in capsys.readouterr().out
    assert bests[1] == bests[2]


def test_tuner_best_answers_the_confirmed_choice_while_it_covers_the_leader(tmp_path):
    from tuner import store
    from tuner.answers import best_config

    root = tmp_path / "results"
    wdir = store.workload_dir(root, H100, "gemm")
    (wdir / "evaluations").mkdir(parents=True)
    rows = read_parts("*/gemm/evaluations/*.parquet", results_root())
    rows = rows[(rows["size"] == GEMM[1]) & (rows["dtype"] == GEMM[2]) & (rows["gpu"] == H100)]
    rows.to_parquet(wdir / "evaluations" / "recorded.parquet", index=False)
    leader = best_config.best("gemm", GEMM[1], GEMM[2], gpu=H100, root=root)
    medians = store.config_medians(rows[rows.status == "ok"], maximize=True)
    runner_up = medians.index[1]
    record = {"chosen": json.loads(runner_up), "rounds": 15, "seconds": 1.0, "rule": "test", "drawn_from": len(medians),
              "timestamp": "2026-11-23T00:00:00+00:00",
              "finalists": [{"config": json.loads(k), "campaign_value": medians[k], "rounds_ms": [0.4] * 3, "median_ms": 0.4,
                             "change": 0.0, "ci": [0.0, 0.0], "tie": True} for k in medians.index[:2]]}
    r0 = rows.iloc[0]
    common = {"campaign_id": "c1", "workload": "gemm", "size": GEMM[1], "size_vars": r0["size_vars"], "dtype": GEMM[2]}
    confirmation.save(root, record, common, {"gpu": H100}, "w1")
    answer = best_config.best("gemm", GEMM[1], GEMM[2], gpu=H100, root=root)
    # the confirmation names configs as they were stored; the answer completes them with the space's defaults
    space = get_workload("gemm").space
    runner_up_now = store.canonical_config(space.complete(json.loads(runner_up)))
    assert store.canonical_config(answer["config"]) == runner_up_now != store.canonical_config(leader["config"])
    assert any("near-ties" in n for n in answer["notes"])
    # a later confirmation that did not include the leader does not count
    record = {**record, "timestamp": "2026-11-24T00:00:00+00:00",
              "finalists": [{**f, "config": json.loads(k)} for f, k in zip(record["finalists"], medians.index[1:3])]}
    confirmation.save(root, record, {**common, "campaign_id": "c2"}, {"gpu": H100}, "w1")
    assert best_config.best("gemm", GEMM[1], GEMM[2], gpu=H100, root=root)["config"] == leader["config"]


def test_tuner_best_takes_a_campaigns_confirmation_drawn_from_the_most_results(tmp_path):
    """Within one campaign, the confirmation drawn from the most results answers, not the latest: a distributed
    worker that stopped on its time limit with fewer results may end its confirmation after a fuller one's (the
    study keeps the fuller one), and of those drawn from as many, the first, as the study keeps. A later campaign's
    answers whatever it was drawn from; rows from before `drawn_from` was stored fall back to the latest, the first
    read of those alike."""
    import pandas as pd

    from tuner.store.confirmations import choice_for

    a, b, c = (json.dumps({"x": i}) for i in range(3))
    where = {"workload": "reduction", "gpu": "g", "size_vars": "{}", "dtype": "float32"}

    def record(campaign, worker, when, drawn, chosen, finalists=(a, b, c)):
        return [{**where, "campaign_id": campaign, "worker": worker, "timestamp": f"2026-12-01T00:00:0{when}+00:00",
                 "config": k, "chosen": k == chosen, **({"drawn_from": drawn} if drawn is not None else {})}
                for k in finalists]

    def answer(*records):
        found = pd.DataFrame([row for rec in records for row in rec])
        return choice_for(pd.DataFrame([where]), a, tmp_path, confirmations=found)

    fuller, later_fewer = record("c1", "w1", 1, 50, b), record("c1", "w2", 2, 40, c)
    assert answer(fuller, later_fewer) == (b, 3) == answer(later_fewer, fuller)
    assert answer(fuller, record("c1", "w2", 2, 50, c)) == (b, 3)  # the same results: the first, as the study keeps
    assert answer(fuller, record("c2", "w1", 3, 10, c)) == (c, 3)  # a later campaign's, drawn from fewer
    assert answer(record("c1", "w1", 1, None, b), record("c1", "w2", 2, None, c)) == (c, 3)  # the latest
    assert answer(record("c1", "w1", 2, None, b), record("c1", "w2", 2, None, c)) == (b, 3)  # the first read
    assert answer(fuller, record("c1", "w2", 2, 60, c, finalists=(b, c))) is None  # the leader not a finalist


def test_a_single_process_campaign_confirms_its_near_ties(tmp_path, monkeypatch):
    """`tuner tune` (one process) ends like a distributed campaign: its twin best configs (FAKE_TIES: shuffle
    changes nothing) are measured again and the first in space order is chosen, stored, and answered by
    `tuner best`; a campaign whose best stands alone confirms nothing. Each campaign measures the stand-in's
    best config and its shuffle twin first, then random configs to a budget (the confirmation reads whatever
    the search measured; a brute force of all 576 configs spent its time writing their rows): every other
    config of the stand-in's landscape is 5% slower or more, so the twins are the campaign's near-ties."""
    from tests.fake_worker import fake_worker_main, synthetic_time_ms
    from tuner.answers.best_config import best
    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest
    from tuner.measure.kt import searchspace
    from tuner.workloads import get_workload

    leader = {"variant": 7, "block_size_x": 256, "items_per_thread": 16, "vector": 4, "finish": 0}
    space = get_workload("reduction").space
    configs = [dict(zip(space.params, c)) for c in searchspace(space).list]

    def near(best: list[dict]) -> bool:  # `best` tie, and every other config is slower than a finalist can be
        times = [synthetic_time_ms(c) for c in best]
        others = [synthetic_time_ms(c) for c in configs if c not in best]
        return len(set(times)) == 1 and min(others) > (1 + confirmation.FINALIST_WITHIN) * times[0]

    assert near([{**leader, "shuffle": 1}])  # the stand-in's best stands alone: its twin is 5% slower
    with monkeypatch.context() as m:
        m.setenv("FAKE_TIES", "1")
        assert near([{**leader, "shuffle": s} for s in (0, 1)])  # the twins tie, the rest are 5% slower or more

    def tune(root):
        return run_campaign(CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random",
                                            max_evals=12, first=tuple({**leader, "shuffle": s} for s in (0, 1)),
                                            timeout=3.0, quiet=True, results=root, measure_target=fake_worker_main))

    alone = tune(tmp_path / "alone")
    assert alone.best["confirmed"] is False and alone.best["config"]["shuffle"] == 1
    assert not list((tmp_path / "alone").glob("*/reduction/confirmations/*.parquet"))

    monkeypatch.setenv("FAKE_TIES", "1")  # the worker processes inherit it
    result = tune(tmp_path / "ties")
    order = confirmation.space_order(space, searchspace(space))
    twins = [canonical_config({**result.best["config"], "shuffle": s}) for s in (0, 1)]
    first = min(twins, key=order.index)
    assert result.best["confirmed"] is True and result.best["config"] == json.loads(first)
    stored = read_parts("*/reduction/confirmations/*.parquet", tmp_path / "ties")
    assert len(stored) == 2 and set(stored["config"]) == set(twins)
    assert stored.loc[stored["chosen"], "config"].item() == first
    assert best("reduction", "seed", "float32", root=tmp_path / "ties")["config"] == json.loads(first)
