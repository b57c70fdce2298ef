"""Distributed campaigns without a GPU: worker processes replay the reduction recorded on the H100 (Kernel
Tuner's simulation mode behind the worker protocol) and share one Optuna study, on SQLite and, where
TUNER_TEST_POSTGRES names a server (.ci/run starts one), on PostgreSQL. One worker is SIGKILLed mid-trial;
its trial must be retried by another, and every config must be in the store exactly once (a brute force over
part of the recording: every claim holds for any space, and each trial costs the workers' database time)."""

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import optuna
import pytest

from tests.fake_worker import fake_worker_main
from tests.recorded import is_recorded, recording
from tuner import locations
from tuner.campaign.distributed import (
    campaign_result,
    campaign_rows,
    campaign_status,
    create_campaign,
    lost_trials,
    merge_cache_parts,
    run_worker,
)
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.cli import main
from tuner.errors import TunerError
from tuner.store import cache_path, canonical_config, read_parts
from tuner.workloads import get_workload

PROJECT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"
SEED = (H100, "reduction", "seed", "float32")
pytestmark = pytest.mark.skipif(not is_recorded(*SEED), reason="no recorded reduction campaign in results/")
SPACE_SIZE = 162  # the killed-worker brute force's space: the part of the recording in_part keeps


def in_part(config: dict) -> bool:
    """The part of the recording the killed-worker brute force replays: each variant's configs that finish with
    one block (variant 7's with shuffle): the best configs, exact ties among them, and their near-ties."""
    return config["finish"] == 1 and (config["variant"] != 7 or config["shuffle"] == 1)


def with_recording(root: Path, keep=None) -> Path:
    """The recording in `root`'s store; `keep`: only its configs for which keep(config) holds (a replay searches
    the configs its recording holds)."""
    target = cache_path(root, H100, "reduction", "seed", "float32")
    target.parent.mkdir(parents=True, exist_ok=True)
    if keep is None:
        shutil.copy(recording(*SEED), target)
    else:
        doc = json.loads(recording(*SEED).read_text())
        doc["cache"] = {k: v for k, v in doc["cache"].items() if keep(v)}
        target.write_text(json.dumps(doc))
    return root


def start_worker(root, name, url, device, delay=0.0):
    env = {**os.environ, "TUNER_RESULTS": str(root), "TUNER_REPLAY_DELAY": str(delay), "PYTHONPATH": str(PROJECT)}
    cmd = [sys.executable, "-m", "tuner", "--results", str(root), "worker", name, "--storage", url,
           "--device", str(device), "--quiet"]
    return subprocess.Popen(cmd, cwd=PROJECT, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def running_trials_of(study, pid, older_than_s=0.0):
    """The numbers of the victim's running trials (the one it measures and the one it has asked ahead)."""
    return [t.number for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
            if t.user_attrs.get("worker", "").endswith(f"-replay0-{pid}")
            and datetime.now() - t.datetime_start > timedelta(seconds=older_than_s)]


def brute_force_with_a_killed_worker(root: Path, url: str) -> dict:
    """Three workers on a brute force; worker 0 (slow, so it is mostly mid-measurement) is killed with
    its isolated worker process after a sixth of the configs, once it has measured some of its own, holding
    running trials (one measuring for at least 0.3 s, past its claim check, and the one asked ahead of it).
    The others beat every second; the victim's trials are failed and retried once silent for the grace period,
    5 s (here the others measure the rest within it: a longer one, 10 s, was mostly their time spent waiting)."""
    name = f"ci-{uuid.uuid4().hex[:8]}"
    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="brute_force", simulate=True,
                          results=with_recording(root, keep=in_part))
    create_campaign(req, name, url, heartbeat_s=1, grace_s=5)
    victim = start_worker(root, name, url, 0, delay=1.0)
    others = [start_worker(root, name, url, d) for d in (1, 2)]
    study = optuna.load_study(study_name=name, storage=url)
    complete = (optuna.trial.TrialState.COMPLETE,)
    killed, deadline = None, time.time() + 240
    while killed is None and time.time() < deadline:
        assert victim.poll() is None, victim.communicate()[0]
        # read from the study this test holds (not campaign_status, which opens the storage and reads the
        # recording each time: CPU the workers need); the victim's own rows stored first (raw.worker below)
        measured = study.get_trials(deepcopy=False, states=complete)
        if len(measured) >= SPACE_SIZE // 6 and any(t.user_attrs.get("worker", "").endswith(f"-replay0-{victim.pid}")
                                                   for t in measured):
            if running_trials_of(study, victim.pid, older_than_s=0.3):
                os.killpg(victim.pid, signal.SIGKILL)
                victim.wait()
                killed = running_trials_of(study, victim.pid)
        time.sleep(0.05)
    assert killed is not None, "the victim never held a running trial"
    for p in others:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
    return {"name": name, "url": url, "root": root, "killed": killed, "victim": f"-replay0-{victim.pid}"}


