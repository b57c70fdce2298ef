"""The regression gate's second audit: a project with no baselines of its own never passes (the shipped ones are a
`--demo`, said in the JSON), degenerate or malformed baseline rows are damaged rows (left out, named, exit 3), never
a NaN pass or a traceback, a baseline of a workload nothing defines is stale while the rest is checked, baselines of
other GPUs are said, an interrupted or damaged refresh loses nothing, a re-tune says whether it recovers, the
replay's refusals say why, options that do nothing under --simulate are refused, and the reports name what they
check. The GPU path runs with a stand-in measuring process that plays each baseline's last session."""

import json
import math
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tuner.answers.baseline
import tuner.answers.check
from tests import test_check_gate_fixes as gate_fixes
from tests.recorded import is_recorded
from tests.test_check_gate_fixes import H100, H100_DIR, H100_INFO, SHIPPED, _baselines, _part, _run
from tuner.answers.check import check_one
from tuner.answers.check_result import CheckResult
from tuner.answers.check_retune import recovery
from tuner.answers.check_replay import held_out
from tuner.answers.check_report import as_json, junit, markdown
from tuner.cli import main
from tuner.stats import compare, verdict
from tuner.workloads import get_workload

ROOT = Path(__file__).resolve().parents[1]
needs_baselines = pytest.mark.skipif(
    not all((SHIPPED / w / "check" / "baseline.parquet").is_file() for w in ("reduction", "gemm")),
    reason="no reduction and gemm baselines committed",
)
pytestmark = needs_baselines
project = gate_fixes.project  # the fixture: an installed package (its shipped baselines) in an empty project
TARGET = ("64M", "int32")  # the row each test damages: the other seven reduction kernels are checked


def strict(text: str) -> dict:
    """JSON as JSON.parse reads it: NaN and Infinity are not JSON."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))


def _edit(root: Path, workload: str, **values) -> pd.DataFrame:
    """The baseline part of `workload` with the TARGET row's columns set to `values`; its rows."""
    path = _part(root, workload)
    rows = pd.read_parquet(path)
    at = rows.index[(rows["size"] == TARGET[0]) & (rows["dtype"] == TARGET[1])][0]
    for column, value in values.items():
        if column not in rows or rows[column].dtype != object:
            rows[column] = rows[column].astype(object)
        rows.at[at, column] = value
    rows.to_parquet(path, index=False)
    return rows


class StandIn:
    """A measuring process that measures nothing: each kernel's fresh rounds are its baseline's last session
    (times scaled by `slow`), on the H100 the baselines were taken on."""

    def __init__(self, root: Path, slow: float = 1.0) -> None:
        bases = pd.concat([pd.read_parquet(p) for p in root.glob(f"{H100_DIR}/*/check/baseline.parquet")])
        self.sessions = {(b["workload"], b["size_vars"], b["dtype"]): held_out(b)[1] for b in bases.to_dict("records")}
        self.slow, self.asked = slow, []

    def __call__(self, workload, size, dtype, backend, device, timeout):
        now = self.sessions[(workload, json.dumps(size, sort_keys=True), dtype)]
        slow, asked = self.slow, self.asked

        class Runner:
            lifecycle_s: dict = {}
            setup = {"setup_s": 0.0}

            def measure_rounds(self, values, params, rounds):
                asked.append(rounds)
                return {**now, "rounds": [x * slow for x in now["rounds"]], "measure_s": 0.0}

            def shutdown(self):
                pass

        return Runner(), {**H100_INFO, "timing": "delayed-start"}


def _on_the_h100(monkeypatch, root: Path, slow: float = 1.0) -> StandIn:
    stand_in = StandIn(root, slow)
    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: H100_INFO)
    monkeypatch.setattr(tuner.answers.check, "measuring_process", stand_in)
    return stand_in


