"""The typed row schema of the store's parts, in one place, and what a read left out (Degraded).

Every part read (tuner.store.parts.read_parts) is checked against the schema of its folder (evaluations/,
baselines/, confirmations/, and check/, the regression gate's baselines): a part lacking a required column, or
holding one of the wrong type, is left out whole; rows whose value (objective_value, time_ms) is not a number, or
not finite in a successful row, are left out and counted, and so are a regression baseline's rows that a check
could not read: its rounds not a list of positive finite times, its config or size_vars not a JSON object, its
references not a JSON object of lists of positive finite times one a round, its names (workload, size, dtype,
gpu) missing, or its sessions not a whole number of 1 or more (each named by its workload, size and dtype). An
answer drawn from a store with anything left out says so (`degraded`), so a damaged store never gives a silently
wrong answer."""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


TEXT, NUMBER, FLAG = "text", "number", "flag"
# the kinds of a regression baseline's columns, each checked row by row where rows are read, so that a check never
# meets a value it cannot use (a JSON error or a NaN verdict half-way through the gate): TIMES a non-empty list of
# positive finite numbers (times in ms: a time of 0 or below is no measurement); NAME text, never missing or empty;
# JSON_OBJECT text holding a JSON object; TIMES_BY_NAME text holding a JSON object of TIMES, each as long as the
# row's TIMES column (a reference timed in each round); COUNT a whole number of 1 or more, or missing (a column that
# older parts lack: optional, unlike every other kind)
TIMES, NAME, JSON_OBJECT, TIMES_BY_NAME, COUNT = "times", "name", "json object", "times by name", "count"
OPTIONAL = {COUNT}  # kinds whose column a part may lack

# required columns of each kind of part (and, of the kinds in OPTIONAL, columns checked where a part has them), with
# their type (a NUMBER column, and each of the regression baseline's kinds, is also checked row by row)
EVALUATION: dict[str, str] = {
    "workload": TEXT,
    "size": TEXT,
    "size_vars": TEXT,
    "dtype": TEXT,
    "config": TEXT,
    "status": TEXT,
    "gpu": TEXT,
    "metrics": TEXT,
    "timestamp": TEXT,
    "objective_value": NUMBER,
    "time_ms": NUMBER,
}
BASELINE: dict[str, str] = {
    "workload": TEXT,
    "size_vars": TEXT,
    "dtype": TEXT,
    "baseline": TEXT,
    "gpu": TEXT,
    "metrics": TEXT,
    "timestamp": TEXT,
    "time_ms": NUMBER,
}
CONFIRMATION: dict[str, str] = {
    "workload": TEXT,
    "size_vars": TEXT,
    "dtype": TEXT,
    "gpu": TEXT,
    "config": TEXT,
    "worker": TEXT,
    "timestamp": TEXT,
    "chosen": FLAG,
}
# the regression gate's baselines (check/baseline.parquet: tuner.answers.baseline), as a check reads them
CHECK_BASELINE: dict[str, str] = {
    "workload": NAME,
    "size": NAME,
    "size_vars": JSON_OBJECT,
    "dtype": NAME,
    "config": JSON_OBJECT,
    "rounds": TIMES,
    "references": TIMES_BY_NAME,
    "gpu": NAME,
    "driver": TEXT,
    "cuda": TEXT,
    "sessions": COUNT,
}
ROW_NAME = ("workload", "size", "dtype")  # the NAME columns that name a row where it is left out
BY_FOLDER = {
    "evaluations": EVALUATION,
    "baselines": BASELINE,
    "confirmations": CONFIRMATION,
    "check": CHECK_BASELINE,
}


def schema_for(pattern: str) -> dict[str, str] | None:
    """The schema of the parts a glob pattern under the store names (by their folder), or None (unchecked)."""
    folders = Path(pattern).parts[:-1]
    return next((BY_FOLDER[f] for f in reversed(folders) if f in BY_FOLDER), None)


