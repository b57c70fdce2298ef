"""The `auto` strategy's sampler (tuner.search.auto_sampler): how it reads a study (penalties, repeats,
running trials), what it suggests, and a real replay of a recorded space through the one search loop."""

import math

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from tests.recorded import is_recorded
from tuner.search import trial_kinds
from tuner.search.auto_sampler import AutoSampler
from tuner.search.codec import Codec, penalty_for
from tuner.search.level_moves import ValidLevels
from tuner.search.names import OPTUNA_SAMPLERS
from tuner.search.sampler_view import ViewSampler
from tuner.search.samplers import make_sampler
from tuner.search.strategies import make_strategy
from tuner.search.study_history import read_history
from tuner.store import results_root

DISTS = {"a": IntDistribution(0, 4), "b": IntDistribution(0, 3), "c": CategoricalDistribution(["x", "y"])}
NAMES = list(DISTS)
CATEGORICAL = [isinstance(d, CategoricalDistribution) for d in DISTS.values()]
RECORDED = is_recorded("nvidia-h100-80gb-hbm3", "reduction", "large", "float32")


def _study(rows: list[tuple[dict, float | None]]) -> optuna.Study:
    """A study told what the search loop tells it: each row's params and cost (None: still running)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize")
    for params, value in rows:
        state = TrialState.RUNNING if value is None else TrialState.COMPLETE
        study.add_trial(create_trial(params=params, distributions=DISTS, value=value, state=state))
    return study


def _told(costs: list[float | None]) -> list[float]:
    """What the loop tells for each of `costs` (None: invalid or failed, told the penalty of those before)."""
    out, seen = [], []
    for c in costs:
        out.append(penalty_for(seen) if c is None else c)
        seen += [] if c is None else [c]
    return out


def test_auto_is_an_optuna_strategy():
    assert "auto" in OPTUNA_SAMPLERS
    assert isinstance(make_sampler("auto", 0), AutoSampler)
    assert make_strategy("auto", seed=1).sampler_name == "auto"


def test_penalties_read_as_invalid_and_worse_costs_as_costs():
    costs = [None, 5.0, 9.0, None, 20.0, 3.0, None]  # 9 and 20: new worst costs, not penalties
    params = [{"a": i % 5, "b": i % 4, "c": "xy"[i % 2]} for i in range(len(costs))]
    history = read_history(_study(list(zip(params, _told(costs)))), NAMES, list(DISTS.values()))
    got = [None if math.isnan(c) else c for c in history.costs]
    assert got == costs


def test_repeats_count_once_and_running_trials_are_pending():
    p, q = {"a": 1, "b": 2, "c": "x"}, {"a": 3, "b": 0, "c": "y"}
    history = read_history(_study([(p, 4.0), (p, 4.0), (q, None)]), NAMES, list(DISTS.values()))
    assert history.levels.tolist() == [[1, 2, 0]] and history.costs.tolist() == [4.0]
    assert history.pending.tolist() == [[3, 0, 1]] and (3, 0, 1) in history.seen


@pytest.mark.parametrize("done", [3, 12])  # the space-filling start, then the model
def test_never_suggests_a_config_tried_or_being_measured(done):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(done):
        params = {"a": int(rng.integers(5)), "b": int(rng.integers(4)), "c": "xy"[i % 2]}
        rows.append((params, float(params["a"] + params["b"]) if i % 4 else None))
    rows = list(zip([r[0] for r in rows], _told([r[1] for r in rows])))
    running = {"a": 0, "b": 0, "c": "y"}
    study = _study([*rows, (running, None)])
    sampler = AutoSampler(seed=1, n_startup=4)
    seen = {tuple(p[n] for n in NAMES) for p, _ in rows} | {tuple(running.values())}
    for _ in range(5):
        trial = study.ask()
        got = sampler.sample_relative(study, study.trials[-1], DISTS)
        assert tuple(got[n] for n in NAMES) not in seen
        study.tell(trial, state=TrialState.FAIL)


def test_restricted_to_valid_configs_it_suggests_only_those():
    valid = [{"a": a, "b": b, "c": "x"} for a in range(5) for b in range(4) if a + b <= 3]
    sampler = AutoSampler(seed=0, n_startup=3)
    sampler.restrict_to(valid)
    study = optuna.create_study(sampler=sampler)
    keys = {tuple(v.values()) for v in valid}
    for _ in range(len(valid)):  # every valid config once, whichever phase suggests it
        trial = study.ask(DISTS)
        key = tuple(trial.params[n] for n in NAMES)
        assert key in keys
        study.tell(trial, float(key[0] * 3 + key[1]))
    assert len({tuple(t.params.values()) for t in study.trials}) == len(valid)


def test_thompson_sampling_exploits_a_smooth_space():
    """Once the forest has data its draws agree around the best configs: the single optimum of 40 is found
    within 15 evaluations (random sampling finds it so in 3 seeds of 3 with a chance of about 5%)."""
    valid = [{"a": a, "b": b, "c": c} for a in range(5) for b in range(4) for c in "xy"]
    for seed in range(3):
        sampler = AutoSampler(seed=seed)
        sampler.restrict_to(valid)
        study = optuna.create_study(sampler=sampler)
        for _ in range(15):
            trial = study.ask(DISTS)
            p = trial.params
            study.tell(trial, 1.0 + (p["a"] - 3) ** 2 + (p["b"] - 1) ** 2 + (p["c"] == "y"))
        assert study.best_value == 1.0


def test_the_view_hands_the_valid_configs_over_as_the_sampler_sees_them():
    codec = Codec({"block": [64, 32, 128], "kind": ["a", "b"]})
    inner = AutoSampler(seed=0)
    ViewSampler(inner, codec, [(32, "b"), (128, "a")])
    assert inner._valid == [{"block": 0, "kind": "b"}, {"block": 2, "kind": "a"}]  # ordinal: 32 is index 0
    tpe = optuna.samplers.TPESampler(seed=0)
    ViewSampler(tpe, codec, [(32, "b")])  # Optuna's samplers take no valid configs: nothing changes there
    assert not hasattr(tpe, "_valid")


def test_valid_membership_by_mixed_radix_keys():
    levels = np.array([[0, 1, 2], [3, 0, 1], [4, 3, 0]])
    valid = ValidLevels(("a", "b", "c"), levels, np.array([5, 4, 3]))
    candidates = np.array([[0, 1, 2], [0, 2, 1], [4, 3, 0], [4, 3, 2], [3, 0, 1], [0, 0, 0]])
    assert valid.contains(candidates).tolist() == [True, False, True, False, True, False]


def test_common_values_hold_at_least_their_fair_share_of_the_valid_configs():
    """A parameter's value is common where at least 1 / (the parameter's values) of the valid configs hold it;
    a parameter of one value has none. The covering start's candidates hold a common value no config tried holds."""
    levels = np.array([[0, 0, 0], [0, 1, 0], [0, 2, 0], [0, 3, 0], [1, 0, 0], [1, 1, 0], [2, 2, 0], [0, 0, 0]])
    valid = ValidLevels(("a", "b", "c"), np.unique(levels, axis=0), np.array([3, 4, 1]))  # 7 configs
    assert [c.tolist() for c in valid.common] == [[0], [0, 1, 2], []]  # a: 4 of 7 >= 7/3; b: 2 of 7 >= 7/4
    assert valid.with_untried_common(np.array([[0, 0, 0], [1, 1, 0]])).tolist() == [[0, 2, 0], [2, 2, 0]]
    assert len(valid.with_untried_common(np.array([[0, 0, 0], [1, 1, 0], [2, 2, 0]]))) == 0