# ---- 1. a project without baselines of its own ---------------------------------------------------------------
def test_a_project_without_baselines_of_its_own_never_passes_and_the_demo_is_asked_for(project, capsys):
    """Before: exit 0, having replayed the 14 shipped baselines, with no field saying whose they were."""
    code, out, err = _run(capsys, "check", "--simulate", "--json")
    doc = strict(out)
    assert code == 2 and doc["exit_code"] == 2 and doc["baselines"] == "project" and doc["checks"] == []
    assert "`tuner check --simulate --demo`" in err
    # a kernel named, a config planted: the same line, not a traceback (the empty store has no columns to select by)
    code, out, err = _run(capsys, "check", "reduction", "--simulate", "--plant", "finish=0", "--json")
    assert code == 2 and strict(out)["checks"] == [] and "`tuner check --simulate --demo`" in err
    assert "Traceback" not in err and "could not run" not in err
    shipped = project.parent / "shipped"
    shutil.copytree(SHIPPED / "reduction" / "evaluations", shipped / H100_DIR / "reduction" / "evaluations")
    files = sorted((p, p.stat().st_mtime_ns) for p in shipped.rglob("*") if p.is_file())
    code, out, err = _run(capsys, "check", "--simulate", "--demo", "--json", "--plant-slowdown", "0.1")
    doc = strict(out)
    assert code == 1 and doc["baselines"] == "shipped" and len(doc["checks"]) == 9
    assert "not this project's" in doc["notes"][0]
    # a demo's re-tune replays the shipped recordings, and writes nothing there
    code, out, _ = _run(
        capsys, "check", "reduction", "--simulate", "--demo", "--json", "--plant-slowdown", "0.1", "--retune", "2"
    )
    assert code == 1 and any(c["retuned"] for c in strict(out)["checks"])
    assert sorted((p, p.stat().st_mtime_ns) for p in shipped.rglob("*") if p.is_file()) == files


def test_the_tour_asks_for_the_demo_and_the_ci_example_installs_the_package():
    tour = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("tuner check")]
    assert [line for line in tour if "--simulate" in line]
    assert all("--demo" in line for line in tour if "--simulate" in line)  # the tour runs in a fresh folder too
    page = (ROOT / "docs" / "regression-check.md").read_text()
    assert "pip install -e '.[cuda,cupy]'" not in page and "pip install 'gpu-tuner[cuda,cupy]'" in page
    assert "--demo" in page


# ---- 2. degenerate numbers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0.0, -0.05])
def test_rounds_of_zero_or_below_are_a_damaged_row_not_a_nan_pass(tmp_path, capsys, value):
    """Before: "verdict": "pass", "change": NaN, exit 0; the JSON held a bare NaN."""
    root = _baselines(tmp_path, "reduction")
    rows = _edit(root, "reduction", rounds=[value] * 60)
    code, out, err = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    doc = strict(out)
    assert code == 3 and doc["exit_code"] == 3 and len(doc["checks"]) == len(rows) - 1
    assert (TARGET[0], TARGET[1]) not in {(c["size"], c["dtype"]) for c in doc["checks"]}
    why = "rounds not a list of positive finite times (reduction 64M int32)"
    assert doc["degraded"]["rows"] == [{"path": str(_part(root, "reduction")), "reason": why, "count": 1}]
    assert f"not checked: {_part(root, 'reduction')}: rows left out: 1 with {why}" in err


def test_a_comparison_without_finite_numbers_fails_closed_and_json_is_strict():
    assert verdict(math.nan, math.nan, math.nan, 0.03) == "invalid"
    assert verdict(0.0, -0.01, 0.01, math.nan) == "invalid"
    assert compare([0.0] * 5, [0.0] * 5).verdict == "invalid"
    assert compare([1.0] * 5, [1.0] * 5).verdict == "pass"
    base = {
        "workload": "reduction",
        "size": "seed",
        "dtype": "float32",
        "config": "{}",
        "rounds": [1.0] * 12,
        "sessions": 2,
        "references": "{}",
        **H100_INFO,
    }
    for rounds in ([0.0] * 5, [1.0, math.nan, 1.0], [-1.0] * 4):
        res = check_one(base, H100_INFO, {"status": "ok", "rounds": rounds})
        assert res.verdict == "invalid" and res.exit_code == 2 and "not all positive finite" in res.reason
    nan = CheckResult("reduction", "seed", "float32", {}, "invalid", raw={"change": math.nan, "ci": [math.nan, 1.0]})
    doc = strict(as_json([nan]))
    assert doc["checks"][0]["raw"] == {"change": None, "ci": [None, 1.0]} and doc["exit_code"] == 2
    assert "n/a" in markdown([nan]) and "nan" not in markdown([nan])


