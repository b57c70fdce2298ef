"""Issue 23, terminal: every table fits the terminal's width (60, 80, 120 columns), and no name or number is
cut (no ellipsis; each value whole on one line). Issue 22: `tuner list` and `tuner results` say which sizes
were recorded and how completely."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tuner.cli import main
from tuner.cli.common import console
from tuner.formatting import Field, Items, fitted, pack, readable

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (60, 80, 120)


@pytest.fixture
def width(monkeypatch):
    """Set the width of the console every command prints through."""

    def set_width(w: int) -> None:
        monkeypatch.setattr(console, "width", w)

    return set_width


def printed(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def assert_fits(out: str, w: int) -> None:
    wide = [line for line in out.splitlines() if len(line) > w]
    assert not wide, f"{len(wide)} line(s) wider than {w}: {wide[:2]}"
    assert "…" not in out  # rich's ellipsis: something was cut


def tokens(out: str) -> set[str]:
    return set(re.split(r"[\s,()]+", out))


@pytest.mark.parametrize(
    ("argv", "w"),
    [
        *((["reduction", "--size", "large"], w) for w in WIDTHS),
        *((["gemm", "--size", "2048x2048x2048"], w) for w in WIDTHS),
        (["floyd-warshall"], 80),
    ],
)
def test_results_fit_and_show_every_value_whole(argv, w, width, capsys):
    rows = json.loads(printed(capsys, "results", *argv, "--json"))
    width(w)
    out = printed(capsys, "results", *argv)
    assert_fits(out, w)
    seen = tokens(out) | {half for t in tokens(out) for half in t.split("=", 1)}  # cells, or name=value items
    keys = list(rows[0])  # the parameters, chosen, the objective (GB/s, or time_ms), ...
    params, objective = keys[: keys.index("chosen")], keys[keys.index("chosen") + 1]
    for row in rows[:20]:
        assert readable(row[objective], keep_zeros=True) in seen
        assert readable(row["time_ms"], keep_zeros=True) in seen
        assert all(str(row[k]) in seen for k in params)
    for name in params + [objective]:  # whole, or broken after underscores only
        pieces = [p + "_" for p in name.split("_")[:-1]] + [name.split("_")[-1]]
        assert name in seen or all(p in seen for p in pieces), name


@pytest.mark.parametrize("w", WIDTHS)
def test_results_by_one_and_two_parameters_fit(w, width, capsys):
    width(w)
    assert_fits(printed(capsys, "results", "reduction", "--size", "large", "--by", "variant"), w)
    assert_fits(printed(capsys, "results", "reduction", "--size", "large", "--by", "variant", "block_size_x"), w)


@pytest.mark.parametrize("w", WIDTHS)
def test_list_fits_and_names_every_workload_whole(w, width, capsys):
    docs = json.loads(printed(capsys, "list", "--json"))
    width(w)
    out = printed(capsys, "list")
    assert_fits(out, w)
    seen = tokens(out)
    for d in docs:  # floyd-warshall and floyd-warshall-small each whole, not both "floyd-w…"
        assert d["workload"] in seen
        assert str(d["configurations"]) in seen


@pytest.mark.parametrize("w", (*WIDTHS, 40))
def test_list_of_one_workload_fits_and_lists_its_recordings(w, width, capsys):
    width(w)
    out = printed(capsys, "list", "floyd-warshall")
    doc = json.loads(printed(capsys, "list", "floyd-warshall", "--json"))
    # a path too wide for its column is written whole on a line of its own (the terminal wraps it), so that it
    # can be copied: never folded inside the block
    whole = {f" kernel source: {doc['source']}", f" space file: {doc['space']}"}
    assert_fits("\n".join(line for line in out.splitlines() if line not in whole), w)
    for path in (doc["source"], doc["space"]):
        assert any(line.endswith(f": {path}") for line in out.splitlines()) or f"({path})" in out or path in out.split()
    if w == 40:  # this checkout's paths are longer than 40 - 15 columns
        assert f" kernel source: {doc['source']}" in out.splitlines()
    for r in doc["recordings"]:
        assert r["size"] in tokens(out) or r["size"] in out  # a size given as variables holds commas


@pytest.mark.parametrize("w", WIDTHS)
@pytest.mark.parametrize("workload", ["gemm", "floyd-warshall", "locvolcalib"])
def test_best_wraps_its_config_between_parameters(workload, w, width, capsys):
    answer = json.loads(printed(capsys, "best", workload, "--json"))
    width(w)
    out = printed(capsys, "best", workload)
    assert_fits(out, w)
    lines = out.splitlines()
    for k, v in answer["config"].items():  # each name=value whole on one line
        assert any(re.search(rf"(^|[\s,]){re.escape(k)}={re.escape(str(v))}(,|\s|$)", line) for line in lines), k


def test_columns_80_results_of_reduction_large_fit_in_a_real_process():
    """The issue's own check: the command line, with COLUMNS=80 as a terminal of 80 columns sets it."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", "import sys, tuner.cli; sys.exit(tuner.cli.main())", "results", "reduction", "--size", "large"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert_fits(out, 80)
    assert "3084" in out