def test_past_the_start_a_common_value_never_tried_is_tried_next():
    """The covering start: every value of a and b was tried, all with c = x; c = y holds half the valid configs,
    so the next suggestion holds it, whatever the forest makes of the configs tried."""
    valid = [{"a": a, "b": b, "c": c} for a in range(5) for b in range(4) for c in "xy"]
    tried = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 0)]
    for seed in range(3):
        sampler = AutoSampler(seed=seed, n_startup=2)
        sampler.restrict_to(valid)
        study = _study([({"a": a, "b": b, "c": "x"}, float(a + b)) for a, b in tried])
        got = sampler.sample_relative(study, study.trials[-1], DISTS)
        assert got["c"] == "y"


def test_after_a_warm_start_there_is_no_covering_start(monkeypatch):
    """Trials the warm start queued carry trial_kinds.WARM_START; once the study holds one, the sampler goes
    straight to its model and steps (the covering start is never consulted)."""
    valid = [{"a": a, "b": b, "c": c} for a in range(5) for b in range(4) for c in "xy"]
    rows = [({"a": a, "b": b, "c": "x"}, float(a + b)) for a, b in [(0, 0), (1, 1), (2, 2), (3, 3), (4, 0)]]

    def refused(self, tried):
        raise AssertionError("covering consulted after a warm start")

    sampler = AutoSampler(seed=0, n_startup=2)
    sampler.restrict_to(valid)
    study = _study(rows)
    study.enqueue_trial({"a": 1, "b": 2, "c": "x"}, user_attrs={trial_kinds.WARM_START: True})
    trial = study.ask(DISTS)  # the queued one
    assert trial.user_attrs[trial_kinds.WARM_START]
    study.tell(trial, 3.0)
    monkeypatch.setattr(ValidLevels, "with_untried_common", refused)
    got = sampler.sample_relative(study, study.trials[-1], DISTS)
    assert {"a", "b", "c"} <= set(got)


