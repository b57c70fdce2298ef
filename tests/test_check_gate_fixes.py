"""The regression gate's audit fixes: a gate checks the project's own baselines (the shipped ones only for a
`tuner check --simulate --demo`), a named workload without a baseline is refused by the replay too,
--threshold is a fraction, a damaged baseline part is said in every report and error, the replay reproduces a
stale baseline, a check that cannot run still writes its reports, and a baseline whose config is no longer the
stored best says so."""

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

import tuner.answers.check
from tuner import locations
from tuner.answers.baseline import load_check_baselines, read_baselines
from tuner.answers.best_config import best
from tuner.answers.check import run_check
from tuner.answers.check_replay import simulate_check
from tuner.cli import main
from tuner.errors import TunerError
from tuner.workloads import get_workload, registry

H100 = "NVIDIA H100 80GB HBM3"
H100_DIR = "nvidia-h100-80gb-hbm3"
SHIPPED = locations.BUILTIN_RESULTS / H100_DIR
H100_INFO = {"gpu": H100, "driver": "580.159.04", "cuda": "13.3"}
needs_baselines = pytest.mark.skipif(
    not all((SHIPPED / w / "check" / "baseline.parquet").is_file() for w in ("reduction", "gemm")),
    reason="no reduction and gemm baselines committed",
)


def _baselines(root: Path, *workloads: str, whole: bool = False) -> Path:
    """A store holding the committed H100 baselines of `workloads` (with `whole`, their campaigns too)."""
    for w in workloads:
        source = SHIPPED / w if whole else SHIPPED / w / "check"
        shutil.copytree(source, root / H100_DIR / w if whole else root / H100_DIR / w / "check")
    return root


def _part(root: Path, workload: str) -> Path:
    return root / H100_DIR / workload / "check" / "baseline.parquet"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())  # rich wraps long lines


def _no_gpu_work(monkeypatch) -> None:
    monkeypatch.setattr(tuner.answers.check, "measuring_process", lambda *a, **kw: pytest.fail("nothing measured"))


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An installed package (its shipped recordings: a copy of the committed H100 reduction and gemm baselines)
    run in an empty project folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TUNER_WORKLOADS", raising=False)
    monkeypatch.delenv("TUNER_RESULTS", raising=False)
    shipped = _baselines(tmp_path / "shipped", "reduction", "gemm")
    monkeypatch.setattr(locations, "INSTALLED", True)
    monkeypatch.setattr(locations, "BUILTIN_RESULTS", shipped)
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()
    (tmp_path / "results").mkdir()
    yield tmp_path / "results"
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()


# ---- 1. the project's own baselines --------------------------------------------------------------------------
@needs_baselines
def test_a_gate_checks_the_projects_own_baselines_not_the_shipped_ones(project, monkeypatch, capsys):
    _baselines(project, "reduction")
    assert set(load_check_baselines(project)["workload"]) == {"reduction"}
    assert set(load_check_baselines(project, shipped=True)["workload"]) == {"reduction", "gemm"}  # what a query reads
    code, out, err = _run(capsys, "check", "--simulate", "--json")
    doc = json.loads(out)
    assert code == 0 and {c["workload"] for c in doc["checks"]} == {"reduction"} and len(doc["checks"]) == 8
    assert "shipped" not in err
    # on a GPU too: gemm, shipped but not the project's, is not measured, and named it has no baseline here
    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: H100_INFO)
    _no_gpu_work(monkeypatch)
    code, _, err = _run(capsys, "check", "gemm")
    assert code == 2 and f"no baseline of gemm for {H100}" in err


