"""`tuner export`: the best configs per GPU and size as JSON, YAML or a C header."""

from __future__ import annotations

import argparse
import json
import sys

from rich.markup import escape

from tuner.cli.common import (
    add_allow_degraded,
    console,
    degraded_status,
    err_console,
    not_found_in_degraded_store,
    write_text,
)
from tuner.errors import TunerError
from tuner.json_text import strict_json


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
        action="append",  # as `tuner baseline --size`: one file for the sizes a build needs
        help="json, yaml, header: only this size, repeated for several (default: every measured size); "
        "t4, kt-cache: the recorded size, one (default: the space's default size)",
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
    """Write the export to --output, or to stdout; what the user should know of it (configs measured with an
    earlier kernel source, or chosen without rows timed under an older protocol) on stderr, or in the --json
    summary."""
    from tuner.answers.export import export_notes, render
    from tuner.answers.selection import DegradedStoreError

    sizes = list(dict.fromkeys(args.size or [None]))  # a size given twice is exported once
    if args.format in ("t4", "kt-cache"):  # one recorded space in Kernel Tuner's own files
        from tuner.cli.export_recording import command as export_recording

        if len(sizes) > 1:
            raise TunerError(
                f"--format {args.format} writes one recorded size, and {len(sizes)} were given "
                f"({', '.join(map(str, sizes))}): export each to its own file"
            )
        return export_recording(argparse.Namespace(**{**vars(args), "size": sizes[0]}))
    try:
        answers, left_out = _answers(args, sizes)
    except DegradedStoreError as e:
        return not_found_in_degraded_store(e, args.allow_degraded)
    text = render(args.workload, answers, args.format, left_out)
    notes = export_notes(answers)
    if args.json:  # what was written, for scripts: the export itself goes to -o (or into the summary)
        if args.output:
            write_text(args.output, text)
        summary = {"workload": args.workload, "format": args.format, "output": args.output}
        summary["configurations"] = len(answers)
        summary["answers"] = [
            {k: a.get(k) for k in ("gpu", "size", "dtype", "fallback", "kernel_source", "timing", "notes")}
            for a in answers
        ]
        summary["notes"] = notes
        print(strict_json({**summary, **({} if args.output else {"text": text}), "degraded": left_out}))
        return degraded_status(left_out, args.allow_degraded)
    for note in notes:  # beside a file on stdout, or before the line that says it was written
        err_console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    if args.output:
        write_text(args.output, text)
        console.print(f"wrote {len(answers)} configuration(s) to {args.output}", highlight=False)
    else:
        sys.stdout.write(text)
    return degraded_status(left_out, args.allow_degraded)


def _answers(args: argparse.Namespace, sizes: list[str | None]) -> tuple[list[dict], dict | None]:
    """The answers of each size asked for (None: every measured size), each (GPU, size, dtype) once where two
    spellings name one size, and what the store left out (Degraded.as_dict(), None where nothing)."""
    from tuner.answers.best_config import export_answers
    from tuner.store.schema import Degraded

    answers: dict[tuple, dict] = {}
    degraded = Degraded()
    for size in sizes:
        found, left_out = export_answers(args.workload, args.dtype, args.results, size=size, gpu=args.gpu)
        degraded.merge(left_out)
        for a in found:
            answers.setdefault((a["gpu"], json.dumps(a["size_vars"], sort_keys=True), a["dtype"]), a)
    return list(answers.values()), degraded.as_dict() if degraded else None
