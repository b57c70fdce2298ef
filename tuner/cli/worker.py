"""`tuner worker`: join a distributed campaign with one GPU of this host."""

from __future__ import annotations

import argparse
import json

from tuner.cli.common import console, storage_url
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner worker`."""
    s = subparsers.add_parser("worker", help="join a distributed campaign with one GPU of this host")
    s.add_argument("campaign")
    s.add_argument(
        "--storage",
        help="the campaign's Optuna storage URL (sqlite:///..., postgresql://...; default: $TUNER_STORAGE, else "
        "the SQLite file beside the results)",
    )
    s.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    s.add_argument(
        "--allow-mixed-gpus", action="store_true", help="join even if the campaign runs on another GPU model"
    )
    s.add_argument("--quiet", action="store_true", help="no line per evaluation")
    s.add_argument("--json", action="store_true", help="what this worker did, as one JSON document (implies --quiet)")
    s.add_argument("--measure-target", help=argparse.SUPPRESS)
    # JSON: the measuring process to launch at once (run_distributed)
    s.add_argument("--launch", help=argparse.SUPPRESS)
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Work on the campaign until its budget is spent, then print what this worker did."""
    if not args.launch:
        return _work(args)
    try:
        return _work(args)
    except KeyboardInterrupt:
        # started by `tune --workers` (--launch): stopped with it, its trials given back; that command says, once for
        # all its workers, how to resume
        return 130


def _work(args: argparse.Namespace) -> int:
    """The worker's work and its summary line (or JSON)."""
    launched = None
    if args.launch:  # before the heavy imports below, which the measuring process's set-up then overlaps
        from tuner.measure.runner import IsolatedRunner

        launched = IsolatedRunner.for_campaign(device=args.device, **json.loads(args.launch)).launch()
    from tuner.campaign.distributed import run_worker

    log = (lambda msg: None) if args.quiet or args.json else (lambda msg: print(msg, flush=True))
    try:
        summary = run_worker(
            args.campaign,
            storage_url(args),
            args.device,
            results=args.results,
            allow_mixed_gpus=args.allow_mixed_gpus,
            measure_target=args.measure_target,
            launched=launched,
            log=log,
        )
    finally:
        if launched is not None:
            launched.shutdown()  # if it was not used (run_worker shuts down what it uses)
    if args.json:
        print(strict_json(summary))
        return 0
    back = summary.get("handed_back", 0)
    done = "replayed" if summary.get("simulated") else "measured"  # a replay measures nothing
    console.print(
        f"worker {summary['worker']} ({summary['gpu']}): {summary['measured']} {done}, "
        f"{summary['served']} served from the store, {summary['trials']} trials"
        + (
            f" ({back} told at once: another trial's config, invalid, or left over when the queue ran out)"
            if back
            else ""
        ),
        highlight=False,
    )
    return 0
