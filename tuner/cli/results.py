"""`tuner results`: the measured configs of a GPU, size and dtype as a table, or the best per parameter value."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from rich.markup import escape

from tuner.cli.common import console, size_text, write_text
from tuner.errors import TunerError
from tuner.formatting import Items
from tuner.json_text import strict_json

if TYPE_CHECKING:
    from tuner.answers.selection import Selection


TOP = 20  # configs a table shows on screen unless --top or --all


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner results`."""
    s = subparsers.add_parser(
        "results",
        help="the measured configs of a GPU, size and dtype as a table, best first, "
        "or the best per value of one or two parameters (--by)",
    )
    s.add_argument("workload")
    s.add_argument(
        "--size",
        help="a named size of the space, or k=v,... (default: the space's default size; where not stored, the nearest stored size, saying so)",
    )
    s.add_argument("--matrix", help="spmv: a Matrix Market file (its nearest measured matrix by features)")
    s.add_argument("--dtype", help="element type (default: the space's first)")
    s.add_argument(
        "--gpu",
        help="a stored GPU: its name, its folder's (nvidia-h200) or a word of it (h200) (default: this machine's)",
    )
    shown = s.add_mutually_exclusive_group()
    shown.add_argument(
        "--top", type=int, help=f"show the best N configs (default {TOP} on screen, every one with --json)"
    )
    shown.add_argument("--all", action="store_true", help="show every config measured")
    s.add_argument(
        "--by",
        nargs="+",
        metavar="PARAM",
        help="one parameter: best and median per value; two (P Q): a grid of the best, P's values down and Q's "
        "across (on screen the columns are headed by Q's values; in --json and --csv keyed Q=value)",
    )
    s.add_argument("--csv", help="also write the table (every row) to this CSV file")
    s.add_argument(
        "--json", action="store_true", help="the table as JSON records (every row, or --top N); notes go to stderr"
    )
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Print the table (and write it as CSV), or the rows as JSON."""
    from tuner.answers.selection import select
    from tuner.answers.tables import (
        by_parameters,
        config_table,
        grid_records,
        objective_column,
        render,
    )
    from tuner.store.schema import collect

    if args.top is not None and args.top < 1:
        raise TunerError(f"--top {args.top}: show at least 1 config (--all for every one)")
    sel = select(args.workload, size_text(args), args.dtype, gpu=args.gpu, root=args.results)
    space = sel.workload.space
    table = config_table(sel)
    shown = by_parameters(table, args.by, objective_column(space), space.maximize) if args.by else table
    grid = len(args.by or []) == 2  # its rows are named by the first parameter's values
    # a grid's columns as --json and --csv key them: the first parameter, then "block_size_x=32", ...
    records = grid_records(shown, args.by) if grid else shown
    if args.csv:
        write_text(args.csv, records.to_csv(index=False))
    if args.json:
        for note in sel.notes:  # what the answer is drawn from (another GPU, the nearest size): said, off stdout
            print(f"note: {note}", file=sys.stderr)
        doc = records.head(args.top) if args.top else records
        print(strict_json(json.loads(doc.to_json(orient="records"))))  # NaN -> null, numpy -> JSON
        return 0
    for note in sel.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    heading, out = render(sel, table, shown, args.by, None if args.all else args.top or TOP, console.width)
    console.print(heading, highlight=False)
    with collect():  # the same parts as the rows just read: any damage was said once already
        recorded = recorded_line(sel)
    console.print(recorded, highlight=False)
    console.print(out, highlight=False)
    if args.csv:
        console.print(f"wrote {len(shown)} row(s) to {args.csv}", highlight=False)
    return 0


def recorded_line(sel: Selection) -> Items:
    """What the store recorded for a replay (`tuner tune --simulate`) of this GPU and dtype: how completely this
    size, and which other sizes (each size with its count on one line)."""
    from pathlib import Path

    from tuner.store import gpu_slug, results_root, safe_name
    from tuner.store.coverage import recordings

    space = sel.workload.space
    gpu, size = gpu_slug(str(sel.rows.iloc[0]["gpu"])), str(sel.rows.iloc[0]["size"])
    recorded = recordings(Path(sel.root or results_root()), sel.workload.name, space)
    mine = [r for r in recorded if r.gpu == gpu and r.dtype == sel.dtype]
    this = next((r for r in mine if safe_name(r.size) == safe_name(size)), None)
    said = [
        f"recorded for replay: {this.coverage} configs of the space" if this else "no recording of this size to replay"
    ]
    others = [f"{r.size} {r.coverage}" for r in mine if r is not this]
    if others:
        more = [f"and {len(others) - 8} more"] if len(others) > 8 else []
        shown = [*others[:8], *more]
        said[0] += ";"
        said += [
            "other sizes recorded:",
            *(o + "," for o in shown[:-1]),
            shown[-1],
            f"(tuner list {sel.workload.name})",
        ]
    return Items(said, sep=" ")
