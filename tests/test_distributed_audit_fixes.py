"""Distributed campaigns as a user audit found them: `tune --workers` ignored $TUNER_STORAGE (the password then went
on its command line), the check that a named SQLite storage exists was written three ways, a distributed replay
chose another recording than a single-process one and said nothing, a refusal to resume listed the settings asked
for rather than those that differ, `--campaign` without `--workers` was silently ignored, and a MySQL URL got the
PostgreSQL driver's install hint. (Status counts and clean stops: test_distributed.py, test_distributed_kill.py.)"""

import importlib.util
import json
import os
import socket
import subprocess
import sys
import uuid

import optuna
import pytest

from tests.recorded import is_recorded
from tests.test_distributed import SEED, with_recording
from tuner.campaign.distributed import campaign_names
from tuner.campaign.distributed.liveness import process_gone, process_started
from tuner.campaign.rdb_storage import open_storage
from tuner.campaign.study_storages import STORAGE_ENV
from tuner.cli import main
from tuner.errors import TunerError
from tuner.store import results_root
from tuner.store.recordings import sources

needs_seed = pytest.mark.skipif(not is_recorded(*SEED), reason="no recorded reduction campaign in results/")
POSTGRES = os.environ.get("TUNER_TEST_POSTGRES")


def _error(capsys) -> str:
    """The one line a refused command wrote to stderr."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# 1. `tune --workers` reads $TUNER_STORAGE, as `worker` and `status` do


@needs_seed
@pytest.mark.parametrize("server", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_tune_workers_creates_the_campaign_where_tuner_storage_says(results, capsys, monkeypatch, server):
    if server == "postgres" and not POSTGRES:
        pytest.skip("TUNER_TEST_POSTGRES names no server")
    with_recording(results)
    url = POSTGRES if server == "postgres" else f"sqlite:///{results / 'env.sqlite3'}"
    monkeypatch.setenv(STORAGE_ENV, url)
    name = f"env-{uuid.uuid4().hex[:8]}"
    try:
        create = ["tune", "reduction", "--size", "seed", "--simulate", "--budget", "3", "--workers", "0"]
        assert main([*create, "--campaign", name]) == 0
        said = capsys.readouterr()
        assert name in campaign_names(url)  # not in the SQLite file beside the results
        assert not (results / "campaigns.sqlite3").exists()
        # the line for more workers: the URL stays in the environment, where its password is safe
        assert f"more workers: tuner worker {name} --device D (with ${STORAGE_ENV} as here)" in said.err
        # the worker finds it by the same variable; a replay's worker is named and counted as one
        assert main(["worker", name]) == 0
        out = capsys.readouterr().out
        assert "-replay0-" in out and " 3 replayed, 0 served" in out
        assert main(["status", name, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["done"] == 3
    finally:
        if server == "postgres":
            optuna.delete_study(study_name=name, storage=url)


# 2. one check: a SQLite storage to read or join must exist, whichever command and wherever the URL came from


@pytest.mark.parametrize(
    "command", [["status"], ["status", "c"], ["worker", "c"], pytest.param(["dashboard", "c"], id="dashboard")]
)
def test_a_missing_sqlite_storage_is_one_error_alike_and_is_not_created(tmp_path, results, capsys, command):
    if command[0] == "dashboard":
        pytest.importorskip("optuna_dashboard")
    missing = tmp_path / "typo.sqlite3"
    assert main([*command, "--storage", f"sqlite:///{missing}"]) == 2
    assert _error(capsys) == (
        f"error: no campaign database at sqlite:///{missing}: no such file ("
        + ("`tuner tune` creates it)" if command[0] == "dashboard" else "`tuner tune ... --workers N` creates it)")
    )
    assert not missing.exists()


def test_a_missing_sqlite_storage_in_tuner_storage_is_an_error_naming_it(tmp_path, results, capsys, monkeypatch):
    """A worker given the URL by the environment opened it as it was: a typo there created an empty database, and
    the worker said only that no campaign was in it."""
    missing = tmp_path / "nowhere" / "typo.sqlite3"
    monkeypatch.setenv(STORAGE_ENV, f"sqlite:///{missing}")
    for command in (["worker", "c"], ["status"]):
        assert main(command) == 2
        assert _error(capsys) == (
            f"error: no campaign database at sqlite:///{missing} (from ${STORAGE_ENV}): no such folder "
            f"{missing.parent} (`tuner tune ... --workers N` creates it)"
        )
    assert not missing.parent.exists()


# 3. a distributed replay takes the recording a single-process replay takes, and says why alike


GEMM = ("gemm", "2048x2048x2048", "float32")


def _gpus_recorded(workload: str, size: str, dtype: str) -> int:
    return sum(1 for s in sources(results_root(), workload) if (s.size, s.dtype) == (size, dtype))


@pytest.mark.skipif(_gpus_recorded(*GEMM) < 2, reason="GEMM 2048^3 is not recorded on two GPUs")
def test_a_distributed_replay_chooses_its_recording_as_one_process_does_and_says_so(tmp_path, capsys):
    """The audit's case: per size the H100 has the most measurements, overall the H200; a distributed replay took
    the H200's, without a word. Nothing is written to the project's store: the campaign's study goes to tmp."""
    base = ["tune", "gemm", "--size", "2048x2048x2048", "--simulate", "--quiet", "--json"]
    assert main([*base, "--budget", "1"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single["notes"] and single["notes"][0].startswith(f"replaying the recording from {single['gpu']} (")
    url = f"sqlite:///{tmp_path / 'campaigns.sqlite3'}"
    assert main([*base, "--workers", "0", "--storage", url, "--campaign", "g"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert (created["gpu"], created["notes"]) == (single["gpu"], single["notes"])
    # said as a single-process replay says it: with the result, not in the workers' log
    assert main([*base[:-1], "--workers", "0", "--storage", url, "--campaign", "g"]) == 0
    assert single["notes"][0].split(" (")[0] in capsys.readouterr().out.replace("\n", " ")
    # resumed with another GPU's recording asked for: refused, naming it
    other = next(s.gpu_name for s in sources(results_root(), "gemm")
                 if (s.size, s.dtype) == GEMM[1:] and s.gpu_name != single["gpu"])
    assert main([*base, "--workers", "0", "--storage", url, "--campaign", "g", "--gpu", other]) == 2
    assert f"with other settings: --gpu {single['gpu']} (asked: {other});" in _error(capsys)
    # one created with the other GPU's, resumed without --gpu: it goes on with its own recording, and says so
    assert main([*base, "--workers", "0", "--storage", url, "--campaign", "h", "--gpu", other]) == 0
    capsys.readouterr()
    assert main([*base, "--workers", "0", "--storage", url, "--campaign", "h"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["gpu"] == other and resumed["notes"] == [
        f"replaying the recording from {other}, the one campaign 'h' was created with (a new campaign would replay "
        f"{single['gpu']}'s; choose with --gpu and another --campaign name)"
    ]


# 5. a refusal to resume names the settings that differ, the campaign's and those asked for


@needs_seed
def test_a_campaign_resumed_with_other_settings_is_refused_naming_them(results, capsys):
    with_recording(results)
    args = ["tune", "reduction", "--size", "seed", "--strategy", "brute_force", "--workers", "0", "--campaign", "x"]
    assert main([*args, "--simulate"]) == 0
    capsys.readouterr()
    assert main(args) == 2  # the audit's case: the same settings, measured rather than replayed
    line = _error(capsys)
    assert line.endswith(
        "with other settings: replayed (asked: measured on GPUs); resume it with its own, or choose another "
        "--campaign name"
    ), line
    assert main([*args, "--simulate", "--seed", "2", "--backend", "cupy", "--dtype", "float32"]) == 2
    assert "with other settings: --seed 1 (asked: 2); --backend nvcuda (asked: cupy); resume" in _error(capsys)
    assert main([*args, "--simulate", "--budget", "10"]) == 0  # a budget may change


# 6. the options of --workers are refused without it, in one line each


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--campaign", "foo"], "--campaign names a distributed campaign (--workers N); one on one process is named "
                                "by its workload, size, dtype, strategy and seed"),
        (["--devices", "0,1"], "--devices is for --workers N"),
        (["--allow-mixed-gpus"], "--allow-mixed-gpus is for --workers N"),
    ],
)
def test_options_of_workers_without_workers_are_refused(results, capsys, extra, said):
    assert main(["tune", "reduction", "--size", "seed", "--simulate", "--quiet", *extra]) == 2
    assert _error(capsys).startswith(f"error: {said}")
    assert not list(results.rglob("*.sqlite3"))  # refused before anything ran


# 7. a missing database driver gets the hint for that driver


@pytest.mark.skipif(importlib.util.find_spec("MySQLdb") is not None, reason="mysqlclient is installed")
def test_a_mysql_url_without_its_driver_says_which_to_install():
    with pytest.raises(TunerError) as e:
        open_storage("mysql://u:pw@127.0.0.1/db")
    said = str(e.value)
    assert "no module MySQLdb): pip install pymysql, and give the URL as mysql+pymysql://" in said
    assert "pw" not in said  # the extra (psycopg) only as the other server's: "; or PostgreSQL, ..."
    assert said.index("pip install pymysql") < said.index("; or PostgreSQL") < said.index("gpu-tuner[distributed]")
    if importlib.util.find_spec("pymysql") is None:
        with pytest.raises(TunerError, match=r"\(no module pymysql\): pip install pymysql$"):
            open_storage("mysql+pymysql://u@127.0.0.1/db")


def test_a_postgresql_url_without_psycopg_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where it is not installed
    with pytest.raises(TunerError, match=r"\(no module psycopg\): pip install 'gpu-tuner\[distributed\]'$"):
        open_storage("postgresql://u:pw@127.0.0.1/db")


# 4. a worker's process known gone on this host (a dead worker shown as such before its trials' grace period)


def test_a_worker_process_of_this_host_is_known_gone_once_it_has_exited():
    me = socket.gethostname()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    started = process_started(child.pid)
    assert started is not None and not process_gone(me, child.pid, started)
    assert process_gone(me, child.pid, started - 60)  # the pid since taken by another process
    assert not process_gone("another-host", child.pid, started - 60)  # elsewhere: only heartbeats tell
    child.communicate(b"")
    assert process_gone(me, child.pid, started)
    assert not process_gone("another-host", child.pid, started)


# 4. the line a stopped `tune --workers` ends with: the command that resumes it (run by test_distributed_kill.py)


def test_the_resume_line_is_the_command_as_given_without_its_password(tmp_path):
    from tuner.cli import build_parser
    from tuner.cli.tune import resume_command

    argv = ["--results", str(tmp_path / "r s"), "tune", "gemm", "--size", "2048x2048x2048", "--simulate",
            "--workers", "2", "--budget", "20", "--storage", "postgresql://u:s3cret@db/tuner", "--quiet",
            "--measure-target", "tests.fake_worker:fake_worker_main"]
    line = resume_command(build_parser(run_programs=False).parse_args(argv))
    assert line == (
        f"tuner --results '{tmp_path / 'r s'}' tune gemm --size 2048x2048x2048 --budget 20 --storage "
        "'postgresql://u:***@db/tuner' --simulate --quiet --workers 2"
        "  (with the storage's password for ***, or the URL in $TUNER_STORAGE)"
    )
    assert "s3cret" not in line and "measure-target" not in line  # a test's hook is no user's option
    after = [*argv[2:], *argv[:2]]  # --results after the command: the same command, written the same way
    assert resume_command(build_parser(run_programs=False).parse_args(after)) == line
