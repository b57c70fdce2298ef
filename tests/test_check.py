"""The regression check's statistics and verdicts on synthetic distributions (no GPU): A/A stays quiet,
planted slowdowns are caught, a throttled runner is not a regression, other GPUs/drivers are refused."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from tuner.answers.baseline import BASELINE_SESSIONS, session_noise
from tuner.answers.check import check_one
from tuner.answers.check_result import CheckResult, exit_code
from tuner.answers.check_report import junit, markdown
from tuner.stats import compare, normalise
from tuner.measure.protocol import MeasureSpec
from tuner.measure.runner import _Opts

GPU = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "cuda": "13.3"}

# the campaigns that stand-in baselines start from: the stand-in answers each config at once, and its one hanging
# config (fake_worker.misbehaviour) costs the whole timeout; what they find is not what these tests check
STAND_IN_TIMEOUT = 1.0


def rounds(rng, k, scale=1.0, sigma=0.01):
    return list(scale * np.exp(rng.normal(0, sigma, k)))


def baseline(rng, sessions=BASELINE_SESSIONS, per=10, sigma=0.01, session_sigma=0.0, ms=0.35, ref_ms=0.73):
    kern, ref = [], []
    for _ in range(sessions):
        shift = np.exp(rng.normal(0, session_sigma))
        kern += rounds(rng, per, ms * shift, sigma)
        ref += rounds(rng, per, ref_ms, sigma)
    return {"workload": "reduction", "size": "large", "dtype": "float32", "config": json.dumps({"variant": 7}),
            "rounds": kern, "references": json.dumps({"copy": ref}), "reference": "copy", "sessions": sessions, **GPU}


def now(rng, slow=0.0, throttle=1.0, sigma=0.01, ms=0.35, ref_ms=0.73, k=20):
    return {"status": "ok", "rounds": rounds(rng, k, ms * (1 + slow) * throttle, sigma),
            "references": {"copy": rounds(rng, k, ref_ms * throttle, sigma)}}


def verdicts(slow, trials=200, sigma=0.01, throttle=1.0, session_sigma=0.0, seed=7):
    """Checks as they run on a GPU: each worker session (the baseline's, and the check's own) lands at its
    own offset, drawn with `session_sigma`, on top of the round-to-round noise `sigma`."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(trials):
        base = baseline(rng, sigma=sigma, session_sigma=session_sigma)
        offset = np.exp(rng.normal(0, session_sigma))
        out.append(check_one(base, GPU, now(rng, slow, throttle, sigma, ms=0.35 * offset)).verdict)
    return out


def test_aa_flags_almost_nothing():
    v = verdicts(0.0)
    assert v.count("regression") / len(v) <= 0.01


# each slowdown its own simulation, seeded alike (as one test they were run one after the other): xdist spreads them
@pytest.mark.parametrize("slow, caught", [(0.05, 0.95), (0.10, 1.0)])
def test_ab_catches_5_percent_mostly_and_10_percent_always(slow, caught):
    assert verdicts(slow).count("regression") / 200 >= caught


def test_throttled_runner_is_not_a_regression_after_normalisation():
    rng = np.random.default_rng(3)
    res = check_one(baseline(rng), GPU, now(rng, slow=0.0, throttle=1.25))
    assert res.raw["change"] > 0.2 and res.raw["verdict"] == "regression"
    assert abs(res.normalised["change"]) < 0.02 and res.verdict == "pass"