@pytest.mark.skipif(not RECORDED, reason="no recording")
def test_the_warm_start_marks_its_trials():
    from tuner.measure.replay import replay
    from tuner.store.recording_choice import find_recording
    from tuner.workloads import get_workload

    space = get_workload("reduction").space
    storage = optuna.storages.InMemoryStorage()
    warm = {"variant": 7, "block_size_x": 256, "items_per_thread": 8, "vector": 4, "shuffle": 1, "finish": 1}
    strategy = make_strategy("auto", seed=0, storage=storage, study_name="warm", warm_start=[warm])
    cache = find_recording(results_root(), "reduction", "large", "float32")
    replay(space, dict(space.sizes["large"]), "float32", cache, strategy, max_evals=6, seed=0)
    trials = optuna.load_study(study_name="warm", storage=storage).trials
    assert [bool(t.user_attrs.get(trial_kinds.WARM_START)) for t in trials[:2]] == [True, False]


@pytest.mark.skipif(not RECORDED, reason="no recording")
def test_a_cold_search_suggests_only_valid_configs():
    """Through the strategy (the loop, the view): no suggestion breaks a restriction, so the loop never
    replaces one by its nearest valid config (84% of the reduction space's parameter grid is invalid)."""
    from tuner.measure.replay import replay
    from tuner.store.recording_choice import find_recording
    from tuner.workloads import get_workload

    space = get_workload("reduction").space
    storage = optuna.storages.InMemoryStorage()
    strategy = make_strategy("auto", seed=0, storage=storage, study_name="cold")
    cache = find_recording(results_root(), "reduction", "large", "float32")
    results, _ = replay(space, dict(space.sizes["large"]), "float32", cache, strategy, max_evals=30, seed=0)
    kinds = [trial_kinds.kind_of(t) for t in optuna.load_study(study_name="cold", storage=storage).trials]
    assert len(results) == 30 and kinds.count("measured") == 30
    assert "invalid" not in kinds and "repeat" not in kinds


@pytest.mark.skipif(not RECORDED, reason="no recording")
def test_a_cold_replay_measures_distinct_configs_and_finds_good_ones():
    from tuner.answers.compare import load_recording, strategy_trace

    rec = load_recording("reduction", "large", "float32")
    traces = [strategy_trace(rec, "auto", seed, 40) for seed in range(2)]
    assert all(len(t) == 40 for t in traces)  # unique evaluations: the sampler never wastes one on a repeat
    assert traces[0] != traces[1]  # seeded apart
    median = float(np.median(rec.values))
    assert all(max(v for v in t if v is not None) > median for t in traces)  # GB/s: better than half the space


