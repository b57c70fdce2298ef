"""Rows timed under an older timing protocol, where a GPU, size and dtype has times taken the current way, are left
out of `tuner results`, `tuner best`, `tuner export` and the API's `results` (their times do not compare:
tuner.store.without_superseded), and each says so in one note, as the rows of an earlier kernel source are said
(tuner.answers.selection.protocol_note): how many, how they were timed against the rest, how many of their configs
have no other time, and that tuner.load_store() keeps every row. `--json` carries it in `timing` beside
`kernel_source`. A small store of the `tuner init` example (saxpy) in tmp_path, and the committed store's GEMM
2048^3 float32 on the H100 (293 configs of a brute force timed `plain`, 24 timed again the current way)."""

from __future__ import annotations

import json
import warnings

import pytest

import tuner
from tests.recorded import is_recorded
from tests.test_answer_rules import GPU, A, B, _cli, _row, _write, saxpy  # noqa: F401  (saxpy: a fixture)
from tuner.answers.best_config import best

NOTE = "2 row(s) timed under an older protocol (plain, not delayed-start as the rest) are left out"
ONLY = "1 of their configs has no other time: tune again to time them (tuner.load_store() keeps every row)"


def _plain(row: dict) -> dict:
    """A row as a campaign stored it before the delayed start (no timing column then: read as plain)."""
    return {**row, "timing": None, "campaign_id": "20261101T000000Z-bbbbbb", "timestamp": "2026-11-01T00:00:00"}


@pytest.fixture
def older(saxpy):
    """saxpy small on the H100: A timed the current way (10 GB/s); A and B (20 GB/s, faster) timed plain before."""
    _write([_row(A, 10.0)])
    _write([_plain(_row(A, 30.0)), _plain(_row(B, 20.0))], campaign="20261101T000000Z-bbbbbb")
    return saxpy


def test_results_says_how_many_rows_an_older_protocol_timed(older, capsys):
    code, out, err = _cli(capsys, "results", "saxpy", "--size", "small", "--gpu", GPU)
    flat = " ".join(out.split())
    assert code == 0 and f"note: {NOTE}" in flat and ONLY in flat, out
    assert "1 configuration(s)" in flat  # B, timed plain only, is not in the table


def test_results_json_says_it_on_stderr_and_keeps_the_json_alone(older, capsys):
    code, out, err = _cli(capsys, "results", "saxpy", "--size", "small", "--gpu", GPU, "--json")
    rows = json.loads(out)
    assert code == 0 and [r["GB/s"] for r in rows] == [10.0], rows
    (said,) = [line for line in err.splitlines() if "older protocol" in line]
    assert said.startswith(f"note: {NOTE}") and said.endswith(ONLY), err


def test_best_answers_from_the_current_protocol_and_says_what_it_left_out(older, capsys):
    answer = best("saxpy", "small", gpu=GPU)
    assert answer["config"] == A and answer["value"] == 10.0  # not B's 20 GB/s, timed plain
    assert answer["timing"] == {
        "protocol": "delayed-start",
        "measured_with": ["delayed-start"],
        "left_out": 2,
        "left_out_with": ["plain"],
    }
    assert any(n.startswith(NOTE) and n.endswith(ONLY) for n in answer["notes"])
    code, out, _ = _cli(capsys, "best", "saxpy", "--size", "small", "--gpu", GPU)
    assert code == 0 and f"note: {NOTE}" in " ".join(out.split())
    code, out, _ = _cli(capsys, "best", "saxpy", "--size", "small", "--gpu", GPU, "--json")
    assert code == 0 and json.loads(out)["timing"]["left_out"] == 2