@needs_baselines
def test_a_simulated_check_in_a_project_without_baselines_replays_the_shipped_ones_only_as_a_demo(
    project, monkeypatch, capsys
):
    """The README's demo from a wheel: `tuner check --simulate --demo --plant-slowdown 0.1` in a fresh project.
    Without --demo a project with no baselines of its own cannot pass (it once replayed the shipped ones, exit 0)."""
    code, out, err = _run(capsys, "check", "--simulate", "--json")
    doc = json.loads(out)
    assert code == 2 and doc["exit_code"] == 2 and doc["checks"] == [] and doc["baselines"] == "project"
    assert "no baseline stored to replay in this project's store" in doc["error"] and "--simulate --demo" in err
    code, out, err = _run(capsys, "check", "--simulate", "--demo", "--plant-slowdown", "0.1", "--json")
    doc = json.loads(out)
    checks = doc["checks"]
    assert code == 1 and doc["baselines"] == "shipped" and {c["workload"] for c in checks} == {"reduction", "gemm"}
    assert len(checks) == 9 and {c["verdict"] for c in checks} == {"regression"}
    assert "a demo: the 9 baseline(s) replayed are those shipped with the built-in workloads" in err
    assert any("not this project's" in n for n in doc["notes"])
    assert all("a baseline shipped with the built-in workloads (--demo)" in c["reason"] for c in checks)
    assert read_baselines(project).frame.empty and read_baselines(project, demo=True).shipped
    # a gate on a GPU never checks them, and --demo is for --simulate alone
    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: H100_INFO)
    _no_gpu_work(monkeypatch)
    code, _, err = _run(capsys, "check")
    assert code == 2 and "no baseline stored: record one with `tuner baseline" in err
    code, _, err = _run(capsys, "check", "--demo")
    assert code == 2 and "--demo is for --simulate" in err
    # a demo of named workloads announces theirs, not all of those shipped (and none for one without)
    code, _, err = _run(capsys, "check", "gemm", "--simulate", "--demo", "--json")  # the log on stderr
    assert code == 0 and "the 1 baseline(s) replayed are those shipped" in err
    code, _, err = _run(capsys, "check", "floyd-warshall-small", "--simulate", "--demo", "--json")
    assert code == 2 and "replayed are" not in err and "no baseline of floyd-warshall-small is shipped" in err
    # the project's own once it has one; the demo still the shipped ones
    _baselines(project, "gemm")
    code, out, err = _run(capsys, "check", "--simulate", "--json")
    doc = json.loads(out)
    assert code == 0 and {c["workload"] for c in doc["checks"]} == {"gemm"} and doc["baselines"] == "project"
    assert "shipped" not in err
    code, out, _ = _run(capsys, "check", "--simulate", "--demo", "--json")
    assert len(json.loads(out)["checks"]) == 9 and json.loads(out)["baselines"] == "shipped"


# ---- 2. a named workload without a baseline --------------------------------------------------------------------
@needs_baselines
def test_a_simulated_check_refuses_a_named_workload_without_a_baseline(tmp_path, capsys):
    root = _baselines(tmp_path, "reduction")
    code, out, err = _run(
        capsys, "--results", str(root), "check", "reduction", "floyd-warshall-small", "--simulate", "--json"
    )
    checks = json.loads(out)["checks"]
    assert code == 2 and len(checks) == 9 and json.loads(out)["exit_code"] == 2
    (refused,) = [c for c in checks if c["workload"] == "floyd-warshall-small"]
    assert refused["verdict"] == "refused" and "no baseline stored to replay" in refused["reason"]
    assert "floyd-warshall-small: refused (no baseline stored to replay" in err
    code, _, err = _run(capsys, "--results", str(root), "check", "floyd-warshall-small", "--simulate")
    assert code == 2 and "no baseline of floyd-warshall-small stored to replay" in err
    assert "`tuner baseline floyd-warshall-small` on a GPU" in err


# ---- 3. --threshold ------------------------------------------------------------------------------------------
@needs_baselines
@pytest.mark.parametrize("value", ["5", "-1", "0", "1", "nan"])
def test_a_threshold_outside_0_to_1_is_refused_in_one_line(tmp_path, capsys, value):
    root = _baselines(tmp_path, "gemm")
    code, out, err = _run(
        capsys, "--results", str(root), "check", "gemm", "--simulate", "--threshold", value, "--plant-slowdown", "1.0"
    )
    assert code == 2 and out == "" and err.startswith(f"error: --threshold {value}: give a fraction such as 0.03")
    with pytest.raises(TunerError, match="give a fraction such as 0.03"):
        simulate_check(threshold=float(value), root=root, log=lambda _: None)
    with pytest.raises(TunerError, match="give a fraction such as 0.03"):  # before any GPU is looked for
        run_check(threshold=float(value), root=root, log=lambda _: None)


@needs_baselines
def test_a_valid_threshold_still_catches_the_planted_slowdown_and_the_help_says_what_it_is(tmp_path, capsys):
    root = _baselines(tmp_path, "gemm")
    code, _, _ = _run(
        capsys, "--results", str(root), "check", "gemm", "--simulate", "--threshold", "0.05", "--plant-slowdown", "1.0"
    )
    assert code == 1
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "5% slowdown is caught" not in said and "a fraction above 0 and below 1" in said
    assert "(default 0.03: 3%)" in said


