"""`tuner best`: the best stored config for a GPU, size and dtype, with the fallbacks that found it."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table

from tuner.cli.common import add_allow_degraded, console, degraded_status, size_text
from tuner.formatting import Items, config_items, readable
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner best`."""
    s = subparsers.add_parser("best", help="best stored config for a GPU, size and dtype")
    s.add_argument("workload")
    s.add_argument(
        "--size",
        help="a named size of the space, or k=v,... (default: the space's default size; where not stored, the nearest stored size, saying so)",
    )
    s.add_argument(
        "--matrix", help="spmv: a Matrix Market file; never tuned, it gets the config of the nearest matrix by features"
    )
    s.add_argument("--dtype", help="element type (default: the space's first)")
    s.add_argument(
        "--gpu",
        help="a stored GPU: its name, its folder's (nvidia-h200) or a word of it (h200) (default: this machine's "
        "GPU); a GPU with nothing stored is answered from another, saying so and which are stored",
    )
    s.add_argument(
        "--json", action="store_true", help="the answer as one JSON document (config, value, baselines, provenance)"
    )
    add_allow_degraded(s)
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Print the answer: its config, objective, baselines and provenance."""
    from tuner.answers.best_config import best

    answer = best(args.workload, size_text(args), args.dtype, gpu=args.gpu, root=args.results)
    if args.json:
        print(strict_json(answer))
        return degraded_status(answer.get("degraded"), args.allow_degraded)
    for note in answer["notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(
        f"[bold]{escape(answer['workload'])}[/] {escape(answer['size'])} {answer['dtype']} on "
        f"{escape(answer['gpu'])} (answer: {answer['fallback']})",
        highlight=False,
    )
    console.print(answer_grid(answer), highlight=False)
    return degraded_status(answer.get("degraded"), args.allow_degraded)


def answer_grid(answer: dict) -> Table:
    """The answer as `label  value` lines, each value wrapping in its own column; the config only between
    its parameters."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    grid.add_row("config", Items(config_items(answer["config"])))
    median = f"median of {answer['measurements']} measurement(s)"
    if answer["objective"] == "time":
        grid.add_row("time", Items([f"{readable(answer['time_ms'])} ms", f"({median})"], sep=" "))
    else:
        grid.add_row(answer["objective"], Items([readable(answer["value"]), f"({median})"], sep=" "))
        grid.add_row("time", f"{readable(answer['time_ms'])} ms")
    for name, b in answer["baselines"].items():
        ratios = ", ".join(f"{m} {r:.3f}x" for m, r in b["ratio"].items()).split(" ")
        grid.add_row(f"vs {name}", Items([*ratios, f"({name}: {b['time_ms']:.4g} ms)"], sep=" "))
    grid.add_row("measured", Items(measured_items(answer["provenance"]), sep=" "))
    return grid


def measured_items(p: dict) -> list[str]:
    """Where the answer was measured, `with nvcuda on driver 580.159.04, CUDA 13.3, commit ..., campaign ...`:
    a field the row left empty (a CPU's driver and CUDA) is left out, not printed as a stray comma."""
    fields = [("with", "backend"), ("on driver", "driver"), ("CUDA", "cuda"), ("commit", "git_commit")]
    fields.append(("campaign", "campaign_id"))
    given = [(label, str(p[key])) for label, key in fields if p.get(key) not in (None, "")]
    items = []
    for i, (label, value) in enumerate(given):
        last = i == len(given) - 1
        joined = label == "with" and not last and given[i + 1][0] == "on driver"  # "with nvcuda on driver 580"
        items.append(f"{label} {value}" + ("" if last or joined else ","))
    return items