def test_a_reference_that_does_not_track_the_kernel_is_not_used():
    """LocVolCalib on the H100: its sessions agree to 0.1%, the copy reference beside it wanders by a few %
    from session to session. Normalised, a 5% slowdown hides under a 10% floor; raw times decide instead."""
    rng = np.random.default_rng(6)
    base = baseline(rng)
    ref = json.loads(base["references"])["copy"]
    offsets = np.repeat(np.exp(rng.normal(0, 0.03, BASELINE_SESSIONS)), len(ref) // BASELINE_SESSIONS)
    base["references"] = json.dumps({"copy": list(np.asarray(ref) * offsets)})
    res = check_one(base, GPU, now(rng, slow=0.05))
    assert res.normalised["threshold"] > res.raw["threshold"] == pytest.approx(0.03)
    assert res.decided_by == "raw" and res.verdict == "regression" and res.noise_floor == res.raw["threshold"]
    assert "did not track" in res.reason
    steady = check_one(baseline(rng), GPU, now(rng))  # where it tracks (or ties), the normalised times decide
    assert steady.decided_by == "normalised" and steady.reason == ""


def test_a_pass_whose_interval_slow_rounds_widen_says_so():
    """Two cold rounds of ten (twice as slow: a session's first rounds on an idle card) leave the median where it
    was and the verdict a pass, but a bootstrap's resamples draw them often enough that the interval reaches +100%
    (the 64M int32 baseline shipped with the built-in workloads, replayed by `tuner check --simulate --demo`): the
    reason names the rounds and says what the pass does not rule out. Without them, nothing is said."""
    rng = np.random.default_rng(8)
    fresh = now(rng, k=10)
    fresh["rounds"][:2] = [2 * r for r in fresh["rounds"][:2]]  # the kernel's alone: its reference was not slow
    res = check_one(baseline(rng), GPU, fresh)
    decider = getattr(res, res.decided_by)
    assert res.verdict == "pass" and decider["ci"][1] > 0.5
    assert "2 of the 10 rounds measured now (rounds 1, 2) took 1.5x their median or more" in res.reason
    assert f"the interval reaches {decider['ci'][1]:+.1%}" in res.reason
    assert check_one(baseline(rng), GPU, now(rng, k=10)).reason == ""


def test_real_slowdown_on_a_throttled_runner_is_still_caught():
    rng = np.random.default_rng(4)
    res = check_one(baseline(rng), GPU, now(rng, slow=0.08, throttle=1.25))
    assert res.verdict == "regression" and res.normalised["change"] == pytest.approx(0.08, abs=0.02)


def test_faster_is_not_a_failure():
    rng = np.random.default_rng(5)
    res = check_one(baseline(rng), GPU, now(rng, slow=-0.10))
    assert res.verdict == "faster" and res.exit_code == 0


@pytest.mark.parametrize("session_sigma", [0.01, 0.06])
def test_aa_with_session_offsets_flags_at_most_1_percent(session_sigma):
    """Session offsets of 1% (the H100's 2^26 kernels) or 6% (tiny kernels in L2): the noise floor, an
    upper prediction bound from the baseline's sessions, keeps false alarms rare."""
    v = verdicts(0.0, trials=400, session_sigma=session_sigma, seed=11)
    assert v.count("regression") / len(v) <= 0.01, session_sigma


def test_a_fixed_three_sigma_floor_over_three_sessions_would_alarm_often():
    """Why the floor uses the t quantile: with 3 sessions their spread is a rough estimate, and 3 x that
    spread is exceeded by several percent of unchanged checks (the first A/A measurement, 93%)."""
    rng = np.random.default_rng(12)
    alarms = 0
    for _ in range(2000):
        medians = rng.normal(0, 0.01, 3)
        fresh = rng.normal(0, 0.01)
        alarms += fresh - medians.mean() > max(0.0, 3 * medians.std(ddof=1))
    assert alarms / 2000 > 0.03
    b = baseline(np.random.default_rng(13), sessions=3, session_sigma=0.01)
    spread = np.std([np.median(p) for p in np.array_split(b["rounds"], 3)], ddof=1) / np.median(b["rounds"])
    assert session_noise(b["rounds"], 3) > 9 * spread  # t(2) at 99.5% is 9.9


@pytest.mark.parametrize("slow, caught", [(0.05, 0.95), (0.10, 1.0)])
def test_ab_with_session_offsets_catches_5_percent_on_steady_kernels(slow, caught):
    """Large kernels (sessions within about 0.3% of each other on the H100): 5% is caught in at least 95%
    of checks, 10% always."""
    assert verdicts(slow, trials=400, session_sigma=0.003, seed=11).count("regression") / 400 >= caught


def test_session_spread_raises_the_noise_floor():
    rng = np.random.default_rng(6)
    noisy = baseline(rng, session_sigma=0.06)
    assert session_noise(noisy["rounds"], 3) > 0.05
    assert session_noise(noisy["rounds"], 1) == 0.0
    # a 6% change on a kernel whose sessions wobble by ~6% is not flagged
    res = check_one(noisy, GPU, now(rng, slow=0.06))
    assert res.noise_floor > 0.05


@pytest.mark.parametrize("field, value, words", [
    ("gpu", "NVIDIA A100-SXM4-80GB", "baseline taken on NVIDIA H100"),
    ("driver", "575.10", "driver 580.159.04 at baseline, 575.10 now"),
    ("cuda", "12.8", "CUDA 13.3 at baseline, 12.8 now"),
])
def test_refuses_other_gpu_or_major_versions(field, value, words):
    rng = np.random.default_rng(8)
    gpu = {**GPU, field: value}
    res = check_one(baseline(rng), gpu, now(rng))
    assert res.verdict == "refused" and words in res.reason and res.exit_code == 2
    forced = check_one(baseline(rng), gpu, now(rng), allow_different=True)
    assert forced.verdict == "pass" and "compared anyway" in forced.reason


def test_minor_driver_update_is_compared():
    rng = np.random.default_rng(9)
    assert check_one(baseline(rng), {**GPU, "driver": "580.200.01"}, now(rng)).verdict == "pass"


def test_wrong_answer_fails_the_check():
    rng = np.random.default_rng(10)
    res = check_one(baseline(rng), GPU, {"status": "wrong_answer", "error": "verification failed"})
    assert res.verdict == "failed" and res.exit_code == 1


def test_exit_codes_and_reports():
    results = [CheckResult("reduction", "large", "float32", {}, "pass"),
               CheckResult("reduction", "seed", "int32", {}, "regression", raw={"change": 0.1, "ci": [0.05, 0.15]}),
               CheckResult("gemm", "4096", "float32", {}, "refused", reason="other GPU")]
    assert exit_code(results) == 1
    assert exit_code(results[:1]) == 0 and exit_code([results[0], results[2]]) == 2
    suite = ET.fromstring(junit(results))
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "1"
    assert suite.find("testcase[@name='seed-int32']/failure") is not None
    md = markdown(results)
    assert "**regression**" in md and "+10.0% [+5.0%, +15.0%]" in md


def test_compare_needs_enough_rounds_and_matching_references():
    with pytest.raises(ValueError):
        compare([1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        normalise([1, 2, 3], [1, 2])


def test_cli_check_without_gpu_cannot_run(monkeypatch, capsys):
    import tuner.answers.check
    from tuner.cli import main

    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: {"gpu": "unknown"})
    assert main(["check"]) == 2
    assert "no CUDA GPU found" in capsys.readouterr().err


def test_baseline_then_check_end_to_end_with_stand_in_worker(results, monkeypatch, tmp_path, capsys):
    """tuner baseline stores each kernel at once; tuner check passes, then flags a planted 10% slowdown."""
    import tuner.answers.baseline
    import tuner.answers.check
    from tests.fake_worker import fake_worker_main
    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest
    from tuner.cli import main

    run_campaign(CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="brute_force",
                                 max_evals=30, timeout=STAND_IN_TIMEOUT, quiet=True, measure_target=fake_worker_main))
    monkeypatch.setattr(tuner.answers.baseline, "measure_target", fake_worker_main)
    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: {"gpu": "Fake GPU 9000", "driver": "580.0", "cuda": "13.0"})
    assert main(["baseline", "reduction", "--size", "seed", "--dtype", "float32", "--sessions", "4"]) == 0
    stored = tuner.answers.baseline.load_check_baselines()
    assert len(stored) == 1 and stored.iloc[0]["sessions"] == 4 and len(stored.iloc[0]["rounds"]) == 40
    report = tmp_path / "r.xml"
    assert main(["check", "--junit", str(report)]) == 0
    monkeypatch.setenv("FAKE_SLOWDOWN", "0.10")
    assert main(["check", "--markdown", str(tmp_path / "r.md")]) == 1
    assert "**regression**" in (tmp_path / "r.md").read_text()
    assert ET.parse(report).getroot().get("failures") == "0"
    capsys.readouterr()
    assert main(["check", "--json"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["checks"][0]["verdict"] == "regression"  # stdout holds the JSON alone
    assert "reduction seed float32: regression" in out.err  # progress goes to stderr


def _stand_in(monkeypatch):
    """The stand-in worker measures (`tuner baseline` and `tuner check`) on a Fake GPU 9000."""
    import tuner.answers.baseline
    import tuner.answers.check
    from tests.fake_worker import fake_worker_main

    monkeypatch.setattr(tuner.answers.baseline, "measure_target", fake_worker_main)
    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: {"gpu": "Fake GPU 9000", "driver": "580.0", "cuda": "13.0"})


# the tests that start from stand_in_store run in one pytest-xdist process (--dist loadgroup), so it is made once
STAND_IN_GROUP = pytest.mark.xdist_group("tests.test_check.stand_in_store")


@pytest.fixture(scope="module")
def stand_in_store(tmp_path_factory):
    """A 10-evaluation campaign and a 2-session baseline of reduction seed float32, both by the stand-in worker,
    made once for the tests that start from them (each gets a copy of its own: _stand_in_baseline), not again by
    each: the stand-in's landscape is the same every time, and only the worker processes' start cost differed."""
    from tests.fake_worker import fake_worker_main
    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest
    from tuner.cli import main

    root = tmp_path_factory.mktemp("stand-in") / "results"
    root.mkdir()
    with pytest.MonkeyPatch.context() as m:
        m.setenv("TUNER_RESULTS", str(root))
        run_campaign(CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="brute_force",
                                     max_evals=10, timeout=STAND_IN_TIMEOUT, quiet=True, measure_target=fake_worker_main))
        _stand_in(m)
        assert main(["baseline", "reduction", "--size", "seed", "--dtype", "float32", "--sessions", "2"]) == 0
    return root


