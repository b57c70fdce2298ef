"""`tuner baseline`: record (or refresh) the regression baseline of `tuner check`."""

from __future__ import annotations

import argparse

from tuner.cli.common import console


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner baseline`."""
    from tuner.measure.kt import BACKENDS

    s = subparsers.add_parser("baseline", help="record (or refresh) the regression baseline: best configs, re-measured")
    s.add_argument("workloads", nargs="+")
    s.add_argument("--size", action="append", help="size(s) to baseline (default: every size stored)")
    s.add_argument("--dtype", action="append", help="dtype(s) (default: every dtype stored)")
    s.add_argument("--rounds", type=int, default=10, help="rounds per session")
    s.add_argument(
        "--sessions",
        type=int,
        help="independent worker sessions per kernel (their spread sets the noise floor; default 6)",
    )  # tuner.answers.baseline.BASELINE_SESSIONS
    s.add_argument("--backend", default="nvcuda", choices=sorted(BACKENDS))
    s.add_argument("--device", type=int, default=0)
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Re-measure the best configs and record them; exit 2 if none was recorded."""
    from tuner.answers.baseline import BASELINE_SESSIONS, take_baseline

    rows = take_baseline(
        args.workloads,
        args.size,
        args.dtype,
        rounds=args.rounds,
        sessions_per_baseline=args.sessions or BASELINE_SESSIONS,
        backend=args.backend,
        device=args.device,
        root=args.results,
        log=console.print,
    )
    console.print(f"{len(rows)} baseline(s) recorded")
    return 0 if rows else 2
