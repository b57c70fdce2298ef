"""Issue 23: a replay shows progress as a live campaign does, and its closing summary says why it stopped and,
where `tuner best` answers another config than its top row, why. Issue 22: `tuner list` and `tuner results`
say which sizes were recorded and how completely."""

import json
from pathlib import Path

import pytest

import tuner
import tuner.campaign.local
from tuner.answers.best_config import best
from tuner.campaign.local import run_campaign
from tuner.campaign.progress import CampaignProgress
from tuner.campaign.request import CampaignRequest
from tuner.campaign.summary import chosen_line, replay_line, stopped_line
from tuner.cli import main
from tuner.measure.replay import recording_searchspace
from tuner.workloads import get_workload


@pytest.fixture
def bars(monkeypatch):
    """Every CampaignProgress a campaign makes, kept for the test to read."""
    made = []

    class Kept(CampaignProgress):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(tuner.campaign.local, "CampaignProgress", Kept)
    return made


def test_a_replay_advances_its_progress_once_per_config_evaluated(bars):
    result = run_campaign(CampaignRequest(workload="reduction", size="large", dtype="float32", strategy="tpe",
                                          max_evals=8, simulate=True, quiet=True, warm_start=False),
                          stored_best=best)
    (bar,) = bars
    assert bar.done == result.evaluated == 8 and bar.total == 8
    assert bar.best == pytest.approx(result.best["value"]) and bar.failed == 0
    assert result.stop_reason == "budget" and result.closing[0].startswith("stopped (budget)")
    # 8 evaluations without the warm start do not reach the store's best: the summary says so
    assert "`tuner best` answers" in result.closing[1] and "did not reach it" in result.closing[1]


def test_tune_and_the_api_hand_tuner_best_to_a_replay_for_its_closing_notes():
    """The campaign stage sits below the answers: `tuner tune` and tuner.tune() give it `tuner best`."""
    said = _out(["tune", "reduction", "--size", "large", "--dtype", "float32", "--strategy", "tpe", "--budget", "8",
                 "--simulate", "--quiet", "--no-warm-start"])
    assert "`tuner best` answers" in said and "did not reach it" in " ".join(said.split())
    out = tuner.tune("reduction", size="large", dtype="float32", strategy="tpe", budget=8, simulate=True,
                     warm_start=False)
    assert "`tuner best` answers" in out["closing"][1] and "did not reach it" in out["closing"][1]

def test_a_brute_force_replay_counts_its_failures_and_says_the_space_was_exhausted(bars):
    result = run_campaign(CampaignRequest(workload="floyd-warshall-small", size="5k", dtype="int32",
                                          strategy="brute_force", simulate=True, quiet=True), stored_best=best)
    (bar,) = bars
    assert bar.done == result.evaluated == bar.total
    assert bar.failed == sum(result.failures.values()) and bar.failures == result.failures
    assert result.closing == [stopped_line("space exhausted")]  # its top row is what `tuner best` answers


def test_the_progress_bar_is_drawn_for_a_replay(capsys):
    run_campaign(CampaignRequest(workload="reduction", size="large", dtype="float32", strategy="tpe",
                                 max_evals=5, simulate=True, warm_start=False))
    err = capsys.readouterr().err
    assert "reduction large float32 [tpe, replay]" in err and "5/5" in err and "best" in err


def test_the_summary_names_a_confirmation_that_chose_another_config():
    gpu = json.loads(_out(["best", "locvolcalib", "--size", "course-large", "--dtype", "float64", "--json"]))["gpu"]
    answer = best("locvolcalib", "course-large", "float64", gpu=gpu)  # as a replay of that GPU's recording asks
    assert any("near-ties" in n for n in answer["notes"])  # the store holds a confirmation for it
    top = {"config": {**answer["config"], "STEPS": 1}, "value": 1.0, "objective": "time"}
    line = replay_line(answer, top, [])
    assert "confirmation" in line and f"{answer['value']:.4g}" in line
    assert replay_line(answer, answer, []) is None and replay_line(None, top, []) is None  # None: nothing stored

    chosen = {"config": {"a": 1}, "value": 2.0, "objective": "GB/s"}
    said = chosen_line(chosen, {"config": {"a": 2}, "value": 2.1, "objective": "GB/s"})
    assert "a=2" in said and "confirmation chose" in said
    assert chosen_line(chosen, chosen) is None and stopped_line(None) is None