def check_exactly_once_and_best(run: dict):
    name, url, root = run["name"], run["url"], run["root"]
    status = campaign_status(name, url)
    assert (status["done"], status["running"], status["waiting"]) == (SPACE_SIZE, 0, 0)
    trials = optuna.load_study(study_name=name, storage=url).trials  # read once (study.trials copies them all)
    # the trials the victim held: those seen at the kill, and any it had asked for without naming itself yet
    # (one killed after attaching its result but before telling the study is among them: CI met that once)
    lost_numbers = lost_trials(trials)
    lost = [t for t in trials if t.number in lost_numbers]
    assert run["killed"] and set(run["killed"]) <= {t.number for t in lost}
    for killed in lost:  # failed by a heartbeat check, each retried once by a worker still alive
        assert killed.state == optuna.trial.TrialState.FAIL
        assert killed.user_attrs.get("worker", run["victim"]).endswith(run["victim"])
        retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed.number]
        assert len(retries) == 1 and retries[0].user_attrs["tuner"]["kind"] in ("measured", "served")
        assert not retries[0].user_attrs["tuner"]["worker"].endswith(run["victim"])
    # the store: every worker's part, read raw (no dedupe), holds every valid config exactly once
    raw = read_parts("*/reduction/evaluations/*.parquet", root / "simulated")
    space = get_workload("reduction").space
    assert len(raw) == SPACE_SIZE and raw.config.is_unique
    assert all(space.is_valid(json.loads(c)) for c in raw.config)
    assert raw.worker.nunique() == 3 and set(raw.campaign_id) == {name}
    # the best equals the single-process replay's
    single = run_campaign(CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="brute_force",
                                          simulate=True, results=root, quiet=True))
    result = campaign_result(name, url, root)
    if result.best["config"] != single.best["config"] and result.best["value"] != pytest.approx(single.best["value"]):
        # (an exact tie aside) the campaign's confirmation chose another of the near-ties (its replayed rounds
        # resample the recorded times; a single-process replay confirms nothing): both are among its finalists
        finalists = read_parts("*/reduction/confirmations/*.parquet", root / "simulated")
        # (two workers may both confirm: Optuna has no compare-and-set; the study keeps the first's choice)
        assert result.best["confirmed"] and canonical_config(result.best["config"]) in set(finalists.config[finalists.chosen])
        assert {canonical_config(result.best["config"]), canonical_config(single.best["config"])} <= set(finalists.config)
    else:
        assert result.best["value"] == pytest.approx(single.best["value"])
    assert result.evaluated == SPACE_SIZE and result.measured == SPACE_SIZE
    ok = raw[raw.status == "ok"]
    top = ok[ok.objective_value == ok.objective_value.max()]  # the event clock's steps make exact ties
    assert canonical_config(single.best["config"]) in set(top.config)
    assert ok.objective_value.max() == pytest.approx(single.best["value"])


@pytest.fixture(scope="module")
def sqlite_run(tmp_path_factory):
    root = with_recording(tmp_path_factory.mktemp("results"))
    return brute_force_with_a_killed_worker(root, f"sqlite:///{root / 'campaigns.sqlite3'}")


