"""A damaged store never gives a silently wrong answer: a part that is truncated, garbage, unreadable, lacks a
required column or holds one of the wrong type is left out whole, rows with a non-finite or non-numeric objective
value are left out and counted, and `tuner best` / `tuner export` answer from the rest, say what was left out
(`degraded` in --json, one line on stderr) and exit 3 unless --allow-degraded. Writes are atomic (one helper)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from tuner import api, locations
from tuner.atomic import write_atomically
from tuner.cli import main

GPU_DIR = "nvidia-h100-80gb-hbm3"
SOURCE = locations.BUILTIN_RESULTS / GPU_DIR / "reduction"
BEST = ["best", "reduction", "--size", "seed", "--gpu", "NVIDIA H100 80GB HBM3", "--json"]


def _copy(root: Path) -> Path:
    shutil.copytree(SOURCE, root / GPU_DIR / "reduction")
    return root


def _ask(root: Path, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = main(["--results", str(root), *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _winner_part(root: Path, capsys: pytest.CaptureFixture) -> tuple[Path, dict]:
    """The part holding the measurement that answers `tuner best reduction --size seed` on the whole store."""
    code, answer, _ = _ask(root, capsys, *BEST)
    assert code == 0 and "degraded" not in answer and answer["fallback"] == "exact"
    campaign = answer["provenance"]["campaign_id"]
    (part,) = sorted((root / GPU_DIR / "reduction" / "evaluations").glob(f"{campaign}*.parquet"))
    return part, answer


def _expected(tmp_path: Path, capsys: pytest.CaptureFixture, change: Callable[[Path], None]) -> dict:
    """The answer of a store copy where `change` took out, cleanly, what the fault should leave out."""
    reference = _copy(tmp_path / "reference")
    part, _ = _winner_part(reference, capsys)
    change(part)
    code, answer, _ = _ask(reference, capsys, *BEST)
    assert code == 0 and "degraded" not in answer
    return answer


def _drop_rows(part: Path, which: Callable[[pd.DataFrame], pd.Series]) -> None:
    df = pd.read_parquet(part)
    df[~which(df)].to_parquet(part, index=False)


def _winning_row(answer: dict) -> Callable[[pd.DataFrame], pd.Series]:
    config = json.dumps(answer["config"], sort_keys=True, separators=(",", ":"))
    return lambda df: (df["config"] == config) & (df["timestamp"] == answer["provenance"]["timestamp"])


def _edit(part: Path, change: Callable[[pd.DataFrame], pd.DataFrame]) -> None:
    change(pd.read_parquet(part)).to_parquet(part, index=False)


def _truncate(part: Path) -> None:
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])


def _garbage(part: Path) -> None:
    part.write_bytes(os.urandom(4096))


def _mistyped(part: Path) -> None:
    _edit(part, lambda df: df.assign(gpu=range(len(df))))


def _no_status(part: Path) -> None:
    _edit(part, lambda df: df.drop(columns=["status"]))


def _text_values(part: Path) -> None:
    _edit(part, lambda df: df.assign(objective_value=df["objective_value"].astype(str).where(df.index != 0, "fast")))


WHOLE_PART_FAULTS = {
    "missing-status": (_no_status, "missing column(s) status"),
    "truncated": (_truncate, "not a readable Parquet file"),
    "garbage": (_garbage, "not a readable Parquet file"),
    "mistyped-gpu": (_mistyped, "wrong type in column(s) gpu"),
}


def _check_degraded(tmp_path: Path, capsys: pytest.CaptureFixture, root: Path, expected: dict) -> dict:
    code, answer, err = _ask(root, capsys, *BEST)
    assert code == 3
    assert answer["config"] == expected["config"] and answer["value"] == pytest.approx(expected["value"])
    assert answer["fallback"] == "degraded" and answer["degraded"]
    assert len([line for line in err.splitlines() if "degraded store" in line]) == 1
    allowed, again, _ = _ask(root, capsys, *BEST, "--allow-degraded")
    assert allowed == 0 and again == answer
    code, doc, err = _ask(root, capsys, "export", "reduction")
    assert code == 3 and doc["degraded"] == answer["degraded"] and "degraded store" in err
    assert (
        main(["--results", str(root), "export", "reduction", "--allow-degraded", "-o", str(tmp_path / "x.json")]) == 0
    )
    assert api.best("reduction", "seed", results=root)["degraded"] == answer["degraded"]
    return answer["degraded"]


@pytest.mark.parametrize("fault", sorted(WHOLE_PART_FAULTS))
def test_damaged_part_left_out_whole(tmp_path: Path, capsys: pytest.CaptureFixture, fault: str) -> None:
    damage, reason = WHOLE_PART_FAULTS[fault]
    expected = _expected(tmp_path, capsys, lambda part: part.unlink())
    root = _copy(tmp_path / "store")
    part, whole = _winner_part(root, capsys)
    damage(part)
    degraded = _check_degraded(tmp_path, capsys, root, expected)
    assert expected["value"] < whole["value"] or expected["config"] != whole["config"]  # the fault matters
    assert [p["path"] for p in degraded["parts"]] == [str(part)]
    assert degraded["parts"][0]["reason"].startswith(reason) and degraded["rows"] == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_unreadable_part_left_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    expected = _expected(tmp_path, capsys, lambda part: part.unlink())
    root = _copy(tmp_path / "store")
    part, _ = _winner_part(root, capsys)
    part.chmod(0)
    try:
        degraded = _check_degraded(tmp_path, capsys, root, expected)
    finally:
        part.chmod(0o644)
    assert [p["path"] for p in degraded["parts"]] == [str(part)]


def test_infinite_objective_value_row_left_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = _copy(tmp_path / "store")
    part, whole = _winner_part(root, capsys)
    winner = _winning_row(whole)
    expected = _expected(tmp_path, capsys, lambda p: _drop_rows(p, winner))
    _edit(part, lambda df: df.assign(objective_value=df["objective_value"].mask(winner(df), float("inf"))))
    degraded = _check_degraded(tmp_path, capsys, root, expected)
    assert degraded["parts"] == []
    assert degraded["rows"] == [{"path": str(part), "reason": "objective_value not finite", "count": 1}]


def test_text_objective_values_left_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A part whose objective values are text ("fast", or a number written as text): none is a number."""
    expected = _expected(tmp_path, capsys, lambda part: part.unlink())
    root = _copy(tmp_path / "store")
    part, _ = _winner_part(root, capsys)
    rows = len(pd.read_parquet(part))
    _text_values(part)
    degraded = _check_degraded(tmp_path, capsys, root, expected)
    assert degraded["rows"] == [{"path": str(part), "reason": "objective_value not a number", "count": rows}]
    assert degraded["rows_left_out"] == rows


def test_whole_store_is_not_degraded(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = _copy(tmp_path / "store")
    code, doc, err = _ask(root, capsys, "export", "reduction")
    assert code == 0 and "degraded" not in doc and "degraded" not in err


def test_atomic_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "part.parquet"
    write_atomically(target, lambda tmp: tmp.write_text("first"))
    write_atomically(target, lambda tmp: tmp.write_text("second"))
    assert target.read_text() == "second" and [p.name for p in tmp_path.iterdir()] == ["part.parquet"]

    def fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        write_atomically(target, fail)
    assert target.read_text() == "second" and [p.name for p in tmp_path.iterdir()] == ["part.parquet"]
    with pytest.raises(RuntimeError):
        write_atomically(tmp_path / "new" / "other.parquet", fail)
    assert list((tmp_path / "new").iterdir()) == []
