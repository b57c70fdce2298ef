"""Asking ahead (tuner.search.ahead) without a GPU: an Optuna search over the recorded reduction space through a
runner that says it compiles ahead and records every prefetch and every measurement, with compile and measure
times of the test's choosing; and the campaign's own runner with its compile pool (a stand-in compiler) under
a seeded search."""

from types import SimpleNamespace

import optuna
import pytest

from tests.fake_worker import cubin_requests
from tests.test_search_loop import PINNED, SPACE, STORE, digest, needs_recording
from tuner.measure.compile_pool import CompileJob
from tuner.measure.protocol import MeasureSpec, Result
from tuner.measure.replay import recorded_searchspace, simulation
from tuner.search.ahead import AskAhead, Pace, compile_ahead
from tuner.search.strategies import make_strategy
from tuner.store.recording_choice import find_recording

KEYS = list(SPACE.params)


class Recorder:
    """Kernel Tuner's simulation runner over the recording, as a runner with (or without) a compile pipeline
    of `workers`: `events` lists ("prefetch", config) and ("run", config) in order; every result's compile
    and measure times are the test's."""

    def __init__(self, runner, compile_ms: float, measure_ms: float, workers: int = 4, pipeline: bool = True):
        self.runner, self.compile_ms, self.measure_ms = runner, compile_ms, measure_ms
        self.compile_workers, self.has_pipeline = workers, pipeline
        self.events: list[tuple[str, tuple]] = []

    def __getattr__(self, name):
        return getattr(self.runner, name)

    def pipeline(self):
        return SimpleNamespace(depth=2 * self.compile_workers) if self.has_pipeline else None

    def prefetch(self, configs):
        self.events += [("prefetch", tuple(c)) for c in configs]

    def run(self, parameter_space, tuning_options):
        configs = [tuple(c) for c in parameter_space]
        results = self.runner.run(configs, tuning_options)
        for config, result in zip(configs, results, strict=True):
            self.events.append(("run", config))
            if result is not None:
                result.update(compile_time=self.compile_ms, benchmark_time=self.measure_ms, verification_time=0.0)
        return results


def search(sampler="tpe", budget=40, seed=0, *, compile_ms=40.0, measure_ms=10.0, workers=4, pipeline=True, **options):
    """A seeded search replayed through a Recorder: the recorder, the configs evaluated, the study, the strategy
    and Kernel Tuner's options (its budget)."""
    cache = find_recording(STORE, "reduction", "large", "float32")
    runner, tuning_options = simulation(SPACE, dict(SPACE.sizes["large"]), "float32", cache, max_fevals=budget, seed=seed)
    searchspace, _ = recorded_searchspace(SPACE, tuning_options["cache"])
    recorder = Recorder(runner, compile_ms, measure_ms, workers, pipeline)
    storage = optuna.storages.InMemoryStorage()
    strategy = make_strategy(sampler, seed=seed, storage=storage, study_name="ahead", **options)
    results = strategy.tune(searchspace, recorder, tuning_options)
    configs = [",".join(str(r[k]) for k in KEYS) for r in results]
    return recorder, configs, optuna.load_study(study_name="ahead", storage=storage), strategy, tuning_options


def in_flight(events: list[tuple[str, tuple]]) -> list[int]:
    """At each measurement, how many configs were asked and not measured yet (the one measuring included)."""
    asked, counts = set(), []
    for what, config in events:
        if what == "prefetch":
            asked.add(config)
        else:
            assert config in asked, f"{config} measured without being prefetched"
            counts.append(len(asked))
            asked.discard(config)
    return counts


def kinds(study) -> list:
    return [t.user_attrs.get("tuner", {}).get("kind") for t in study.trials]


@needs_recording
def test_without_a_pipeline_the_search_asks_one_at_a_time_exactly_as_pinned():
    recorder, configs, study, _, _ = search(pipeline=False)
    trials, log_digest, expected = PINNED["tpe"]
    assert configs == expected and (len(study.trials), digest(study)) == (trials, log_digest)
    assert not [e for e in recorder.events if e[0] == "prefetch"]