# ---- 4. and 5. a damaged baseline part ---------------------------------------------------------------------------
@needs_baselines
def test_a_damaged_baseline_part_is_in_every_report_and_the_jsons_exit_code_is_the_processs(tmp_path, capsys):
    root = _baselines(tmp_path / "results", "reduction", "gemm")
    _truncate(_part(root, "reduction"))
    xml, md = tmp_path / "x.xml", tmp_path / "x.md"
    code, out, err = _run(
        capsys, "--results", str(root), "check", "--simulate", "--json", "--junit", str(xml), "--markdown", str(md)
    )
    doc = json.loads(out)
    damaged = str(_part(root, "reduction"))
    assert code == 3 and doc["exit_code"] == 3 and len(doc["checks"]) == 1  # gemm alone
    assert [p["path"] for p in doc["degraded"]["parts"]] == [damaged]
    assert "degraded store: 1 part(s) left out" in err
    suite = ET.parse(xml).getroot()
    assert suite.get("tests") == "2" and suite.get("errors") == "1" and suite.get("failures") == "0"
    (case,) = [c for c in suite.iter("testcase") if c.find("error") is not None]
    assert case.get("name") == damaged and "not a readable Parquet file" in case.find("error").text
    text = md.read_text()
    assert "**degraded**" in text and damaged in text and "kernels not checked" in text
    # allowed: exit 0, said all the same (the JUnit case skipped, not an error)
    code, out, _ = _run(
        capsys,
        "--results",
        str(root),
        "check",
        "--simulate",
        "--json",
        "--junit",
        str(xml),
        "--markdown",
        str(md),
        "--allow-degraded",
    )
    assert code == 0 and json.loads(out)["exit_code"] == 0 and json.loads(out)["degraded"]["parts"]
    suite = ET.parse(xml).getroot()
    assert suite.get("errors") == "0" and suite.get("skipped") == "1" and damaged in md.read_text()
    # a regression is the verdict still (exit 1), the damage said beside it
    code, out, _ = _run(capsys, "--results", str(root), "check", "--simulate", "--json", "--plant-slowdown", "0.2")
    assert code == 1 and json.loads(out)["exit_code"] == 1 and json.loads(out)["degraded"]["parts"]


@needs_baselines
def test_an_error_caused_by_a_damaged_part_names_it(tmp_path, monkeypatch, capsys):
    root = _baselines(tmp_path / "results", "reduction", "gemm")
    _truncate(_part(root, "reduction"))
    damaged = str(_part(root, "reduction"))
    code, _, err = _run(capsys, "--results", str(root), "check", "reduction", "--simulate")
    assert code == 2 and "no baseline stored" not in err
    assert f"no baseline could be read to replay: the baseline part {damaged} (not a readable Parquet file" in err
    assert "record it again with `tuner baseline reduction`" in err and "degraded store: 1 part(s) left out" in err
    # named beside a workload that has one: refused, saying why
    code, out, _ = _run(capsys, "--results", str(root), "check", "reduction", "gemm", "--simulate", "--json")
    (refused,) = [c for c in json.loads(out)["checks"] if c["workload"] == "reduction"]
    assert code == 2 and refused["verdict"] == "refused" and f"the baseline part {damaged}" in refused["reason"]
    # the same on a GPU
    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: H100_INFO)
    _no_gpu_work(monkeypatch)
    code, _, err = _run(capsys, "--results", str(root), "check", "reduction")
    assert code == 2 and f"no baseline of reduction for {H100}: the baseline part {damaged}" in err
    _truncate(_part(root, "gemm"))
    code, _, err = _run(capsys, "--results", str(root), "check")
    assert code == 2 and "no baseline could be read: the baseline parts" in err and "record them again" in err


