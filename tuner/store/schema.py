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
import json
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
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


def check(frame: pd.DataFrame, schema: dict[str, str] | None, path: Path, degraded: Degraded) -> pd.DataFrame | None:
    """`frame` as the schema admits it (rows with bad values left out and counted in `degraded`), or None
    where the whole part is left out (a required column missing or of the wrong type)."""
    if schema is None or frame.empty:
        return frame
    missing = [c for c, kind in schema.items() if c not in frame.columns and kind not in OPTIONAL]
    if missing:
        degraded.add_part(path, "missing column(s) " + ", ".join(missing))
        return None
    wrong = [c for c, kind in schema.items() if c in frame.columns and not _has_type(frame[c], kind)]
    if wrong:
        degraded.add_part(path, "wrong type in column(s) " + ", ".join(f"{c} ({frame[c].dtype})" for c in wrong))
        return None
    keep = np.ones(len(frame), dtype=bool)
    ok = (frame["status"] == "ok").to_numpy(dtype=bool, na_value=False) if "status" in schema else keep
    for column in (c for c, kind in schema.items() if kind == NUMBER):
        values = frame[column]
        if pd.api.types.is_float_dtype(values.dtype) or pd.api.types.is_integer_dtype(values.dtype):
            numbers, mistyped = values.to_numpy(dtype=float, na_value=np.nan), np.zeros(len(frame), dtype=bool)
        else:  # object or text: each value must be a real number (numeric text is not one)
            numbers = np.array([_number(v) for v in values], dtype=float)
            mistyped = np.array([not _missing(v) and math.isnan(n) for v, n in zip(values, numbers)], dtype=bool)
        nonfinite = ok & ~mistyped & ~np.isfinite(numbers)
        degraded.add_rows(path, f"{column} not a number", int((keep & mistyped).sum()))
        degraded.add_rows(path, f"{column} not finite", int((keep & nonfinite).sum()))
        keep &= ~mistyped & ~nonfinite
        if not pd.api.types.is_float_dtype(values.dtype):
            frame = frame.assign(**{column: numbers})
    keep &= _rows_as_typed(frame, schema, path, degraded, keep)
    return frame if keep.all() else frame[keep].reset_index(drop=True)


# what is wrong with a value of each row-checked kind (None: nothing); TIMES_BY_NAME is checked with the row's TIMES
_ROW_CHECKS: dict[str, Callable[[object], str | None]] = {
    TIMES: lambda v: None if _times(v) else "not a list of positive finite times",
    NAME: lambda v: None if isinstance(v, str) and v.strip() else "missing",
    JSON_OBJECT: lambda v: None if isinstance(_json(v), dict) else "not a JSON object",
    COUNT: lambda v: None if _missing(v) or _count(v) else f"{_shown(v)}, not a whole number of 1 or more",
}


def _rows_as_typed(
    frame: pd.DataFrame, schema: dict[str, str], path: Path, degraded: Degraded, keep: np.ndarray
) -> np.ndarray:
    """Which rows hold values of their row-checked kinds; each other row is counted in `degraded` once, by its
    first fault, and named where the schema names rows (ROW_NAME), so that the line saying it was left out says
    which kernel that is."""
    good = np.ones(len(frame), dtype=bool)
    checked = [(c, k) for c, k in schema.items() if (k in _ROW_CHECKS or k == TIMES_BY_NAME) and c in frame.columns]
    if not checked:
        return good
    times = next((c for c, kind in schema.items() if kind == TIMES), "")
    names = list(ROW_NAME) if all(schema.get(c) == NAME for c in ROW_NAME) else []
    columns = list(dict.fromkeys([c for c, _ in checked] + [c for c in (times, *names) if c in frame.columns]))
    for i, row in enumerate(frame[columns].to_dict("records")):
        if not keep[i]:
            continue
        for column, kind in checked:
            value = row[column]
            fault = _times_by_name(value, row.get(times)) if kind == TIMES_BY_NAME else _ROW_CHECKS[kind](value)
            if fault:
                label = " ".join(v for v in (row[c] for c in names) if isinstance(v, str))
                degraded.add_rows(path, f"{column} {fault}" + (f" ({label})" if label else ""), 1)
                good[i] = False
                break
    return good


def unreadable(e: Exception) -> str:
    """Why a part was left out whole that could not be read or parsed: the first line of the error."""
    return f"not a readable Parquet file: {(str(e).splitlines() or [type(e).__name__])[0]}"


def _has_type(values: pd.Series, kind: str) -> bool:
    dtype = values.dtype
    if kind == NUMBER:  # checked row by row; a boolean or datetime column is not one
        return not pd.api.types.is_bool_dtype(dtype) and (
            pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_object_dtype(dtype) or _is_text(values)
        )
    if kind == FLAG:
        return pd.api.types.is_bool_dtype(dtype)
    if kind == TIMES:  # checked row by row
        return pd.api.types.is_object_dtype(dtype)
    if kind == COUNT:  # checked row by row; a column of missing values alone reads as object or float
        return not pd.api.types.is_bool_dtype(dtype) and (
            pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_object_dtype(dtype)
        )
    return _is_text(values)  # TEXT, and NAME, JSON_OBJECT, TIMES_BY_NAME (checked row by row)


def _is_text(values: pd.Series) -> bool:
    if isinstance(values.dtype, pd.StringDtype):
        return True
    return pd.api.types.is_object_dtype(values.dtype) and all(isinstance(v, str) or _missing(v) for v in values)


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _times(value: object) -> bool:
    """Whether `value` is a non-empty list (or array) of positive finite real numbers."""
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) == 0:
        return False
    return all(math.isfinite(n) and n > 0 for n in map(_number, value))


def _times_by_name(value: object, times: object) -> str | None:
    """What is wrong with `value` as a JSON object of lists of times, one a round of `times` (None: nothing)."""
    doc = _json(value)
    if not isinstance(doc, dict):
        return "not a JSON object"
    for name, listed in doc.items():
        if not _times(listed):
            return f"{name} not a list of positive finite times"
        if isinstance(times, (list, tuple, np.ndarray)) and len(listed) != len(times):
            return f"{name} holds {len(listed)} times for {len(times)} rounds"
    return None


def _json(value: object) -> object:
    """`value` parsed as JSON text (None where it is not text, or not JSON)."""
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def _count(value: object) -> bool:
    """Whether `value` is a whole number of 1 or more (2.0 is one: a column with missing values reads as floats)."""
    n = _number(value)
    return math.isfinite(n) and n >= 1 and n == int(n)


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)


def _number(value: object) -> float:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    return math.nan
