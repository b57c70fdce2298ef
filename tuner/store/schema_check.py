"""A part's rows checked against its folder's schema (tuner.store.schema): `check` leaves out a part lacking a
required column or holding one of the wrong type, and counts and leaves out the rows whose values are not what
their column's kind asks. Apart from the schema and Degraded so that what only says what was left out (a listing
answered from what was kept, `tuner list`) imports neither numpy nor pandas."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from tuner.store.schema import (
    COUNT,
    FLAG,
    JSON_OBJECT,
    NAME,
    NUMBER,
    OPTIONAL,
    ROW_NAME,
    TIMES,
    TIMES_BY_NAME,
    Degraded,
)


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
