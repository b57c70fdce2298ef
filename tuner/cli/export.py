"""`tuner export`: the best configs per GPU and size as JSON, YAML or a C header."""

from __future__ import annotations

import argparse
import sys

from tuner.cli.common import add_allow_degraded, console, degraded_status, write_text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner export`."""
    from tuner.answers.export import FORMATS

    s = subparsers.add_parser("export", help="best configs per GPU and size as JSON, YAML or a C header")
    s.add_argument("workload")
    s.add_argument("--format", choices=FORMATS, default="json")
    s.add_argument("--dtype")
    s.add_argument("-o", "--output")
    add_allow_degraded(s)
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Write the export to --output, or to stdout."""
    from tuner.answers.best_config import export_answers
    from tuner.answers.export import render

    answers, degraded = export_answers(args.workload, args.dtype, root=args.results)
    left_out = degraded.as_dict() if degraded else None
    text = render(args.workload, answers, args.format, left_out)
    if args.output:
        write_text(args.output, text)
        console.print(f"wrote {len(answers)} configuration(s) to {args.output}", highlight=False)
    else:
        sys.stdout.write(text)
    return degraded_status(left_out, args.allow_degraded)
