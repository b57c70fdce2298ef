"""Answers from a damaged store, or a damaged cache, found by an audit: a recording derived into the user's cache
that is deleted during a `--workers` replay, or cut short, is derived again from the store rather than crashing
or being trusted for good; `tuner list` names a part it cannot read (once) and says the listing is incomplete; a
size only a damaged part holds is said to be in a store that could not be read in full (not "never measured"),
and a replay of it refuses naming the part; `tuner report` exits 3 on a degraded store unless --allow-degraded,
and its page names what was left out."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.recorded import is_recorded
from tuner import locations
from tuner.cli import main

H100 = "NVIDIA H100 80GB HBM3"
GPU_DIR = "nvidia-h100-80gb-hbm3"
SOURCE = locations.BUILTIN_RESULTS / GPU_DIR / "reduction"
pytestmark = pytest.mark.skipif(
    not is_recorded(H100, "reduction", "large", "float32"), reason="no recorded reduction large float32 in results/"
)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed store's H100 reduction rows."""
    root = tmp_path / "store"
    shutil.copytree(SOURCE, root / GPU_DIR / "reduction")
    monkeypatch.setenv("TUNER_RESULTS", str(root))
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of the test's own: it deletes and damages what is in it."""
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _part_holding(root: Path, size: str, dtype: str) -> Path:
    """The one part that holds the rows of `size` and `dtype` (reduction large float32: one campaign's)."""
    held = []
    for part in sorted((root / GPU_DIR / "reduction" / "evaluations").glob("*.parquet")):
        rows = pd.read_parquet(part, columns=["size", "dtype"])
        if ((rows["size"] == size) & (rows["dtype"] == dtype)).any():
            held.append(part)
    assert len(held) == 1
    return held[0]


def _zero(part: Path) -> None:
    part.write_bytes(b"")


def _truncate(part: Path) -> None:
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])


def _garbage(part: Path) -> None:
    part.write_bytes(os.urandom(4096))


DAMAGE = {"zero-length": _zero, "truncated": _truncate, "garbage": _garbage}