@needs_baselines
def test_a_baseline_part_missing_a_column_is_left_out_as_damaged_not_a_traceback(tmp_path, capsys):
    """A baseline part read against its schema (tuner.store.schema.CHECK_BASELINE): before, one without `rounds`
    gave a TypeError traceback and "a bug to report"."""
    root = _baselines(tmp_path / "results", "reduction", "gemm")
    part = _part(root, "reduction")
    pd.read_parquet(part).drop(columns="rounds").to_parquet(part, index=False)
    code, out, err = _run(capsys, "--results", str(root), "check", "reduction", "--simulate")
    assert code == 2 and "Traceback" not in err and "bug" not in err
    assert f"no baseline could be read to replay: the baseline part {part} (missing column(s) rounds)" in err
    assert "degraded store: 1 part(s) left out" in err
    code, out, err = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["exit_code"] == 3 and {c["workload"] for c in doc["checks"]} == {"gemm"}
    assert doc["degraded"]["parts"] == [{"path": str(part), "reason": "missing column(s) rounds"}]
    # a row whose rounds are not numbers: that row is left out and counted, the others checked
    _baselines(tmp_path / "again", "reduction")
    rows = pd.read_parquet(_part(tmp_path / "again", "reduction"))
    rows.at[0, "rounds"] = []
    rows.to_parquet(part, index=False)
    code, out, err = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    doc = json.loads(out)
    assert code == 3 and len(doc["checks"]) == len(rows) - 1 + 1 and "Traceback" not in err
    why = f"rounds not a list of positive finite times ({rows.at[0, 'workload']} {rows.at[0, 'size']} {rows.at[0, 'dtype']})"
    assert doc["degraded"]["rows"] == [{"path": str(part), "reason": why, "count": 1}]
    assert f"degraded store: 1 row(s) left out (1 of {part})" in err  # the file to look at
    with pytest.warns(UserWarning, match="rows left out: 1 with rounds not a list of positive finite times"):
        assert len(read_baselines(root).frame) == len(rows) - 1 + 1  # outside a check: a warning


# ---- 6. a stale baseline, replayed ------------------------------------------------------------------------------
@needs_baselines
def test_a_replay_reproduces_a_stale_baseline(tmp_path, capsys):
    root = _baselines(tmp_path, "reduction", "gemm")
    path = _part(root, "reduction")
    stored = pd.read_parquet(path)
    stored["timing"] = None  # as baselines taken before kernels' start events waited for their launch
    stored.to_parquet(path, index=False)
    path = _part(root, "gemm")
    stored = pd.read_parquet(path)
    stored["config"] = [json.dumps({k: v for k, v in json.loads(c).items() if k != "tile_k"}) for c in stored["config"]]
    stored.to_parquet(path, index=False)
    assert "tile_k" in get_workload("gemm").space.params and "tile_k" not in get_workload("gemm").space.defaults
    code, out, _ = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    checks = json.loads(out)["checks"]
    assert code == 2 and {c["verdict"] for c in checks} == {"stale"}
    reduction = [c for c in checks if c["workload"] == "reduction"]
    assert len(reduction) == 8 and all(
        "timed plain, kernels are timed delayed-start now" in c["reason"] and "tuner baseline reduction" in c["reason"]
        for c in reduction
    )
    (gemm,) = [c for c in checks if c["workload"] == "gemm"]
    assert "its config lacks tile_k, parameters the space gained since" in gemm["reason"]
    # stale whatever is planted: nothing of today's to replay
    code, out, _ = _run(capsys, "--results", str(root), "check", "--simulate", "--json", "--plant-slowdown", "0.2")
    assert code == 2 and {c["verdict"] for c in json.loads(out)["checks"]} == {"stale"}


# ---- 7. reports of a check that could not run ------------------------------------------------------------------
def _error_reports(tmp_path: Path) -> tuple[ET.Element, str]:
    suite = ET.parse(tmp_path / "perf.xml").getroot()
    assert suite.get("tests") == "1" and suite.get("errors") == "1"
    return suite, (tmp_path / "perf.md").read_text()