# ---- 3. malformed text columns ----------------------------------------------------------------------------------
MALFORMED = [
    ("config", '{"block_size_x": 128', "config not a JSON object"),
    ("config", "[1,2]", "config not a JSON object"),
    ("references", '{"copy": [1,2', "references not a JSON object"),
    ("references", '{"copy": [1, 2]}', "references copy holds 2 times for 60 rounds"),
    ("references", '{"copy": "fast"}', "references copy not a list of positive finite times"),
    ("size_vars", "nope", "size_vars not a JSON object"),
    ("sessions", 0, "sessions 0, not a whole number of 1 or more"),
    ("sessions", 2.5, "sessions 2.5, not a whole number of 1 or more"),
    ("gpu", None, "gpu missing"),
]


@pytest.mark.parametrize("column, value, why", MALFORMED, ids=[f"{c}={v}" for c, v, _ in MALFORMED])
def test_a_malformed_text_column_is_a_damaged_row_named_and_the_rest_checked(tmp_path, capsys, column, value, why):
    """Before: a JSONDecodeError or TypeError traceback, "a bug to report", exit 2, nothing checked."""
    root = _baselines(tmp_path, "reduction")
    rows = _edit(root, "reduction", **{column: value})
    code, out, err = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    doc = strict(out)
    assert code == 3 and "Traceback" not in err and "bug" not in err
    assert len(doc["checks"]) == len(rows) - 1 and {c["verdict"] for c in doc["checks"]} == {"pass"}
    said = f"{why} (reduction 64M int32)"
    assert doc["degraded"]["rows"] == [{"path": str(_part(root, "reduction")), "reason": said, "count": 1}]
    assert f"not checked: {_part(root, 'reduction')}: rows left out: 1 with {said}" in err


def test_a_malformed_row_on_the_gpu_is_left_out_too(tmp_path, monkeypatch, capsys):
    root = _baselines(tmp_path, "reduction")
    stand_in = _on_the_h100(monkeypatch, root)
    _edit(root, "reduction", config='{"block_size_x": 128')
    code, out, err = _run(capsys, "--results", str(root), "check", "--json")
    doc = strict(out)
    assert code == 3 and len(doc["checks"]) == 7 and "Traceback" not in err
    assert stand_in.asked == [20] * 7  # --rounds' default, as before


# ---- 4. a workload that no longer exists ----------------------------------------------------------------------
def _nosuch(root: Path) -> Path:
    row = pd.read_parquet(SHIPPED / "gemm" / "check" / "baseline.parquet").assign(workload="nosuch")
    path = root / H100_DIR / "nosuch" / "check" / "baseline.parquet"
    path.parent.mkdir(parents=True)
    row.to_parquet(path, index=False)
    return path


def test_a_baseline_of_a_workload_nothing_defines_is_stale_and_the_rest_checked(tmp_path, monkeypatch, capsys):
    """Before: `error: unknown workload 'nosuch'`, exit 2, the file not named, nothing checked."""
    root = _baselines(tmp_path, "reduction")
    path = _nosuch(root)
    code, out, err = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    checks = strict(out)["checks"]
    assert code == 2 and len(checks) == 9
    (stale,) = [c for c in checks if c["workload"] == "nosuch"]
    assert stale["verdict"] == "stale" and f"the baseline part {path} is of workload 'nosuch'" in stale["reason"]
    assert "which nothing defines now (unknown workload 'nosuch'" in stale["reason"]
    assert {c["verdict"] for c in checks if c["workload"] == "reduction"} == {"pass"}
    # on a GPU: the others measured, that one not
    stand_in = _on_the_h100(monkeypatch, root)
    code, out, _ = _run(capsys, "--results", str(root), "check", "--json")
    checks = strict(out)["checks"]
    assert code == 2 and len(checks) == 9 and len(stand_in.asked) == 8
    assert [c["verdict"] for c in checks if c["workload"] == "nosuch"] == ["stale"]