def test_pack_breaks_only_between_items():
    items = ["block_size_x=1024", "items_per_thread=16", "variant=7"]
    assert pack(items, 40) == ["block_size_x=1024, items_per_thread=16,", "variant=7"]
    assert pack(items, 10) == ["block_size_x=1024,", "items_per_thread=16,", "variant=7"]  # never inside one
    assert pack([], 10) == [""]


def test_fitted_goes_compact_then_vertical_and_keeps_every_value():
    fields = [Field("variant", numeric=True), Field("block_size_x", numeric=True), Field("GB/s", keep=True)]
    fields += [Field("status"), Field("chosen", flag=True), Field("best config", wrap=True)]
    rows = [[7, 1024, "3084", "ok", True, Items(["a=1", "bb=2"])], [7, 512, "3072", "ok", False, Items(["a=2"])]]

    def shown(w: int) -> str:
        c = Console(width=w, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
        c.print(fitted(fields, rows, w, title="t"))
        return c.export_text()

    full, compact, vertical = shown(200), shown(45), shown(20)
    assert "┃ variant" in full and "in every row" not in full
    assert "in every row:" in compact and "variant 7" in compact and "status ok" in compact  # said once
    assert "variant" not in compact.split("in every row:")[1].split("\n", 2)[-1]  # not a column any more
    assert "1." in vertical and "block_size_x=1024" in vertical and "chosen" in vertical
    for out, w in ((full, 200), (compact, 45), (vertical, 20)):
        assert all(len(line) <= w for line in out.splitlines())
        assert "1024" in out and "3072" in out and "…" not in out


@pytest.mark.parametrize("argv", [("best", "gemm"), ("list",), ("results", "reduction", "--top", "3")])
def test_output_lines_carry_no_trailing_spaces(capsys, width, argv):
    """rich pads a table's last column and its centred title to the table's width: piped into a log or a diff,
    every line would end in spaces (tuner.cli.common trims them)."""
    width(200)
    out = printed(capsys, *argv)
    padded = [line for line in out.splitlines() if line != line.rstrip(" ")]
    assert out.strip() and not padded, padded[:3]


@pytest.mark.parametrize("w", WIDTHS)
def test_compare_strategies_folds_a_long_recording_name_never_cuts_it(capsys, width, w):
    """The several-recordings table of `compare-strategies`: a recording's long file name is folded onto lines of
    its column, whole (it was cut in the middle with an ellipsis), the scores whole beside it."""
    from tuner.cli.compare_strategies import _print_table

    width(w)
    name = "conv_A100_with_a_rather_long_name.json.gz (kernel reduce)"
    header = ["recording", "configs", "budget", "random", "kt:genetic_algorithm", "cold", "warm", "best kt"]
    _print_table("scores", header, [[name, "1234", "123", "0.123", "0.456", "0.789", "0.812", "0.654"]])
    out = capsys.readouterr().out
    assert_fits(out, w)
    assert "…" not in out
    cells = "".join(line.split("│")[1].strip() for line in out.splitlines() if line.count("│") > 2)
    assert name.replace(" ", "") in cells.replace(" ", "")
    kept = [h for h in header if h in out.split("left out")[0]]
    assert kept[:3] == header[:3] and all(v in out for v in ("1234", "123"))  # the rest whole beside it