def _out(argv: list[str]) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


def _derived(workload: str, listed: dict) -> Path:
    """The recording `tuner list --json` listed, derived as a replay derives it (at the path it named)."""
    from tuner.cli.common import shown_path
    from tuner.store import results_root
    from tuner.store.recordings import replay_file, sources

    key = (listed["gpu"], listed["size"], listed["dtype"])
    source = next(s for s in sources(results_root(), workload) if (s.gpu, s.size, s.dtype) == key)
    path = replay_file(results_root(), workload, source)
    assert shown_path(path) == listed["path"]
    return path


def test_list_says_how_completely_each_size_was_recorded():
    docs = {d["workload"]: d for d in json.loads(_out(["list", "--json"]))}
    reduction = docs["reduction"]["recordings"]
    assert {(r["size"], r["dtype"]) for r in reduction} >= {("large", "float32"), ("seed", "int32")}
    assert all(r["complete"] and r["recorded_configs"] == docs["reduction"]["configurations"] for r in reduction)
    # a partial recording: counted as a replay counts what it can replay
    gemm = get_workload("gemm").space
    for r in docs["gemm"]["recordings"][:3]:
        assert r["recorded_configs"] == recording_searchspace(gemm, _derived("gemm", r)).size
        assert not r["complete"] and r["space_configs"] == docs["gemm"]["configurations"]
    table = _out(["list", "reduction"])
    assert "576/576" in table and "large" in table


def test_list_keeps_what_kernel_tuner_counted_and_counts_a_changed_recording_again(tmp_path, monkeypatch):
    """`tuner list` counts recordings without Kernel Tuner's searchspaces (seconds to build for the large spaces)
    and keeps each recording's count in the user's cache (tuner.kept), so a second listing says the same; a
    recording put into the store whose bytes differ is counted as it is."""
    from tuner.measure import kt

    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    first = json.loads(_out(["list", "reduction", "--json"]))

    def no_searchspace(*args, **kwargs):
        raise AssertionError("built a searchspace")

    with monkeypatch.context() as m:
        m.setattr(kt, "searchspace", no_searchspace)
        assert json.loads(_out(["list", "reduction", "--json"])) == first
    root = tmp_path / "results"
    folder = root / "nvidia-h100-80gb-hbm3" / "reduction"
    folder.mkdir(parents=True)
    listed = first["recordings"][0]
    assert not listed["derived"]  # named, not derived: the counts came from the rows
    recording = json.loads(_derived("reduction", listed).read_text())
    held = dict(list(recording["cache"].items())[:10])
    (folder / "large_float32.cache.json").write_text(json.dumps({**recording, "cache": held}))
    (r,) = json.loads(_out(["--results", str(root), "list", "reduction", "--json"]))["recordings"]
    assert r["recorded_configs"] == 10 and r["space_configs"] == first["configurations"] and not r["complete"]


def test_an_unreadable_recording_is_listed_as_such(tmp_path):
    """A Kernel Tuner cache put into the store by hand, with no rows: unreadable, listed so."""
    root = tmp_path / "results"
    (root / "nvidia-h100-80gb-hbm3" / "reduction").mkdir(parents=True)
    (root / "nvidia-h100-80gb-hbm3" / "reduction" / "large_float32.cache.json").write_text('{"cache": {"1,2')
    doc = json.loads(_out(["--results", str(root), "list", "reduction", "--json"]))
    (r,) = doc["recordings"]
    assert r["recorded_configs"] is None and not r["complete"] and "cannot be read" in r["error"]
    assert "unreadable" in _out(["--results", str(root), "list", "reduction"])


def test_results_say_how_completely_this_size_was_recorded():
    out = _out(["results", "reduction", "--size", "large", "--top", "3"])
    assert "recorded for replay: 576/576 configs of the space" in out and "seed 576/576" in out
