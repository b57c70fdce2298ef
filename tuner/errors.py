"""The one exception type whose message is shown to users as is, without a traceback."""


class TunerError(Exception):
    """A problem the user can fix: bad input, a missing result, an unknown name."""
