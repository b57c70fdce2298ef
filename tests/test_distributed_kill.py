"""Killing `tuner tune --workers N` stops its workers (a user audit found them running on as orphans, writing rows,
and a second `tune` beside them took the campaign past its budget): SIGTERM stops the campaign as Ctrl-C does,
and a SIGKILL of the parent alone stops the workers too (they watch it); a rerun then resumes to exactly the
budget. And workers that ask at the same moment keep to the budget: a trial asked past it is told `surplus`."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.recorded import is_recorded
from tests.test_distributed import SEED, with_recording
from tuner.campaign.distributed import campaign_status, create_campaign
from tuner.campaign.request import CampaignRequest
from tuner.store import read_parts

PROJECT = Path(__file__).resolve().parent.parent
BUDGET = 30
pytestmark = pytest.mark.skipif(not is_recorded(*SEED), reason="no recorded reduction campaign in results/")


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), or None for no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(pid: int) -> dict[int, str]:
    """The processes below `pid` (its workers, their measuring processes and helpers): pid -> start time."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if (fields := _stat(child)) is not None:
                found[child] = fields[19]
                todo.append(child)
    return found


def alive(pid: int, started: str) -> bool:
    """The same process (not a later one given its pid) is still there, and not a zombie nobody reaped yet."""
    fields = _stat(pid)
    return fields is not None and fields[19] == started and fields[0] not in ("Z", "X")


def tune(root: Path, name: str, out: Path, delay: float = 0.0, cmd: list[str] | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "TUNER_REPLAY_DELAY": str(delay)}
    cmd = cmd or [sys.executable, "-m", "tuner", "--results", str(root), "tune", "reduction", "--size", "seed",
                  "--dtype", "float32", "--simulate", "--workers", "2", "--strategy", "random", "--budget",
                  str(BUDGET), "--campaign", name, "--quiet", "--json"]
    # a session of its own: the test's clean-up kills whatever of it is left; files, not pipes, for its output,
    # which workers that outlive it would hold open
    with out.open("w") as f:
        return subprocess.Popen(cmd, cwd=PROJECT, env=env, start_new_session=True, stdout=f, stderr=subprocess.STDOUT)


