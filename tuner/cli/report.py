"""`tuner report`: a self-contained HTML page of figures for a workload, from the store."""

from __future__ import annotations

import argparse

from rich.markup import escape

from tuner.cli.common import add_allow_degraded, console, degraded_status, shown_path, size_text
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner report`."""
    s = subparsers.add_parser(
        "report",
        help="an HTML page of figures (convergence, sweeps, vendor references, failures, ceiling) from the store",
    )
    s.add_argument("workload")
    s.add_argument("--size", help="the size of the sweep plots (default: the space's default size)")
    s.add_argument("--matrix", help="spmv: a Matrix Market file (its nearest measured matrix by features)")
    s.add_argument("--dtype")
    s.add_argument(
        "--gpu",
        help="a stored GPU: its name, its folder's (nvidia-h200) or a word of it (h200) (default: this machine's GPU)",
    )
    s.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="the folder to write the page into (named by workload, size and dtype), or the page's file (.html)",
    )
    s.add_argument("--json", action="store_true", help="print a summary of what was written as JSON")
    add_allow_degraded(s)  # the page is written either way, and says what was left out
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Write the page; say where (and, with --json, what it holds)."""
    from tuner.report import write_report
    from tuner.report.page import GOOD_NEWS

    summary = write_report(args.workload, size_text(args), args.dtype, args.output, gpu=args.gpu, root=args.results)
    if args.json:
        print(strict_json(summary))
    else:
        for note in summary["notes"]:
            console.print(f"[yellow]note:[/] {escape(note)}")
        empty = [s for s in summary["sections"].items() if s[1]["empty"]]
        missing = [s["title"] for key, s in empty if key not in GOOD_NEWS]
        good = [
            s["empty"][0].lower() + s["empty"][1:].rstrip(".") for key, s in empty if key in GOOD_NEWS
        ]  # as the page says it
        console.print(
            f"wrote {shown_path(summary['path'])}: {summary['figures']} figure(s)"
            + (f"; no data for: {', '.join(missing)}" if missing else "")
            + "".join(f"; {g}" for g in good),
            highlight=False,
            soft_wrap=True,  # the path stays whole
        )
    # as `tuner best` and `tuner export`: a page drawn from a store with parts or rows left out exits 3 (the page
    # says what was left out) unless --allow-degraded
    return degraded_status(summary["degraded"], args.allow_degraded)
