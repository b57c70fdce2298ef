"""`tuner baseline`: record (or refresh) the regression baseline of `tuner check`."""

from __future__ import annotations

import argparse
import json
import sys

from tuner.cli.common import console


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner baseline`."""
    from tuner.measure.backends import BACKENDS

    s = subparsers.add_parser("baseline", help="record (or refresh) the regression baseline: best configs, re-measured")
    s.add_argument("workloads", nargs="+")
    s.add_argument("--size", action="append", help="size(s) to baseline (default: every size stored)")
    s.add_argument("--dtype", action="append", help="dtype(s) (default: every dtype stored)")
    s.add_argument("--rounds", type=int, default=10, help="rounds per session (default 10)")
    s.add_argument(
        "--sessions",
        type=int,
        help="independent worker sessions per kernel (their spread sets the noise floor; default 6)",
    )  # tuner.answers.baseline.BASELINE_SESSIONS
    s.add_argument("--backend", default="nvcuda", choices=sorted(BACKENDS))
    s.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    s.add_argument("--json", action="store_true", help="the baselines recorded, as JSON (progress on stderr)")
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Re-measure the best configs and record them; exit 2 if none was recorded."""
    from tuner.answers.baseline import BASELINE_SESSIONS, take_baseline
    from tuner.json_text import strict_json

    rows = take_baseline(
        args.workloads,
        args.size,
        args.dtype,
        rounds=args.rounds,
        sessions_per_baseline=args.sessions or BASELINE_SESSIONS,
        backend=args.backend,
        device=args.device,
        root=args.results,
        log=lambda m: print(m, file=sys.stderr, flush=True) if args.json else console.print(m, highlight=False),
    )
    if args.json:
        print(strict_json([_readable(r) for r in rows]))  # a time that is not finite is null
    else:
        console.print(f"{len(rows)} baseline(s) recorded")
    return 0 if rows else 2


def _readable(row: dict) -> dict:
    """A stored baseline row for JSON: its JSON-encoded columns (config, size_vars, references) decoded."""
    out = dict(row)
    for key in ("config", "size_vars", "references"):
        if isinstance(out.get(key), str):
            out[key] = json.loads(out[key])
    return out
