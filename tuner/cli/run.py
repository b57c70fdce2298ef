"""`tuner run WORKLOAD`: a workload's own program, run with the best stored config (or --config)."""

from __future__ import annotations

import argparse
import contextlib
import sys

from tuner.cli.common import parse_assignment
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction, programs: bool = True) -> None:
    """Add `tuner run`; with `programs`, a sub-command for each workload that has a program (which imports
    every workload: only worth it when the command may be `run`)."""
    s = subparsers.add_parser("run", help="run a workload's program with the best stored config (or --config)")
    sub = s.add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    if not programs:
        return
    from tuner.errors import TunerError
    from tuner.workloads import discover, get_workload

    for name in sorted(discover()):
        try:
            w = get_workload(name)
        except TunerError:  # a broken workload (`tuner list` says why) must not take the others' programs down
            continue
        if w.run_help:
            prog = sub.add_parser(w.name, help=w.run_help, description=w.run_help)
            w.add_run_arguments(prog)
            prog.add_argument(
                "--config", nargs="+", metavar="NAME=VALUE", help="run this config instead of the best stored"
            )
            prog.add_argument("--dtype", help="element type (default: the space's first)")
            prog.add_argument("--gpu", help="take the best config stored for this GPU (default: this machine's)")
            prog.add_argument(
                "--json",
                action="store_true",
                help="a JSON summary on stdout (each size and dtype run, its config and where it came from; "
                "the program's own printing goes to stderr)",
            )
            prog.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Run the workload's program; it asks for the config of each size and dtype it runs, once it has read and
    checked its inputs: the config is checked (--config) or looked up, then the device it runs on (require_device),
    before anything is built or run."""
    from tuner.answers.best_config import run_config
    from tuner.workloads import get_workload

    given = dict(parse_assignment(a) for a in args.config) if args.config else None
    ran: list[dict] = []

    def config_for(size: dict, dtype: str) -> dict:
        notes: list[str] = []  # the lookup's fallbacks, said once the program can run
        config = run_config(args.workload, size, dtype, given, gpu=args.gpu, log=notes.append)
        require_device(args.workload)
        for note in notes:
            print(note, file=sys.stderr)
        ran.append({"size": size, "dtype": dtype, "config": config, "from": "--config" if given else "store"})
        return config

    if not getattr(args, "json", False):
        return get_workload(args.workload).run(args, config_for)
    with contextlib.redirect_stdout(sys.stderr):  # stdout holds the JSON alone
        status = get_workload(args.workload).run(args, config_for)
    print(strict_json({"workload": args.workload, "exit_status": status, "runs": ran}))
    return status


def require_device(workload: str) -> None:
    """Before a program builds and runs its GPU code: a CUDA driver and GPU are here, else one line saying what
    this machine lacks, in `tuner tune`'s words (tuner.measure.machine.gpu_missing), instead of the CUDA error the
    program would print once built. A program of CPU code needs none."""
    from tuner.errors import TunerError
    from tuner.measure import machine
    from tuner.measure.backends import HOST_BACKEND
    from tuner.workloads import get_workload

    if get_workload(workload).space.on_cpu:
        return
    missing = machine.gpu_missing(HOST_BACKEND)  # the driver and a GPU: what any program's CUDA code needs
    if missing:
        raise TunerError(f"cannot run {workload} here: {missing}")