def test_the_local_step_is_an_unseen_valid_neighbour_of_the_incumbent():
    """The greedy step changes one parameter of the best config so far, to a valid config not tried; once every
    such neighbour is tried it changes two; once those are tried too there is no step (the Thompson draw takes
    its place)."""
    from tuner.search.forest import Forest

    valid_configs = [{"a": a, "b": b, "c": c} for a in range(5) for b in range(4) for c in "xy" if a + b <= 5]
    rows = [({"a": 2, "b": 1, "c": "x"}, 1.0), ({"a": 0, "b": 0, "c": "y"}, 5.0), ({"a": 4, "b": 0, "c": "x"}, 3.0)]
    study = _study(rows)
    dists = list(DISTS.values())
    sizes = np.array([5, 4, 2])
    valid = ValidLevels(tuple(NAMES), np.array([[v["a"], v["b"], "xy".index(v["c"])] for v in valid_configs]), sizes)
    history = read_history(study, NAMES, dists)
    scale = np.maximum(sizes - 1, 1)
    forest = Forest(4, max_features=1.0, seed=0).fit(history.levels / scale, history.costs)
    sampler = AutoSampler(seed=0)
    incumbent = np.array([2, 1, 0])
    step = sampler._local_step(history, sizes, CATEGORICAL, valid, forest, scale)
    assert step is not None and int((step != incumbent).sum()) == 1
    assert valid.contains(step[None, :])[0] and tuple(step) not in history.seen
    neighbours = [(a, 1, 0) for a in range(5) if a != 2 and a + 1 <= 5] + [(2, b, 0) for b in range(4) if b != 1]
    neighbours += [(2, 1, 1)]
    history.seen |= set(neighbours)
    step = sampler._local_step(history, sizes, CATEGORICAL, valid, forest, scale)
    assert step is not None and int((step != incumbent).sum()) == 2
    assert valid.contains(step[None, :])[0] and tuple(step) not in history.seen
    two_away = [tuple(int(x) for x in v) for v in valid.levels if int((v != incumbent).sum()) == 2]
    history.seen |= set(two_away)
    assert sampler._local_step(history, sizes, CATEGORICAL, valid, forest, scale) is None


def test_the_local_step_tries_the_neighbour_the_trees_disagree_on():
    """The greedy step ranks the incumbent's neighbours by a lower bound on their cost (the trees' mean less their
    spread): a neighbour beside one good and one bad config goes before one the trees all rate a little worse,
    though its mean is the higher."""
    from tuner.search.auto_sampler import lower_bound
    from tuner.search.forest import Forest
    from tuner.search.study_history import History

    levels = np.array([[0, 0], [1, 1], [1, 2], [1, 3], [2, 1], [0, 2], [0, 3]])
    costs = np.array([0.0, 0.3, 0.3, 0.3, 0.35, 0.1, 4.0])
    sizes = np.array([5, 4])
    scale = np.maximum(sizes - 1, 1)
    forest = Forest(48, max_features=0.8, seed=0).fit(levels / scale, costs)
    agreed, disputed = np.array([1, 0]), np.array([0, 1])
    means = forest.predict(np.array([agreed, disputed]) / scale)
    assert means[0] < means[1]  # by the mean alone, the agreed neighbour
    others = {(a, 0) for a in range(2, 5)} | {(0, b) for b in range(2, 4)}  # the other neighbours: tried
    history = History(levels, costs, np.zeros((0, 2), dtype=int), {tuple(c) for c in levels.tolist()} | others)
    step = AutoSampler(seed=0)._local_step(history, sizes, [False, False], None, forest, scale)
    assert step.tolist() == disputed.tolist()
    bounds = lower_bound(forest, np.array([agreed, disputed]) / scale)
    per_tree = forest.per_tree(np.array([agreed, disputed]) / scale)
    assert np.allclose(bounds, per_tree.mean(axis=0) - per_tree.std(axis=0)) and bounds[1] < bounds[0]