# ---- 5. baselines of other GPUs -------------------------------------------------------------------------------
def test_baselines_of_other_gpus_are_said_in_the_log_and_every_report(tmp_path, monkeypatch, capsys):
    """Before: dropped with no word."""
    root = _baselines(tmp_path / "results", "reduction", "gemm")
    a100 = root / "nvidia-a100-sxm4-80gb" / "gemm" / "check" / "baseline.parquet"
    a100.parent.mkdir(parents=True)
    pd.read_parquet(_part(root, "gemm")).assign(gpu="NVIDIA A100-SXM4-80GB").to_parquet(a100, index=False)
    _on_the_h100(monkeypatch, root)
    xml, md = tmp_path / "perf.xml", tmp_path / "perf.md"
    code, out, err = _run(capsys, "--results", str(root), "check", "--json", "--junit", str(xml), "--markdown", str(md))
    doc = strict(out)
    said = "1 baseline(s) recorded on other GPUs (NVIDIA A100-SXM4-80GB: 1) not checked"
    assert code == 0 and len(doc["checks"]) == 9 and said in doc["notes"][0] and said in err
    assert said in md.read_text() and said in ET.parse(xml).getroot().find("system-out").text
    assert ET.parse(xml).getroot().find("properties/property").attrib == {"name": "baselines", "value": "project"}
    code, out, _ = _run(capsys, "--results", str(root), "check", "reduction", "--json")  # of the workloads named
    assert code == 0 and strict(out)["notes"] == []


# ---- 6. a refresh that stops, or meets a damaged baseline ------------------------------------------------------
class Stop(BaseException):
    """A Ctrl-C."""


def _measuring(monkeypatch, stop_at: int | None = None) -> list:
    """tuner baseline's measuring process, standing in: 3 rounds of 0.006 ms; a Ctrl-C at its `stop_at`th start."""
    started = []

    def start(workload, size, dtype, backend, device, timeout):
        started.append(workload)
        if len(started) == stop_at:
            raise Stop

        class Runner:
            setup = {"setup_s": 0.0}

            def measure_rounds(self, values, params, rounds):
                return {"status": "ok", "rounds": [0.006] * rounds, "references": {"copy": [0.01] * rounds}}

            def shutdown(self):
                pass

        return Runner(), {**H100_INFO, "timing": "delayed-start"}

    monkeypatch.setattr(tuner.answers.baseline, "measuring_process", start)
    return started


def _seed_row(root: Path) -> dict:
    rows = pd.read_parquet(_part(root, "reduction"))
    return rows[(rows["size"] == "seed") & (rows["dtype"] == "float32")].iloc[0].to_dict()


def test_an_interrupted_refresh_leaves_the_complete_baseline_in_place(tmp_path, monkeypatch):
    """Before: each session replaced the stored row, so a stop after one left a 1-session baseline in place."""
    root = _baselines(tmp_path, "reduction", whole=True)
    old = _seed_row(root)
    _measuring(monkeypatch, stop_at=2)
    log = []
    with pytest.raises(Stop):
        tuner.answers.baseline.take_baseline(
            ["reduction"], ["seed"], ["float32"], rounds=3, sessions_per_baseline=3, root=root, log=log.append
        )
    kept = _seed_row(root)
    assert kept["sessions"] == old["sessions"] == 6 and list(kept["rounds"]) == list(old["rounds"])
    partial = pd.read_parquet(_part(root, "reduction").with_name("baseline.partial.parquet"))
    assert len(partial) == 1 and partial.iloc[0]["sessions"] == 1
    assert any(line.startswith("stopped: 1 baseline(s) unfinished (reduction seed float32 1/3)") for line in log)
    # finished: it replaces the old one, the other kernels' baselines as they were, the partial file gone
    _measuring(monkeypatch)
    done = tuner.answers.baseline.take_baseline(
        ["reduction"], ["seed"], ["float32"], rounds=3, sessions_per_baseline=3, root=root, log=lambda _: None
    )
    assert len(done) == 1 and _seed_row(root)["sessions"] == 3 and list(_seed_row(root)["rounds"]) == [0.006] * 9
    assert len(pd.read_parquet(_part(root, "reduction"))) == 8
    assert not _part(root, "reduction").with_name("baseline.partial.parquet").exists()


