"""`tuner best`: the best stored config for a GPU, size and dtype, with the fallbacks that found it."""

from __future__ import annotations

import argparse
import json

from rich.markup import escape

from tuner.cli.common import add_allow_degraded, console, degraded_status, size_text
from tuner.formatting import config_text, readable


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner best`."""
    s = subparsers.add_parser("best", help="best stored config for a GPU, size and dtype")
    s.add_argument("workload")
    s.add_argument("--size")
    s.add_argument(
        "--matrix", help="spmv: a Matrix Market file; never tuned, it gets the config of the nearest matrix by features"
    )
    s.add_argument("--dtype")
    s.add_argument("--gpu", help="GPU name as stored (default: this machine's GPU)")
    s.add_argument("--json", action="store_true")
    add_allow_degraded(s)
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Print the answer: its config, objective, baselines and provenance."""
    from tuner.answers.best_config import best

    answer = best(args.workload, size_text(args), args.dtype, gpu=args.gpu, root=args.results)
    if args.json:
        print(json.dumps(answer, indent=2, default=str))
        return degraded_status(answer.get("degraded"), args.allow_degraded)
    for note in answer["notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(
        f"[bold]{answer['workload']}[/] {answer['size']} {answer['dtype']} on {answer['gpu']}"
        f" (answer: {answer['fallback']})"
    )
    console.print("config: " + config_text(answer["config"]), highlight=False)
    console.print(
        f"{answer['objective']}: {readable(answer['value'])}   time: {readable(answer['time_ms'])} ms"
        f"   (median of {answer['measurements']} measurement(s))"
    )
    for name, b in answer["baselines"].items():
        ratios = ", ".join(f"{m} {r:.3f}x" for m, r in b["ratio"].items())
        console.print(f"vs {name}: {ratios}  ({name}: {b['time_ms']:.4g} ms)")
    p = answer["provenance"]
    console.print(
        f"measured with {p.get('backend')} on driver {p.get('driver')}, CUDA {p.get('cuda')}, "
        f"commit {p.get('git_commit')}, campaign {p.get('campaign_id')}"
    )
    return degraded_status(answer.get("degraded"), args.allow_degraded)
