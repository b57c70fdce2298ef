"""The one search loop (tuner.search.loop): a seeded single-process search evaluates exactly the configs it
evaluated before the loop was shared with distributed campaigns, and records its trials one way.

PINNED was recorded with the code before the change (tuner/search/strategies.py's own ask/tell loop), by
replaying the recorded reduction space: per case, the number of trials in the study, a digest of every
trial's (number, state, value, params) as the sampler sees them, and the configs evaluated in order. A
change to the asks, the tells, their values or the enqueued repairs changes one of them; the recorded
strategy-comparison figures depend on all three. The study has since stored real values and states for
Optuna's tools (tests/test_optuna_study.py); the sampler's view of it (tuner.search.sampler_view) is still
the study as it was stored then, to the digest."""

import hashlib
import json
import re
from pathlib import Path

import optuna
import pytest

from tests.recorded import is_recorded, recording
from tuner.measure import kt
from tuner.measure.replay import replay
from tuner.search.codec import Codec
from tuner.search.sampler_view import StudyView
from tuner.search.strategies import make_strategy
from tuner.store import results_root
from tuner.store.recording_choice import find_recording
from tuner.workloads import get_workload

SPACE = get_workload("reduction").space
STORE = results_root()  # the project's (a test's `results` fixture points the store elsewhere)
needs_recording = pytest.mark.skipif(not is_recorded("nvidia-h100-80gb-hbm3", "reduction", "large", "float32"), reason="no recording")
WARM = [
    {"variant": 7, "block_size_x": 256, "items_per_thread": 16, "vector": 4, "shuffle": 1, "finish": 1},
    {"variant": 7, "block_size_x": 512, "items_per_thread": 8, "vector": 2, "shuffle": 1, "finish": 1},
]
CASES = {  # name: (sampler, budget, seed, make_strategy's options)
    "tpe": ("tpe", 40, 0, {}),
    "cmaes": ("cmaes", 40, 0, {}),
    "random": ("random", 40, 0, {}),
    "qmc": ("qmc", 40, 0, {}),
    "tpe-categorical": ("tpe", 30, 1, {"encoding": "categorical"}),
    "tpe-warm-patience": ("tpe", 80, 3, {"warm_start": WARM, "patience": 8}),
}