def test_a_damaged_old_baseline_is_moved_aside_and_replaced_not_a_crash(tmp_path, monkeypatch):
    """Before: pd.read_parquet of the old file raised, and the refresh crashed after measuring."""
    root = _baselines(tmp_path, "reduction", whole=True)
    path = _part(root, "reduction")
    damaged = path.read_bytes()[:1000]
    path.write_bytes(damaged)
    _measuring(monkeypatch)
    log = []
    done = tuner.answers.baseline.take_baseline(
        ["reduction"], ["seed"], ["float32"], rounds=3, sessions_per_baseline=2, root=root, log=log.append
    )
    assert len(done) == 1 and len(pd.read_parquet(path)) == 1 and _seed_row(root)["sessions"] == 2
    (aside,) = path.parent.glob("baseline.damaged-*.parquet")
    assert aside.read_bytes() == damaged  # nothing lost
    assert any(f"note: {path} could not be read in full" in line and aside.name in line for line in log)
    # a damaged row: the good rows kept, the part (all eight) moved aside beside the first, in the same second too
    _baselines(tmp_path / "again", "reduction")
    rows = pd.read_parquet(_part(tmp_path / "again", "reduction"))
    assert (rows.at[0, "size"], rows.at[0, "dtype"]) != ("seed", "float32")
    rows.at[0, "config"] = "{"
    rows.to_parquet(path, index=False)
    tuner.answers.baseline.take_baseline(
        ["reduction"], ["seed"], ["float32"], rounds=3, sessions_per_baseline=2, root=root, log=lambda _: None
    )
    assert len(pd.read_parquet(path)) == 7 and _seed_row(root)["sessions"] == 2
    asides = sorted(path.parent.glob("baseline.damaged-*.parquet"))
    assert len(asides) == 2 and damaged in [a.read_bytes() for a in asides]
    assert 8 in [len(pd.read_parquet(a)) for a in asides if a.read_bytes() != damaged]


# ---- 7. a re-tune says whether it recovers ------------------------------------------------------------------
def test_a_retune_says_whether_it_recovers_or_that_its_times_are_not_comparable(capsys):
    """Before: `retuned` was the config found, 16M float32 0.0392 ms against a baseline of 0.0253 ms, unsaid."""
    if not all(is_recorded(H100, "reduction", size, "float32") for size in ("seed", "16M")):
        pytest.skip("no recorded reduction campaigns")
    code = main(["check", "reduction", "--simulate", "--plant-slowdown", "0.1", "--retune", "3", "--json"])
    checks = {(c["size"], c["dtype"]): c for c in strict(capsys.readouterr().out)["checks"]}
    assert code == 1
    plain = checks[("16M", "float32")]  # recorded before kernels were timed with a delayed start
    assert plain["retuned"]["recovers"] is None and "not comparable with the baseline's" in plain["retuned"]["note"]
    assert "the recording's times were taken plain, the baseline's delayed-start" in plain["reason"]
    timed = checks[("seed", "float32")]["retuned"]  # recorded as the baseline was timed: compared
    said = "it recovers the baseline" if timed["recovers"] else "it does not recover the baseline"
    assert timed["recovers"] in (True, False) and timed["note"].endswith(said), timed
    assert timed["baseline_ms"] == pytest.approx(checks[("seed", "float32")]["baseline_ms"])


def test_recovery_compares_within_the_noise_floor_of_the_same_timing_protocol():
    space = get_workload("reduction").space
    base = {"config": json.dumps(space.complete({})), "timing": "delayed-start"}
    res = CheckResult("reduction", "seed", "float32", {}, "regression", baseline_ms=1.0, raw={"threshold": 0.05})
    config = space.complete({})
    assert recovery(res, base, space, {"config": config, "time_ms": 1.04}, "delayed-start", "x")["recovers"] is True
    assert recovery(res, base, space, {"config": config, "time_ms": 1.06}, "delayed-start", "x")["recovers"] is False
    apart = recovery(res, base, space, {"config": config, "time_ms": 0.5}, "plain", "the recording's")
    assert apart["recovers"] is None and "not comparable" in apart["note"] and "not comparable" in res.reason


def test_a_retune_on_the_gpu_says_whether_it_recovers(tmp_path, monkeypatch, capsys):
    root = _baselines(tmp_path, "gemm")
    _on_the_h100(monkeypatch, root, slow=1.2)
    base = pd.read_parquet(_part(root, "gemm")).iloc[0]
    fast = float(np.median(base["rounds"]))
    monkeypatch.setattr(
        tuner.answers.check,
        "retuned",
        lambda b, budget, log, **kw: {"config": json.loads(b["config"]), "time_ms": fast},
    )
    code, out, _ = _run(capsys, "--results", str(root), "check", "--retune", "5", "--json")
    (c,) = strict(out)["checks"]
    assert code == 1 and c["retuned"]["recovers"] is True and "it recovers the baseline" in c["reason"]


