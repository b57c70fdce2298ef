"""The one exception type whose message is shown to users as is, without a traceback, the one way an exception is
said in one line (one_line), and Ctrl-C in a replay (ReplayInterrupted)."""


class TunerError(Exception):
    """A problem the user can fix: bad input, a missing result, an unknown name."""


class ReplayInterrupted(KeyboardInterrupt):
    """Ctrl-C in a command that replays a recording (a worker that joined a replayed campaign): what it did was
    not measured, so the CLI does not say that measurements were stored."""


def one_line(e: BaseException) -> str:
    """An exception in one line: its type, and its message if it has one, its lines folded into one (a message
    of several lines would break the one line of a TunerError or a SpaceError it goes into)."""
    if isinstance(e, SystemExit):
        return f"it calls sys.exit({e.code!r})" if e.code is not None else "it calls sys.exit()"
    message = " ".join(line.strip() for line in str(e).splitlines() if line.strip())
    return f"{type(e).__name__}: {message}" if message else type(e).__name__
