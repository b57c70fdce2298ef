"""`tuner report`: a self-contained HTML page for every built-in workload from the committed store, its figures
inlined (SVG data URIs, nothing fetched), sections without data saying so, failures drawn by class, ceilings
only as measured, and one clear line for an unknown workload or size. (The browser check: .ci/browser.sh.)"""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tuner import locations
from tuner.cli import main
from tuner.report import write_report
from tuner.report.data import gather
from tuner.store import load_baselines
from tuner.workloads.registry import BUILTINS

GPU_DIR = "nvidia-h100-80gb-hbm3"
STORE = locations.BUILTIN_RESULTS
# every built-in workload the committed store holds measurements of (a built-in with none: test_nothing_stored)
BUILTIN = sorted(name for name in BUILTINS if any(STORE.glob(f"*/{name}/evaluations/*.parquet")))
# in one test process (pytest-xdist): the pages report_of writes once are shared by the tests that read them
pytestmark = pytest.mark.xdist_group("tests.test_report")
IMAGE = re.compile(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)" alt="[^"]*" data-figure="([a-z]+)">')


def _figures(text: str) -> dict[str, bytes]:
    return {name: base64.b64decode(data) for data, name in IMAGE.findall(text)}


@pytest.fixture(scope="module")
def report_of(tmp_path_factory):
    """Each built-in workload's default page (write_report from the committed store), written once for every test
    that reads it, with the ReportData it was drawn from (gather's, as write_report called it): GEMM's page took
    20 s on the 2-core machine, and three tests drew it, or gathered its data, again. A test gets the summary, the
    page's text and that data; none of them changes the page or the data."""
    import tuner.report.data as report_data

    made: dict[str, tuple[dict, str, report_data.ReportData]] = {}
    out = tmp_path_factory.mktemp("reports")

    def report(workload: str) -> tuple[dict, str, report_data.ReportData]:
        if workload not in made:
            drawn, real = [], report_data.gather
            with pytest.MonkeyPatch.context() as m:
                m.setattr(report_data, "gather", lambda *a, **kw: drawn.append(real(*a, **kw)) or drawn[-1])
                summary = write_report(workload, out_dir=out / workload, root=STORE)
            made[workload] = (summary, Path(summary["path"]).read_text(), drawn[0])
        return made[workload]

    return report


def test_the_committed_store_covers_the_five_course_workloads() -> None:
    assert {"reduction", "gemm", "spmv", "floyd-warshall", "floyd-warshall-small", "locvolcalib"} <= set(BUILTIN)


@pytest.mark.parametrize("workload", BUILTIN)
def test_report_of_every_builtin_workload(workload: str, report_of) -> None:
    summary, text, _ = report_of(workload)
    figures = _figures(text)
    assert summary["figures"] == len(figures) == text.count("<img ") >= 3  # convergence, sweeps, heat maps
    assert {"convergence", "sweeps", "heatmaps"} <= set(figures)
    for svg in figures.values():
        assert b"<svg" in svg and b"<path" in svg  # a drawing, not an empty image
    # self-contained: nothing fetched (the SVG namespace is a name, not a request), no script
    assert not re.search(r'(src|href)="(https?:|//)', text) and "<script" not in text and "<link" not in text
    for key, section in summary["sections"].items():
        assert f'<section id="{key}">' in text
        assert bool(section["figures"]) != bool(section["empty"])  # drawn, or says why not
        if section["empty"]:
            assert f'<p class="empty">{section["empty"][:20]}' in text


def test_sections_without_data_say_so(report_of) -> None:
    """Floyd-Warshall's campaigns timed no vendor reference and no copy: those sections say so, draw nothing."""
    summary, _, _ = report_of("floyd-warshall")
    sections = summary["sections"]
    assert sections["vendor"]["empty"].startswith("No vendor reference is stored")
    assert sections["roofline"]["empty"].startswith("No ceiling was measured")
    assert sections["failures"]["empty"].startswith("No failed evaluation")
    assert summary["figures"] == 3


def test_convergence_is_each_campaigns_best_so_far(report_of) -> None:
    _, _, data = report_of("gemm")  # its default page: 2048x2048x2048, float32
    assert (data.size, data.selection.dtype) == ("2048x2048x2048", "float32")
    at_size = data.rows[data.rows["size"] == "2048x2048x2048"]
    frame = data.convergence[data.convergence["size"] == "2048x2048x2048"]
    assert set(frame["campaign_id"]) == set(at_size["campaign_id"])
    assert set(frame["strategy"]) == set(at_size["strategy"])  # each campaign under its own strategy
    for campaign, run in frame.groupby("campaign_id"):
        mine = at_size[at_size["campaign_id"] == campaign]
        assert list(run["evaluation"]) == list(range(1, len(mine) + 1))
        assert (np.diff(run["best"].to_numpy()) >= 0).all()  # GFLOP/s: higher is better
        assert run["best"].iloc[-1] == mine["objective_value"].max()


def test_vendor_and_ceiling_are_measured_figures(report_of) -> None:
    """Every speed-up is a stored reference time over `tuner best`'s time; every ceiling is the copy's GB/s
    stored in the best's own campaign."""
    _, _, data = report_of("reduction")  # the pages' data: float32, as each default page draws it
    assert data.selection.dtype == "float32"
    assert set(data.versus["baseline"]) == {"cub"} and len(data.versus) == 4
    assert np.allclose(data.versus["speedup"], data.versus["baseline_ms"] / data.versus["tuned_ms"])
    base = load_baselines("reduction", STORE)
    copies = {json.loads(m)["GB/s"] for m in base.loc[base["baseline"] == "copy", "metrics"]}
    assert len(data.roofline) == 4 and set(data.roofline["ceiling"]) <= copies
    assert (data.roofline["reference"] == "copy (same campaign)").all()
    _, _, gemm = report_of("gemm")
    assert gemm.selection.dtype == "float32"
    assert (gemm.roofline["reference"] == "cublas (same campaign)").all() and gemm.roofline["metric"].eq(
        "GFLOP/s"
    ).all()


def _store_with_failures(root: Path) -> Path:
    """floyd-warshall-small's part with three rows turned into failures of two classes, and a damaged part."""
    source = STORE / GPU_DIR / "floyd-warshall-small"
    target = root / GPU_DIR / "floyd-warshall-small"
    shutil.copytree(source, target)
    (part,) = (target / "evaluations").glob("*.parquet")
    df = pd.read_parquet(part)
    for i, status in ((0, "compile"), (1, "compile"), (2, "timeout")):
        df.loc[i, ["status", "error"]] = [status, f"nvcc said no\n{status} went wrong"]
        df.loc[i, ["objective_value", "time_ms"]] = [np.nan, np.nan]
    df.to_parquet(part)
    (target / "evaluations" / "broken.parquet").write_bytes(b"not parquet")
    return root


def test_failures_by_class_and_degraded_store(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = _store_with_failures(tmp_path / "store")
    args = ["--results", str(root), "report", "floyd-warshall-small", "-o", str(tmp_path / "out"), "--json"]
    assert main(args) == 3  # written, and the exit says the store was not read whole
    capsys.readouterr()
    assert main([*args, "--allow-degraded"]) == 0
    out = capsys.readouterr()
    summary = json.loads(out.out)
    assert "degraded store" in out.err and summary["degraded"]["parts"][0]["path"].endswith("broken.parquet")
    assert summary["sections"]["failures"]["figures"] == ["failures"]
    text = Path(summary["path"]).read_text()
    assert "3 of 56 evaluation(s) failed: compile 2, timeout 1" in text
    assert "compile went wrong" in text and "nvcc said no" not in text  # a message's last line
    assert "degraded store: 1 part(s)" in text
    data = gather("floyd-warshall-small", None, None, root=root)
    assert data.failures.groupby("status")["count"].sum().to_dict() == {"compile": 2, "timeout": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "error: unknown workload 'nope'"),
        (["reduction", "--size", "huge"], "error: unknown size 'huge' for reduction"),
        (["gemm", "--dtype", "int8"], "error: gemm has no dtype 'int8'"),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--results", str(STORE), "report", *args, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_cli_says_where_and_what_is_empty(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--results", str(STORE), "report", "locvolcalib", "--dtype", "float32", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "locvolcalib-course-large-float32.html" in out and "no data for:" in out
    assert (tmp_path / "locvolcalib-course-large-float32.html").is_file()


def test_nothing_stored_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--results", str(empty), "report", "reduction", "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip().startswith("error: nothing stored for reduction")


def test_o_naming_an_html_file_writes_the_page_there(tmp_path) -> None:
    """`-o site/fw.html` is the page's file, not a folder of that name holding it (a user audit)."""
    from tuner.cli import main

    page = tmp_path / "site" / "fw.html"
    assert main(["report", "floyd-warshall-small", "-o", str(page)]) == 0
    assert page.is_file() and page.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in (tmp_path / "site").iterdir()] == ["fw.html"]
