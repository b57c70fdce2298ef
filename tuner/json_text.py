"""JSON as every `--json` and every JSON report of the tool writes it: strict, so that any parser reads it. A
number that is not finite (a score over one repeat has no interval, a comparison that could not be made) is
null, not the bare NaN Python's json writes by default; numpy values are their Python ones; anything else JSON
lacks (a path, a timestamp) is its text."""

from __future__ import annotations

import json
import math
import sys


def strict_json(doc: object, indent: int | None = 2) -> str:
    """`doc` as strict JSON text."""
    return json.dumps(finite(doc), indent=indent, default=str, allow_nan=False)


def finite(value: object) -> object:
    """`value` with every number that is not finite made None, and numpy values made Python's, all the way down."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    # numpy values exist only once numpy is imported: read from sys.modules, so that a command that never
    # imports numpy (`tuner --help`, whose parser imports this module) does not for this
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return [finite(v) for v in value]
    if np is not None and isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
