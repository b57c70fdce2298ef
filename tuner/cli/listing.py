"""`tuner list`: every workload this project sees, where it comes from, its kernel, space and sizes, and what
the store has recorded of it (the sizes a replay can run, and over how many of the space's configs)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from tuner.cli.common import console, shown_path
from tuner.errors import TunerError
from tuner.formatting import Field, Items, fitted, records
from tuner.json_text import strict_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `tuner list`."""
    s = subparsers.add_parser(
        "list",
        help="workloads, where each comes from, their kernels, spaces and problem sizes, and their recordings",
    )
    s.add_argument(
        "workload", nargs="?", help="one workload in full: every size and every recording (GPU, size, dtype, configs)"
    )
    s.add_argument("--json", action="store_true", help="one JSON document for scripts")
    s.set_defaults(func=command)


def describe(name: str, origin: str, root: Path, say: Callable[[str], object] = lambda what: None) -> dict[str, Any]:
    """One workload as `tuner list --json` shows it; one that cannot be loaded has its `error` instead, a line
    that names where it comes from (the others are listed as usual). `say`: told what is being done, as it is
    begun (a first listing counts each space's configs and reads the store's parts: seconds)."""
    from tuner.store.coverage import recordings, space_size
    from tuner.store.schema import collect
    from tuner.workloads import get_workload

    try:
        say("its space (counting its valid configs)")
        w = get_workload(name)
        s = w.space
        configurations = space_size(s, None)  # the space's configs whatever the dtype
    except TunerError as e:
        said = str(e)
        if not said.startswith(f"workload '{name}'"):  # some errors name the workload already
            said = f"workload '{name}'{'' if origin in said else f' ({origin})'}: {said}"
        return {"workload": name, "origin": origin, "error": said}
    say("its recordings (reading the store's rows of it)")
    with collect() as left_out:  # parts of the store that could not be read: their recordings are not listed
        recorded = recordings(root, w.name, s)
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
        # what `tuner tune --simulate` can replay: per GPU, size and dtype, the space's configs recorded
        "recordings": [{**r.as_dict(), "path": shown_path(r.path) if r.path else None} for r in recorded],
        # what was left out (as `tuner best --json` says it): the recordings listed may be incomplete
        **({"degraded": left_out.as_dict()} if left_out else {}),
    }


def command(args: argparse.Namespace) -> int:
    """Print the workloads as a table (one workload: in full, with its recordings), or as JSON."""
    from tuner.store import results_root
    from tuner.workloads import discover, get_workload

    found = discover()  # a name defined twice is listed once, its error (naming both places) in place of it
    if args.workload and args.workload not in found:  # the error every command gives: known names, did you mean
        get_workload(args.workload)
        raise TunerError(f"no workload '{args.workload}' (known: {', '.join(sorted(found))})")  # if that found it
    names = [args.workload] if args.workload else sorted(found)
    root = Path(args.results or results_root())
    docs = []
    # loading a space and reading its store take seconds the first time (then kept: tuner.kept); on a terminal, say
    # what is being read meanwhile (rich shows a status only there)
    with Console(stderr=True).status("") as status:
        for i, name in enumerate(names, 1):
            where = f"{name} ({i} of {len(names)})" if len(names) > 1 else name
            docs.append(describe(name, found[name].origin, root, functools.partial(_say, status, where)))
    _warn_left_out(docs)
    broken = [d["error"] for d in docs if "error" in d]
    for error in broken:  # after the listing, on stderr: exit 2 says that something needs mending
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(error)}", highlight=False)
    if args.json:
        print(strict_json(docs[0] if args.workload else docs))
    elif args.workload:
        _print_one(docs[0])
    else:
        _print_all(docs)
    return 2 if broken else 0


def _say(status: Status, where: str, what: str) -> None:
    status.update(f"reading {escape(where)}: {escape(what)}")


_FIELDS = [
    Field("workload"),
    Field("origin", wrap=True),
    Field("kernel", wrap=True, optional=True),
    Field("space", wrap=True, optional=True),
    Field("valid configs", numeric=True, keep=True),
    Field("sizes", wrap=True),
    Field("dtypes", wrap=True),
    Field("objective", wrap=True, keep=True),
    Field("recorded", wrap=True, keep=True),
]


def _print_all(docs: list[dict]) -> None:
    rows = []
    for d in docs:
        if "error" in d:
            rows.append([d["workload"], _origin(d["origin"]), "broken: see the error below"])
            rows[-1] += [""] * (len(_FIELDS) - len(rows[-1]))
            continue
        names = list(d["sizes"])  # the variables of each: `tuner list --json`
        sizes = names[:6] + ([f"and {len(names) - 6} more"] if len(names) > 6 else [])
        rows.append(
            [
                d["workload"],
                _origin(d["origin"]),
                Items([d["kernel"], f"({d['source']})"], sep=" "),
                d["space"],
                str(d["configurations"]),
                Items(sizes),
                Items(d["dtypes"]),
                _objective(d),
                _recorded(d["recordings"]) + (f"; {_incomplete(d, short=True)}" if d.get("degraded") else ""),
            ]
        )
    console.print(fitted(_FIELDS, rows, console.width, title="workloads", vertical="records"))
    console.print("[dim]one workload in full, with every recording: tuner list WORKLOAD[/]", highlight=False)


