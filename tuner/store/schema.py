"""The typed row schema of the store's parts, in one place, and what a read left out (Degraded).

Every part read (tuner.store.parts.read_parts) is checked against the schema of its folder (evaluations/,
baselines/, confirmations/, and check/, the regression gate's baselines): a part lacking a required column, or
holding one of the wrong type, is left out whole; rows whose value (objective_value, time_ms) is not a number, or
not finite in a successful row, and a regression baseline's rows whose rounds are not a list of finite numbers,
are left out and counted. An answer drawn from a store with anything left out says so (`degraded`), so a damaged
store never gives a silently wrong answer."""

from __future__ import annotations

import contextvars
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

TEXT, NUMBER, FLAG, NUMBERS = "text", "number", "flag", "numbers"  # NUMBERS: a list of finite numbers a row

# required columns of each kind of part, with their type (a NUMBER or NUMBERS column is also checked row by row)
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
    "workload": TEXT,
    "size": TEXT,
    "size_vars": TEXT,
    "dtype": TEXT,
    "config": TEXT,
    "rounds": NUMBERS,
    "references": TEXT,
    "gpu": TEXT,
    "driver": TEXT,
    "cuda": TEXT,
}
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
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        degraded.add_part(path, "missing column(s) " + ", ".join(missing))
        return None
    wrong = [c for c, kind in schema.items() if not _has_type(frame[c], kind)]
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
    for column in (c for c, kind in schema.items() if kind == NUMBERS):
        listed = np.array([_finite_numbers(v) for v in frame[column]], dtype=bool)
        degraded.add_rows(path, f"{column} not a list of finite numbers", int((keep & ~listed).sum()))
        keep &= listed
    return frame if keep.all() else frame[keep].reset_index(drop=True)


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
    if kind == NUMBERS:  # checked row by row
        return pd.api.types.is_object_dtype(dtype)
    return _is_text(values)


def _is_text(values: pd.Series) -> bool:
    if isinstance(values.dtype, pd.StringDtype):
        return True
    return pd.api.types.is_object_dtype(values.dtype) and all(isinstance(v, str) or _missing(v) for v in values)


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _finite_numbers(value: object) -> bool:
    """Whether `value` is a non-empty list (or array) of finite real numbers."""
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) == 0:
        return False
    return all(math.isfinite(n) for n in map(_number, value))


def _number(value: object) -> float:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    return math.nan
