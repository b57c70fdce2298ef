"""Bad command-line input and damaged Kernel Tuner caches: one clear line (exit 2), never a traceback nor a
silent default (issue 22)."""

import json
import shutil
import sys

import pytest

from tests.recorded import recording
from tuner.cli import main
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.workloads import get_workload

H100 = "nvidia-h100-80gb-hbm3"


def fails(args, capsys, said):
    assert main(args) == 2, args
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "size, said",
    [("n=1000,n=2000", "sets n more than once"), ("", "empty size"), ("n=" + "9" * 30, "beyond 64 bits")],
)
def test_a_size_given_twice_empty_or_huge_is_an_error(size, said):
    space = get_workload("reduction").space
    with pytest.raises(TunerError, match=said):
        space.resolve_size(size)
    assert space.resolve_size(None)[0] == space.default_size  # only an absent size is the default


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--size", "n=1000,n=2000"], "more than once"),
        (["--size", ""], "empty size"),
        (["--timeout", "nan"], "--timeout nan"),
        (["--timeout", "inf"], "--timeout inf"),
        (["--timeout", "0"], "--timeout 0"),
        (["--timeout", "-3"], "--timeout -3"),
        (["--seed", "-1"], "--seed -1"),
        (["--seed", str(2**40)], "--seed"),
        (["--device", "-1"], "--device -1"),
        (["--workers", "2", "--devices", "0,0"], "each GPU once"),
        (["--workers", "2", "--devices", "0,-1"], "0 or more"),
        (["--workers", "2", "--devices", "0"], "give one per worker"),
        (["--workers", "-1"], "--workers -1"),
        (["--devices", "0,1"], "--devices is for --workers"),
    ],
)
def test_bad_tune_options_are_one_clear_line(results, capsys, extra, said):
    fails(["tune", "reduction", "--simulate", "--quiet", *extra], capsys, said)


def test_workers_0_only_creates_the_campaign(results, capsys):
    damaged(results, "floyd-warshall-small", "5k", "int32", "intact")
    url = f"sqlite:///{results / 'c.sqlite3'}"
    args = ["tune", "floyd-warshall-small", "--size", "5k", "--simulate", "--workers", "0"]
    assert main([*args, "--storage", url]) == 0
    out = capsys.readouterr().out
    assert "campaign created" in out and "no worker runs here" in out
    assert main([*args, "--storage", url, "--json", "--campaign", "other"]) == 0
    assert json.loads(capsys.readouterr().out)["created_only"] is True


def test_without_a_gpu_tune_says_what_is_missing_and_offers_a_replay(results, capsys, monkeypatch):
    from tuner.measure import machine

    monkeypatch.setattr(machine, "gpu_missing", lambda backend: "no CUDA GPU on this machine")
    err = fails(["tune", "reduction", "--size", "seed", "--quiet"], capsys, "no CUDA GPU on this machine")
    assert "--simulate" in err
    err = fails(["tune", "reduction", "--size", "seed", "--workers", "1", "--quiet"], capsys, "no CUDA GPU")


def test_a_missing_backend_package_names_its_extra(monkeypatch):
    from tuner.measure import machine

    monkeypatch.setattr(machine.importlib.util, "find_spec", lambda name: None)
    assert "pip install 'gpu-tuner[cuda]'" in machine.gpu_missing("nvcuda")
    assert "pip install 'gpu-tuner[cupy]'" in machine.gpu_missing("cupy")


def test_kernel_tuners_del_after_a_failed_set_up_is_not_shown(capsys):
    from tuner.measure.process import quiet_kernel_tuner_del

    class CudaFunctions:  # as Kernel Tuner's, whose __init__ failed before setting its attributes
        def __del__(self):
            self.green_ctx_cache.values()

    CudaFunctions.__del__.__module__ = "kernel_tuner.backends.nvcuda"
    hook, sys.unraisablehook = sys.unraisablehook, quiet_kernel_tuner_del
    try:
        CudaFunctions()  # collected at once: its __del__ raises, unraisably
    finally:
        sys.unraisablehook = hook
    assert "green_ctx_cache" not in capsys.readouterr().err