def test_momentum_follows_a_config_that_improved_on_every_one_before():
    """Past the start, a config that ran and beat every config before it makes the next suggestion a greedy
    step; a failed config after it does not count, and one that did not improve ends the momentum."""
    configs = [{"a": a, "b": b, "c": "x"} for a in range(5) for b in range(4)]
    sampler = AutoSampler(seed=0, n_startup=2)
    dists = list(DISTS.values())

    def improved(costs: list[float | None]) -> bool:
        study = _study(list(zip(configs, _told(costs), strict=False)))
        return sampler._improved_last(read_history(study, NAMES, dists))

    assert not improved([3.0, 2.0])  # still the start
    assert improved([3.0, 2.0, 1.0])
    assert improved([3.0, 2.0, 1.0, None])
    assert not improved([3.0, 2.0, 1.0, 1.5])


def test_an_improving_move_of_ordinal_parameters_is_made_once_more():
    """Right after an improvement, the move that made it (here a: 1 -> 2) is applied again (a = 3), where that
    config is unseen and valid; not after a config that did not improve, nor when the move changed a
    categorical parameter, nor when the config it leads to is invalid or tried."""
    sampler = AutoSampler(seed=0, n_startup=2)
    dists = list(DISTS.values())
    sizes = np.array([5, 4, 2])
    start = [({"a": 0, "b": 3, "c": "y"}, 9.0), ({"a": 4, "b": 0, "c": "x"}, 8.0), ({"a": 1, "b": 1, "c": "x"}, 3.0)]
    all_valid = ValidLevels(tuple(NAMES), np.array([[a, b, c] for a in range(5) for b in range(4) for c in (0, 1)]), sizes)

    def step_on(rows: list, valid: ValidLevels = all_valid):
        return sampler._step_on(read_history(_study(start + rows), NAMES, dists), sizes, CATEGORICAL, valid)

    assert step_on([({"a": 2, "b": 1, "c": "x"}, 2.0)]).tolist() == [3, 1, 0]
    assert step_on([({"a": 2, "b": 2, "c": "x"}, 2.0)]).tolist() == [3, 3, 0]  # two ordinal parameters
    assert step_on([({"a": 2, "b": 1, "c": "x"}, 4.0)]) is None  # no improvement
    assert step_on([({"a": 1, "b": 1, "c": "y"}, 2.0)]) is None  # a categorical move
    assert step_on([({"a": 2, "b": 1, "c": "x"}, 2.5), ({"a": 3, "b": 1, "c": "x"}, 2.0)]).tolist() == [4, 1, 0]
    assert step_on([({"a": 3, "b": 1, "c": "x"}, 2.5), ({"a": 2, "b": 1, "c": "x"}, 2.0)]) is None  # a = 1 tried
    no_a3 = ValidLevels(tuple(NAMES), all_valid.levels[all_valid.levels[:, 0] != 3], sizes)
    assert step_on([({"a": 2, "b": 1, "c": "x"}, 2.0)], no_a3) is None  # invalid
    assert step_on([({"a": 4, "b": 1, "c": "x"}, 2.0)]) is None  # a = 7: out of range


def test_the_step_two_parameters_away_is_bounded_on_a_space_of_many_values():
    """Two parameters of 1000 values each make a million configs two away; the step ranks a random
    MAX_TWO_AWAY of them, each two parameters from the incumbent and inside the box. Small spaces list all."""
    from tuner.search.level_moves import MAX_TWO_AWAY, two_away

    rng = np.random.default_rng(0)
    incumbent, sizes = np.array([5, 7, 1]), np.array([1000, 1000, 3])
    two = two_away(incumbent, sizes, rng)
    assert 0 < len(two) <= MAX_TWO_AWAY and len(np.unique(two, axis=0)) == len(two)
    assert ((two != incumbent).sum(axis=1) == 2).all() and (two < sizes).all() and (two >= 0).all()
    small = two_away(np.array([1, 2, 0]), np.array([5, 4, 2]), rng)
    assert len(small) == 4 * 3 + 4 * 1 + 3 * 1 and ((small != [1, 2, 0]).sum(axis=1) == 2).all()
