"""Warm starts (tuner.search.warmstart) and early stopping (tuner.search.early_stopping): the rules on synthetic data, and their
effect on real replays of the recorded reduction spaces."""

import json
import math

import pandas as pd
import pytest

from tests.recorded import is_recorded
from tuner.campaign.local import campaign_strategy
from tuner.campaign.request import CampaignRequest
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.replay import replay
from tuner.search.early_stopping import Patience, evaluations_until_stop
from tuner.search.strategies import make_strategy
from tuner.search.warmstart import warm_configs, warm_evaluations
from tuner.store import load_evaluations, results_root
from tuner.store.recording_choice import find_recording
from tuner.workloads import get_workload

SPACE = get_workload("reduction").space
BEST = {"variant": 7, "block_size_x": 256, "items_per_thread": 16, "vector": 4, "shuffle": 1, "finish": 1}


def test_patience_counts_evaluations_without_a_real_gain():
    rule = Patience(3)
    assert [rule.update(c) for c in [10.0, 9.0, 8.99, None, math.inf]] == [False, False, False, False, True]
    assert rule.best == 8.99 and rule.reference == 9.0  # a small gain is seen, but does not reset the count
    creeping = [100 * 0.996 ** i for i in range(40)]  # 0.4% better each time: 15% in all
    assert evaluations_until_stop(creeping, 3) == 40  # gains under 0.5% each add up to real ones
    assert evaluations_until_stop([5, 4, 3, 3, 3, 3, 2], 3) == 6
    assert evaluations_until_stop([5, 4, 3], 3) == 3
    assert evaluations_until_stop([-1.0, -1.001, -2.0, -2.0], None) == 4  # no patience: never stops
    with pytest.raises(ValueError):
        Patience(0)


def _rows(entries):
    return pd.DataFrame([{"workload": "reduction", "status": "ok", "gpu": gpu, "dtype": dtype,
                          "size_vars": json.dumps({"n": n}), "config": json.dumps(cfg, sort_keys=True),
                          "objective_value": value} for gpu, dtype, n, cfg, value in entries])


def test_warm_configs_take_the_nearest_recordings_best_and_never_the_target():
    a = dict(BEST)
    b = {**BEST, "block_size_x": 512}
    c = {**BEST, "block_size_x": 128}
    bad = {**BEST, "variant": 1}  # breaks a restriction of the space: never suggested
    df = _rows([("G", "float32", 2**24, a, 100.0), ("G", "float32", 2**24, b, 90.0),
                ("G", "float32", 2**20, c, 500.0),  # same GPU and dtype, but further away in size
                ("G", "float32", 2**22, bad, 10_000.0),
                ("G", "float32", 2**23, c, 1.0)])  # the target itself: left out
    got = warm_configs(df, SPACE, {"n": 2**23}, "float32", "G", count=3, per_recording=2)
    assert got[0] == a and set(map(json.dumps, got)) == {json.dumps(x) for x in (a, b, c)}
    assert bad not in got
    other_gpu = warm_configs(_rows([("H", "float32", 2**23, c, 1.0)]), SPACE, {"n": 2**23}, "float32", "G")
    assert other_gpu == [c]  # the same size on another GPU is a neighbour, not the target
    assert warm_configs(df.iloc[:0], SPACE, {"n": 8}, "float32", "G") == []


def test_invalid_configs_do_not_take_a_recordings_places():
    """A recording's best configs that this space rejects (an older or larger space) are passed over before
    its `per_recording` best are taken, so its valid ones still come through (GB/s: higher is better)."""
    b = {**BEST, "block_size_x": 512}
    bad = {**BEST, "variant": 1}
    df = _rows([("G", "float32", 2**24, bad, 900.0), ("G", "float32", 2**24, BEST, 60.0), ("G", "float32", 2**24, b, 50.0)])
    assert warm_configs(df, SPACE, {"n": 2**23}, "float32", "G", per_recording=1) == [BEST]


