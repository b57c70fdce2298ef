"""`tuner check`: re-measure the baselines on this GPU; exit 1 on a regression, 2 if it cannot run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from tuner.cli.common import DEGRADED_EXIT, DEGRADED_HELP, console, degraded_status, parse_assignment, write_text
from tuner.errors import TunerError, one_line

if TYPE_CHECKING:
    from tuner.answers.check_result import CheckRun


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner check`."""
    from tuner.measure.backends import BACKENDS

    s = subparsers.add_parser(
        "check", help="re-measure the baselines on this GPU; exit 1 on a regression, 2 if it cannot run"
    )
    s.add_argument("workloads", nargs="*", help="default: every workload with a baseline")
    s.add_argument("--rounds", type=int, help="rounds per kernel (default 20; not with --simulate)")
    s.add_argument(
        "--threshold",
        type=float,
        default=0.03,  # tuner.stats.THRESHOLD (imported lazily)
        help="the practical threshold, as a fraction above 0 and below 1: a kernel is a regression when it is "
        "significantly slower by more than this, or than its own noise floor where that is higher (default 0.03: "
        "3%%)",
    )
    s.add_argument(
        "--allow-different",
        action="store_true",
        help="compare even across GPU models or major driver/CUDA versions (not with --simulate)",
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
        "--demo",
        action="store_true",
        help="with --simulate: replay the baselines shipped with the built-in workloads, not the project's (a demo: "
        '`baselines` is "shipped" in --json); without it, a project with no baselines of its own cannot pass',
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
    s.add_argument("--backend", choices=sorted(BACKENDS), help="default nvcuda; not with --simulate")
    s.add_argument("--device", type=int, help="CUDA device ordinal (default 0; not with --simulate)")
    s.add_argument("--allow-degraded", action="store_true", help=DEGRADED_HELP)
    s.epilog = (
        "exit status: 0 every kernel passed; 1 a regression (or a kernel failed); 2 the check could not run or "
        f"refused a kernel; {DEGRADED_EXIT} it passed, but the store had unreadable or malformed parts or rows "
        "(a baseline left out is a kernel not checked), unless --allow-degraded"
    )
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Run the check, print and write its reports; the exit code is the verdict, then whether the store was whole
    (a damaged baseline part would otherwise leave its kernels out of the gate unsaid). The reports say what the
    store left out, and carry the process's exit code; a check that could not run at all (exit 2) still writes
    --junit and --markdown, with its error, for a CI step that publishes them whatever happened."""
    from tuner.answers import check_report, check_result
    from tuner.store.schema import collect

    try:
        with collect() as degraded:
            results = _check(args)
    except Exception as e:  # exit 2 (a TunerError, or a bug: tuner.cli.main says which): the reports say why
        degraded_status(degraded.as_dict() if degraded else None, args.allow_degraded)  # the damage said too
        said = str(e) if isinstance(e, TunerError) else f"{one_line(e)} (a bug to report)"
        empty = check_result.CheckRun(baselines=check_result.SHIPPED if args.demo else check_result.PROJECT)
        _write_reports(args, empty, degraded.as_dict() if degraded else None, error=said)
        if args.json:  # a script reading stdout gets a document whatever happened
            left = degraded.as_dict() if degraded else None
            print(check_report.as_json(empty, code=2, degraded=left, baselines=empty.baselines, error=said))
        raise
    left = degraded.as_dict() if degraded else None
    status = degraded_status(left, args.allow_degraded)  # said in any case
    code = check_result.exit_code(results) or status
    _report(args, results, code, left)
    return code


# the options of a measurement: under --simulate nothing is measured, and an option that would do nothing is an
# error (a gate that asked for --rounds 1, or another device, must not read as having had it)
MEASURING = (
    ("--rounds", "rounds"),
    ("--backend", "backend"),
    ("--device", "device"),
    ("--allow-different", "allow_different"),
)


def _check(args: argparse.Namespace) -> CheckRun:
    from tuner.answers import check
    from tuner.answers.check_inputs import check_threshold

    plant = dict(parse_assignment(a) for a in args.plant) if args.plant else None
    for path in filter(None, (args.junit, args.markdown)):  # found out now, not after minutes of measuring
        folder = Path(path).resolve().parent
        if not folder.is_dir():
            raise TunerError(f"cannot write {path}: no folder {folder}")
    check_threshold(args.threshold)
    out = Console(stderr=True) if args.json else console

    def log(line: str) -> None:  # whole lines: a path or config is never cut, and a CI log greps them
        out.print(line, soft_wrap=True, markup=False)

    if args.plant_slowdown and not args.simulate:
        raise TunerError("--plant-slowdown is for --simulate (on a GPU, --plant changes the config itself)")
    if args.demo and not args.simulate:
        raise TunerError("--demo is for --simulate: a check on the GPU compares the project's own baselines")
    if args.simulate:
        from tuner.answers.check_replay import simulate_check

        given = [
            flag for flag, name in MEASURING if getattr(args, name) is not None and getattr(args, name) is not False
        ]
        if given:
            raise TunerError(
                f"{', '.join(given)}: nothing is measured under --simulate (each baseline's last recorded session plays "
                f"the fresh measurement); leave {'it' if len(given) == 1 else 'them'} out, or check on a GPU"
            )
        return simulate_check(
            args.workloads or None,
            threshold=args.threshold,
            slowdown=args.plant_slowdown,
            plant=plant,
            retune=args.retune,
            root=args.results,
            demo=args.demo,
            log=log,
        )
    return check.run_check(
        args.workloads or None,
        rounds=20 if args.rounds is None else args.rounds,
        threshold=args.threshold,
        allow_different=args.allow_different,
        backend=args.backend or "nvcuda",
        device=args.device or 0,
        root=args.results,
        plant=plant,
        retune=args.retune,
        log=log,
    )  # stdout: the JSON


def _report(args: argparse.Namespace, results: CheckRun, code: int, degraded: dict | None) -> None:
    from tuner.answers import check_report

    if args.json:
        print(
            check_report.as_json(
                results, code=code, degraded=degraded, notes=results.notes, baselines=results.baselines
            )
        )
    else:
        table = check_report.markdown(
            results, degraded=degraded, allowed=args.allow_degraded, notes=results.notes, baselines=results.baselines
        )
        console.print(table, highlight=False, soft_wrap=True)  # a table: no line breaks
    _write_reports(args, results, degraded)


def _write_reports(
    args: argparse.Namespace, results: CheckRun, degraded: dict | None, error: str | None = None
) -> None:
    """--junit and --markdown (each saying whose baselines were checked, and the notes); with `error` (the check
    could not run), each that can be written is, and a failure to write one is not said over the error."""
    from tuner.answers import check_report

    def junit() -> str:
        return check_report.junit(
            results,
            degraded=degraded,
            allowed=args.allow_degraded,
            error=error,
            notes=results.notes,
            baselines=results.baselines,
        )

    def markdown() -> str:
        return check_report.markdown(
            results,
            degraded=degraded,
            allowed=args.allow_degraded,
            error=error,
            notes=results.notes,
            baselines=results.baselines,
        )

    for path, text in ((args.junit, junit), (args.markdown, markdown)):
        if not path:
            continue
        if error is None:
            write_text(path, text())
            continue
        try:
            write_text(path, text())
        except TunerError:  # e.g. its folder missing: the error already says what stopped the check
            pass