PINNED = {
    "tpe": (
        67,
        "14ad9040985c3762",
        [
            "7,512,16,2,0,1",
            "7,1024,64,2,1,1",
            "3,1024,1,1,0,1",
            "7,1024,64,4,0,1",
            "1,256,1,1,0,0",
            "7,32,32,1,1,1",
            "7,512,64,2,1,1",
            "4,1024,2,1,0,1",
            "7,256,16,2,1,1",
            "7,512,64,1,0,1",
            "5,1024,2,1,0,1",
            "7,1024,32,2,1,1",
            "7,512,64,4,1,1",
            "7,256,64,2,1,1",
            "7,512,64,2,0,1",
            "7,1024,32,4,1,1",
            "7,256,32,2,1,1",
            "7,256,8,2,0,1",
            "7,128,8,2,0,1",
            "7,1024,64,2,0,1",
            "7,256,8,4,0,1",
            "7,256,4,4,0,1",
            "7,512,32,4,0,1",
            "7,256,8,1,0,1",
            "7,256,16,4,1,1",
            "7,128,8,4,0,1",
            "7,512,16,2,1,1",
            "7,512,4,2,0,1",
            "7,512,8,4,0,1",
            "7,256,4,2,0,1",
            "7,256,2,4,0,1",
            "7,128,4,2,0,1",
            "7,256,16,4,0,1",
            "7,512,4,4,0,1",
            "7,128,16,2,0,1",
            "7,512,2,4,0,1",
            "7,1024,4,4,1,1",
            "7,512,4,4,1,1",
            "7,1024,2,4,1,1",
            "7,1024,4,2,1,1",
        ],
    ),
    "cmaes": (
        80,
        "d49e2f2e2ee4d389",
        [
            "7,512,16,2,0,1",
            "7,256,8,2,1,0",
            "3,256,1,1,0,0",
            "4,256,2,1,0,0",
            "4,128,2,1,0,1",
            "7,128,8,2,1,0",
            "7,128,16,2,1,0",
            "7,64,4,1,1,0",
            "4,512,2,1,0,1",
            "4,32,2,1,0,1",
            "3,128,1,1,0,0",
            "2,256,1,1,0,0",
            "4,128,2,1,0,0",
            "7,1024,4,2,0,0",
            "7,512,4,4,1,0",
            "4,512,2,1,0,0",
            "3,256,1,1,0,1",
            "7,128,1,2,1,0",
            "7,256,1,4,0,0",
            "2,1024,1,1,0,0",
            "2,512,1,1,0,0",
            "1,128,1,1,0,0",
            "1,256,1,1,0,0",
            "1,512,1,1,0,0",
            "1,1024,1,1,0,0",
            "5,256,2,1,0,0",
            "4,64,2,1,0,1",
            "2,128,1,1,0,0",
            "3,512,1,1,0,0",
            "2,64,1,1,0,0",
            "7,512,8,4,1,0",
            "3,1024,1,1,0,0",
            "1,512,1,1,0,1",
            "2,512,1,1,0,1",
            "7,512,4,2,1,0",
            "7,512,8,2,1,1",
            "7,512,8,2,1,0",
            "7,512,16,2,1,0",
            "7,1024,8,2,1,1",
            "2,256,1,1,0,1",
        ],
    ),
    "random": (
        77,
        "bc8f0d462cc065e3",
        [
            "7,512,16,2,0,1",
            "7,1024,64,2,1,1",
            "3,1024,1,1,0,1",
            "7,1024,64,4,0,1",
            "1,256,1,1,0,0",
            "2,512,1,1,0,1",
            "7,256,64,4,0,0",
            "7,32,16,4,0,0",
            "7,128,8,2,1,0",
            "2,32,1,1,0,0",
            "2,32,1,1,0,1",
            "7,32,32,1,1,0",
            "7,256,32,1,0,0",
            "3,32,1,1,0,1",
            "7,64,8,1,1,1",
            "3,512,1,1,0,0",
            "7,32,16,1,1,0",
            "7,1024,2,2,1,1",
            "7,1024,8,4,1,0",
            "7,128,64,2,1,1",
            "7,256,64,2,0,1",
            "1,64,1,1,0,0",
            "1,64,1,1,0,1",
            "7,128,64,2,0,1",
            "7,512,1,4,1,1",
            "2,1024,1,1,0,1",
            "7,256,4,1,1,0",
            "7,1024,64,4,0,0",
            "7,64,8,1,0,0",
            "7,64,4,4,1,0",
            "2,256,1,1,0,1",
            "7,256,32,1,0,1",
            "7,1024,32,2,0,0",
            "1,128,1,1,0,0",
            "1,32,1,1,0,1",
            "7,64,16,1,0,1",
            "7,128,16,4,1,1",
            "2,512,1,1,0,0",
            "7,512,2,1,1,0",
            "2,128,1,1,0,1",
        ],
    ),
    "qmc": (
        74,
        "2b0d7994089ebaa8",
        [
            "7,512,16,2,0,1",
            "1,32,1,1,0,0",
            "7,256,8,2,1,1",
            "6,64,2,1,0,1",
            "7,512,32,4,0,0",
            "7,128,16,4,0,0",
            "7,1024,1,2,1,1",
            "7,32,64,2,1,1",
            "1,256,1,1,0,0",
            "7,64,64,2,1,0",
            "7,512,8,4,0,1",
            "7,32,16,1,0,1",
            "7,256,2,4,1,0",
            "4,64,2,1,0,0",
            "7,512,32,1,0,1",
            "3,128,1,1,0,1",
            "1,1024,1,1,0,0",
            "1,128,1,1,0,1",
            "7,1024,64,1,1,0",
            "7,64,2,4,1,0",
            "7,512,32,2,0,1",
            "7,32,32,1,0,1",
            "7,256,4,4,1,0",
            "7,128,16,1,1,0",
            "2,1024,1,1,0,1",
            "7,32,8,4,1,1",
            "7,256,1,2,0,0",
            "7,128,32,2,0,0",
            "3,1024,1,1,0,1",
            "2,64,1,1,0,1",
            "7,512,16,4,0,0",
            "4,32,2,1,0,0",
            "7,256,64,4,1,1",
            "1,64,1,1,0,1",
            "4,512,2,1,0,0",
            "7,32,64,4,1,0",
            "3,256,1,1,0,1",
            "3,32,1,1,0,1",
            "7,256,16,4,1,0",
            "5,128,2,1,0,0",
        ],
    ),
    "tpe-categorical": (
        46,
        "f4c5beae44e246e1",
        [
            "2,512,1,1,0,0",
            "7,256,1,1,1,1",
            "7,64,2,4,1,1",
            "7,256,4,2,0,1",
            "7,128,8,4,0,1",
            "7,1024,8,1,0,1",
            "7,256,4,2,0,0",
            "7,256,64,2,0,1",
            "2,256,1,1,0,1",
            "7,512,4,1,0,1",
            "7,64,4,2,0,1",
            "7,1024,8,1,1,0",
            "7,1024,64,1,0,1",
            "7,128,1,4,0,1",
            "7,512,8,4,0,1",
            "7,128,8,4,0,0",
            "5,128,2,1,0,1",
            "7,1024,8,2,0,1",
            "7,1024,8,2,0,0",
            "7,1024,4,2,1,1",
            "7,32,4,2,1,1",
            "2,1024,1,1,0,1",
            "7,1024,32,2,1,1",
            "7,1024,16,1,1,1",
            "7,1024,4,4,0,1",
            "7,1024,2,2,0,1",
            "7,256,4,4,0,1",
            "7,32,8,1,0,1",
            "7,1024,4,4,1,1",
            "1,1024,1,1,0,1",
        ],
    ),
    "tpe-warm-patience": (
        15,
        "8cab7d317b2e903c",
        [
            "7,256,16,4,1,1",
            "7,512,8,2,1,1",
            "4,512,2,1,0,1",
            "1,64,1,1,0,0",
            "7,64,16,2,0,1",
            "2,128,1,1,0,0",
            "7,1024,2,2,1,1",
            "7,32,8,2,1,0",
            "7,256,8,1,0,1",
            "7,512,8,2,0,0",
        ],
    ),
    "tpe-resumed": (
        54,
        "b45de23fd2f9e164",
        [
            "4,32,2,1,0,0",
            "2,256,1,1,0,1",
            "1,256,1,1,0,0",
            "7,32,8,1,0,0",
            "1,128,1,1,0,0",
            "1,256,1,1,0,1",
            "4,1024,2,1,0,1",
            "3,1024,1,1,0,1",
            "2,1024,1,1,0,1",
            "7,1024,16,1,0,1",
            "7,1024,64,1,0,1",
            "7,512,64,1,0,1",
            "7,512,64,1,0,0",
            "7,256,64,1,0,1",
            "7,1024,32,2,0,1",
            "7,512,8,2,0,1",
            "7,512,8,2,1,1",
            "7,256,32,2,0,1",
            "7,512,8,1,1,1",
            "7,512,8,1,0,1",
            "7,512,4,1,1,1",
            "7,256,8,1,0,1",
            "7,1024,16,1,1,1",
            "7,256,16,1,1,1",
            "7,1024,4,2,0,1",
            "7,1024,4,4,0,1",
            "7,512,4,4,0,1",
            "7,1024,2,4,0,1",
            "7,512,2,4,0,1",
            "7,1024,1,4,0,1",
        ],
    ),
}