@needs_recording
def test_where_compiling_is_cheap_the_search_stays_sequential_and_learns_from_every_result():
    """A compile a tenth of a measurement: one trial in flight, each config compiled in the pool just before it
    is measured; the search is the sequential one (TPE's constant liar has no running trial to lie about)."""
    recorder, configs, study, _, _ = search(compile_ms=1.0, measure_ms=10.0)
    assert set(in_flight(recorder.events)) == {1}
    trials, log_digest, expected = PINNED["tpe"]
    assert configs == expected and (len(study.trials), digest(study)) == (trials, log_digest)


@needs_recording
def test_configs_asked_ahead_are_compiled_ahead_and_none_is_lost_at_the_budget():
    recorder, configs, study, strategy, options = search(budget=30, compile_ms=40.0, measure_ms=10.0, workers=4)
    counts = in_flight(recorder.events)  # every measured config was prefetched first
    # the first is asked alone (no times known yet); then compiles take 4 measurements: 4 in flight, the pool's
    # workers, and fewer only as the budget runs out
    assert counts[0] == 1 and max(counts) == 4 and counts[5:-4] == [4] * len(counts[5:-4])
    # the budget counts measured configs, each once
    assert len(configs) == len(set(configs)) == 30 and options.budget.num_fevals == 30
    assert strategy.stop_reason == "budget"
    # every trial told: 30 measured; asked ahead and never measured: none (the budget bounds the asks)
    assert kinds(study).count("measured") == 30
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    prefetched = {c for what, c in recorder.events if what == "prefetch"}
    measured = {c for what, c in recorder.events if what == "run"}
    assert prefetched == measured


@needs_recording
def test_a_patience_stop_tells_the_trials_asked_ahead_fail():
    recorder, configs, study, strategy, _ = search(budget=200, seed=3, compile_ms=40.0, measure_ms=10.0, patience=8)
    assert strategy.stop_reason == "patience" and len(configs) < 200
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    prefetched = [c for what, c in recorder.events if what == "prefetch"]
    measured = {c for what, c in recorder.events if what == "run"}
    unmeasured = [c for c in prefetched if c not in measured]
    assert 0 < len(unmeasured) < 4 and len(prefetched) == len(set(prefetched))
    # each told FAIL, with no result: nothing counts it
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL and t.user_attrs.get("tuner") is None]
    assert sorted(tuple(t.params[k] for k in KEYS) for t in failed) == sorted(unmeasured)
    assert kinds(study).count("measured") == len(configs) == len(set(configs))


def test_the_depth_follows_compile_over_measure_time():
    pace = Pace(limit=4)
    assert pace.depth == 1  # nothing known: one at a time
    pace.observe({"compile_time": 25.0, "benchmark_time": 8.0, "verification_time": 2.0})
    assert pace.depth == 3
    pace.observe({"compile_time": 900.0, "benchmark_time": 0.0, "verification_time": 0.0})  # a compile failure
    pace.observe({"compile_time": float("nan"), "benchmark_time": 5.0})  # times it does not have
    assert pace.depth == 3
    for _ in range(8):  # the search moved to configs that compile quickly: back to one at a time
        pace.observe({"compile_time": 5.0, "benchmark_time": 9.0, "verification_time": 1.0})
    assert pace.depth == 1
    for _ in range(8):
        pace.observe({"compile_time": 1000.0, "benchmark_time": 1.0})
    assert pace.depth == 4  # at most the pool's workers
    single = Pace(limit=1)
    single.observe({"compile_time": 1000.0, "benchmark_time": 1.0})
    assert single.depth == 1


def test_the_limit_is_the_pools_workers_and_one_without_a_pipeline():
    class NoPipeline:
        def pipeline(self):
            return None

        def prefetch(self, configs):
            raise AssertionError("never called")

    assert compile_ahead(object())[0] == 1 and compile_ahead(object())[1] is None  # Kernel Tuner's own runners
    assert compile_ahead(NoPipeline()) == (1, None)
    with_pool = Recorder(None, 1.0, 1.0, workers=6)
    limit, prefetch = compile_ahead(with_pool)
    assert limit == 6 and prefetch == with_pool.prefetch
    with_pool.pipeline = lambda: SimpleNamespace(depth=0)  # TUNER_COMPILE_AHEAD=0: one at a time, the pool's binary
    assert compile_ahead(with_pool)[0] == 1


