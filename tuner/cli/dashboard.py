"""`tuner dashboard`: optuna-dashboard on a campaign's Optuna study (the `dashboard` extra)."""

from __future__ import annotations

import argparse

from tuner.errors import TunerError
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner dashboard`."""
    s = subparsers.add_parser(
        "dashboard",
        help="start optuna-dashboard on a campaign's study (pip install 'gpu-tuner[dashboard]')",
        description="Serve optuna-dashboard on the storage that holds CAMPAIGN's study (without a name: the only "
        "storage of the results folder, or --storage). Parameters show their real values, the objective its "
        "unit and direction; a failed or invalid config is a pruned trial whose user attribute `tuner.status` "
        "says why.",
    )
    s.add_argument(
        "campaign",
        nargs="?",
        help="the campaign: its Optuna study's name, or the campaign's name where that names one study (a campaign "
        "on one process names its study <campaign>@<gpu>/<hashes>; a distributed one as `tuner status` lists it)",
    )
    s.add_argument("--storage", help="an Optuna storage URL (default: the studies under the results folder)")
    s.add_argument("--host", default="127.0.0.1", help="the address to serve on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8080, help="the port to serve on (default 8080)")
    s.add_argument("--json", action="store_true", help="print where the dashboard serves (JSON) before serving")
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Find the campaign's storage and open it, then say where the dashboard serves and serve it until
    interrupted (a storage that does not open is an error before anything is announced; none is created)."""
    try:
        import optuna_dashboard
    except ImportError:
        raise TunerError("`tuner dashboard` needs optuna-dashboard: pip install 'gpu-tuner[dashboard]'") from None
    from tuner.campaign.rdb_storage import open_storage, redact
    from tuner.campaign.study_storages import find_study
    from tuner.store import results_root

    url, study_id = find_study(args.results or results_root(), args.campaign, args.storage)
    storage = open_storage(url)  # before the line that says it serves: a script reading it may take it as up
    address = f"http://{args.host}:{args.port}/dashboard" + (f"/studies/{study_id}" if study_id is not None else "")
    if args.json:
        print(strict_json({"storage": redact(url), "study_id": study_id, "url": address}, indent=None), flush=True)
    else:
        print(f"optuna-dashboard on {redact(url)}: {address}  (Ctrl-C stops it)", flush=True)
    optuna_dashboard.run_server(storage, host=args.host, port=args.port)
    return 0