def test_sqlite_brute_force_killed_worker_exactly_once_and_best(sqlite_run):
    check_exactly_once_and_best(sqlite_run)


def test_status_command(sqlite_run, capsys):
    assert main(["status", sqlite_run["name"], "--storage", sqlite_run["url"]]) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name=sqlite_run["name"], storage=sqlite_run["url"])
    lost = len(lost_trials(study.trials))
    assert lost >= len(sqlite_run["killed"])
    assert f"done {SPACE_SIZE}/{SPACE_SIZE}, running 0, queued 0, dead workers 1, lost trials {lost} (retried)" in out
    assert "[brute_force] on NVIDIA H100 80GB HBM3 (simulated)" in out
    single = run_campaign(CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="brute_force",
                                          simulate=True, results=sqlite_run["root"], quiet=True))
    assert out.count("  worker ") == 3 and f"best so far: {single.best['value']:.0f} GB/s" in out
    # the killed worker shown dead (its process gone, its trials lost), the two others finished
    assert out.count(": finished, ") == 2 and out.count(": dead, ") == 1
    assert f"{sqlite_run['victim']}: dead, " in out
    # where each worker's time went; the killed one never closed
    assert out.count("    seconds after its start: loaded ") == 3 and out.count(", closed ") == 2
    assert main(["status", sqlite_run["name"], "--storage", sqlite_run["url"], "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # lost trials and lost workers counted apart (the audit found the trials' count under `lost_workers`)
    assert doc["done"] == SPACE_SIZE and doc["lost_trials"] == lost and doc["lost_workers"] == 1 and doc["gpu"] == H100
    assert sorted(w["state"] for w in doc["workers"].values()) == ["dead", "finished", "finished"]
    # without a name: a line per campaign, in the SQLite file beside the results unless --storage names another
    assert main(["--results", str(sqlite_run["root"]), "status"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{sqlite_run['name']}: reduction seed float32 [brute_force] on {H100} (simulated): "
                           f"done {SPACE_SIZE}/{SPACE_SIZE}, running 0, best {single.best['value']:.0f} GB/s")
    assert line.endswith(", 1 worker dead")


def test_status_without_a_campaign_database_says_where_it_looked(results, capsys):
    assert main(["status"]) == 2
    assert f"no campaign database at sqlite:///{results.resolve() / 'campaigns.sqlite3'}" in capsys.readouterr().err


def test_store_dedupes_a_row_written_twice(sqlite_run, tmp_path):
    """The safety net: should a part hold a config another part holds, the campaign's rows keep one."""
    root = tmp_path / "copy"
    shutil.copytree(sqlite_run["root"] / "simulated", root / "simulated")
    parts = sorted((root / "simulated").glob("*/reduction/evaluations/*.parquet"))
    shutil.copy(parts[0], parts[0].with_name(parts[0].name.replace(".parquet", "-again.parquet")))
    assert len(read_parts("*/reduction/evaluations/*.parquet", root / "simulated")) > SPACE_SIZE
    rows = campaign_rows(sqlite_run["name"], root, simulated=True)
    assert len(rows) == SPACE_SIZE and rows.config.is_unique


@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("TUNER_TEST_POSTGRES"), reason="TUNER_TEST_POSTGRES names no server")
def test_postgres_brute_force_killed_worker_exactly_once_and_best(tmp_path):
    url = os.environ["TUNER_TEST_POSTGRES"]
    run = brute_force_with_a_killed_worker(with_recording(tmp_path / "results"), url)
    try:
        check_exactly_once_and_best(run)
    finally:
        optuna.delete_study(study_name=run["name"], storage=url)


@pytest.mark.parametrize("strategy", ["tpe", "auto"])
def test_sampling_workers_via_tune_never_measure_a_config_twice(results, capsys, strategy):
    with_recording(results)
    rc = main(["tune", "reduction", "--size", "seed", "--dtype", "float32", "--simulate", "--workers", "2",
               "--strategy", strategy, "--budget", "40", "--quiet", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["simulated"] and doc["strategy"] == strategy and doc["evaluated"] >= 40 and doc["best"]
    raw = read_parts("*/reduction/evaluations/*.parquet", results / "simulated")
    assert raw.config.is_unique and len(raw) == doc["measured"] >= 40
    assert raw.worker.nunique() == 2
    # each worker's measuring process was launched before the worker's own imports, and used
    status = campaign_status(f"reduction-seed-float32-{strategy}-s1", f"sqlite:///{results / 'campaigns.sqlite3'}")
    assert len(status["workers"]) == 2 and all(w["launched_early"] for w in status["workers"].values())
    assert all(set(w["timeline_s"]) == {"loaded", "joined", "ready", "searched", "confirmed", "closed"}
               for w in status["workers"].values())
    # nothing written where measured rows live
    assert not list(results.glob("*/reduction/evaluations/*.parquet"))


def test_a_worker_on_another_gpu_model_is_refused(results):
    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random", max_evals=4,
                          timeout=3.0, results=results)
    _, url = create_campaign(req, "mixed", None)
    optuna.load_study(study_name="mixed", storage=url).set_user_attr("gpu", "NVIDIA H200")  # a worker elsewhere
    with pytest.raises(TunerError, match="runs on NVIDIA H200, this worker's GPU is Fake GPU 9000"):
        run_worker("mixed", url, 0, results=results, measure_target=fake_worker_main)
    assert not list(results.rglob("*.parquet"))  # refused before writing anything
    summary = run_worker("mixed", url, 0, results=results, measure_target=fake_worker_main, allow_mixed_gpus=True)
    assert summary["gpu"] == "Fake GPU 9000" and summary["measured"] == 4
    assert summary["trials"] == summary["measured"] + summary["served"] + summary["handed_back"]  # each accounted for
    assert campaign_status("mixed", url)["done"] == 4


def test_a_campaign_in_a_results_folder_not_made_yet_makes_it(tmp_path):
    root = tmp_path / "new" / "results"
    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random", max_evals=4,
                          results=root)
    camp, url = create_campaign(req, None, None)
    assert (root / "campaigns.sqlite3").is_file() and campaign_status(camp.name, url)["total"] == 4
    create_campaign(req, None, f"sqlite:///{tmp_path / 'db' / 'here.sqlite3'}")  # a URL of the user's own
    assert (tmp_path / "db" / "here.sqlite3").is_file()


def test_workers_keep_to_the_budget_and_take_the_last_queued_config(results, capsys):
    """A time budget leaves no evaluation count (it crashed every worker); brute force with a count measures
    that many, not the space; a sampler whose budget covers the space gets every config, the last one
    included (it was left queued when no config was free any more)."""
    shutil.copytree(locations.BUILTIN_RESULTS / "nvidia-h100-80gb-hbm3" / "floyd-warshall-small",
                    results / "nvidia-h100-80gb-hbm3" / "floyd-warshall-small")
    base = ["tune", "floyd-warshall-small", "--size", "5k", "--simulate", "--workers", "1", "--quiet", "--json"]
    # the time budget is generous: a worker that starts slowly on a loaded machine must still get a config in
    for extra, evaluated in ((["--budget", "60s"], None), (["--strategy", "brute_force", "--budget", "10"], 10),
                             (["--strategy", "random", "--patience", "0"], 56)):  # no early stop: every config
        assert main(base + extra) == 0, extra
        doc = json.loads(capsys.readouterr().out)
        assert evaluated is None or doc["evaluated"] == evaluated, (extra, doc["evaluated"])
        # a host-code space's recording names the CPU that ran its host code; the store names the GPU
        assert doc["gpu"] == H100
    url = f"sqlite:///{results / 'campaigns.sqlite3'}"
    brute = campaign_status("floyd-warshall-small-5k-int32-brute_force-s1", url)
    assert (brute["done"], brute["total"]) == (10, 10)
    every = campaign_status("floyd-warshall-small-5k-int32-random-s1", url)
    assert (every["done"], every["total"], every["waiting"]) == (56, 56, 0)


def test_processes_creating_one_new_database_together_all_open_it(tmp_path):
    """Two campaigns started at once on a fresh results folder both write the schema's version: the loser of
    that race (an IntegrityError from SQLite) opens the database the winner made. Four processes, imports done,
    are each handed a fresh database's URL at the same moment, three times (a process started per open spent
    its time importing Optuna, and the imports' jitter spread the opens apart)."""
    script = ("import sys\nfrom tuner.campaign.rdb_storage import open_storage\nprint('ready', flush=True)\n"
              "for url in sys.stdin:\n    open_storage(url.strip())\n    print('opened', flush=True)\n")
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=PROJECT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    lines: list[queue.Queue] = [queue.Queue() for _ in procs]
    for p, q in zip(procs, lines):  # each one's output read as it comes (a traceback too), never blocking the test
        threading.Thread(target=lambda p=p, q=q: [q.put(line) for line in p.stdout], daemon=True).start()

    def said(q: queue.Queue) -> str:
        try:
            return q.get(timeout=120).strip()
        except queue.Empty:
            return "(nothing within 120 s)"

    try:
        assert [said(q) for q in lines] == ["ready"] * 4
        for round_ in range(3):
            url = f"sqlite:///{tmp_path / f'fresh{round_}.sqlite3'}\n"
            for p in procs:
                p.stdin.write(url)
                p.stdin.flush()
            outs = [said(q) for q in lines]
            assert outs == ["opened"] * 4, [o + "".join(list(q.queue)) for o, q in zip(outs, lines)]
        for p in procs:
            p.stdin.close()
        assert [p.wait(timeout=60) for p in procs] == [0] * 4
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_worker_errors_are_one_line(results):
    with pytest.raises(TunerError, match="no campaign 'nope'"):
        run_worker("nope", f"sqlite:///{results / 'x.sqlite3'}", 0)
    with pytest.raises(TunerError, match="give a database URL"):
        run_worker("nope", "journal.log", 0)
    req = CampaignRequest(workload="reduction", size="seed", strategy="kt:genetic_algorithm", results=results)
    with pytest.raises(TunerError, match="Kernel Tuner's strategies run in one process"):
        create_campaign(req, None, None)


def test_kernel_tuner_cache_parts_merge(tmp_path):
    """Workers append to their own Kernel Tuner cache; the parts merge into one file Kernel Tuner reads."""
    from kernel_tuner.util import read_cache

    doc = read_cache(str(recording(*SEED)), open_cache=False)
    keys = list(doc["cache"])
    header = {k: v for k, v in doc.items() if k != "cache"}
    parts = []
    for i, chunk in enumerate((keys[:300], keys[250:])):
        text = json.dumps({**header, "cache": {}}, indent="")[:-3]
        for k in chunk:
            entry = {f: (str(v) if f == "__error__" else v) for f, v in doc["cache"][k].items()}
            text += "\n" + json.dumps({k: entry})[1:-1] + ","
        parts.append(tmp_path / f"part{i}.json")
        parts[-1].write_text(text)
    main_file = tmp_path / "seed_float32.cache.json"
    assert merge_cache_parts(main_file, parts) == len(keys)
    merged = read_cache(str(main_file), open_cache=False)
    assert set(merged["cache"]) == set(keys) and not any(p.exists() for p in parts)
    assert merged["device_name"] == H100
    # a config measured again (a longer timeout, another timing protocol) keeps its new time, as Kernel
    # Tuner's own appends do; a part cut short is left where it is, with a warning
    again = {**doc["cache"][keys[0]], "time": 99.0}
    again = {f: (str(v) if f == "__error__" else v) for f, v in again.items()}
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**header, "cache": {}}, indent="")[:-3] + "\n" + json.dumps({keys[0]: again})[1:-1] + ",")
    broken = tmp_path / "broken.json"
    broken.write_text('\n"1,2,3": {"time": 1.0},')  # what Kernel Tuner leaves when it reopens a deleted part
    with pytest.warns(UserWarning, match="broken.json: not a readable Kernel Tuner cache"):
        assert merge_cache_parts(main_file, [newer, broken]) == len(keys)
    assert read_cache(str(main_file), open_cache=False)["cache"][keys[0]]["time"] == 99.0
    assert broken.exists() and not newer.exists()