def _run(capsys: pytest.CaptureFixture, root: Path, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--results", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _recording(root: Path, size: str = "large", dtype: str = "float32") -> Path:
    from tuner.store.recording_choice import find_recording

    return find_recording(root, "reduction", size, dtype, H100)


# ---- 1. a recording deleted from the cache during a distributed replay -------------------------------------


def test_a_campaigns_recording_deleted_from_the_cache_is_derived_again(store, cache, tmp_path, capsys, monkeypatch):
    """`tune --workers` asks the campaign's status every 10 s, and its workers and their measuring processes read
    the recording the campaign was created with: deleting the cache folder meanwhile (docs/store.md: it can be
    deleted at any time) derives it again from the store, the same file, instead of a FileNotFoundError."""
    from tuner.campaign.distributed import campaign_result, campaign_status, create_campaign
    from tuner.campaign.request import CampaignRequest
    from tuner.measure.replay import recording_searchspace, simulation
    from tuner.workloads import get_workload

    req = CampaignRequest(
        workload="reduction", size="16M", dtype="float32", strategy="brute_force", simulate=True, results=store
    )
    camp, url = create_campaign(req, "lost-recording", None)
    recording = Path(str(camp.recording))
    assert recording.is_file() and cache in recording.parents
    before = campaign_status(camp.name, url)

    shutil.rmtree(cache)
    with monkeypatch.context() as m:  # the project's store is another: the campaign's is beside its storage
        m.setenv("TUNER_RESULTS", str(tmp_path / "elsewhere"))
        again = campaign_status(camp.name, url)
    assert again["total"] == before["total"] == 576 and recording.is_file()  # the same file, derived again

    shutil.rmtree(cache)  # the end of the campaign: its result, with its store given
    assert campaign_result(camp.name, url, store).workload == "reduction" and recording.is_file()

    space = get_workload("reduction").space
    shutil.rmtree(cache)  # a worker's search space, and its measuring process's replay
    assert recording_searchspace(space, recording, "float32").size == 576
    shutil.rmtree(cache)
    runner, options = simulation(space, dict(space.sizes["16M"]), "float32", recording, metrics=False)
    assert len(options["cache"]) == 576 and recording.is_file()

    code, out, err = _run(capsys, store, "status", camp.name, "--storage", url, "--json")
    assert code == 0 and json.loads(out)["total"] == 576


def test_a_recording_gone_with_no_store_holding_its_rows_is_one_clear_error(store, cache):
    from tuner.errors import TunerError
    from tuner.measure.replay import recording_searchspace
    from tuner.workloads import get_workload

    recording = _recording(store, "16M")
    shutil.rmtree(cache)
    shutil.rmtree(store / GPU_DIR)
    with pytest.raises(TunerError, match="this recording is gone .* cannot be derived again"):
        recording_searchspace(get_workload("reduction").space, recording, "float32", store_root=store)


def test_a_workers_replay_survives_the_cache_folder_deleted_before_its_result(store, cache, capsys, monkeypatch):
    """The audit's run, end to end: `tune --simulate --workers 1`, the cache folder deleted while it runs (here,
    just before the campaign's result is read): the replay answers, exit 0."""
    from tuner.campaign.distributed import launch

    real = launch.campaign_result

    def deleted_first(*args, **kwargs):
        shutil.rmtree(cache, ignore_errors=True)
        return real(*args, **kwargs)

    monkeypatch.setattr(launch, "campaign_result", deleted_first)
    args = ["tune", "reduction", "--size", "16M", "--dtype", "float32", "--simulate", "--budget", "12"]
    code, out, err = _run(capsys, store, *args, "--workers", "1", "--quiet", "--json")
    assert code == 0, err
    assert json.loads(out)["simulated"] and "Traceback" not in err


# ---- 2. a derived recording damaged in the cache ---------------------------------------------------------


def _halve(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _cut_at_a_line(path: Path) -> None:
    """Cut after a whole entry: Kernel Tuner's reader closes such a text and reads it as a shorter cache."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: len(lines) // 2]))


def _overwritten(path: Path) -> None:
    path.write_text('{"not": "a cache"}')


@pytest.mark.parametrize("damage", [_halve, _cut_at_a_line, _overwritten], ids=["halved", "cut", "overwritten"])
def test_a_damaged_recording_in_the_cache_is_derived_again(store, cache, damage):
    recording = _recording(store)
    whole = recording.read_bytes()
    damage(recording)
    assert _recording(store) == recording and recording.read_bytes() == whole


def test_replays_listings_and_results_derive_a_damaged_recording_again(store, cache, capsys):
    """The audit's commands on a recording cut in half: each derives it again (before: every replay failed with
    "not a readable Kernel Tuner cache", `tuner list` and `tuner results` said "unreadable", for good)."""
    recording = _recording(store)
    whole = recording.read_bytes()

    _halve(recording)
    code, out, err = _run(capsys, store, "tune", "reduction", "--size", "large", "--simulate", "--budget", "10")
    assert code == 0, err
    assert "not a readable Kernel Tuner cache" not in err and recording.read_bytes() == whole

    _halve(recording)
    code, out, err = _run(capsys, store, "list", "reduction", "--json")
    (large,) = [r for r in json.loads(out)["recordings"] if (r["size"], r["dtype"]) == ("large", "float32")]
    assert code == 0 and large["recorded_configs"] == 576 and "error" not in large

    _halve(recording)
    code, out, err = _run(capsys, store, "results", "reduction", "--size", "large", "--gpu", H100)
    assert code == 0 and "recorded for replay: 576/576 configs" in " ".join(out.split())


# ---- 3. `tuner list` with a part it cannot read ------------------------------------------------------------


@pytest.mark.parametrize("how", DAMAGE)
def test_list_names_an_unreadable_part_once_and_says_it_is_incomplete(store, capsys, how):
    part = _part_holding(store, "large", "float32")
    DAMAGE[how](part)
    code, out, err = _run(capsys, store, "list", "reduction")
    assert code == 0
    assert err.count(str(part)) == 1 and "warning:" in err  # named once
    said = " ".join(out.split())
    assert "incomplete: 1 part(s) of the store could not be read" in said and part.name in said.replace(" ", "")

    code, out, err = _run(capsys, store, "list", "reduction", "--json")
    doc = json.loads(out)
    assert code == 0 and [p["path"] for p in doc["degraded"]["parts"]] == [str(part)]
    assert ("large", "float32") not in {(r["size"], r["dtype"]) for r in doc["recordings"]}

    code, out, err = _run(capsys, store, "list")  # every workload: its row says so too
    assert code == 0 and "incomplete" in out and err.count(str(part)) == 1


def test_list_of_a_whole_store_says_nothing_left_out(store, capsys):
    code, out, err = _run(capsys, store, "list", "reduction", "--json")
    assert code == 0 and "degraded" not in json.loads(out) and "warning" not in err


def test_a_part_without_a_required_column_is_said_and_its_recording_names_it(store, capsys):
    """The other damaged-part case, as it was: the recording only that part holds is listed unreadable, the part
    named (in the warning, the listing's `degraded`, and the recording's error)."""
    part = _part_holding(store, "large", "float32")
    pd.read_parquet(part).drop(columns=["time_ms"]).to_parquet(part, index=False)
    code, out, err = _run(capsys, store, "list", "reduction", "--json")
    doc = json.loads(out)
    (large,) = [r for r in doc["recordings"] if (r["size"], r["dtype"]) == ("large", "float32")]
    assert code == 0 and large["recorded_configs"] is None and str(part) in large["error"]
    assert doc["degraded"]["parts"] == [{"path": str(part), "reason": "missing column(s) time_ms"}]
    assert err.count(str(part)) == 1

    code, out, err = _run(capsys, store, "tune", "reduction", "--size", "large", "--simulate", "--budget", "10")
    assert code == 2 and "could not be read in full" in err and str(part) in err


def test_list_with_a_cache_folder_it_cannot_write_says_so_not_unreadable(store, tmp_path, capsys, monkeypatch):
    """The recordings are fine, the folder they are derived into is not writable (a read-only ~/.cache in CI):
    `tuner list` says "not derived" and why, once, not "unreadable" in every row; --json names the folder."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a folder under a file cannot be made, even by root
    monkeypatch.setenv("TUNER_CACHE", str(blocked / "cache"))
    code, out, err = _run(capsys, store, "list", "reduction")
    said = " ".join(out.split())
    assert code == 0 and "unreadable" not in said and "not derived" in said
    assert said.count("set TUNER_CACHE to a writable folder") == 1 and str(blocked / "cache") in said.replace(" ", "")
    code, out, err = _run(capsys, store, "list", "reduction", "--json")
    recorded = json.loads(out)["recordings"]
    assert code == 0 and recorded and all(r["recorded_configs"] is None for r in recorded)
    assert all(r["cache_not_writable"] == str(blocked / "cache" / "recordings") for r in recorded)
    assert all("set TUNER_CACHE to a writable folder" in r["error"] for r in recorded)
    code, out, err = _run(capsys, store, "list")  # every workload: the row says why too
    assert code == 0 and "not derived" in out and "unreadable" not in out


# ---- 4. a size that only a damaged part holds ---------------------------------------------------------------


@pytest.mark.parametrize("how", DAMAGE)
def test_a_size_only_a_damaged_part_holds_is_not_said_never_measured(store, capsys, how):
    part = _part_holding(store, "large", "float32")
    DAMAGE[how](part)

    code, out, err = _run(capsys, store, "best", "reduction", "--size", "large", "--gpu", H100, "--json")
    answer = json.loads(out)
    assert code == 3 and answer["fallback"] == "nearest-size+degraded"
    (note,) = [n for n in answer["notes"] if n.startswith("size large")]
    assert "never measured" not in note and "could not be read in full" in note and str(part) in note

    code, out, err = _run(capsys, store, "results", "reduction", "--size", "large", "--gpu", H100)
    said = " ".join(out.split())
    assert code == 0 and "never measured" not in said and "could not be read in full" in said

    # an export of it refuses in one line naming the part (not a second saying an answer was drawn from the rest)
    for fmt in ("json", "kt-cache"):
        code, out, err = _run(capsys, store, "export", "reduction", "--size", "large", "--gpu", H100, "--format", fmt)
        assert code == 3 and len(err.strip().splitlines()) == 1 and str(part) in err, err

    # a replay refuses, naming the damaged part (not only what else is recorded)
    code, out, err = _run(capsys, store, "tune", "reduction", "--size", "large", "--simulate", "--budget", "10")
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 2 and "nothing recorded to replay for reduction large float32" in line
    assert str(part) in line and "could not be read in full" in line
    code, out, err = _run(capsys, store, "tune", "reduction", "--size", "large", "--simulate", "--workers", "1")
    assert code == 2 and str(part) in err and "could not be read in full" in err


def test_a_size_never_measured_on_a_whole_store_is_still_said_so(store, capsys):
    code, out, err = _run(capsys, store, "best", "reduction", "--size", "n=1000", "--gpu", H100, "--json")
    answer = json.loads(out)
    assert code == 0 and any(n.startswith("size n=1000 was never measured on") for n in answer["notes"])


# ---- 5. `tuner report` on a damaged store --------------------------------------------------------------------


def test_report_on_a_damaged_store_exits_3_and_its_page_names_what_was_left_out(store, tmp_path, capsys):
    part = _part_holding(store, "large", "float32")
    _zero(part)
    out_dir = tmp_path / "out"
    code, out, err = _run(capsys, store, "report", "reduction", "--size", "large", "-o", str(out_dir), "--json")
    summary = json.loads(out)
    assert code == 3 and "degraded store" in err
    assert [p["path"] for p in summary["degraded"]["parts"]] == [str(part)]
    page = Path(summary["path"]).read_text()
    assert 'class="degraded"' in page and str(part) in page and "Incomplete" in page
    assert "never measured" not in page and "could not be read in full" in page

    code, out, err = _run(
        capsys, store, "report", "reduction", "--size", "large", "-o", str(out_dir), "--allow-degraded"
    )
    assert code == 0 and "degraded store" in err  # still said


def test_report_on_a_whole_store_exits_0_without_a_degraded_note(store, tmp_path, capsys):
    code, out, err = _run(
        capsys, store, "report", "reduction", "--size", "large", "-o", str(tmp_path / "out"), "--json"
    )
    summary = json.loads(out)
    assert code == 0 and summary["degraded"] is None
    assert 'class="degraded"' not in Path(summary["path"]).read_text()


def test_results_names_an_unreadable_part_once(store, cache, capsys):
    """The rows and the recordings `tuner results` reads are the same parts: a damaged one is said once."""
    part = _part_holding(store, "large", "float32")
    _zero(part)
    code, out, err = _run(capsys, store, "results", "reduction", "--size", "seed", "--top", "2")
    assert code == 0 and err.count(str(part)) == 1
