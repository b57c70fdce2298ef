"""`tuner report` reads each of the store's evaluations and baselines once for a page, handing them to the answers
(export_answers) rather than having them read again, so that what a read leaves out is counted once."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tuner import locations
from tuner.report import write_report
from tuner.store import parts

WORKLOAD = "floyd-warshall-small"  # the smallest page of the committed store
GPU_DIR = "nvidia-h100-80gb-hbm3"


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, list[str]]:
    """The page of a copy of the workload's store whose evaluations have two successful rows with a time that is
    not finite (left out, counted), written once: its summary, its text and the patterns of every store read."""
    tmp = tmp_path_factory.mktemp("report_reads")
    target = tmp / "store" / GPU_DIR / WORKLOAD
    shutil.copytree(locations.BUILTIN_RESULTS / GPU_DIR / WORKLOAD, target)
    (part,) = (target / "evaluations").glob("*.parquet")
    df = pd.read_parquet(part)
    ok = df.index[df["status"] == "ok"][:2]
    df.loc[ok, "time_ms"] = np.inf
    df.to_parquet(part)
    reads: list[str] = []
    real = parts.read_store
    with pytest.MonkeyPatch.context() as m:
        m.setattr(parts, "read_store", lambda pattern, *a, **kw: reads.append(pattern) or real(pattern, *a, **kw))
        summary = write_report(WORKLOAD, out_dir=tmp / "out", root=tmp / "store")
    return summary, Path(summary["path"]).read_text(), reads


def test_a_page_reads_the_evaluations_and_baselines_once(page: tuple[dict, str, list[str]]) -> None:
    _, _, reads = page
    assert sum(p.endswith("/evaluations/*.parquet") for p in reads) == 1
    assert sum(p.endswith("/baselines/*.parquet") for p in reads) == 1


def test_rows_left_out_are_counted_once(page: tuple[dict, str, list[str]]) -> None:
    summary, text, _ = page
    assert summary["degraded"]["rows_left_out"] == 2
    assert [r["count"] for r in summary["degraded"]["rows"]] == [2]
    assert "0 part(s) and 2 row(s) left out" in text
