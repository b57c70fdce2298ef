"""`tuner init NAME`: a new workload folder in the project's workloads folder, from the worked example, around
the user's kernel (--kernel), or imported from a Kernel Tuner / BAT T1 input file (--from-t1)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from rich.markup import escape

from tuner.cli.common import console, shown_path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner init`."""
    s = subparsers.add_parser(
        "init",
        help="create a workload in the project's workloads folder (a worked example, "
        "your kernel with a space to fill in, or a T1 input file imported)",
    )
    s.add_argument(
        "name", help="the workload's name (lowercase letters, digits, '-' and '_'), not one `tuner list` shows"
    )
    s.add_argument("--kernel", type=Path, metavar="FILE", help="your kernel source, copied into the workload's folder")
    s.add_argument(
        "--from-t1",
        type=Path,
        metavar="FILE",
        dest="t1",
        help="a T1 input file (Kernel Tuner / BAT) to import: parameters, restrictions, launch, arguments",
    )
    s.add_argument("--json", action="store_true", help="print the folder made and its files as JSON")
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Write the folder, then say where it is and what to run next."""
    from tuner.locations import project
    from tuner.workloads.scaffold import init_workload

    folder = init_workload(args.name, project().workloads, kernel=args.kernel, t1=args.t1)
    if args.json:
        print(
            json.dumps(
                {"workload": args.name, "folder": str(folder), "files": sorted(p.name for p in folder.iterdir())}
            )
        )
        return 0
    files = ", ".join(sorted(p.name for p in folder.iterdir()))
    console.print(f"created {escape(shown_path(folder))}/ ({escape(files)})", highlight=False, soft_wrap=True)
    # a folder given with --workloads must be given again (TUNER_WORKLOADS or the settings file need not)
    tuner = f"tuner --workloads {shlex.quote(str(args.workloads_dir))}" if args.workloads_dir else "tuner"
    console.print(
        f"next:\n  {escape(tuner)} list\n  {escape(tuner)} tune {args.name} --dry-run   # checks it, no GPU needed"
        f"\n  {escape(tuner)} tune {args.name} --budget 20",
        highlight=False,
        soft_wrap=True,
    )
    return 0
