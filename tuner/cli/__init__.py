"""`tuner`: one command, one thin module per subcommand (each with `register(subparsers)` and its command)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from tuner import __version__
from tuner.cli import (
    baseline,
    best,
    check,
    compare_strategies,
    dashboard,
    export,
    init,
    listing,
    report,
    results,
    run,
    status,
    tune,
    worker,
)
from tuner.errors import ReplayInterrupted, TunerError

WORKLOADS_ENV = "TUNER_WORKLOADS"  # read by tuner.locations.project(), here and in every process a command starts
STORING = {"tune", "worker", "baseline"}  # the commands that write to the store (and may create its folder)


def build_parser(run_programs: bool = True) -> argparse.ArgumentParser:
    """The CLI; `run_programs`: with each workload's `tuner run` program, which imports every workload (half a
    second of each worker's start on the H100 machine, spent only when the command may be `run`)."""
    p = argparse.ArgumentParser(prog="tuner", description="Tune CUDA kernels, query and export the best configs.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _folder_options(p, None)
    sub = p.add_subparsers(dest="command", required=True)
    for module in (listing, tune, worker, status, dashboard, best, results, report, export, baseline, check):
        module.register(sub)
    run.register(sub, programs=run_programs)
    compare_strategies.register(sub)
    init.register(sub)
    _after_every_command(sub)
    return p


def _folder_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--results", type=Path, default=default, help="results directory (default: ./results of the project)"
    )
    parser.add_argument(
        "--workloads",
        type=Path,
        default=default,
        dest="workloads_dir",
        metavar="DIR",
        help=f"the user's workloads folder (default: ./workloads of the project, or ${WORKLOADS_ENV})",
    )


def _after_every_command(sub: argparse._SubParsersAction) -> None:
    """--results and --workloads after the command too (`tuner list --workloads DIR`, as the docs and the errors
    write them), and after a `tuner run` program's name: there they default to nothing (SUPPRESS), so that one given
    before the command stands unless given again after it."""
    for command in sub.choices.values():
        _folder_options(command, argparse.SUPPRESS)
        for action in command._actions:  # `tuner run`'s programs
            if isinstance(action, argparse._SubParsersAction):
                _after_every_command(action)


def _workloads_option(argv: list[str]) -> str | None:
    """The value of --workloads, needed before the parser is built (`tuner run` lists every workload's
    program); a malformed command line is left for the full parser to report."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    pre.add_argument("--workloads")
    try:
        return pre.parse_known_args(argv)[0].workloads
    except argparse.ArgumentError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status: 0, 1 (no result, or a regression), 2 (a clear error), 3 (`best`/`export`/`check`
    answered from a degraded store: parts or rows left out; --allow-degraded makes it 0), 130, 141."""
    argv = sys.argv[1:] if argv is None else list(argv)
    saved = os.environ.get(WORKLOADS_ENV)
    args = None
    try:
        workloads = _workloads_option(argv)
        if workloads:  # through the environment: measuring processes and `tuner worker`s find workloads by name
            os.environ[WORKLOADS_ENV] = str(Path(workloads).resolve())
        args = build_parser(run_programs="run" in argv).parse_args(argv)
        _check_folders(args)
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            return args.func(args)
    except TunerError as e:
        # soft_wrap: paths stay whole; escaped: "pip install 'gpu-tuner[distributed]'" is text, not markup
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 2
    except KeyboardInterrupt as e:
        replayed = isinstance(e, ReplayInterrupted) or getattr(args, "simulate", False)
        measuring = args is not None and args.command in STORING and not replayed
        said = "; everything measured is stored; run the same command again to resume" if measuring else ""
        if isinstance(e, ReplayInterrupted) and args is not None and args.command == "worker":
            said = "; run the same command again to go on with the replay"  # a hand-started worker of a replay
        elif replayed and args is not None and args.command == "tune" and getattr(args, "storage", None):
            said = "; its study is kept in the --storage: run the same command again to go on with the replay"
        if args is not None and args.command == "worker" and getattr(args, "launch", None):
            said = ""  # a worker `tune --workers N` started: that command says how to resume, not this one
        Console(stderr=True).print(f"interrupted{said}", highlight=False)
        return 130
    except BrokenPipeError:  # `tuner results ... | head`: the reader has gone; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit would raise
        return 141
    except Exception:  # a bug, not a verdict: `tuner check` must not exit 1, which says "regression"
        if args is None or args.func is not check.command:
            raise
        import traceback

        traceback.print_exc()
        Console(stderr=True).print("[red]error:[/] the check could not run (the traceback above is a bug to report)")
        return 2
    finally:
        if saved is None:
            os.environ.pop(WORKLOADS_ENV, None)
        else:
            os.environ[WORKLOADS_ENV] = saved


def _check_folders(args: argparse.Namespace) -> None:
    """--workloads and --results (or TUNER_RESULTS) name folders: a typo must not answer from the built-ins alone (or
    the package's recordings), nor a campaign create its store somewhere unintended."""
    if args.workloads_dir is not None and args.command != "init" and not args.workloads_dir.is_dir():
        raise TunerError(f"--workloads {args.workloads_dir}: no such folder (`tuner init NAME` creates one)")
    named = (
        ("--results", args.results) if args.results is not None else ("TUNER_RESULTS", os.environ.get("TUNER_RESULTS"))
    )
    if named[1]:  # imported only then: tuner.store imports pandas
        from tuner.store.paths import checked_results_folder

        checked_results_folder(named[1], named[0], may_create=args.command in STORING)


def _one_line_warning(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
    """A warning as the CLI says everything else: one line on stderr, not Python's file, line and source."""
    Console(stderr=True, soft_wrap=True).print(f"[yellow]warning:[/] {escape(str(message))}", highlight=False)


if __name__ == "__main__":
    raise SystemExit(main())
