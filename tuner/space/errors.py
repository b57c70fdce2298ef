"""How a space file's mistakes are said: SpaceError, one line naming the file and the key path; kernel_path,
the one rule for a file a space names (relative to the space file, inside the workload's folder); and
one_of, the one rule for a value being one of a parameter's values (true is not 1, 2.0 is not 2). The
loader, the declaration check (tuner.space.declaration) and the loaded Space all go through these."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from tuner.errors import TunerError


class SpaceError(TunerError):
    def __init__(self, path: str | Path, key_path: list, message: str) -> None:
        where = ".".join(str(k) for k in key_path) or "(top level)"
        super().__init__(_one_line(f"{path}: at {where}: {message}"))


def _one_line(text: str) -> str:
    """`text` with any character that is not printable (a line break in a key's name) escaped: one line."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def kernel_path(space_path: Path, name: str, key_path: list, within: Path | None = None) -> Path:
    """A file a space names (a kernel source, a reference kernel; relative to the space file, or absolute),
    checked to exist and to lie inside `within` (default: the space file's folder; symbolic links are
    followed), so a workload, which may be shared, cannot make the tuner read files outside its folder."""
    folder = Path(space_path).resolve().parent
    source = (folder / name).resolve()
    allowed = Path(within).resolve() if within is not None else folder
    if not source.is_relative_to(allowed):
        raise SpaceError(space_path, key_path, f"'{name}' lies outside the workload's folder {allowed}")
    if not source.is_file():
        raise SpaceError(space_path, key_path, f"'{name}' does not exist (looked for {source})")
    return source


def value_kind(value: object) -> str:
    """What a parameter's value is, as a kernel sees it: a boolean, a whole number, a fraction (2.0 is written
    `2.0`, not `2`: `#if X == 2` does not even compile with it), text, or something else. numpy's scalars
    are numbers like Python's."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        return "float"
    return "str" if isinstance(value, str) else type(value).__name__


def one_of(value: object, values: Iterable) -> bool:
    """Whether `value` is one of `values`, of the same kind too (value_kind): Python's `in` says True is 1 and
    2.0 is 2, which a kernel compiled with `#define X True` or `#define X 2.0` does not."""
    kind = value_kind(value)
    return any(value_kind(v) == kind and v == value for v in values)