def test_a_reduced_space_warm_starts_from_the_full_workloads_recordings(monkeypatch):
    """floyd-warshall-small runs the floyd-warshall program: its warm start draws on floyd-warshall's
    recordings at other sizes, keeps the configs that lie in the reduced space, and never uses the target
    size, whichever workload recorded it."""
    from tuner import store

    small = get_workload("floyd-warshall-small").space
    inside = {"BLOCK": 64, "block_size_x": 16, "block_size_y": 8, "VEC": 1, "DPX": 0, "PAD": 4, "K_UNROLL": 16,
              "LOOKAHEAD": 2, "SPLIT": 100, "KCHUNK": 0, "MIN_BLOCKS": 0, "PRIORITY": 0}
    outside = {**inside, "block_size_y": 4}  # valid in floyd-warshall, not in the reduced space
    target = {"n": 5000, "m": 30000, "gpus": 1}

    def rows(workload, entries):
        return pd.DataFrame([{"workload": workload, "status": "ok", "gpu": "G", "dtype": "int32",
                              "size_vars": json.dumps(size, sort_keys=True), "config": json.dumps(c, sort_keys=True),
                              "objective_value": v} for size, c, v in entries])

    full = rows("floyd-warshall", [({"n": 11000, "m": 66000, "gpus": 1}, outside, 100.0),
                                   ({"n": 11000, "m": 66000, "gpus": 1}, inside, 105.0),
                                   (target, {**inside, "KCHUNK": 16}, 10.0)])  # the target size: left out
    frames = {"floyd-warshall-small": pd.DataFrame(), "floyd-warshall": full}
    monkeypatch.setattr(store, "load_evaluations", lambda name, root=None: frames[name])
    evaluations = warm_evaluations("floyd-warshall-small")
    assert set(evaluations["workload"]) == {"floyd-warshall"}
    assert warm_configs(evaluations, small, target, "int32", "G") == [inside]
    assert warm_evaluations("floyd-warshall") is full  # a workload that shares nothing reads only its own


needs_recording = pytest.mark.skipif(not is_recorded("nvidia-h100-80gb-hbm3", "reduction", "large", "float32"), reason="no recording")


def _replay(strategy, size="large", budget=40):
    size_vars = dict(SPACE.sizes[size])
    cache = find_recording(results_root(), "reduction", size, "float32")
    results, _ = replay(SPACE, size_vars, "float32", cache, strategy, max_evals=budget, seed=0)
    return [tuple(r[k] for k in SPACE.params) for r in results if r is not None]


@needs_recording
def test_a_warm_started_search_tries_the_warm_configs_first():
    warm = warm_configs(load_evaluations("reduction"), SPACE, SPACE.sizes["large"], "float32",
                        "NVIDIA H100 80GB HBM3")
    assert len(warm) == 5 and all(SPACE.is_valid(c) for c in warm)
    order = _replay(make_strategy("tpe", seed=0, warm_start=warm))
    assert order[:5] == [tuple(c[k] for k in SPACE.params) for c in warm]
    assert len(set(order)) == len(order) == 40


@needs_recording
def test_early_stopping_ends_a_replay_before_its_budget():
    unlimited = _replay(make_strategy("tpe", seed=0), budget=200)
    stopped = _replay(make_strategy("tpe", seed=0, patience=5), budget=200)
    assert len(unlimited) == 200 and 5 <= len(stopped) < 200
    assert stopped == unlimited[:len(stopped)]  # the same search, cut short


def test_patience_applies_by_default_only_without_a_budget():
    space_size = kt.searchspace(SPACE).size
    assert space_size > 0
    root = results_root()
    default = campaign_strategy(CampaignRequest("reduction"), SPACE, {"n": 8}, "float32", None, root)
    budget = campaign_strategy(CampaignRequest("reduction", max_evals=50), SPACE, {"n": 8}, "float32", None, root)
    never = campaign_strategy(CampaignRequest("reduction", patience=0), SPACE, {"n": 8}, "float32", None, root)
    cold = campaign_strategy(CampaignRequest("reduction", warm_start=False), SPACE, {"n": 8}, "float32", None, root)
    assert (default.patience, budget.patience, never.patience) == (20, None, None)
    assert cold.warm_start == []
    first = campaign_strategy(CampaignRequest("reduction", first=(BEST,)), SPACE, {"n": 2**28}, "float32",
                              "NVIDIA H100 80GB HBM3", root)
    assert first.warm_start[0] == BEST and BEST not in first.warm_start[1:]
    with pytest.raises(TunerError, match="need an Optuna strategy"):
        campaign_strategy(CampaignRequest("reduction", strategy="brute_force", first=(BEST,)), SPACE, {"n": 8},
                          "float32", None, root)
    with pytest.raises(TunerError, match="Optuna strategies"):
        make_strategy("kt:random_sample", warm_start=[BEST])