def test_a_workers_cache_part_is_named_by_its_campaign(tmp_path):
    from tuner.campaign.distributed.cache_parts import cache_part

    class Camp:
        workload, size, dtype = "reduction", "seed", "float32"

    one, other = Camp(), Camp()
    one.name, other.name = "one", "other"
    assert cache_part(tmp_path, H100, one, "host-gpu0-1") != cache_part(tmp_path, H100, other, "host-gpu0-1")


def test_a_trial_orphaned_before_its_first_heartbeat_is_retried(results):
    """A worker killed between taking a trial and its first heartbeat: Optuna's stale check alone would
    wait for that trial forever; the workers give it a heartbeat once it is older than the grace period."""
    from tuner.campaign.distributed.study import TrialCodec
    from tuner.measure import kt

    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random", max_evals=5,
                          simulate=True, results=with_recording(results))
    _, url = create_campaign(req, "orphan", None, heartbeat_s=1, grace_s=2)
    study = optuna.load_study(study_name="orphan", storage=url)
    codec = TrialCodec(kt.searchspace(get_workload("reduction").space))
    study.enqueue_trial(codec.encode(kt.searchspace(get_workload("reduction").space).list[0]))
    orphan = study.ask(codec.dists)  # taken, then its worker "dies": no heartbeat ever
    summary = run_worker("orphan", url, 0, results=results)
    assert summary["measured"] == 5
    retried = [t for t in study.get_trials() if t.system_attrs.get("failed_trial") == orphan.number]
    assert len(retried) == 1 and retried[0].user_attrs["tuner"]["kind"] == "measured"
    assert study.trials[orphan.number].state == optuna.trial.TrialState.FAIL


