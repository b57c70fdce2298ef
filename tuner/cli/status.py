"""`tuner status`: the progress of distributed campaigns."""

from __future__ import annotations

import argparse

from tuner.cli.common import storage_url
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner status`."""
    s = subparsers.add_parser(
        "status",
        help="progress of a distributed campaign: done, running, failed, best so far "
        "(without a name: a line for each campaign in the storage)",
    )
    s.add_argument("campaign", nargs="?")
    s.add_argument(
        "--storage",
        help="the campaigns' Optuna storage URL (default: $TUNER_STORAGE, else the SQLite file beside the results)",
    )
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Print one campaign's status, or a line per campaign in the storage."""
    from tuner.campaign.distributed import (
        campaign_names,
        campaign_status,
        format_status,
        format_summary,
    )
    from tuner.campaign.rdb_storage import redact

    url = storage_url(args)  # only one that exists: status creates nothing
    names = [args.campaign] if args.campaign else campaign_names(url)
    statuses = [campaign_status(name, url, args.results) for name in names]
    if args.json:
        print(strict_json(statuses[0] if args.campaign else statuses))
    elif args.campaign:
        print(format_status(statuses[0]))  # plain: rich would wrap its lines
    else:
        print("\n".join(map(format_summary, statuses)) if statuses else f"no campaigns in {redact(url)}")
    return 0