def search(sampler: str, budget: int, seed: int, storage=None, study_name="pinned", **options):
    """Replay a seeded search on the recording: the configs it evaluated, in order, its study and storage."""
    storage = storage or optuna.storages.InMemoryStorage()
    strategy = make_strategy(sampler, seed=seed, storage=storage, study_name=study_name, **options)
    cache = find_recording(STORE, "reduction", "large", "float32")
    results, _ = replay(SPACE, dict(SPACE.sizes["large"]), "float32", cache, strategy, max_evals=budget, seed=seed)
    configs = [",".join(str(r[k]) for k in SPACE.params) for r in results]
    return configs, optuna.load_study(study_name=study_name, storage=storage), storage


def digest(study, encoding: str = "ordinal") -> str:
    """Every trial's number, state, value and params as the sampler sees them: what it was asked and told."""
    view = StudyView(study, Codec(kt.tune_params(SPACE), encoding))
    log = [[t.number, t.state.name, t.value, sorted(t.params.items())] for t in view.get_trials(deepcopy=False)]
    return hashlib.sha256(json.dumps(log).encode()).hexdigest()[:16]


@needs_recording
@pytest.mark.parametrize("case", list(CASES))
def test_a_seeded_search_evaluates_the_pinned_configs(case):
    sampler, budget, seed, options = CASES[case]
    configs, study, _ = search(sampler, budget, seed, **options)
    trials, log_digest, expected = PINNED[case]
    assert configs == expected
    assert (len(study.trials), digest(study, options.get("encoding", "ordinal"))) == (trials, log_digest)


