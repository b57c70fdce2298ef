"""`tuner check`: re-measure the baselines on this GPU; exit 1 on a regression, 2 if it cannot run."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from tuner.cli.common import DEGRADED_EXIT, DEGRADED_HELP, console, degraded_status, parse_assignment, write_text
from tuner.errors import TunerError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner check`."""
    from tuner.measure.kt import BACKENDS

    s = subparsers.add_parser(
        "check", help="re-measure the baselines on this GPU; exit 1 on a regression, 2 if it cannot run"
    )
    s.add_argument("workloads", nargs="*", help="default: every workload with a baseline")
    s.add_argument("--rounds", type=int, default=20, help="rounds per kernel (default 20)")
    s.add_argument(
        "--threshold",
        type=float,
        default=0.03,  # tuner.answers.stats.THRESHOLD (imported lazily)
        help="smallest slowdown reported, as a fraction (default 0.03: a 5%% slowdown is caught)",
    )
    s.add_argument(
        "--allow-different", action="store_true", help="compare even across GPU models or major driver/CUDA versions"
    )
    s.add_argument(
        "--retune",
        type=int,
        default=0,
        metavar="BUDGET",
        help="re-tune a regressed kernel with this many evaluations and print the config found (with --simulate: "
        "a campaign replayed from the recording of the baseline's GPU)",
    )
    s.add_argument(
        "--plant",
        action="append",
        metavar="NAME=VALUE",
        help="measure the baseline config with this parameter changed (validates the check on a runner; with "
        "--simulate: the replayed times scaled by how much longer that config took in the store's campaigns)",
    )
    s.add_argument(
        "--simulate",
        action="store_true",
        help="no GPU: replay the check from the baselines' recorded rounds (each baseline's last session "
        "plays the fresh measurement), to test the gate itself",
    )
    s.add_argument(
        "--plant-slowdown",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="with --simulate: the replayed kernel times slowed by this fraction (0.1: 10%%), a regression to catch",
    )
    s.add_argument("--junit", help="write a JUnit XML report")
    s.add_argument("--markdown", help="write a markdown summary")
    s.add_argument("--json", action="store_true", help="the verdicts as one JSON document on stdout")
    s.add_argument("--backend", default="nvcuda", choices=sorted(BACKENDS))
    s.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    s.add_argument("--allow-degraded", action="store_true", help=DEGRADED_HELP)
    s.epilog = (
        "exit status: 0 every kernel passed; 1 a regression (or a kernel failed); 2 the check could not run or "
        f"refused a kernel; {DEGRADED_EXIT} it passed, but the store had unreadable or malformed parts or rows "
        "(a baseline left out is a kernel not checked), unless --allow-degraded"
    )
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Run the check, print and write its reports; the exit code is the verdict, then whether the store was whole
    (a damaged baseline part would otherwise leave its kernels out of the gate unsaid)."""
    from tuner.store.schema import collect

    with collect() as degraded:
        code = _check(args)
    status = degraded_status(degraded.as_dict() if degraded else None, args.allow_degraded)  # said in any case
    return code or status


def _check(args: argparse.Namespace) -> int:
    from tuner.answers import check

    plant = dict(parse_assignment(a) for a in args.plant) if args.plant else None
    for path in filter(None, (args.junit, args.markdown)):  # found out now, not after minutes of measuring
        folder = Path(path).resolve().parent
        if not folder.is_dir():
            raise TunerError(f"cannot write {path}: no folder {folder}")
    log = Console(stderr=True).print if args.json else console.print
    if args.plant_slowdown and not args.simulate:
        raise TunerError("--plant-slowdown is for --simulate (on a GPU, --plant changes the config itself)")
    if args.simulate:
        from tuner.answers.check_replay import simulate_check

        results = simulate_check(
            args.workloads or None,
            threshold=args.threshold,
            slowdown=args.plant_slowdown,
            plant=plant,
            retune=args.retune,
            root=args.results,
            log=log,
        )
        return _report(args, results)
    results = check.run_check(
        args.workloads or None,
        rounds=args.rounds,
        threshold=args.threshold,
        allow_different=args.allow_different,
        backend=args.backend,
        device=args.device,
        root=args.results,
        plant=plant,
        retune=args.retune,
        log=log,
    )  # stdout: the JSON
    return _report(args, results)


def _report(args: argparse.Namespace, results: list) -> int:
    from tuner.answers import check, check_report

    if args.json:
        print(check_report.as_json(results))
    else:
        console.print(check_report.markdown(results), highlight=False, soft_wrap=True)  # a table: no line breaks
    if args.junit:
        write_text(args.junit, check_report.junit(results))
    if args.markdown:
        write_text(args.markdown, check_report.markdown(results))
    return check.exit_code(results)