def _stand_in_baseline(results, monkeypatch, made):
    """The store `made` by stand_in_store, copied into this test's results folder, and the stand-in worker to
    measure (which `tuner check` then uses too). The baseline file's path."""
    import shutil

    shutil.copytree(made, results, dirs_exist_ok=True)
    _stand_in(monkeypatch)
    return next(results.glob("*/reduction/check/baseline.parquet"))


def test_a_check_that_crashes_exits_2_not_1_and_bad_report_paths_are_said_before_measuring(results, monkeypatch,
                                                                                          capsys):
    """1 means "regression" to a CI gate: a bug in the check must not read as one."""
    import tuner.answers.check
    from tuner.cli import main

    def crash(*a, **kw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(tuner.answers.check, "run_check", crash)
    assert main(["check"]) == 2
    assert "RuntimeError: a bug" in capsys.readouterr().err
    assert main(["check", "--junit", str(results / "no" / "such" / "r.xml")]) == 2
    assert "cannot write" in capsys.readouterr().err  # and run_check was never reached


@STAND_IN_GROUP
def test_a_named_kernel_without_a_baseline_bad_plants_and_too_few_rounds_are_refused(results, monkeypatch, capsys,
                                                                                     stand_in_store):
    """A CI gate names its kernels: one with no baseline here must not pass by being skipped (exit 2, said);
    a planted parameter the space lacks would re-measure the unchanged config and pass, so it is an error;
    fewer than 3 rounds cannot be compared, which is said before any GPU time is spent."""
    import tuner.answers.check
    from tuner.cli import main

    _stand_in_baseline(results, monkeypatch, stand_in_store)
    capsys.readouterr()
    assert main(["check", "reduction", "gemm"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "gemm" in out and "no baseline on Fake GPU 9000" in out and "reduction seed float32: pass" in out
    assert main(["check", "gemm"]) == 2
    assert "no baseline of gemm for Fake GPU 9000: record one with `tuner baseline gemm`" in capsys.readouterr().err
    monkeypatch.setattr(tuner.answers.check, "measuring_process", lambda *a, **kw: pytest.fail("nothing is measured for a bad request"))
    assert main(["check", "--plant", "block_size=1024"]) == 2
    assert "--plant: reduction has no parameter block_size (it has variant, block_size_x," in capsys.readouterr().err
    assert main(["check", "--plant", "block_size_x=3"]) == 2
    assert "block_size_x=3 is not a value of block_size_x in reduction (it has 32, 64," in capsys.readouterr().err
    assert main(["check", "--plant", "variant=1", "--plant", "items_per_thread=2"]) == 2  # before any worker starts
    assert "breaks a restriction of the reduction space for seed float32" in capsys.readouterr().err
    assert main(["check", "--rounds", "2"]) == 2
    assert "at least 3 rounds" in capsys.readouterr().err
    assert main(["baseline", "reduction", "--size", "seed", "--rounds", "1", "--sessions", "2"]) == 2
    assert "at least 3 rounds in all" in capsys.readouterr().err


@STAND_IN_GROUP
def test_a_baseline_older_than_its_space_cannot_run_and_says_why(results, monkeypatch, tmp_path, capsys,
                                                                  stand_in_store):
    """A baseline recorded before the space gained a parameter (Floyd-Warshall's KCHUNK, say) names no kernel
    of today's space: that kernel's check could not run (exit 2) and says to record the baseline again; no
    worker is started for it."""
    import tuner.answers.check
    from tuner.cli import main

    path = _stand_in_baseline(results, monkeypatch, stand_in_store)
    stored = pd.read_parquet(path)
    stored["config"] = [json.dumps({k: v for k, v in json.loads(c).items() if k != "finish"}) for c in stored["config"]]
    stored.to_parquet(path, index=False)
    monkeypatch.setattr(tuner.answers.check, "measuring_process", lambda *a, **kw: pytest.fail("no worker for a stale baseline"))
    capsys.readouterr()
    assert main(["check", "--markdown", str(tmp_path / "r.md")]) == 2
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "reduction seed float32: stale" in out and "its config lacks finish" in out and "tuner baseline reduction" in out


@STAND_IN_GROUP
def test_a_baseline_timed_another_way_is_stale_and_not_measured(results, monkeypatch, tmp_path, capsys,
                                                                stand_in_store):
    """Baselines taken before kernels' start events waited for their launch (no `timing` column: "plain")
    carry 8-20 us of launch overhead: compared with times taken now, they would hide a regression of that
    size. Such a check says to record the baseline again instead of measuring."""
    import tuner.answers.baseline
    from tuner.cli import main

    path = _stand_in_baseline(results, monkeypatch, stand_in_store)
    stored = pd.read_parquet(path)
    assert list(stored["timing"]) == ["delayed-start"]  # the stand-in worker's protocol, recorded
    assert main(["check"]) == 0
    stored.drop(columns="timing").to_parquet(path, index=False)  # as baselines from before the column
    monkeypatch.setattr(tuner.answers.baseline.IsolatedRunner, "measure_rounds",
                        lambda *a, **kw: pytest.fail("a stale baseline is not measured"))
    capsys.readouterr()
    assert main(["check"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "reduction seed float32: stale" in out and "timed plain" in out and "tuner baseline reduction" in out


def test_baseline_sessions_are_spread_over_the_run(results, monkeypatch):
    """Every kernel's first session comes before any kernel's second, so the sessions' spread holds the drift
    of the whole run; a size with nothing tuned is skipped once, not per session."""
    import tuner.answers.baseline
    from tests.fake_worker import fake_worker_main
    from tuner.campaign.local import run_campaign
    from tuner.campaign.request import CampaignRequest

    for size in ("seed", "16M"):
        run_campaign(CampaignRequest(workload="reduction", size=size, dtype="float32", strategy="brute_force",
                                     max_evals=10, timeout=STAND_IN_TIMEOUT, quiet=True, measure_target=fake_worker_main))
    monkeypatch.setattr(tuner.answers.baseline, "measure_target", fake_worker_main)
    log = []
    rows = tuner.answers.baseline.take_baseline(["reduction"], ["seed", "16M", "64M"], ["float32"], rounds=3,
                                                sessions_per_baseline=3, log=log.append)
    order = [(line.split()[2], line.split(",")[1].split(":")[0].strip()) for line in log if line.startswith("baseline")]
    assert order == [(s, f"session {k}/3") for k in (1, 2, 3) for s in ("seed", "16M")]
    assert sum(line.startswith("skip reduction 64M") for line in log) == 1
    assert sorted(r["size"] for r in rows) == ["16M", "seed"] and all(r["sessions"] == 3 for r in rows)
    stored = tuner.answers.baseline.load_check_baselines()
    assert len(stored) == 2 and set(stored["sessions"]) == {3} and all(len(r) == 9 for r in stored["rounds"])


class _FakeDev:
    """Kernel Tuner's DeviceInterface as _measure_rounds meets it: compile, verify (when an answer is set), time."""

    def __init__(self):
        self.compiles, self.verifies, self.iterations, self.launches = 0, 0, 30, []

    def compile_kernel(self, instance, verbose):
        self.compiles += 1
        return f"binary {self.compiles}"


class _FakeRunner:
    def __init__(self, ms=(1.0, 2.0, 3.0)):
        self.dev, self.binaries, self.ms = _FakeDev(), [], list(ms)

    def run(self, configs, tuning_options):
        self.dev.launches.append(self.dev.iterations)
        instance = type("Instance", (), {"params": {"block_size_x": configs[0][0]}})()
        func = self.dev.compile_kernel(instance, False)
        if tuning_options.answer is not None:
            self.dev.verifies += 1
        self.binaries.append((configs[0][0], func))
        return [{"block_size_x": configs[0][0], "times": self.ms}]


@pytest.mark.parametrize("lang, order", [("CUDA", [128, 256, 256, 128] * 3 + [128, 256]), ("C", [128] * 7 + [256] * 7)])
def test_rounds_compile_and_verify_each_config_once_then_time_its_binary(lang, order):
    from tuner.measure.rounds import measure_rounds

    runner = _FakeRunner()
    opts = {"answer": [1], "verify": None, "cache": {}, "cachefile": None}
    rows = measure_rounds(runner, opts, ["block_size_x"], [[128], [256]], rounds=5,
                          timers={"copy": lambda repeats: [0.5] * repeats}, one_at_a_time=lang == "C", warmup=2,
                          warmup_s=0)
    assert [r["block_size_x"] for r in rows] == [128, 256]
    for row in rows:
        assert row["status"] == "ok" and row["rounds"] == [2.0] * 5 and row["references"] == {"copy": [0.5] * 5}
    # device code interleaved, each round starting at the next config: 128, 256, 256, 128, ...; Kernel Tuner's
    # C backend holds one library at a time, so host code runs each config's rounds together. Either way each
    # compiled and verified once
    assert [b[0] for b in runner.binaries] == order
    assert (runner.dev.compiles, runner.dev.verifies) == (2, 2)
    assert len(set(runner.binaries)) == 2  # the binary of each config re-run, never rebuilt
    assert opts["answer"] == [1]  # the caller's options are left as they were
    runner.run([[128]], _Opts(opts))  # and the process compiles again for its next config
    assert runner.dev.compiles == 3
    # each config's first round with the full count, then 25 launches of 2 ms (ROUND_S), then restored
    firsts = [30, 30] + [25] * 12 if lang == "CUDA" else ([30] + [25] * 6) * 2
    assert runner.dev.launches == firsts + [30]


def test_the_references_are_set_up_once_for_all_rounds(monkeypatch):
    """The references' inputs go to the GPU (and are checked) once per request, not per round."""
    from tuner.measure.process import Fastest, LiveMeasurer

    class Workload:
        prepared = 0

        def reference_timers(self, args, size, dtype):
            self.prepared += 1
            return {"copy": lambda repeats: [0.5] * repeats}

    measurer = LiveMeasurer.__new__(LiveMeasurer)  # its state, without a GPU's set-up
    measurer.workload, measurer.args, measurer.runner = Workload(), None, _FakeRunner()
    measurer.spec = MeasureSpec("reduction", {"n": 8}, "float32", "nvcuda", 0, None)
    measurer.tuning_options, measurer.keys = {"answer": [1], "verify": None}, ["block_size_x"]
    measurer.host_code, measurer.fastest, measurer.cubin_target = False, Fastest(0), None
    monkeypatch.setattr("tuner.measure.rounds.WARMUP_S", 0)
    rows = measurer.measure_rounds([[128], [256]], 3, references=True)
    assert measurer.workload.prepared == 1 and all(r["references"]["copy"] == [0.5] * 3 for r in rows)
    assert all("references_s" in r for r in rows)
    measurer.measure_rounds([[128]], 3, references=False)
    assert measurer.workload.prepared == 1


def test_rounds_reuse_the_binaries_of_the_fastest_configs_measured_before():
    """A campaign's confirmation measures its near-best configs again: the measuring process kept their
    compiled kernels (the fastest Fastest.KEEP by median), so only the others are compiled again."""
    from tuner.measure.process import Fastest
    from tuner.measure.rounds import measure_rounds

    fastest = Fastest(keep=2)
    dev = _FakeDev()
    for size, ms, status in ((32, 3.0, "ok"), (64, 1.0, "ok"), (96, 0.5, "compile"), (128, 2.0, "ok"), (256, 0.9, "ok")):
        dev._tuner_compiled = f"binary of {size}"
        fastest.offer(str(size), {"status": status, "times": [ms] if status == "ok" else None}, dev)
    assert sorted(fastest.funcs) == ["256", "64"]  # the failure is not kept; 128 and 32 were pushed out
    dev._tuner_compiled = None  # an evaluation that compiled nothing (served, or failed before nvcc)
    fastest.offer("512", {"status": "ok", "times": [0.1]}, dev)
    assert sorted(fastest.funcs) == ["256", "64"]

    runner = _FakeRunner()
    rows = measure_rounds(runner, {"answer": [1], "verify": None}, ["block_size_x"], [[64], [128], [256]], rounds=3,
                          timers={}, compiled=dict(fastest.funcs), warmup=1, warmup_s=0)
    assert all(r["status"] == "ok" for r in rows)
    assert runner.dev.compiles == 1  # 128 only
    assert {size: func for size, func in runner.binaries} == {64: "binary of 64", 128: "binary 1", 256: "binary of 256"}
    assert runner.dev.verifies == 3  # every binary is still verified in its first round
    assert sorted(fastest.funcs) == ["256", "64"]  # the rounds themselves change nothing kept


def test_slow_pipelines_get_fewer_launches_after_the_first_round():
    from tuner.measure.rounds import MIN_LAUNCHES, measure_rounds

    runner = _FakeRunner(ms=[110.0] * 3)
    rows = measure_rounds(runner, {"answer": [1], "verify": None}, ["block_size_x"], [[16]], rounds=4, timers={},
                          one_at_a_time=True, warmup=1, warmup_s=0)
    assert rows[0]["rounds"] == [110.0] * 4
    assert runner.dev.launches == [30] + [MIN_LAUNCHES] * 4 and runner.dev.iterations == 30  # restored


def test_warm_up_lasts_until_its_seconds_have_passed():
    """A 17-us kernel's three warm-up rounds are milliseconds: rounds are discarded until warmup_s has passed."""
    import time

    from tuner.measure.rounds import measure_rounds

    ended = []  # when each round ended

    class SlowRunner(_FakeRunner):
        def run(self, configs, tuning_options):
            time.sleep(0.01)
            result = super().run(configs, tuning_options)
            ended.append(time.perf_counter())
            return result

    runner = SlowRunner()
    rows = measure_rounds(runner, {"answer": [1], "verify": None}, ["block_size_x"], [[128]], rounds=4, timers={},
                          warmup=2, warmup_s=0.1)
    assert len(rows[0]["rounds"]) == 4 and len(runner.dev.launches) == len(ended)
    # after the first round (compile, verify), rounds are discarded until 0.1 s has passed: more than the 2 of
    # `warmup`, and at most 10 (each sleeps at least 10 ms; a loaded machine's longer sleeps make fewer)
    discarded = ended[1:-4]
    assert 2 < len(discarded) <= 10 and ended[-4] - ended[0] >= 0.1


def test_a_worker_never_imports_torch(tmp_path, monkeypatch):
    """Kernel Tuner imports torch whenever it is installed (4.3 s of each worker start on the H100 machine);
    a worker keeps it out. A stand-in torch that leaves a mark when imported shows whether it was."""
    from tuner.errors import TunerError
    from tuner.measure.protocol import MeasureSpec
    from tuner.measure.runner import IsolatedRunner

    (tmp_path / "torch.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned worker gets the parent's sys.path
    runner = IsolatedRunner(MeasureSpec("reduction", {"n": 1024}, "float32", "nvcuda", 0, None, baseline_repeats=0),
                            timeout=60)
    try:
        runner.start()  # ready on a GPU machine; without one the worker reports that it cannot run
    except TunerError:
        pass
    finally:
        runner.shutdown()
    assert not (tmp_path / "imported").exists()


def test_a_worker_never_serves_from_kernel_tuners_cache(tmp_path):
    """Kernel Tuner keys cache entries by config alone: an entry from other kernel code must not stand in for
    a measurement. The worker opens the cache for appending only, and a later read keeps the newest entry."""
    from types import SimpleNamespace

    from kernel_tuner import util

    from tuner.measure import kt
    from tuner.measure.evaluate import open_cache
    from tuner.workloads import get_workload

    space, size = get_workload("reduction").space, {"n": 1024}
    path = tmp_path / "seed_float32.cache.json"
    kernel_options = kt.kernel_options(space, size, "float32", [], "nvcuda")
    device = SimpleNamespace(name="Fake GPU 9000")
    runner = SimpleNamespace(dev=device, simulation_mode=False, get_device_info=lambda: device)
    first = kt.tuning_options(space, size, "float32")
    open_cache(str(path), kernel_options, first, runner)  # writes the header
    util.store_cache("7,256,16,4,1,1", {"time": 1.0, "note": "older kernel code"}, str(path), first["cache"])
    again = kt.tuning_options(space, size, "float32")
    open_cache(str(path), kernel_options, again, runner)
    assert again["cache"] == {}  # nothing served
    util.store_cache("7,256,16,4,1,1", {"time": 2.0, "note": "this code"}, str(path), again["cache"])
    assert util.read_cache(str(path), open_cache=False)["cache"]["7,256,16,4,1,1"]["note"] == "this code"


@pytest.mark.parametrize("rounds", [1, 2, 3, 8, 9])
def test_the_bootstraps_row_medians_are_numpys(rounds):
    """tuner.stats computes a bootstrap's medians from one sort of the rows: the same values as np.median, a
    NaN in a row included."""
    from tuner.stats import _row_medians

    rng = np.random.default_rng(rounds)
    for a in (rng.lognormal(size=(300, rounds)), rng.integers(0, 3, (300, rounds)).astype(float)):
        a[rng.integers(0, 300, 20), rng.integers(0, rounds, 20)] = np.nan
        assert np.array_equal(_row_medians(a), np.median(a, axis=1), equal_nan=True)