@dataclass
class Degraded:
    """What reads left out: whole parts ({path: reason}) and rows ({path: {reason: count}})."""

    parts: dict[str, str] = field(default_factory=dict)
    rows: dict[str, dict[str, int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.parts or self.rows)

    def add_part(self, path: Path | str, reason: str) -> None:
        self.parts[str(path)] = reason

    def add_rows(self, path: Path | str, reason: str, count: int) -> None:
        if count:
            by_reason = self.rows.setdefault(str(path), {})
            by_reason[reason] = by_reason.get(reason, 0) + count

    def merge(self, other: Degraded) -> None:
        self.parts.update(other.parts)
        for path, by_reason in other.rows.items():
            for reason, count in by_reason.items():
                self.add_rows(path, reason, count)

    def reasons(self) -> dict[str, str]:
        """Why each part was left out, whole or in rows, by its path: "missing column(s) rounds", "rows left out:
        2 with time_ms not finite, 1 with objective_value not a number"."""
        said = {
            path: "rows left out: " + ", ".join(f"{n} with {reason}" for reason, n in by_reason.items())
            for path, by_reason in self.rows.items()
        }
        return {**said, **self.parts}

    def lines(self) -> list[str]:
        """What was left out, a line a part: the one text of a degraded store's warnings."""
        return [
            f"{path}: {why}" + ("; left out: move it aside or copy it again" if path in self.parts else "")
            for path, why in self.reasons().items()
        ]

    def warn(self, stacklevel: int = 2, said: set[str] | None = None) -> None:
        """A warning for each of lines() (`stacklevel` as warnings.warn counts it from the caller); with `said`,
        only those not in it, which it then holds (a caller that reads the same parts again and again warns once)."""
        for line in self.lines():
            if said is None or line not in said:
                warnings.warn(line, stacklevel=stacklevel + 1)
                if said is not None:
                    said.add(line)

    @classmethod
    def from_dict(cls, doc: dict | None) -> Degraded:
        """The Degraded that as_dict() gave `doc` (None or empty: nothing left out)."""
        out = cls()
        for p in (doc or {}).get("parts", []):
            out.add_part(p["path"], p["reason"])
        for r in (doc or {}).get("rows", []):
            out.add_rows(r["path"], r["reason"], r["count"])
        return out

    def as_dict(self) -> dict:
        """For `--json`: {"parts": [{path, reason}], "rows": [{path, reason, count}], "rows_left_out": n}."""
        return {
            "parts": [{"path": p, "reason": r} for p, r in sorted(self.parts.items())],
            "rows": [
                {"path": p, "reason": r, "count": n}
                for p, by in sorted(self.rows.items())
                for r, n in sorted(by.items())
            ],
            "rows_left_out": sum(n for by in self.rows.values() for n in by.values()),
        }


@dataclass
class StoreRead:
    """The rows of a read, and what it left out."""

    frame: pd.DataFrame
    degraded: Degraded


_collecting: contextvars.ContextVar[Degraded | None] = contextvars.ContextVar("degraded", default=None)


@contextmanager
def collect() -> Iterator[Degraded]:
    """Gather what every part read within leaves out (an answer's `degraded`); nested, the outer one gets it too."""
    outer = _collecting.get()
    mine = Degraded()
    token = _collecting.set(mine)
    try:
        yield mine
    finally:
        _collecting.reset(token)
        if outer is not None:
            outer.merge(mine)


def record(degraded: Degraded) -> bool:
    """Hand `degraded` to the collect() around this read; False where none is (the reader then warns)."""
    current = _collecting.get()
    if current is not None:
        current.merge(degraded)
    return current is not None


def unreadable(e: Exception) -> str:
    """Why a part was left out whole that could not be read or parsed: the first line of the error."""
    return f"not a readable Parquet file: {(str(e).splitlines() or [type(e).__name__])[0]}"
