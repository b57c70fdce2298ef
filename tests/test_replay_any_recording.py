"""Issue 22, "Replay: every recording, nothing changed on disk": every workload's default size replays with
--simulate over the configs its recording holds (saying how many), a replay never changes a recording, and
with recordings from several GPUs the replay chooses one as `tuner best` does and says which."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.store import results_root
from tuner.store.recordings import Source, replay_file, sources
from tuner.workloads import all_workloads

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = sorted(w.name for w in all_workloads())
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def _recorded(workload: str, size: str, dtype: str | None = None) -> list[Source]:
    """The store's recordings of this size (and dtype), one a GPU."""
    return [s for s in sources(results_root(), workload) if s.size == size and dtype in (None, s.dtype)]


def _results_changed() -> str | None:
    """`git status` of results/, or None where this is no git checkout."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        return None
    out = subprocess.run(["git", "status", "--porcelain", "--", "results"], cwd=REPO, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


@pytest.fixture(autouse=True)
def _no_gpu_here(monkeypatch):
    """The replay's choice among GPUs does not depend on the machine running the tests."""
    monkeypatch.setattr("tuner.campaign.local.local_device_name", lambda space: None)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_default_size_replays_and_leaves_results_unchanged(workload):
    before = _results_changed()
    assert main(["tune", workload, "--simulate", "--budget", "10", "--quiet"]) == 0
    after = _results_changed()
    if after is None:
        pytest.skip("not a git checkout: the replay ran, unchanged files not checked")
    assert after == before == "", f"a replay changed recordings:\n{after}"


@pytest.mark.skipif(not _recorded("locvolcalib", "course-large", "float32"), reason="no locvolcalib recording")
def test_replay_that_aligns_a_recording_leaves_it_unchanged():
    """The recording predates parameters with defaults: the replay aligns a copy, not the file."""
    (source,) = _recorded("locvolcalib", "course-large", "float32")
    path = replay_file(results_root(), "locvolcalib", source)
    text = path.read_bytes()
    args = ["tune", "locvolcalib", "--size", "course-large", "--dtype", "float32", "--simulate", "--budget", "10"]
    assert main([*args, "--quiet"]) == 0
    assert path.read_bytes() == text
    assert not list(path.parent.glob("*.align.tmp"))


@pytest.mark.skipif(not _recorded("spmv", "uniform-2M-16"), reason="no spmv recording")
def test_partial_recording_says_how_much_it_covered(capsys):
    assert main(["tune", "spmv", "--simulate", "--budget", "10", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["simulated"]
    replayed = result["replayed"]
    held, space = (int(w) for w in replayed.split() if w.isdigit())
    assert replayed == f"replayed over {held} of the space's {space} configs the recording holds"
    assert 0 < held < space
    assert result["evaluated"] <= min(10, held)


@pytest.mark.skipif(not _recorded("spmv", "uniform-2M-16"), reason="no spmv recording")
def test_a_distributed_replay_searches_what_the_recording_holds(tmp_path, capsys):
    """Workers replaying a partial recording search its configs only: none fails for lack of a recording."""
    url = f"sqlite:///{tmp_path / 'campaigns.sqlite3'}"
    args = ["tune", "spmv", "--simulate", "--workers", "1", "--budget", "6", "--storage", url, "--json"]
    assert main([*args, "--campaign", "spmv-partial"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["best"] and not result["failures"], result
    assert not _results_changed()  # "" where clean, None where this is no checkout


@pytest.mark.skipif(not _recorded("reduction", "large"), reason="no reduction recording")
def test_complete_recording_says_all(capsys):
    assert main(["tune", "reduction", "--simulate", "--budget", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["replayed"].startswith("replayed over all of the space's ")


@pytest.mark.skipif(len(_recorded("floyd-warshall", "5k", "int32")) < 2, reason="one GPU's recording only")
def test_several_gpus_choose_as_best_does_and_say_which(capsys, monkeypatch):
    assert main(["tune", "floyd-warshall", "--size", "5k", "--simulate", "--budget", "5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (note,) = result["notes"]
    assert note.startswith(f"replaying the recording from {result['gpu']} (no GPU found here")
    assert result["gpu"] in (H100, H200)

    # this machine's GPU has a recording: that one, said so
    other = H200 if result["gpu"] == H100 else H100
    monkeypatch.setattr("tuner.campaign.local.local_device_name", lambda space: other)
    assert main(["tune", "floyd-warshall", "--size", "5k", "--simulate", "--budget", "5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["gpu"] == other
    assert result["notes"] == [f"replaying the recording from {other} (this machine's GPU; also recorded: "
                               f"{result['gpu'] == H100 and H200 or H100}; choose with --gpu)"]

    # --gpu still picks, with nothing to say; nor is this machine's GPU asked for (nvidia-smi: a second)
    def never(space):
        raise AssertionError("asked for this machine's GPU with no choice to make")

    monkeypatch.setattr("tuner.campaign.local.local_device_name", never)
    assert main(["tune", "floyd-warshall", "--size", "5k", "--simulate", "--gpu", "nvidia-h200", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["gpu"] == H200 and result["notes"] == []
    # one GPU recorded (reduction's named sizes: the H100's alone): nothing to choose, nothing asked
    assert main(["tune", "reduction", "--size", "seed", "--simulate", "--budget", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []


def test_human_output_says_coverage_and_choice(capsys):
    if len(_recorded("floyd-warshall", "5k", "int32")) < 2:
        pytest.skip("one GPU's recording only")
    assert main(["tune", "floyd-warshall", "--size", "5k", "--simulate", "--budget", "5"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "configs the recording holds (simulation, no GPU)" in out
    assert "replaying the recording from NVIDIA H" in out