def test_export_counts_the_configs_chosen_without_them(older, capsys, tmp_path):
    code, out, err = _cli(capsys, "export", "saxpy", "--json", "-o", str(tmp_path / "x.json"))
    doc = json.loads(out)
    (answer,) = doc["answers"]
    assert code == 0 and answer["timing"]["left_out"] == 2 and any(n.startswith(NOTE) for n in answer["notes"])
    assert doc["notes"] == [
        f"1 of 1 configs ({GPU} small float32) were chosen leaving out 2 row(s) of their GPU, size and dtype timed "
        "under an older protocol, as their times do not compare (each config's notes say more; tuner.load_store() "
        "keeps every row)"
    ]
    code, out, err = _cli(capsys, "export", "saxpy", "--format", "header")
    assert code == 0 and "leaving out 2 row(s)" in " ".join(err.split()) and "leaving out 2 row(s)" in out
    code, out, err = _cli(capsys, "export", "saxpy", "--format", "kt-cache", "--size", "small", "--gpu", GPU)
    assert code == 0 and f"note: {NOTE}" in " ".join(err.split())  # a recording of the rows answering


def test_the_api_warns_how_many_rows_it_left_out(older):
    with pytest.warns(UserWarning, match=r"saxpy: 2 row\(s\) timed under an older protocol") as said:
        rows = tuner.results("saxpy", size="small")
    assert list(rows["objective_value"]) == [10.0] and str(said[0].message).endswith(ONLY)
    assert len(tuner.load_store()) == 3  # every row


def test_the_report_says_it_among_its_notes_and_draws_only_the_rows_kept(older):
    from tuner.report.data import gather

    data = gather("saxpy", "small", None, gpu=GPU)
    assert any(n.startswith(NOTE) and n.endswith(ONLY) for n in data.notes), data.notes
    assert sorted(data.rows["objective_value"]) == [10.0]  # the convergence and failures read no plain row


def test_no_note_where_nothing_was_left_out(saxpy, capsys):
    """Every row timed the current way, or every row timed plain (nothing newer: they answer), is no note."""
    _write([_row(A, 10.0), _row(B, 20.0)])
    _write([_plain(_row(A, 5.0, size={"n": 67108864})), _plain(_row(B, 6.0, size={"n": 67108864}))], "20261101T0-b")
    for size in ("small", "large"):
        answer = best("saxpy", size, gpu=GPU)
        assert answer["timing"]["left_out"] == 0 and not any("older protocol" in n for n in answer["notes"])
        code, out, err = _cli(capsys, "results", "saxpy", "--size", size, "--gpu", GPU)
        assert code == 0 and "older protocol" not in out + err
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(tuner.results("saxpy")) == 4


def test_rows_timed_over_another_count_of_launches_say_so(saxpy, capsys):
    """saxpy times 7 launches: 5-launch rows of the same protocol are left out beside them, and the note says
    how many launches each took."""
    _write([_row(A, 10.0), _row(B, 20.0)])
    _write([{**_row(B, 40.0), "times": [1.0] * 5, "campaign_id": "20261101T000000Z-bbbbbb"}], "20261101T000000Z-bbbbbb")
    answer = best("saxpy", "small", gpu=GPU)
    assert answer["config"] == B and answer["value"] == 20.0
    (note,) = [n for n in answer["notes"] if "older protocol" in n]
    assert (
        note.startswith(
            "1 row(s) timed under an older protocol (delayed-start over 5 launches, not delayed-start over 7 launches "
            "as the rest) are left out"
        )
        and "each of their configs was timed again" in note
    )


@pytest.mark.skipif(
    not is_recorded("NVIDIA H100 80GB HBM3", "gemm", "2048x2048x2048", "float32"), reason="the committed store"
)
def test_the_committed_gemm_brute_force_timed_plain_is_said(capsys):
    """GEMM 2048^3 float32 on the H100: the brute force of 293 configs timed plain, left out beside the 24 configs
    timed again the current way."""
    argv = ["results", "gemm", "--size", "2048x2048x2048", "--dtype", "float32", "--gpu", "NVIDIA H100 80GB HBM3"]
    code, out, err = _cli(capsys, *argv, "--json")
    (said,) = [line for line in err.splitlines() if "older protocol" in line]
    assert code == 0 and len(json.loads(out)) == 24
    assert said.startswith(
        "note: 293 row(s) timed under an older protocol (plain, not delayed-start as the rest) are left out"
    ), said