def test_a_measurement_that_raises_stops_the_worker_at_once(results, monkeypatch):
    """The measuring thread's error reaches the caller without waiting on the scheduler thread; the failed
    trial is told FAIL, and so is the trial asked ahead: both given back, nothing left running to be retried
    as a dead worker's after the grace period."""
    from kernel_tuner.strategies.common import CostFunc

    with_recording(results)
    name, url = f"ci-{uuid.uuid4().hex[:8]}", f"sqlite:///{results / 'campaigns.sqlite3'}"
    create_campaign(CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="brute_force",
                                    simulate=True, results=results), name, url)
    calls = {"n": 0}
    real_call = CostFunc.__call__

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the GPU fell off the bus")
        return real_call(self, *args, **kwargs)

    monkeypatch.setattr(CostFunc, "__call__", flaky)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="fell off the bus"):
        run_worker(name, url, 0, results=results)
    assert time.monotonic() - started < 30
    study = optuna.load_study(study_name=name, storage=url)
    from tuner.search import trial_kinds

    trials = [t for t in study.trials if t.user_attrs.get("worker")]
    states = [t.state for t in trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 2
    assert states.count(optuna.trial.TrialState.RUNNING) == 0
    given_back = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    assert len(given_back) >= 2 and all(trial_kinds.kind_of(t) == "given_back" for t in given_back)  # raised, asked ahead


def two_config_campaign(results, name: str):
    """A brute-force campaign's study, storage and settings, and a search space of two of its configs."""
    from kernel_tuner.searchspace import Searchspace

    from tuner.campaign.distributed.study import join_campaign
    from tuner.measure import kt

    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="brute_force", simulate=True,
                          results=with_recording(results))
    _, url = create_campaign(req, name, None, heartbeat_s=1, grace_s=30)
    study, storage, camp = join_campaign(name, url)
    full = kt.searchspace(get_workload("reduction").space)
    names = list(full.tune_params)
    two = {str(i): dict(zip(names, c)) for i, c in enumerate(full.list[:2])}
    space = Searchspace(None, None, None, from_cache={"tune_params": full.tune_params, "cache": two})
    return study, storage, camp, space