@needs_recording
def test_a_resumed_search_serves_its_configs_first_and_goes_on_as_pinned():
    first, _, storage = search("tpe", 15, 2)
    configs, study, _ = search("tpe", 30, 2, storage=storage)
    trials, log_digest, expected = PINNED["tpe-resumed"]
    assert configs[:15] == first and configs == expected
    assert (len(study.trials), digest(study)) == (trials, log_digest)


@needs_recording
def test_trials_are_recorded_one_way():
    configs, study, _ = search("tpe", 40, 0)
    kinds = [t.user_attrs.get("tuner", {}).get("kind") for t in study.trials]
    assert kinds.count("measured") == len(set(configs)) == 40
    assert {"invalid", "repeat"} <= set(kinds) <= {"measured", "invalid", "repeat", None}
    # no kind: the trial asked when the budget was spent, failed without a measurement
    assert all(t.state == optuna.trial.TrialState.FAIL for t, k in zip(study.trials, kinds, strict=True) if k is None)
    assert all(set(t.user_attrs) <= {"tuner"} for t in study.trials)


@needs_recording
def test_a_study_an_earlier_version_wrote_is_refused_in_one_line_and_left_as_it_was():
    """Studies from before stored the sampler's encoding (indices, negated values): resuming one would mix two
    encodings in one study. It is refused, named, with what to do; the study is not touched."""
    from tuner.errors import TunerError

    _, now, storage = search("tpe", 6, 4)
    legacy = optuna.create_study(storage=storage, study_name="legacy", direction="minimize")
    legacy.add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState.COMPLETE,
            value=-3000.0,
            params={"variant": 3},
            distributions={"variant": optuna.distributions.IntDistribution(0, 7)},
            user_attrs={"measured": True},
        )
    )
    with pytest.raises(TunerError, match="'legacy' was written by an earlier version.*delete-study"):
        search("tpe", 10, 4, storage=storage, study_name="legacy")
    assert len(optuna.load_study(study_name="legacy", storage=storage).trials) == 1


def small_loop(seed=0):
    """A search loop over a two-parameter space with a restriction: 7 valid configs of 8."""
    from kernel_tuner.searchspace import Searchspace

    from tuner.search.codec import Codec, Repair
    from tuner.search.loop import SearchLoop

    space = Searchspace({"a": [1, 2, 4, 8], "b": [1, 2]}, ["a * b <= 8"], 1024)
    codec = Codec(space.tune_params)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    return SearchLoop(
        study, codec, Repair(space, codec, __import__("random").Random(seed)), space.is_param_config_valid
    )


