"""`tuner list`: every workload this project sees, where it comes from, its kernel, space and sizes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tuner.cli.common import console, shown_path
from tuner.errors import TunerError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner list`."""
    s = subparsers.add_parser("list", help="workloads, where each comes from, their kernels, spaces and problem sizes")
    s.add_argument("--json", action="store_true", help="one JSON document for scripts")
    s.set_defaults(func=command)


def describe(name: str, origin: str) -> dict[str, Any]:
    """One workload as `tuner list --json` shows it; one that cannot be loaded has its `error` instead, a line
    that names where it comes from (the others are listed as usual)."""
    from tuner.measure import kt
    from tuner.workloads import get_workload

    try:
        w = get_workload(name)
        s = w.space
        configurations = kt.searchspace(s).size
    except TunerError as e:
        where = "" if origin in str(e) else f" ({origin})"
        return {"workload": name, "origin": origin, "error": f"workload '{name}'{where}: {e}"}
    return {
        "workload": w.name,
        "origin": w.origin,
        "kernel": s.kernel_name,
        "source": shown_path(s.kernel_source),
        "space": shown_path(s.path),
        "parameters": s.params,
        "configurations": configurations,
        "sizes": s.sizes,
        "default_size": s.default_size,
        "dtypes": list(s.dtypes),
        "objective": {"metric": s.objective, "maximize": s.maximize},
    }


def command(args: argparse.Namespace) -> int:
    """Print the workloads as a table, or as JSON."""
    from tuner.workloads import discover

    found = discover()  # a name defined twice is an error here, naming both places
    docs = [describe(name, found[name].origin) for name in sorted(found)]
    broken = [d["error"] for d in docs if "error" in d]
    for error in broken:  # after the listing, on stderr: exit 2 says that something needs mending
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(error)}", highlight=False)
    if args.json:
        print(json.dumps(docs, indent=2))
        return 2 if broken else 0
    table = Table(title="workloads")
    for col in ("workload", "origin", "kernel", "space", "valid configs", "sizes", "dtypes", "objective"):
        table.add_column(col)
    for d in docs:
        if "error" in d:
            table.add_row(d["workload"], d["origin"], "[red]broken[/]: see the error below", "", "", "", "", "")
            continue
        names = list(d["sizes"])  # the variables of each: `tuner list --json`
        sizes = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        origin = shown_path(Path(d["origin"])) if Path(d["origin"]).is_absolute() else d["origin"]
        table.add_row(
            d["workload"],
            origin,
            f"{d['kernel']} ({d['source']})",
            d["space"],
            str(d["configurations"]),
            sizes,
            ", ".join(d["dtypes"]),
            f"{d['objective']['metric']} ({'max' if d['objective']['maximize'] else 'min'})",
        )
    console.print(table)
    return 2 if broken else 0
