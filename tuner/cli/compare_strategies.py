"""`tuner compare-strategies`: replay a recorded complete space with several strategies and repeats, and show
how fast each gets close to the optimum (the analysis: tuner.answers.compare)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from tuner.cli.common import console, write_text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner compare-strategies`."""
    from tuner.answers.compare import DEFAULT_STRATEGIES

    s = subparsers.add_parser(
        "compare-strategies", help="replay a recorded complete space with several strategies and compare them"
    )
    s.add_argument("workload")
    s.add_argument("--size", help="a named size with a recorded complete space (default: the space's default size)")
    s.add_argument("--dtype", help="element type (default: the space's first)")
    s.add_argument(
        "--strategies",
        default=",".join(DEFAULT_STRATEGIES),
        help=f"comma-separated strategy names (default: {','.join(DEFAULT_STRATEGIES)})",
    )
    s.add_argument("--repeats", type=int, default=30, help="runs per strategy, seeded 0, 1, ... (default 30)")
    s.add_argument("--budget", type=int, default=200, help="unique evaluations per run (default 200)")
    s.add_argument("--gpu", help="which recorded GPU to replay (where several are recorded)")
    s.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per CPU core)")
    s.add_argument("--plot", help="write a convergence plot (PNG) here")
    s.add_argument("--markdown", help="write the table as markdown here")
    s.add_argument("--json", action="store_true", help="one JSON document on stdout")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Run the replays (a progress bar on stderr), then print the table or the JSON document."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from tuner.answers.compare import compare
    from tuner.answers.compare_report import caption, markdown, plot, table_rows

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    with Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=args.quiet,
    ) as progress:
        task = progress.add_task("replays", total=None)
        doc = compare(
            args.workload,
            args.size,
            args.dtype,
            strategies=strategies,
            repeats=args.repeats,
            budget=args.budget,
            gpu=args.gpu,
            root=args.results,
            jobs=args.jobs,
            on_start=lambda n: progress.update(task, total=n),
            on_done=lambda: progress.advance(task),
        )
    if args.plot:
        plot(doc, Path(args.plot))
    if args.markdown:
        write_text(args.markdown, markdown(doc))
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    header, rows = table_rows(doc, sep="\n")
    table = Table(title=caption(doc), title_justify="left")
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for r in rows:
        table.add_row(*r)
    console.print(table)
    for what, path in (("plot", args.plot), ("markdown", args.markdown)):
        if path:
            console.print(f"wrote the {what} to {path}", highlight=False)
    return 0
