"""What the subcommands share: the console, writing a file, the arguments that several commands take the same
way (--size/--matrix, NAME=VALUE, the campaign storage), and the exit status of an answer from a degraded store."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from tuner.atomic import file_bytes, write_text_atomically
from tuner.errors import TunerError


class _TrimmedStdout:
    """sys.stdout as it is when written to (pytest swaps it), with each line's trailing spaces dropped: rich pads
    a table's last column and its centred title to the table's width, which a log or a diff of piped output then
    carries. A line is passed on once it ends; flush passes on what is left as it is."""

    def __init__(self) -> None:
        self._pending = ""

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        if lines:
            sys.stdout.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            sys.stdout.write(self._pending)
            self._pending = ""
        sys.stdout.flush()

    def isatty(self) -> bool:
        return sys.stdout.isatty()

    def fileno(self) -> int:
        return sys.stdout.fileno()

    @property
    def encoding(self) -> str:
        return getattr(sys.stdout, "encoding", None) or "utf-8"


console = Console(file=_TrimmedStdout())  # type: ignore[arg-type]  # a text stream as rich uses one
err_console = Console(stderr=True, soft_wrap=True)  # as the CLI says a TunerError: paths stay whole


def write_text(path: str, text: str) -> None:
    """Write `text` to `path` whole or not at all, gzip-compressed where its name ends in .gz, as the store writes
    its own files (tuner.atomic.write_text_atomically); a failure is one line naming the file. Something other
    than a file there (/dev/stdout, a pipe) is written to in place: a rename would replace it."""
    target = Path(path)
    try:
        if target.exists() and not target.is_file():
            target.write_bytes(file_bytes(target, text))
        elif not target.parent.is_dir():
            raise TunerError(f"cannot write {path}: no folder {target.parent.resolve()}")
        else:
            write_text_atomically(target, text)
    except OSError as e:
        raise TunerError(f"cannot write {path}: {e.strerror or e}") from None


def size_text(args: argparse.Namespace) -> str | None:
    """--matrix FILE (spmv) is the size `mtx:FILE`: the workload reads the Matrix Market file."""
    if not getattr(args, "matrix", None):
        return args.size
    if args.workload != "spmv" or args.size:
        raise TunerError("--matrix is for the spmv workload, instead of --size")
    return f"mtx:{args.matrix}"


def shown_path(path: Path) -> str:
    """A path relative to the working directory when it is inside it, else absolute."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def parse_assignment(text: str) -> tuple[str, Any]:
    """NAME=VALUE, the value as JSON where it parses (numbers, booleans), else as text."""
    key, _, value = text.partition("=")
    if not value:
        raise TunerError(f"expected NAME=VALUE, got '{text}'")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def storage_url(args: argparse.Namespace, *, creating: bool = False) -> str:
    """The distributed campaigns' storage, decided here alike for `tune --workers`, `worker` and `status`:
    --storage, else $TUNER_STORAGE (a command line is visible to every user in `ps`, a process's environment only
    to its owner: `tune --workers` hands the URL to its workers so), else the SQLite file beside the results.
    A command that joins or reads a campaign (not `creating` it) needs the storage to exist
    (study_storages.existing_storage): opening a SQLite file that is not there would create an empty one."""
    from tuner.campaign.study_storages import STORAGE_ENV, default_storage, existing_storage
    from tuner.store import results_root

    if args.storage:
        url, source = args.storage, ""
    elif os.environ.get(STORAGE_ENV):
        url, source = os.environ[STORAGE_ENV], f" (from ${STORAGE_ENV})"
    else:
        url, source = default_storage(args.results or results_root()), ""
    if creating:
        return url
    hint = "`tuner tune ... --workers N` creates it" + ("" if args.storage or source else "; --storage URL for another")
    return existing_storage(url, source=source, hint=hint)


DEGRADED_EXIT = 3
DEGRADED_HELP = (
    "answer even when the store had unreadable or malformed parts or rows, left out (exit 0, not 3; the answer "
    "still says what was left out)"
)
DEGRADED_EPILOG = (
    "exit status: 0 answered; 2 a clear error; 3 answered from a store with parts or rows left out (unreadable, "
    'missing or mistyped columns, non-numeric or non-finite values; --json names them under "degraded"), '
    "unless --allow-degraded"
)


def add_allow_degraded(parser: argparse.ArgumentParser) -> None:
    """--allow-degraded, and the exit statuses in the help."""
    parser.add_argument("--allow-degraded", action="store_true", help=DEGRADED_HELP)
    parser.epilog = DEGRADED_EPILOG


def degraded_status(degraded: dict | None, allowed: bool) -> int:
    """The exit status of an answer: one line on stderr where the store left something out (degraded: as
    tuner.store.schema.Degraded.as_dict()), and 3 then unless `allowed`."""
    if not degraded:
        return 0
    parts = [p["path"] for p in degraded["parts"]]
    rows = degraded["rows_left_out"]
    of_part: dict[str, int] = {}  # rows left out, by the part they were in: the user can look at that file
    for r in degraded["rows"]:
        of_part[r["path"]] = of_part.get(r["path"], 0) + r["count"]
    said = f"{len(parts)} part(s) left out ({', '.join(parts)})" if parts else ""
    said += ("; " if said and rows else "") + (f"{rows} row(s) left out" if rows else "")
    said += f" ({', '.join(f'{n} of {path}' for path, n in of_part.items())})" if of_part else ""
    print(f"warning: degraded store: {said}; the answer is drawn from the rest", file=sys.stderr)
    return 0 if allowed else DEGRADED_EXIT


def not_found_in_degraded_store(e: TunerError, allowed: bool) -> int:
    """What was asked for is not in the store as read, which left parts out (DegradedStoreError): the error,
    and the exit status of a degraded store's answer (3), or 2 with --allow-degraded (there is nothing to write)."""
    err_console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
    # the error names what was left out: not degraded_status's line too, which says an answer was drawn from the rest
    return 2 if allowed or not getattr(e, "degraded", None) else DEGRADED_EXIT