def _warn_left_out(docs: list[dict]) -> None:
    """One warning for each part of the store left out (unreadable, or not as the schema wants it), and for each
    part's rows left out: the listing is drawn from the rest."""
    from tuner.store.schema import Degraded

    said: set[str] = set()
    for d in docs:
        Degraded.from_dict(d.get("degraded")).warn(stacklevel=2, said=said)


def _incomplete(d: dict, short: bool = False) -> str:
    """How many parts (and rows) of the store were left out of the listing of `d`, as a clause ("" if none)."""
    left = d.get("degraded")
    if not left:
        return ""
    parts, rows = len(left["parts"]), left["rows_left_out"]
    said = [f"{parts} part(s)"] if parts else []
    said += [f"{rows} row(s)"] if rows else []
    what = " and ".join(said)
    return f"incomplete: {what} left out" if short else f"incomplete: {what} of the store could not be read"


def _print_one(d: dict) -> None:
    if "error" in d:
        return
    sizes = [f"{name} ({', '.join(f'{k}={v}' for k, v in size.items())})" for name, size in d["sizes"].items()]
    fields = [Field("workload"), *(Field(n, wrap=True) for n in ("origin", "kernel", "space", "parameters"))]
    fields += [Field(n, wrap=True) for n in ("configs", "sizes", "default size", "dtypes", "objective")]
    # a path wider than its column would be folded, and a folded path cannot be copied: it is named by its file
    # in the block and written whole below it, as one line the terminal wraps
    room = console.width - max(len(f.name) for f in fields) - 3
    paths = {"folder": _origin(d["origin"]), "kernel source": d["source"], "space file": d["space"]}
    whole = {what: path for what, path in paths.items() if len(path) + 2 > room}  # never "built-in": not a path

    def shown(what: str) -> str:
        return f"{Path(paths[what]).name}, path below" if what in whole else paths[what]

    row = [
        d["workload"],
        shown("folder"),
        Items([d["kernel"], f"({shown('kernel source')})"], sep=" "),
        shown("space file"),
        Items(f"{k} ({len(v)})" for k, v in d["parameters"].items()),
        f"{d['configurations']} valid",
        Items(sizes),
        str(d["default_size"]),
        Items(d["dtypes"]),
        _objective(d),
    ]
    console.print(records(fields, [row]))
    for what, path in whole.items():
        console.print(f" {what}: {escape(path)}", highlight=False, soft_wrap=True)
    recorded = d["recordings"]
    incomplete = _incomplete(d)
    if incomplete:  # said after the table too: what is listed is drawn from the rest
        unread = sorted({p["path"] for p in d["degraded"]["parts"]} | {r["path"] for r in d["degraded"]["rows"]})
        incomplete += f" ({', '.join(map(str, unread))}); the recordings they hold may be missing or short below"
    if not recorded:
        console.print("no recordings: `tuner tune` on a GPU records one; nothing to replay with --simulate yet")
        if incomplete:
            console.print(f"[yellow]{escape(incomplete)}[/]", highlight=False, soft_wrap=True)
        return
    rows = [[r["gpu"], r["size"], r["dtype"], _coverage(r)] for r in recorded]
    fields = [Field("gpu"), Field("size"), Field("dtype"), Field("recorded configs", numeric=True, keep=True)]
    title = "recordings: what `tuner tune --simulate` replays, and over how many of the space's configs"
    console.print(fitted(fields, rows, console.width, title=title))
    unwritable = sorted({r["cache_not_writable"] for r in recorded if r.get("cache_not_writable")})
    if unwritable:  # said once, not "unreadable" in every row: the recordings are fine, the cache folder is not
        console.print(
            f"[yellow]not derived: the recordings are derived from the store's rows into this user's cache folder, "
            f"and {escape(', '.join(unwritable))} is not writable: set TUNER_CACHE to a writable folder[/]",
            highlight=False,
            soft_wrap=True,
        )
    if incomplete:
        console.print(f"[yellow]{escape(incomplete)}[/]", highlight=False, soft_wrap=True)


def _coverage(r: dict) -> str:
    """A recording's cell: held of the space's configs, "not derived" (its cache folder not writable: said below
    the table), or "unreadable"."""
    if r["recorded_configs"] is not None:
        return f"{r['recorded_configs']}/{r['space_configs']}"
    return "not derived" if r.get("cache_not_writable") else "unreadable"


def _origin(origin: str) -> str:
    return shown_path(Path(origin)) if Path(origin).is_absolute() else origin


def _objective(d: dict) -> str:
    return f"{d['objective']['metric']} ({'max' if d['objective']['maximize'] else 'min'})"


def _recorded(recorded: list[dict]) -> str:
    """How many recordings, and how many hold the whole space: "8, all complete", "66, 1 complete", "none"."""
    if not recorded:
        return "none"
    complete = sum(r["complete"] for r in recorded)
    said = f"{len(recorded)}, " + ("all complete" if complete == len(recorded) else f"{complete or 'none'} complete")
    underived = sum(bool(r.get("cache_not_writable")) for r in recorded)
    if underived:  # the recordings are fine: the cache folder they are derived into is not writable
        said += f"; {underived} not derived (the cache folder is not writable: set TUNER_CACHE)"
    return said
