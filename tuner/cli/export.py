"""`tuner export`: the best configs per GPU and size as JSON, YAML or a C header."""

from __future__ import annotations

import argparse
import json
import sys

from tuner.cli.common import (
    add_allow_degraded,
    console,
    degraded_status,
    not_found_in_degraded_store,
    write_text,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner export`."""
    from tuner.answers.export import FORMATS

    s = subparsers.add_parser("export", help="best configs per GPU and size as JSON, YAML or a C header")
    s.add_argument("workload")
    s.add_argument("--format", choices=FORMATS, default="json")
    s.add_argument(
        "--dtype",
        help="element type; json, yaml, header: only this one (default: every stored dtype); t4, kt-cache: the "
        "recorded one (default: the space's first)",
    )
    s.add_argument(
        "--size",
        help="json, yaml, header: only this size (default: every measured size); "
        "t4, kt-cache: the recorded size (default: the space's default size)",
    )
    s.add_argument(
        "--gpu",
        help="json, yaml, header: only this GPU (default: every GPU); t4, kt-cache: the recorded GPU "
        "(default: as `tuner best` chooses); a stored name, its folder's (nvidia-h200) or a word of one (h200)",
    )
    s.add_argument("-o", "--output")
    s.add_argument(
        "--json", action="store_true", help="a JSON summary of what was written (without -o: the export in it, as text)"
    )
    add_allow_degraded(s)
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Write the export to --output, or to stdout."""
    from tuner.answers.best_config import export_answers
    from tuner.answers.export import render
    from tuner.answers.selection import DegradedStoreError

    if args.format in ("t4", "kt-cache"):  # one recorded space in Kernel Tuner's own files
        from tuner.cli.export_recording import command as export_recording

        return export_recording(args)
    try:
        answers, degraded = export_answers(args.workload, args.dtype, args.results, size=args.size, gpu=args.gpu)
    except DegradedStoreError as e:
        return not_found_in_degraded_store(e, args.allow_degraded)
    left_out = degraded.as_dict() if degraded else None
    text = render(args.workload, answers, args.format, left_out)
    if args.json:  # what was written, for scripts: the export itself goes to -o (or into the summary)
        if args.output:
            write_text(args.output, text)
        summary = {"workload": args.workload, "format": args.format, "output": args.output}
        summary["configurations"] = len(answers)
        summary["answers"] = [{k: a.get(k) for k in ("gpu", "size", "dtype", "fallback")} for a in answers]
        print(json.dumps({**summary, **({} if args.output else {"text": text}), "degraded": left_out}, indent=2))
    elif args.output:
        write_text(args.output, text)
        console.print(f"wrote {len(answers)} configuration(s) to {args.output}", highlight=False)
    else:
        sys.stdout.write(text)
    return degraded_status(left_out, args.allow_degraded)
