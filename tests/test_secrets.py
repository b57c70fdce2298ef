"""A storage URL's secrets are never printed, logged nor put on a command line (issue 22)."""

import json
import shutil
import subprocess

import pytest

from tuner import locations
from tuner.campaign.rdb_storage import redact, scrub
from tuner.campaign.study_storages import STORAGE_ENV
from tuner.cli import main

H100 = "nvidia-h100-80gb-hbm3"


@pytest.mark.parametrize(
    "url, shown",
    [
        ("postgresql://host/db?user=alice&password=S3cret", "postgresql://host/db?user=alice&password=***"),
        ("postgresql://u:p@ss@host/db", "postgresql://u:***@host/db"),
        ("postgresql://u:S3cret@host:5432/db", "postgresql://u:***@host:5432/db"),
        ("postgresql://u:a:b@host/db?sslpassword=S3cret&x=1", "postgresql://u:***@host/db?sslpassword=***&x=1"),
        ("mysql://u@host/db;PWD=S3cret", "mysql://u@host/db;PWD=***"),
        ("postgresql://alice@host/db", "postgresql://alice@host/db"),
        ("sqlite:////tmp/c.sqlite3", "sqlite:////tmp/c.sqlite3"),
    ],
)
def test_redact_hides_every_form_of_password(url, shown):
    assert redact(url) == shown


def test_scrub_hides_the_secret_in_a_drivers_message():
    url = "postgresql://u:p@ss@host/db"
    said = scrub("failed to resolve host 'ss@host' for p@ss and " + url, url)
    assert "p@ss" not in said and "'ss@" not in said and "u:***@host/db" in said


@pytest.mark.parametrize(
    "url, secret, said",
    [
        ("postgresql://host/db?user=alice&password=S3cret", "S3cret", "cannot open storage"),
        # a password holding '@' or ':' as written: read as part of the host or port, which no error may quote
        ("postgresql://u:p@ss@host/db", "p@ss", "percent-encode a password"),
        ("postgresql://u:p@ss:Zq9@host/db", "Zq9", "percent-encode a password"),
    ],
)
def test_status_never_prints_the_password(capsys, url, secret, said):
    assert main(["status", "x", "--storage", url]) == 2
    out = capsys.readouterr()
    assert said in out.err and len(out.err.strip().splitlines()) == 1
    assert secret not in out.out + out.err and "ss@" not in out.err


def test_workers_get_the_url_through_their_environment_not_their_command_line(results, capsys, monkeypatch):
    src = locations.BUILTIN_RESULTS / H100 / "floyd-warshall-small"
    shutil.copytree(src, results / H100 / "floyd-warshall-small")
    url = f"sqlite:///{results / 'secret-campaigns.sqlite3'}"
    started = []
    real = subprocess.Popen

    def spy(cmd, *args, **kwargs):
        started.append((cmd, kwargs.get("env") or {}))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    args = ["tune", "floyd-warshall-small", "--size", "5k", "--simulate", "--workers", "1", "--quiet", "--json"]
    assert main([*args, "--storage", url, "--strategy", "brute_force", "--budget", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["evaluated"] == 4  # the worker found its campaign
    (cmd, env), = started
    assert url not in " ".join(cmd) and "secret-campaigns" not in " ".join(cmd)
    assert env[STORAGE_ENV] == url


def test_worker_and_status_read_the_url_from_the_environment(results, capsys, monkeypatch):
    url = f"sqlite:///{results / 'env.sqlite3'}"
    monkeypatch.setenv(STORAGE_ENV, url)
    shutil.copytree(locations.BUILTIN_RESULTS / H100 / "floyd-warshall-small", results / H100 / "floyd-warshall-small")
    create = ["tune", "floyd-warshall-small", "--size", "5k", "--simulate", "--workers", "0", "--campaign", "c1"]
    assert main([*create, "--storage", url]) == 0
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    assert [s["campaign"] for s in json.loads(capsys.readouterr().out)] == ["c1"]
    # a worker joins it by the same variable, and says what it did as JSON
    assert main(["worker", "c1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["measured"] + summary["served"] > 0 and "H100" in summary["gpu"]