# ---- 8. the replay's refusals --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sessions, per, why",
    [
        (7, None, "its 60 rounds do not split into its 7 sessions"),
        (1, None, "a replay needs a baseline of two sessions or more, and this one has 1"),
        (6, 2, "its sessions hold 2 round(s) each"),
    ],
)
def test_a_replay_refusal_gives_the_true_reason(tmp_path, capsys, sessions, per, why):
    """Before: "a replay needs a baseline of two sessions or more" for 7 sessions of 60 rounds; 6 sessions of two
    rounds a ValueError traceback."""
    root = _baselines(tmp_path, "reduction")
    values = {"sessions": sessions}
    if per:
        rows = pd.read_parquet(_part(root, "reduction"))
        row = rows[(rows["size"] == TARGET[0]) & (rows["dtype"] == TARGET[1])].iloc[0]
        n = sessions * per
        refs = {k: v[:n] for k, v in json.loads(row["references"]).items()}
        values.update(rounds=list(row["rounds"][:n]), references=json.dumps(refs))
    _edit(root, "reduction", **values)
    code, out, err = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    (refused,) = [c for c in strict(out)["checks"] if (c["size"], c["dtype"]) == TARGET]
    assert code == 2 and refused["verdict"] == "refused" and why in refused["reason"] and "Traceback" not in err
    assert ("two sessions or more" in refused["reason"]) == (sessions == 1)


# ---- 9. options that do nothing under --simulate ----------------------------------------------------------------
@pytest.mark.parametrize(
    "argv", [["--rounds", "1"], ["--rounds", "20"], ["--backend", "cupy"], ["--device", "0"], ["--allow-different"]]
)
def test_an_option_that_measures_is_refused_under_simulate(tmp_path, capsys, argv):
    """Before: `--simulate --rounds 1` exited 0, and the others were ignored."""
    root = _baselines(tmp_path, "gemm")
    code, out, err = _run(capsys, "--results", str(root), "check", "--simulate", *argv)
    assert code == 2 and out == "" and err.startswith(f"error: {argv[0]}: nothing is measured under --simulate")
    assert err.count("error:") == 1


# ---- 10. and 11. the reports' names, the no-GPU error, a changed kernel --------------------------------------
def test_a_workload_refused_without_a_baseline_is_a_named_junit_case(tmp_path, capsys):
    """Before: a testcase named `-`."""
    root = _baselines(tmp_path / "results", "gemm")
    xml = tmp_path / "perf.xml"
    code, _, _ = _run(capsys, "--results", str(root), "check", "gemm", "spmv", "--simulate", "--junit", str(xml))
    (case,) = [c for c in ET.parse(xml).getroot().iter("testcase") if c.get("classname") == "tuner.spmv"]
    assert code == 2 and case.get("name") == "spmv (every size)" and case.find("error") is not None
    assert junit([CheckResult("spmv", "", "", {}, "refused")]).count('name="-"') == 0


def test_no_gpu_says_how_to_try_the_gate_without_one(tmp_path, monkeypatch, capsys):
    root = _baselines(tmp_path, "gemm")
    monkeypatch.setattr(tuner.answers.check, "gpu_info", lambda device=0: {"gpu": "unknown"})
    code, _, err = _run(capsys, "--results", str(root), "check")
    assert code == 2 and "no CUDA GPU found" in err and "`tuner check --simulate`" in err


def test_a_kernel_changed_since_its_baseline_is_said(tmp_path, monkeypatch, capsys):
    root = _baselines(tmp_path, "reduction", "gemm")
    rows = pd.read_parquet(_part(root, "gemm"))
    rows["kernel_hash"] = "0123456789abcdef"  # as a baseline taken before the kernel's source changed
    rows.to_parquet(_part(root, "gemm"), index=False)
    code, out, _ = _run(capsys, "--results", str(root), "check", "--simulate", "--json")
    checks = strict(out)["checks"]
    said = "the kernel source changed since the baseline (kernel_hash 0123456789abcdef then,"
    assert code == 0 and all((said in c["reason"]) == (c["workload"] == "gemm") for c in checks)
    _on_the_h100(monkeypatch, root)
    code, out, _ = _run(capsys, "--results", str(root), "check", "gemm", "--json")
    assert code == 0 and said in strict(out)["checks"][0]["reason"]
