"""`tuner compare-strategies`: replay a recorded complete space with several strategies and repeats, and show
how fast each gets close to the optimum (the analysis: tuner.answers.compare). The space is a workload's
recording in the store, or any Kernel Tuner cache or T4 results file (--recording, one or several)."""

from __future__ import annotations

import argparse
import math
import textwrap
from pathlib import Path

from rich.table import Table

from tuner.cli.common import console, write_text
from tuner.errors import TunerError
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner compare-strategies`."""
    from tuner.search.names import COMPARED_STRATEGIES

    s = subparsers.add_parser(
        "compare-strategies", help="replay a recorded complete space with several strategies and compare them"
    )
    s.add_argument("workload", nargs="?", help="a workload with a recorded complete space (or give --recording)")
    s.add_argument(
        "--recording",
        action="append",
        metavar="FILE",
        help="a complete Kernel Tuner cache (.json, .json.gz) or T4 results file to replay instead; repeat it "
        "for several (one summary row each)",
    )
    s.add_argument("--objective", help="--recording: the column to compare on (default: the file's objective)")
    s.add_argument("--direction", choices=("maximize", "minimize"), help="--recording: the objective's direction")
    s.add_argument("--size", help="a named size with a recorded complete space (default: the space's default size)")
    s.add_argument("--dtype", help="element type (default: the space's first)")
    s.add_argument(
        "--strategies",
        default=",".join(COMPARED_STRATEGIES),
        help=f"comma-separated strategy names (default: {', '.join(COMPARED_STRATEGIES)}; default-cold is the "
        "default with its warm start off)",
    )
    s.add_argument(
        "--repeats", type=int, default=30, help="runs per strategy (default 30), seeded as --first-seed says"
    )
    s.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seed of the first run, the next runs seeded one more each (default 0); a strategy chosen by its scores "
        "on some seeds can score lower on others, so check a change on seeds it was not chosen on",
    )
    s.add_argument("--budget", type=int, default=200, help="unique evaluations per run (default 200)")
    s.add_argument("--gpu", help="which recorded GPU to replay (where several are recorded)")
    s.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per CPU core)")
    s.add_argument(
        "--plot",
        help="write a plot here (its format by the suffix: .png, .svg, .pdf, ...): convergence for one space, "
        "cold and warm scores for several",
    )
    s.add_argument("--markdown", help="write the table as markdown here")
    s.add_argument("--json", action="store_true", help="one JSON document on stdout (a list for several files)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Run the replays (a progress bar on stderr), then print the table or the JSON document."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tuner.answers.compare import compare, compare_file

    if bool(args.workload) == bool(args.recording):
        raise TunerError("give a workload or --recording FILE (not both)")
    _check_outputs(args)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]  # checked by compare(), up front
    docs = []
    progress = Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=args.quiet,
    )
    task = progress.add_task("replays", total=None)

    def on_start(n: int) -> None:  # shown once the replays start, so that an error before has no blank line above
        progress.update(task, total=n, completed=0)
        progress.start()

    common = {
        "strategies": strategies,
        "repeats": args.repeats,
        "budget": args.budget,
        "jobs": args.jobs,
        "first_seed": args.first_seed,
        "on_start": on_start,
        "on_done": lambda: progress.advance(task),
    }
    try:
        if args.recording:
            for path in args.recording:
                docs.append(compare_file(Path(path), objective=args.objective, direction=args.direction, **common))
        else:
            docs.append(compare(args.workload, args.size, args.dtype, gpu=args.gpu, root=args.results, **common))
    finally:
        if progress.live.is_started:  # stopping prints a line break where stderr is no terminal
            progress.stop()
    if len(docs) == 1:
        _one(docs[0], args)
    else:
        _several(docs, args)
    for what, path in (("plot", args.plot), ("markdown", args.markdown)):
        if path and not args.json:
            console.print(f"wrote the {what} to {path}", highlight=False)
    return 0


def _check_outputs(args: argparse.Namespace) -> None:
    """--plot and --markdown can be written: found out now, not after minutes of replays."""
    from tuner.answers.compare_report import check_plot_path

    for option, path in (("--plot", args.plot), ("--markdown", args.markdown)):
        if path:
            folder = Path(path).resolve().parent
            if not folder.is_dir():
                raise TunerError(f"{option} {path}: no folder {folder}")
            if Path(path).is_dir():
                raise TunerError(f"{option} {path}: a folder; give a file in it")
    if args.plot:
        check_plot_path(args.plot)


def _one(doc: dict, args: argparse.Namespace) -> None:
    from tuner.answers.compare_report import caption, markdown, plot, table_rows

    if args.plot:
        plot(doc, Path(args.plot))
    if args.markdown:
        write_text(args.markdown, markdown(doc))
    if args.json:
        print(strict_json(doc))
        return
    _print_table(caption(doc), *table_rows(doc, sep="\n"))
    if "cold_warm" in doc:
        cw = doc["cold_warm"]
        source = "" if doc["warm_start"] else " (nothing stored to warm-start from: both run alike)"
        _say(f"default strategy: cold {_fmt(cw['cold'])}, warm {_fmt(cw['warm'])}{source}")


def _several(docs: list[dict], args: argparse.Namespace) -> None:
    from tuner.answers.compare_report import plot_scores, summary_markdown, summary_rows

    if args.plot:
        plot_scores(docs, Path(args.plot))
    if args.markdown:
        write_text(args.markdown, summary_markdown(docs))
    if args.json:
        print(strict_json(docs))
        return
    header, rows = summary_rows(docs)
    # the scores are what the table is for: the other strategies' go first, then the budget and the configs,
    # the default's cold and warm and the best Kernel Tuner strategy's last; a long file name is shortened
    last = len(header) - 1
    order = [*range(last - 1, 4, -1), 2, 1, last]
    _print_table("Methodology scores per recording (cold / warm: the default strategy)", header, rows, order)


FIRST_WIDTH = 24  # the first column's width, at least, when the table is too wide: its names folded to it


def _print_table(title: str, header: list[str], rows: list[list[str]], drop_order: list[int] | None = None) -> None:
    """The columns that fit the terminal, whole, and a line naming those left out (`drop_order`: the columns
    to leave out, first first; by default the middle ones from the right, then the last; the first three stay)."""
    if drop_order is None:
        drop_order = [*range(len(header) - 2, 2, -1), len(header) - 1]
    # a long name in the first column (a recording's file) is folded onto lines of FIRST_WIDTH before a score goes,
    # never cut: then onto lines as wide as the room the kept columns leave
    narrowest = [[_folded(r[0], FIRST_WIDTH), *r[1:]] for r in rows]
    keep, left_out = _fitting(header, narrowest, console.width, drop_order)
    room = console.width - 1 - _width(header, rows, keep[1:]) - 3
    rows = [[_folded(r[0], max(room, FIRST_WIDTH)), *r[1:]] for r in rows]
    # the caption above the table, wrapped at the terminal's width: as the table's title it would be wrapped at
    # the table's and each line padded to it with spaces
    _say(title)
    table = Table()
    for i in keep:
        table.add_column(header[i], justify="left" if i == 0 else "right", no_wrap=True)
    for r in rows:
        table.add_row(*(r[i] for i in keep))
    console.print(table)
    if left_out:
        _say(f"left out to fit {console.width} columns: {', '.join(left_out)} (see --json)")


def _say(text: str) -> None:
    """A line of prose, wrapped between words at the terminal's width with no space left at a line's end (rich's
    own wrapping leaves one, which a log or a diff of piped output then carries); its [...] is text, not markup."""
    console.print(textwrap.fill(text, max(20, console.width - 1)), markup=False, highlight=False, soft_wrap=True)


def _fmt(score: float) -> str:
    return "n/a" if math.isnan(score) else f"{score:.3f}"


def _width(header: list[str], rows: list[list[str]], columns: list[int]) -> int:
    """Characters these columns take whole (a rich table spends 3 a column on padding and rule)."""
    cells = lambda i: [header[i], *(r[i] for r in rows)]  # noqa: E731
    return sum(max(len(line) for c in cells(i) for line in c.split("\n")) + 3 for i in columns)


def _fitting(
    header: list[str], rows: list[list[str]], width: int, drop_order: list[int]
) -> tuple[list[int], list[str]]:
    """The columns that fit `width` whole (and one character more), leaving out those of `drop_order` in its
    order until the rest fits; the left-out names, in the table's order."""
    keep = list(range(len(header)))
    for drop in drop_order:
        if 1 + _width(header, rows, keep) <= width:
            break
        keep.remove(drop)
    left_out = [header[i] for i in range(len(header)) if i not in keep]
    return keep, left_out


def _folded(text: str, width: int) -> str:
    """`text` whole, each of its lines folded onto lines of at most `width` characters (between words where it can,
    else inside a word: a file's name)."""
    return "\n".join(
        piece for line in text.split("\n") for piece in (textwrap.wrap(line, width, break_on_hyphens=False) or [""])
    )
