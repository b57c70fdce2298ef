"""`tuner export --format t4 | kt-cache`: one recorded space, every config, as Kernel Tuner's own file
(the analysis: tuner.answers.export.recording_text)."""

from __future__ import annotations

import argparse
import sys

from rich.markup import escape

from tuner.cli.common import console, degraded_status, err_console, not_found_in_degraded_store, write_text
from tuner.json_text import strict_json


def command(args: argparse.Namespace) -> int:
    """Write the file to --output, or to stdout; with --json, a summary of it instead. Its notes (the GPU or
    size chosen for it, configs left out) go to stderr, beside a file on stdout."""
    from tuner.answers.export import recording_text
    from tuner.answers.selection import DegradedStoreError
    from tuner.store.schema import collect

    with collect() as degraded:
        try:
            text, about = recording_text(args.workload, args.format, args.size, args.dtype, args.gpu, root=args.results)
        except DegradedStoreError as e:
            e.degraded = degraded.as_dict()
            return not_found_in_degraded_store(e, args.allow_degraded)
    left_out = degraded.as_dict() if degraded else None
    if args.output:
        write_text(args.output, text)
    if getattr(args, "json", False):
        summary = {"workload": args.workload, "format": args.format, "output": args.output, **about}
        print(strict_json({**summary, **({} if args.output else {"text": text}), "degraded": left_out}))
        return degraded_status(left_out, args.allow_degraded)
    for note in about["notes"]:
        err_console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    if args.output:
        console.print(
            f"wrote {about['configs']} configuration(s) of {args.workload} {about['size']} {about['dtype']} "
            f"on {about['gpu']} to {args.output}",
            highlight=False,
        )
    else:
        sys.stdout.write(text)
    return degraded_status(left_out, args.allow_degraded)