# ---- damaged Kernel Tuner caches ------------------------------------------------------------------------


def damaged(results, workload, size, dtype, how):
    src = recording(H100, workload, size, dtype)
    target = results / H100 / workload / f"{size}_{dtype}.cache.json"
    target.parent.mkdir(parents=True)
    text = src.read_text()
    if how == "truncated":
        target.write_text(text[: len(text) // 3])
    elif how == "garbage":
        target.write_bytes(b"\x00\xff garbage {{{")
    elif how == "times":
        doc = json.loads(text)
        next(iter(doc["cache"].values()))["times"] = ["abc"]
        target.write_text(json.dumps(doc))
    else:
        shutil.copy(src, target)
    return target


@pytest.mark.parametrize("how", ["truncated", "garbage", "times", "unreadable"])
@pytest.mark.parametrize("workload, size, dtype", [("floyd-warshall-small", "5k", "int32"), ("reduction", "seed", "float32")])
def test_a_damaged_cache_is_one_line_naming_it(results, capsys, monkeypatch, how, workload, size, dtype):
    """floyd-warshall-small has parameters with defaults (its cache is aligned), reduction has none."""
    target = damaged(results, workload, size, dtype, how)
    if how == "unreadable":  # chmod does not stop root: the read itself fails
        real = kt.util.correct_open_cache

        def refuse(path, open_cache=True):
            if str(path) == str(target):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, open_cache=open_cache)

        monkeypatch.setattr(kt.util, "correct_open_cache", refuse)
    err = fails(
        ["tune", workload, "--size", size, "--dtype", dtype, "--simulate", "--quiet", "--strategy", "random"],
        capsys,
        str(target),
    )
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("workload, size, dtype", [("floyd-warshall-small", "5k", "int32"), ("reduction", "seed", "float32")])
def test_a_cache_with_failures_as_kernel_tuner_writes_them_replays(results, capsys, workload, size, dtype):
    """Kernel Tuner 1.5 (and evaluate.record_failure_in_cache) write a failed config as an "__error__" with no
    time; a cache holding one once stopped every later campaign of its space, resumed or replayed."""
    target = damaged(results, workload, size, dtype, "intact")
    doc = json.loads(target.read_text())
    entry = next(iter(doc["cache"].values()))
    for k in ("time", "times"):
        entry.pop(k)
    entry["__error__"] = "RuntimeFailedConfig"
    target.write_text(json.dumps(doc))
    assert main(["tune", workload, "--size", size, "--dtype", dtype, "--simulate", "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"]
    entry.pop("__error__")  # neither a time nor a failure: still refused in one line
    target.write_text(json.dumps(doc))
    err = fails(["tune", workload, "--size", size, "--dtype", dtype, "--simulate", "--quiet"], capsys, "nor a Kernel Tuner failure")
    assert len(err.strip().splitlines()) == 1, err


def test_an_intact_cache_still_replays(results, capsys):
    damaged(results, "floyd-warshall-small", "5k", "int32", "intact")
    assert main(["tune", "floyd-warshall-small", "--size", "5k", "--simulate", "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"]


def test_results_must_name_a_folder_and_only_a_campaign_creates_it(tmp_path, capsys):
    """A mistyped --results must not answer from the recordings the package ships, nor a file stand for a store;
    a campaign's command may create the folder it is told to store into."""
    missing = tmp_path / "no-such-store"
    fails(["--results", str(missing), "best", "reduction"], capsys, "no such folder")
    fails(["--results", str(missing), "results", "reduction"], capsys, "no such folder")
    assert not missing.exists()
    a_file = tmp_path / "a-file"
    a_file.write_text("not a store")
    fails(["--results", str(a_file), "best", "reduction"], capsys, "not a folder")
    fails(["--results", str(a_file), "tune", "reduction", "--simulate"], capsys, "not a folder")


def test_folder_options_go_before_or_after_the_command(tmp_path, capsys):
    """--results and --workloads as the docs and the errors write them, after the command (and after a `tuner run`
    program's name), mean what they mean before it; one given after the command wins over one given before."""
    from tuner.cli import build_parser

    parse = build_parser().parse_args
    store, mine = tmp_path / "store", tmp_path / "workloads"
    for argv in (["--results", str(store), "best", "reduction"], ["best", "reduction", "--results", str(store)],
                 ["--results", "elsewhere", "best", "reduction", "--results", str(store)],
                 ["run", "floyd-warshall", "g.bin", "d.bin", "--results", str(store)]):
        assert parse(argv).results == store, argv
    assert parse(["list", "--workloads", str(mine)]).workloads_dir == mine
    assert parse(["list"]).results is None and parse(["list"]).workloads_dir is None
    fails(["best", "reduction", "--results", str(tmp_path / "no-such-store")], capsys, "no such folder")
    fails(["list", "--workloads", str(tmp_path / "no-such-folder")], capsys, "no such folder")


def test_a_warning_is_one_line_not_pythons_source_lines(tmp_path, capsys):
    """A damaged part in the store: `tuner results` says so in one `warning:` line (no file, line number or
    source line of the code that warned) and answers from the rest."""
    root = tmp_path / "results"
    folder = root / H100 / "reduction" / "evaluations"
    folder.mkdir(parents=True)
    (folder / "empty.parquet").write_bytes(b"")
    main(["--results", str(root), "results", "reduction", "--size", "large"])
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "empty.parquet" in line]
    assert said and all(line.startswith("warning: ") for line in said), err
    assert "UserWarning" not in err and ".py:" not in err, err


@pytest.mark.parametrize(
    "argv, resumes",
    [(["tune", "reduction"], True), (["tune", "reduction", "--simulate"], False), (["best", "reduction"], False),
     (["tune", "reduction", "--simulate", "--storage", "sqlite:///r.db"], True),  # its study is kept
     (["worker", "c"], True), (["worker", "c", "--launch", "{}"], False)],  # a worker `tune --workers` started
)
def test_an_interrupt_says_resume_only_where_measurements_were_stored(monkeypatch, capsys, argv, resumes):
    from tuner.cli import best, tune, worker

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(tune, "command", interrupted)
    monkeypatch.setattr(best, "command", interrupted)
    monkeypatch.setattr(worker, "command", interrupted)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted") and ("run the same command again" in err) == resumes, err


def test_a_hand_started_worker_of_a_replay_says_it_goes_on_not_that_measurements_are_stored(monkeypatch, capsys):
    from tuner.cli import worker
    from tuner.errors import ReplayInterrupted

    def interrupted(args):
        raise ReplayInterrupted  # as run_worker raises it for a simulated campaign

    monkeypatch.setattr(worker, "command", interrupted)
    assert main(["worker", "c"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted; run the same command again to go on with the replay"


def test_an_editable_install_reads_the_checkouts_recordings_in_another_project(tmp_path, capsys, monkeypatch):
    """Run in a project of its own, an editable install reads the recordings committed with the checkout, as a
    wheel reads those it carries; inside the checkout, --results elsewhere reads that folder alone."""
    from tuner import locations

    root = tmp_path / "results"
    root.mkdir()
    if not locations.INSTALLED:  # a wheel reads what it carries from any folder
        fails(["--results", str(root), "tune", "reduction", "--simulate"], capsys, "nothing recorded to replay")
    monkeypatch.chdir(tmp_path)  # another project: its ./results, and the checkout's (or the wheel's) recordings
    assert main(["tune", "reduction", "--size", "seed", "--simulate", "--budget", "3", "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["simulated"]
    assert locations.BUILTIN_RESULTS.is_dir() and not list(root.iterdir())  # a replay stores nothing