def kill_then_resume(root: Path, sig: int, expected_rc: tuple[int, ...]) -> None:
    """`tune --workers 2` stopped by `sig` mid-campaign: every worker stops as on Ctrl-C, giving back the trials it
    held (none is left running, to be counted lost and retried on the rerun: the audit saw "running 3" for over a
    minute, then "retried after a lost worker 3"); a SIGTERM's `tune` says in one line how to resume, and that
    line, run, resumes the campaign to exactly its budget."""
    with_recording(root)
    name, url = f"kill-{uuid.uuid4().hex[:8]}", f"sqlite:///{root / 'campaigns.sqlite3'}"
    # created here for its short grace period: a trial the stop left running would be retried soon on the rerun
    # (and counted as lost, which the checks below refuse)
    create_campaign(CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random",
                                    max_evals=BUDGET, simulate=True, results=root), name, url,
                    heartbeat_s=1, grace_s=3)
    parent = tune(root, name, root / "first.txt", delay=0.5)  # paced: still measuring when it is killed
    # watched through one study opened here (campaign_status opens the storage and reads the recording each time:
    # CPU the starting workers need)
    study = optuna.load_study(study_name=name, storage=url)
    try:
        deadline = time.monotonic() + 40
        while True:  # both workers in (their records written as they join), and rows stored
            assert parent.poll() is None, (root / "first.txt").read_text()
            assert time.monotonic() < deadline, "the campaign never got going"
            joined = [key for key in study.user_attrs if key.startswith("worker:")]
            if len(joined) == 2 and len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= 2:
                break
            time.sleep(0.2)
        tree = descendants(parent.pid)
        assert len(tree) >= 4, tree  # two workers, each with its measuring process
        os.kill(parent.pid, sig)  # the parent alone, not its process group
        assert parent.wait(timeout=40) in expected_rc, (root / "first.txt").read_text()
        deadline = time.monotonic() + 30
        while (left := [p for p, started in tree.items() if alive(p, started)]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"left running: {left}\n" + (root / "first.txt").read_text()
        status = campaign_status(name, url)
        assert 0 < status["done"] < BUDGET
        # each worker stopped as on Ctrl-C, its clean-up done (not killed), and what it measured is stored
        assert all("closed" in w["timeline_s"] for w in status["workers"].values()), status["workers"]
        assert [w["state"] for w in status["workers"].values()] == ["stopped", "stopped"], status["workers"]
        # the trials they held were given back at their stop: none left running for a heartbeat check to find
        assert (status["running"], status["lost_workers"]) == (0, 0), status
        rows = read_parts("*/reduction/evaluations/*.parquet", root / "simulated")
        assert len(rows) >= status["done"] and rows.config.is_unique
    finally:
        try:
            os.killpg(parent.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    said = [line for line in (root / "first.txt").read_text().splitlines() if "interrupted" in line]
    resume = None
    if sig == signal.SIGTERM:  # one line for the campaign, none from its workers; a SIGKILLed `tune` says nothing
        (line,) = said
        assert line.startswith("interrupted; resume with: tuner --results "), line
        resume = [sys.executable, "-m", *shlex.split(line.split("resume with: ", 1)[1])]  # `tuner`, run so
    else:
        assert said == []
    again = tune(root, name, root / "again.txt", cmd=resume)
    try:
        assert again.wait(timeout=90) == 0, (root / "again.txt").read_text()
    finally:
        try:
            os.killpg(again.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    text = (root / "again.txt").read_text()
    doc = json.loads(text[text.index("{"):])
    status = campaign_status(name, url)
    assert (status["done"], status["running"], doc["evaluated"]) == (BUDGET, 0, BUDGET), (status, text)
    assert (status["retried"], status["lost_trials"]) == (0, 0), status  # nothing lost: the stop gave it back
    rows = read_parts("*/reduction/evaluations/*.parquet", root / "simulated")
    assert len(rows) == BUDGET and rows.config.is_unique  # each config once: the rerun measured only the rest


def test_sigterm_stops_the_workers_as_ctrl_c_does_and_a_rerun_resumes_to_the_budget(tmp_path):
    kill_then_resume(tmp_path / "results", signal.SIGTERM, (130,))


def test_a_sigkilled_parents_workers_stop_and_a_rerun_resumes_to_the_budget(tmp_path):
    kill_then_resume(tmp_path / "results", signal.SIGKILL, (-signal.SIGKILL,))


def test_trials_asked_together_past_the_budget_are_surplus(results):
    """Two workers look at the study at the same moment (done + running below the budget) and both ask: the
    later-numbered trial, past the budget, is told `surplus`, not measured."""
    from tuner.campaign.distributed.scheduler import BudgetLoop
    from tuner.campaign.distributed.study import join_campaign
    from tuner.measure import kt
    from tuner.workloads import get_workload

    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)  # asking outside Study.optimize
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    req = CampaignRequest(workload="reduction", size="seed", dtype="float32", strategy="random", max_evals=3,
                          simulate=True, results=with_recording(results))
    _, url = create_campaign(req, "together", None, heartbeat_s=1, grace_s=30)
    study, storage, camp = join_campaign("together", url)
    space = kt.searchspace(get_workload("reduction").space)
    one, other = BudgetLoop(study, storage, camp, space, "one"), BudgetLoop(study, storage, camp, space, "other")
    try:
        first = [one.propose(), one.propose(), other.propose()]  # the budget's three trials, running
        assert all(p is not None for p in first) and other.propose() is None
        looked = iter([True])  # `one` looked before `other` asked: it saw room for one more
        one.wanted = lambda: next(looked, False) or BudgetLoop.wanted(one)
        settled, trials = one.settled, len(study.trials)
        assert one.propose() is None and one.settled == settled + 1 and len(study.trials) == trials + 1
        last = study.trials[-1]
        assert (last.state, last.user_attrs["tuner"]["kind"]) == (optuna.trial.TrialState.FAIL, "surplus")
        assert [t.number for t in study.get_trials(states=(optuna.trial.TrialState.RUNNING,))] == [
            p.trial.number for p in first]
        # a trial that gives back its place (told `taken` here) makes room for one more
        p = first[2]
        other.tell(p.trial, "taken", state=optuna.trial.TrialState.FAIL)
        other.release(p.trial)
        assert other.propose() is not None
    finally:
        one.close()
        other.close()


def test_a_worker_whose_parent_died_before_it_looked_stops_at_once(tmp_path):
    """A worker adopted before it set its watch (its `tuner tune` was killed while it started) gets no signal
    from the kernel: it looks, and stops as on SIGTERM."""
    script = ("import sys, time\n"
              "from tuner.campaign.distributed.signals import Terminated, stopped_like_ctrl_c\n"
              "try:\n"
              "    with stopped_like_ctrl_c(int(sys.argv[1])):\n"
              "        time.sleep(60)\n"
              "except Terminated:\n"
              "    sys.exit(3)\n")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script, gone.stdout.strip()], cwd=PROJECT, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(PROJECT)})
    assert done.returncode == 3 and time.monotonic() - started < 50


def test_a_stop_dropped_in_a_weakref_callback_comes_again():
    """A SIGTERM whose exception Python raised inside a weakref callback, and dropped there ("Exception ignored
    in"), still stops: it is asked for again, and raised where it stops the process."""
    import weakref

    from tuner.campaign.distributed.signals import Terminated, stopped_like_ctrl_c

    class Thing:
        pass

    def callback(ref):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):  # the handler runs in here: its exception goes to sys.unraisablehook
            pass

    thing = Thing()
    ref = weakref.ref(thing, callback)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), stopped_like_ctrl_c():
        del thing
        time.sleep(10)
    assert ref() is None and signal.getsignal(signal.SIGTERM) is before