def test_a_lost_trial_holds_its_config_until_its_retry_is_queued(results):
    """The CI flake of the PostgreSQL run, made deterministic: Optuna's stale check fails a lost trial, then
    queues its retry in another transaction. A worker looking in between saw the config held by no trial, fed
    it to brute force's queue, and the retry found that trial first and was told `taken`. In between, the lost
    trial is in limbo: it holds its config (nobody feeds or measures it), and counts as running."""
    import warnings

    from tuner.campaign.distributed.campaign_loop import CampaignLoop, prior_claim
    from tuner.campaign.distributed.study import TrialCodec, in_limbo, tally_trials
    from tuner.search import optuna_private

    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)  # asking outside Study.optimize
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    study, storage, camp, space = two_config_campaign(results, "limbo")
    codec = TrialCodec(space)
    lost_config, free_config = (tuple(c) for c in space.list)
    study.enqueue_trial(codec.encode(lost_config))
    lost = study.ask()  # a worker's trial, as brute force asks it (the params its queued trial fixed)
    storage.set_trial_state_values(optuna_private.trial_id(lost), optuna.trial.TrialState.FAIL)  # the stale check's
    # first step: the config is held by no live trial (as every worker saw it before), but the trial is in limbo
    trials = study.get_trials(deepcopy=False)
    assert lost_config not in tally_trials(trials, codec)["held"]
    assert lost_config in tally_trials(trials, codec, limbo_s=camp.grace_s)["held"]
    assert prior_claim(study, codec, lost.number + 1, lost_config, limbo_s=camp.grace_s).number == lost.number
    assert prior_claim(study, codec, lost.number + 1, lost_config) is None
    # a limbo is bounded: no retry ever coming (the process failing it died), the config is free again
    assert not in_limbo(trials, camp.grace_s, now=datetime.now() + timedelta(seconds=camp.grace_s + 1))

    loop = CampaignLoop(study, storage, camp, space, "me")
    try:
        assert loop.wanted() and loop.running == 1  # brute force's queue fed with the free config alone
        waiting = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        assert [codec.config_of(t) for t in waiting] == [free_config]
        retry_callback = storage.get_heartbeat_stale_trial_callback()  # the stale check's second step
        retry_callback(study, storage.get_trial(optuna_private.trial_id(lost)))  # the retry queued
        proposals = [loop.propose(), loop.propose()]
        assert loop.propose() is None and loop.settled == 0  # nothing taken, nothing surplus
        assert {p.config for p in proposals} == {lost_config, free_config}
        for p in proposals:
            loop.record(p.trial, p.config, 1.0, "measured")
            loop.release(p.trial)
    finally:
        loop.close()
    (retry,) = [t for t in study.get_trials() if t.system_attrs.get("failed_trial") == lost.number]
    assert retry.user_attrs["tuner"]["kind"] == "measured" and retry.user_attrs["tuner"]["worker"] == "me"


