"""`tuner dashboard` opens the storage it was given before it says it serves, and never creates one: a SQLite path
that is not there (a typo) is one error line and exit 2, with no file made (audit of the reporting side, #1, #2).
optuna-dashboard's server is replaced by a stub that records what it was handed."""

import json

import optuna
import pytest

from tuner.cli import main

pytest.importorskip("optuna_dashboard")


@pytest.fixture
def served(monkeypatch, capsys):
    """The calls to optuna_dashboard.run_server, each with the stdout printed before it."""
    import optuna_dashboard

    calls = []

    def run_server(storage, host, port):
        calls.append({"storage": storage, "host": host, "port": port, "printed": capsys.readouterr().out})

    monkeypatch.setattr(optuna_dashboard, "run_server", run_server)
    return calls


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing announced
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize("campaign", [None, "nosuch"])
def test_a_missing_sqlite_file_is_an_error_and_is_not_created(tmp_path, results, served, capsys, campaign):
    db = tmp_path / "none.db"
    args = ["dashboard", "--storage", f"sqlite:///{db}", *([campaign] if campaign else [])]
    assert main(args) == 2
    line = _one_error_line(capsys)
    assert "no such file" in line and str(db) in line
    assert not db.exists() and not served


def test_a_missing_folder_is_an_error_and_is_not_created(tmp_path, results, served, capsys):
    db = tmp_path / "nodir" / "x.db"
    assert main(["dashboard", "--storage", f"sqlite:///{db}", "--json"]) == 2
    assert "no such folder" in _one_error_line(capsys)
    assert not db.parent.exists() and not served


def test_a_storage_that_does_not_open_announces_nothing(results, served, capsys):
    assert main(["dashboard", "--storage", "foo://bar", "--json"]) == 2
    assert "give a database URL" in _one_error_line(capsys)
    assert not served


@pytest.mark.parametrize("campaign", [None, "red-auto-s1"])
def test_an_existing_storage_is_opened_then_announced_then_served(tmp_path, results, served, capsys, campaign):
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    optuna.create_study(study_name="red-auto-s1@nvidia-h100/1-2", storage=url)
    args = ["dashboard", "--storage", url, "--json", "--port", "18999", *([campaign] if campaign else [])]
    assert main(args) == 0
    (call,) = served
    assert isinstance(call["storage"], optuna.storages.BaseStorage)
    said = json.loads(call["printed"])  # printed before serving, once the storage had opened
    assert said["storage"] == url and said["url"].startswith("http://127.0.0.1:18999/dashboard")
    assert said["study_id"] == (None if campaign is None else call["storage"].get_study_id_from_name(
        "red-auto-s1@nvidia-h100/1-2"))