def test_configs_to_measure_first_get_the_spaces_defaults_or_a_clear_error():
    """A config given to measure first is completed with the defaults of parameters added later (the seed's
    Floyd-Warshall config predates PRIORITY); one that names no config of the space is an error, never
    silently skipped (the search's warm start drops what it cannot encode)."""
    from tuner.workloads import get_workload

    fw = get_workload("floyd-warshall").space
    seed = {"BLOCK": 64, "block_size_x": 32, "block_size_y": 32, "VEC": 0, "DPX": 0, "PAD": 0, "K_UNROLL": 64,
            "LOOKAHEAD": 0, "SPLIT": 100}
    root = results_root()
    got = campaign_strategy(CampaignRequest("floyd-warshall", first=(seed,)), fw, {"n": 64, "gpus": 1}, "int32", None, root)
    assert got.warm_start[0] == {**seed, **fw.defaults}
    with pytest.raises(TunerError, match="a config to measure first must set the parameters of floyd-warshall.*missing BLOCK"):
        campaign_strategy(CampaignRequest("floyd-warshall", first=({k: v for k, v in seed.items() if k != "BLOCK"},)),
                          fw, {"n": 64, "gpus": 1}, "int32", None, root)
    with pytest.raises(TunerError, match="values outside the space: BLOCK=48"):
        campaign_strategy(CampaignRequest("floyd-warshall", first=({**seed, "BLOCK": 48},)), fw, {"n": 64, "gpus": 1},
                          "int32", None, root)


def test_a_replay_named_by_its_gpus_folder_never_warm_starts_from_its_own_recording():
    """`--simulate --gpu nvidia-h100-80gb-hbm3` (the folder's name, as the error for several GPUs offers) is the
    same replay as with the GPU's own name: the warm start leaves the replayed recording out either way."""
    from tuner.campaign.local import run_campaign

    bests = [run_campaign(CampaignRequest(workload="reduction", size="large", dtype="float32", strategy="tpe",
                                          max_evals=1, simulate=True, gpu=gpu, quiet=True)).best
             for gpu in ("nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3")]
    assert bests[0] == bests[1]


def test_the_tune_help_names_the_strategy_tune_runs(capsys):
    """`tuner tune --help` once called TPE the default after `auto` had replaced it."""
    from tuner.cli import main
    from tuner.search.strategies import DEFAULT_STRATEGY, strategy_names

    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    names = [name for name in strategy_names() if not name.startswith("kt:")]
    assert all(name in text for name in names)
    assert [name for name in names if f"{name} (default)" in text] == [DEFAULT_STRATEGY]


def test_a_config_several_recordings_share_is_read_and_checked_once(monkeypatch):
    """warm_configs checks each stored config text once, however many recordings rank it: the answer is what a
    check of every row gives (the shared valid config offered once, the shared invalid one never)."""
    b = {**BEST, "block_size_x": 512}
    bad = {**BEST, "variant": 1}
    ranked = ((bad, 900.0), (BEST, 60.0), (b, 50.0))
    entries = [("G", "float32", n, cfg, value) for n in (2**20, 2**22, 2**24) for cfg, value in ranked]
    checked = []
    real = SPACE.is_valid
    monkeypatch.setattr(SPACE, "is_valid", lambda config, dtype=None: checked.append(config) or real(config, dtype))
    assert warm_configs(_rows(entries), SPACE, {"n": 2**23}, "float32", "G", per_recording=2) == [BEST, b]
    assert sorted(map(json.dumps, checked)) == sorted(json.dumps(c) for c in (bad, BEST, b))  # once each