def test_a_workers_trials_asked_ahead_are_compiled_ahead(results, monkeypatch):
    """Where the runner compiles ahead, each trial a worker asks goes to its prefetch as it is asked, before
    the measuring thread takes it; the worker measures as many as it would otherwise."""
    from kernel_tuner.strategies.common import CostFunc

    from tuner.campaign.distributed import scheduler

    events = []
    monkeypatch.setattr(scheduler, "compile_ahead", lambda runner: (3, lambda configs: events.extend(
        ("prefetch", tuple(c)) for c in configs)))
    real_call = CostFunc.__call__

    def measured(self, config, *args, **kwargs):
        events.append(("run", tuple(config)))
        return real_call(self, config, *args, **kwargs)

    monkeypatch.setattr(CostFunc, "__call__", measured)
    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random", max_evals=8,
                          timeout=5.0, results=results)
    _, url = create_campaign(req, "prefetched", None)
    summary = run_worker("prefetched", url, 0, results=results, measure_target=fake_worker_main)
    assert summary["measured"] == 8
    runs = [c for what, c in events if what == "run"]
    prefetched = [c for what, c in events if what == "prefetch"]
    assert len(runs) == 8 and sorted(prefetched) == sorted(runs)
    assert all(events.index(("prefetch", c)) < events.index(("run", c)) for c in runs)