@needs_baselines
def test_a_check_that_cannot_run_still_writes_both_reports_with_its_error(tmp_path, monkeypatch, capsys):
    root = _baselines(tmp_path / "results", "reduction")
    reports = ["--junit", str(tmp_path / "perf.xml"), "--markdown", str(tmp_path / "perf.md")]
    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: {"gpu": "unknown"})
    code, _, err = _run(capsys, "--results", str(root), "check", *reports)
    assert code == 2 and "no CUDA GPU found" in err
    suite, md = _error_reports(tmp_path)
    assert "no CUDA GPU found" in suite.find("testcase/error").text and "no CUDA GPU found" in md
    assert md.startswith("**error**: the check could not run (exit 2)")
    code, out, _ = _run(capsys, "--results", str(root), "check", "--json")  # stdout: a document all the same
    assert code == 2 and json.loads(out) == {
        "exit_code": 2,
        "baselines": "project",
        "checks": [],
        "notes": [],
        "error": json.loads(out)["error"],
    }
    assert "no CUDA GPU found" in json.loads(out)["error"]
    for argv, said in (
        (["--simulate", "--plant", "nope=1"], "reduction has no parameter nope"),
        (["gemm", "--simulate"], "no baseline of gemm stored to replay"),
        (["--simulate", "--threshold", "5"], "--threshold 5: give a fraction"),
    ):
        for report in ("perf.xml", "perf.md"):
            (tmp_path / report).unlink()
        assert main(["--results", str(root), "check", *argv, *reports]) == 2
        suite, md = _error_reports(tmp_path)
        assert said in suite.find("testcase/error").text and said in md
    # a bug in the check: exit 2 (not 1, "regression"), and the reports say it could not run
    monkeypatch.setattr(tuner.answers.check, "run_check", lambda *a, **kw: (_ for _ in ()).throw(RuntimeError("a bug")))
    assert main(["--results", str(root), "check", *reports]) == 2
    suite, md = _error_reports(tmp_path)
    assert "RuntimeError: a bug" in md and "RuntimeError: a bug" in suite.find("testcase/error").text
    # a report whose folder is missing: the other one is written all the same
    (tmp_path / "perf.xml").unlink()
    assert (
        main(
            [
                "--results",
                str(root),
                "check",
                "--simulate",
                "--junit",
                str(tmp_path / "perf.xml"),
                "--markdown",
                str(tmp_path / "no" / "perf.md"),
            ]
        )
        == 2
    )
    assert "cannot write" in ET.parse(tmp_path / "perf.xml").getroot().find("testcase/error").text


# ---- 8. a baseline whose config is no longer the stored best ---------------------------------------------------
@needs_baselines
def test_a_baseline_no_longer_the_stored_best_says_so_reading_the_evaluations_once(tmp_path, monkeypatch, capsys):
    from tuner import store

    root = _baselines(tmp_path, "reduction", whole=True)
    path = _part(root, "reduction")
    stored = pd.read_parquet(path)
    seed = (stored["size"] == "seed") & (stored["dtype"] == "float32")
    answer = best("reduction", "seed", "float32", gpu=H100, root=root)
    assert answer["fallback"] == "exact"
    other = {
        **answer["config"],
        "finish": 1 - answer["config"]["finish"],
    }  # measured in the campaigns (finish=0 plants)
    stored.loc[seed, "config"] = json.dumps(other, sort_keys=True)
    stored.to_parquet(path, index=False)
    reads = []
    real = store.read_store
    monkeypatch.setattr(store, "read_store", lambda pattern, *a, **kw: reads.append(pattern) or real(pattern, *a, **kw))
    code, out, _ = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    checks = json.loads(out)["checks"]
    assert code in (0, 1) and len(checks) == 8
    assert [p for p in reads if "evaluations" in p] == ["*/reduction/evaluations/*.parquet"]  # one read
    for c in checks:
        want = best("reduction", c["size"], c["dtype"], gpu=H100, root=root)["config"]
        own = get_workload("reduction").space.complete(c["config"])
        if own == want:
            assert c["stored_best"] is None and "no longer the stored best" not in c["reason"]
        else:
            assert c["stored_best"] == want and "no longer the stored best on NVIDIA H100 80GB HBM3" in c["reason"]
            assert f"refresh with `tuner baseline reduction --size {c['size']} --dtype {c['dtype']}`" in c["reason"]
    (mine,) = [c for c in checks if c["size"] == "seed" and c["dtype"] == "float32"]
    assert mine["stored_best"] == answer["config"]
    assert (
        f"`tuner best` answers finish={answer['config']['finish']} (the baseline has finish={other['finish']})"
        in mine["reason"]
    )
    # with a plant, the planted times come from the same one read
    reads.clear()
    code, out, _ = _run(capsys, "--results", str(root), "check", "--simulate", "--json", "--plant", "finish=0")
    assert [p for p in reads if "evaluations" in p] == ["*/reduction/evaluations/*.parquet"]
    assert code in (1, 2) and all("planted finish=0" in c["reason"] for c in json.loads(out)["checks"])