def test_ask_ahead_keeps_to_the_room_the_budget_leaves():
    from tests.test_search_loop import small_loop

    loop = small_loop()
    room = {"left": 2}
    asked = []
    ahead = AskAhead(loop, Pace(limit=4), asked.extend, room=lambda: room["left"])
    for _ in range(3):
        ahead.pace.observe({"compile_time": 100.0, "benchmark_time": 1.0})
    first = ahead.next()
    assert len(asked) == 2 and len(ahead.queue) == 1  # two of the depth's four: the budget has two left
    ahead.drop()
    states = [t.state for t in loop.study.trials]
    assert states.count(optuna.trial.TrialState.FAIL) == 1 and states.count(optuna.trial.TrialState.RUNNING) == 1
    loop.record(first.trial, first.config, 1.0)
    assert not loop.pending


# ---- the campaign's runner and its compile pool ---------------------------------------------------
def quick_compiler(job: CompileJob) -> tuple[bytes, str]:
    return f"cubin of {job.source}".encode(), f"_lowered_{job.name}"


def slow_compile_measuring_main(conn, spec):
    """A measuring process that takes cubins and says whether one came with each config; compiling takes four
    times measuring in its rows."""
    for request in cubin_requests(conn):
        row = {**dict(zip(KEYS, request.values)), "status": "ok", "error": "", "times": [1.0 + sum(request.values) / 1e4],
               "cubin": bool(request.compiled), "compile_time": 40.0, "verification_time": 2.0, "benchmark_time": 8.0}
        conn.send(Result((row,)))


def test_the_campaigns_runner_compiles_what_an_optuna_search_asks_ahead():
    from tuner.measure import kt
    from tuner.measure.runner import IsolatedRunner

    size = {"n": 1 << 20}
    runner = IsolatedRunner(MeasureSpec("reduction", size, "float32", "nvcuda", 0, None), timeout=30,
                            target=slow_compile_measuring_main, compile_workers=3)
    runner.compiler = "tests.test_ask_ahead:quick_compiler"
    rows = []
    runner.on_row = lambda row, fresh: rows.append(row)
    storage = optuna.storages.InMemoryStorage()
    strategy = make_strategy("random", seed=1, storage=storage, study_name="pool")
    try:
        runner.start()
        results = strategy.tune(kt.searchspace(SPACE), runner, kt.tuning_options(SPACE, size, "float32", max_fevals=12))
        assert compile_ahead(runner)[0] == 3
    finally:
        runner.shutdown()
    assert len(results) == len(rows) == 12 and all(r["status"] == "ok" and r["cubin"] for r in rows), rows
    study = optuna.load_study(study_name="pool", storage=storage)
    assert kinds(study).count("measured") == 12 and strategy.stop_reason == "budget"
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))


class Interrupted:
    """A cost function interrupted (Ctrl-C) while it measures."""

    results: list = []

    def __call__(self, config, check_restrictions=False):
        raise KeyboardInterrupt


@pytest.mark.parametrize("depth", [1, 3])
def test_an_interrupted_measurement_leaves_no_trial_running(depth):
    """Told FAIL, the one measuring and those asked ahead: a resumed study's sampler would count a trial left
    running as in flight for ever."""
    from tests.test_search_loop import small_loop
    from tuner.search.optuna_strategy import OptunaStrategy

    loop = small_loop()
    ahead = AskAhead(loop, Pace(limit=depth))
    ahead.pace.observe({"compile_time": 100.0, "benchmark_time": 1.0})
    with pytest.raises(KeyboardInterrupt):
        try:
            OptunaStrategy._search(ahead, Interrupted(), None, None)
        finally:
            ahead.drop()
    assert all(t.state.is_finished() for t in loop.study.trials) and not loop.pending
    abandoned = [t for t in loop.study.trials if t.user_attrs.get("tuner") is None]
    assert len(abandoned) == depth and all(t.state == optuna.trial.TrialState.FAIL for t in abandoned)
