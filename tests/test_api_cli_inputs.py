"""Inputs of the Python API and the CLI found out up front, as one line; the CLI's help saying the defaults."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

import tuner
import tuner.answers.compare as compare_module
import tuner.report as report_module
from tuner.cli import build_parser, main
from tuner.store.schema import EVALUATION


def _never(*args: object, **kwargs: object) -> dict:
    raise AssertionError("the replays ran before the output paths were checked")


@pytest.mark.parametrize(
    ("option", "name", "said"),
    [
        ("--plot", "missing/x.png", "--plot {path}: no folder"),
        ("--plot", "x.txt", "--plot {path}: '.txt' is not an image format matplotlib writes; give one of"),
        ("--plot", "x", "--plot {path}: no suffix to name its format"),
        ("--markdown", "missing/x.md", "--markdown {path}: no folder"),
    ],
)
def test_compare_strategies_checks_its_outputs_first(
    option: str, name: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(compare_module, "compare", _never)
    path = tmp_path / name
    assert main(["compare-strategies", "reduction", option, str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: " + said.format(path=path)) and "\n" not in err


def test_results_of_an_empty_store_has_the_schemas_columns(tmp_path: Path) -> None:
    df = tuner.results("reduction", results=tmp_path)
    assert df.empty and list(df.columns)[: len(EVALUATION)] == list(EVALUATION)
    assert df["objective_value"].dtype == float and df["objective_value"].max() != df["objective_value"].max()  # NaN
    assert list(tuner.load_store(tmp_path).columns) == list(EVALUATION)


def test_load_store_refuses_what_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(tuner.TunerError, match="no such folder"):
        tuner.load_store(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(tuner.TunerError, match="not a folder"):
        tuner.load_store(tmp_path / "file")
    with pytest.raises(tuner.TunerError, match="no such folder"):
        tuner.results("reduction", results=tmp_path / "nope")


def test_the_api_and_the_cli_refuse_a_results_folder_in_the_same_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """One check (tuner.store.paths.checked_results_folder) for both: missing, not a folder, unreadable."""
    (tmp_path / "file").write_text("")
    locked = tmp_path / "locked"
    locked.mkdir()
    scandir = os.scandir

    def refused(path: Path) -> object:  # root reads any folder: chmod cannot make one unreadable here
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refused)
    for name, said in (
        ("nope", "no such folder (a campaign, `tuner tune`, creates it)"),
        ("file", "not a folder"),
        ("locked", "cannot be read (Permission denied)"),
    ):
        folder = tmp_path / name
        with pytest.raises(tuner.TunerError) as e:
            tuner.load_store(folder)
        assert str(e.value) == f"results {folder}: {said}"
        assert main(["--results", str(folder), "best", "reduction"]) == 2
        assert capsys.readouterr().err.strip() == f"error: --results {folder}: {said}"
    with pytest.raises(tuner.TunerError, match="not a folder"):  # a campaign may create its folder, not replace a file
        tuner.tune("reduction", results=tmp_path / "file", simulate=True)


def test_tune_names_an_unknown_option_and_the_known_ones() -> None:
    with pytest.raises(tuner.TunerError, match=r"no option nosuchopt; .*it takes backend, .*warm_start") as e:
        tuner.tune("reduction", nosuchopt=1)
    assert "measure_target" not in str(e.value)


@pytest.mark.parametrize(
    ("budget", "said"), [(0, "at least 1 evaluation"), ("-2", "at least 1 evaluation"), ("0s", "a duration from 0.001s")]
)
def test_tune_says_a_budget_too_small(budget: object, said: str) -> None:
    with pytest.raises(tuner.TunerError, match=f"budget '{budget}': give {said}"):
        tuner.tune("reduction", budget=budget)


def _help(command: str) -> dict[str, str]:
    """A subcommand's options and their help texts."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {o: a.help or "" for a in sub.choices[command]._actions for o in a.option_strings}


def test_help_states_defaults_and_points_to_real_docs() -> None:
    tune = _help("tune")
    assert "docs/distributed.md" in tune["--workers"] and "README" not in tune["--workers"]
    assert (Path(__file__).parents[1] / "docs/distributed.md").is_file()
    assert "default 0" in tune["--device"] and "default 1" in tune["--seed"] and tune["--json"]
    for command in ("best", "results"):
        h = _help(command)
        assert "default: the space's default size" in h["--size"] and "default: the space's first" in h["--dtype"]
    assert "default: every stored dtype" in _help("export")["--dtype"]
    assert _help("best")["--json"] and _help("check")["--json"]
    for command, rounds in (("baseline", "default 10"), ("check", "default 20")):
        h = _help(command)
        assert rounds in h["--rounds"] and "default 0" in h["--device"]
    dashboard = _help("dashboard")
    assert "default 127.0.0.1" in dashboard["--host"] and "default 8080" in dashboard["--port"]


def test_report_does_not_call_nothing_failed_no_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    ok = "No failed evaluation: all 7 evaluation(s) on GPU X (float32) succeeded."
    summary = {
        "path": str(tmp_path / "page.html"),
        "figures": 2,
        "notes": [],
        "degraded": None,
        "sections": {
            "sweeps": {"title": "Sweeps", "figures": [], "empty": "No parameter took more than one value."},
            "failures": {"title": "Failures by class", "figures": [], "empty": ok},
        },
    }
    monkeypatch.setattr(report_module, "write_report", lambda *a, **k: summary)
    assert main(["report", "reduction", "-o", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no data for: Sweeps;" in out and "no failed evaluation: all 7 evaluation(s)" in out
    assert "Failures by class" not in out
