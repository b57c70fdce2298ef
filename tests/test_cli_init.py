"""`tuner init`, the global `--workloads DIR`, and `tuner list` with each workload's origin, in a scratch project."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import tuner.cli.listing
from tuner import locations
from tuner.cli import main
from tuner.workloads import registry

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder (a tuner.toml marks it), the working directory, with nothing cached from others."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "tuner.toml").write_text("")
    monkeypatch.chdir(folder)
    for var in ("TUNER_WORKLOADS", "TUNER_RESULTS"):
        monkeypatch.delenv(var, raising=False)
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()
    yield folder.resolve()
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()


def listed(capsys) -> dict:
    assert main(["list", "--json"]) == 0
    return {d["workload"]: d for d in json.loads(capsys.readouterr().out)}


def test_init_makes_a_workload_that_list_shows_with_its_origin(project, capsys, monkeypatch):
    monkeypatch.setattr(tuner.cli.listing, "console", Console(width=250))  # the table whole, as in a wide terminal
    assert main(["init", "saxpy"]) == 0
    out = capsys.readouterr().out
    folder = project / "workloads" / "saxpy"
    assert (folder / "space.yaml").is_file() and (folder / "saxpy.cu").is_file()
    assert "workloads/saxpy" in out and "tuner list" in out and "tuner tune saxpy --budget 20" in out
    assert "tuner tune saxpy --dry-run" in out

    docs = listed(capsys)
    saxpy = docs["saxpy"]
    assert saxpy["origin"] == str(folder)
    assert saxpy["space"] == "workloads/saxpy/space.yaml" and saxpy["source"] == "workloads/saxpy/saxpy.cu"
    assert saxpy["configurations"] > 0
    assert docs["reduction"]["origin"] == "built-in"  # the built-ins are still there

    assert main(["list"]) == 0  # the table: a column of origins
    table = capsys.readouterr().out
    assert "origin" in table and "built-in" in table and "saxpy" in table


def test_init_twice_is_one_line_and_exit_2(project, capsys):
    assert main(["init", "saxpy"]) == 0
    before = sorted(p.name for p in (project / "workloads").iterdir())
    capsys.readouterr()
    assert main(["init", "saxpy"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "already exists" in err and "Traceback" not in err
    assert sorted(p.name for p in (project / "workloads").iterdir()) == before  # nothing half-written


@pytest.mark.parametrize("argv, message", [(["init", "Not A Name"], "not a valid workload name"),
                                           (["init", "k", "--kernel", "missing.cu"], "missing.cu")])
def test_bad_input_is_one_line_and_exit_2(project, capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert not (project / "workloads").exists() or not any((project / "workloads").iterdir())


def test_workloads_option_is_honoured_and_not_left_behind(project, capsys):
    assert main(["--workloads", "mine", "init", "foo"]) == 0
    assert (project / "mine" / "foo" / "space.yaml").is_file() and not (project / "workloads").exists()
    assert "tuner --workloads mine tune foo --budget 20" in capsys.readouterr().out

    assert listed(capsys).keys().isdisjoint({"foo"})  # without the option: the project's ./workloads
    assert main(["--workloads", str(project / "mine"), "list", "--json"]) == 0
    docs = {d["workload"]: d for d in json.loads(capsys.readouterr().out)}
    assert docs["foo"]["origin"] == str(project / "mine" / "foo")
    assert "TUNER_WORKLOADS" not in os.environ


def test_workloads_option_reaches_the_processes_a_command_starts(project, tmp_path, monkeypatch):
    """Measuring processes and `tuner worker`s find a workload by name: through TUNER_WORKLOADS."""
    assert main(["--workloads", "mine", "init", "foo"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    seen = {}

    def child(args) -> int:  # stands in for `tuner list`: a process started by the command
        code = "from tuner.workloads import discover; print(discover()['foo'].origin)"
        out = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
        seen["out"], seen["err"] = out.stdout.strip(), out.stderr
        return out.returncode

    monkeypatch.setattr(tuner.cli.listing, "command", child)
    assert main(["--workloads", "mine", "list"]) == 0, seen.get("err")
    assert seen["out"] == str(project / "mine" / "foo")


def test_a_missing_workloads_folder_is_an_error(project, capsys):
    assert main(["--workloads", "nowhere", "list"]) == 2
    assert "--workloads nowhere: no such folder" in capsys.readouterr().err


def test_a_broken_user_workload_names_its_folder(project, capsys):
    broken = project / "workloads" / "broken"
    broken.mkdir(parents=True)
    (broken / "space.yaml").write_text("workload: broken\nkernel: [\n")
    assert main(["list"]) == 2
    out, err = capsys.readouterr()
    assert str(broken) in err and "broken" in err and "Traceback" not in err
    assert "workloads" in out  # the table is printed (its narrow cells: see --json below)
    assert main(["list", "--json"]) == 2
    docs = {d["workload"]: d for d in json.loads(capsys.readouterr().out)}
    assert "reduction" in docs and "configurations" in docs["reduction"]
    assert str(broken) in docs["broken"]["error"] and "configurations" not in docs["broken"]


def test_init_json_names_the_folder_and_its_files(project, capsys):
    assert main(["init", "saxpy", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["workload"] == "saxpy" and doc["folder"] == str(project / "workloads" / "saxpy")
    assert {"space.yaml", "saxpy.cu"} <= set(doc["files"])