def test_the_loop_settles_what_needs_no_measurement_and_goes_on_from_the_nearest_free_config():
    import sys

    loop = small_loop()
    loop.enqueue((2, 1))
    trial, config = loop.propose()
    assert config == (2, 1) and loop.asked == 1
    loop.record(trial, config, 5.0)
    assert loop.study.trials[0].params == {"a": 2, "b": 1}  # the real values
    loop.enqueue((2, 1))  # a repeat: told its value, and the nearest free config is proposed instead
    trial, config = loop.propose()
    assert config in {(1, 1), (4, 1), (2, 2)} and (loop.asked, loop.settled) == (3, 1)
    pruned = optuna.trial.TrialState.PRUNED
    repeat = loop.study.trials[1]  # pruned: no value of its own; the sampler is shown the known cost
    assert (repeat.state, repeat.user_attrs["tuner"], repeat.value) == (pruned, {"kind": "repeat", "cost": 5.0}, None)
    loop.record(trial, config, sys.float_info.max, status="compile")  # failed: pruned, the penalty for the sampler
    failed = loop.study.trials[-1]
    assert (failed.state, failed.value) == (pruned, None) and 5.0 < loop.penalty() < 5.001
    assert failed.user_attrs["tuner"] == {"kind": "measured", "cost": loop.penalty(), "status": "compile"}
    loop.enqueue((8, 2))  # breaks the restriction: pruned, the penalty for the sampler
    trial, config = loop.propose()
    invalid = loop.study.trials[3]
    assert invalid.state == pruned and invalid.value is None
    assert invalid.user_attrs["tuner"] == {"kind": "invalid", "status": "invalid", "cost": loop.penalty()}
    assert config in {(8, 1), (4, 2)}
    loop.record(trial, config, 7.0, "measured", note="fields go to the record")
    measured = loop.study.trials[-1]
    assert (measured.state, measured.value) == (optuna.trial.TrialState.COMPLETE, 7.0)
    assert measured.user_attrs["tuner"] == {"kind": "measured", "cost": 7.0, "note": "fields go to the record"}
    assert loop.penalty() == pytest.approx(7.5)
    seen = {(2, 1), config}
    while (proposal := loop.propose()) is not None:  # the rest of the space, each config once
        loop.record(proposal.trial, proposal.config, 10.0)
        seen.add(proposal.config)
    assert len(seen | set(loop.values)) == 7 and loop.repair.exhausted()


@needs_recording
def test_a_distributed_worker_records_its_trials_the_same_way(results):
    """A distributed TPE worker goes through the same loop: every trial it told has a kind, and its name."""
    import shutil

    from tuner.campaign.distributed import create_campaign, run_worker
    from tuner.campaign.request import CampaignRequest
    from tuner.search.trial_kinds import KINDS
    from tuner.store import cache_path

    h100 = "NVIDIA H100 80GB HBM3"
    target = cache_path(results, h100, "reduction", "seed", "float32")
    target.parent.mkdir(parents=True)
    shutil.copy(recording(h100, "reduction", "seed", "float32"), target)
    req = CampaignRequest(
        workload="reduction", size="seed", dtype="float32", strategy="tpe", max_evals=15, simulate=True, results=results
    )
    _, url = create_campaign(req, "kinds", None)
    summary = run_worker("kinds", url, 0, results=results)
    study = optuna.load_study(study_name="kinds", storage=url)
    records = [t.user_attrs["tuner"] for t in study.trials]
    assert {r["kind"] for r in records} <= set(KINDS) and all(r["worker"] == summary["worker"] for r in records)
    assert sum(r["kind"] in ("measured", "served") for r in records) == 15
    assert summary["trials"] == len(study.trials) == 15 + summary["handed_back"]


TUNER = Path(__file__).resolve().parent.parent / "tuner"


def test_one_ask_call_site_and_optunas_privates_in_one_module():
    sources = {p.relative_to(TUNER).as_posix(): p.read_text() for p in TUNER.rglob("*.py")}
    assert [name for name, text in sources.items() for _ in re.finditer(r"\.ask\(", text)] == ["search/loop.py"]
    private = re.compile(r"\.(_storage|_trial_id|_backend|_heartbeat)\b|\bstorages\._")
    assert {name for name, text in sources.items() if private.search(text)} <= {
        "search/optuna_private.py"
    }
