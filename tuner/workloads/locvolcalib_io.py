"""LocVolCalib files (SPEC §1): the Finpar input (9 values) and the course input (4 integers, fixed
parameters), the output array literal, and the original validation rule (absolute 1e-5, NaN/Inf invalid)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tuner.errors import TunerError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

VARIANTS = ("finpar", "course")
VARIANT_CODE = {"finpar": 1, "course": 2}  # the size variable `variant`, the host function's argument
COURSE_PARAMS = {"s0": 0.03, "t": 5.0, "alpha": 0.2, "nu": 0.6, "beta": 0.5}  # ProjectMain.cpp's constants
EPS = 1e-5  # ParseInput.h::validate, absolute


@dataclass(frozen=True)
class Problem:
    variant: str
    outer: int
    num_x: int
    num_y: int
    num_t: int
    s0: float
    t: float
    alpha: float
    nu: float
    beta: float

    @property
    def size(self) -> dict:
        """The workload's size variables."""
        return {
            "outer": self.outer,
            "numX": self.num_x,
            "numY": self.num_y,
            "numT": self.num_t,
            "variant": VARIANT_CODE[self.variant],
        }

    @property
    def params(self) -> np.ndarray:
        return np.array([self.s0, self.t, self.alpha, self.nu, self.beta], dtype=np.float64)


def problem_from_size(size: dict) -> Problem:
    variant = VARIANTS[size["variant"] - 1]
    finpar_defaults = COURSE_PARAMS  # every Finpar dataset uses the same five values (SPEC §1.2)
    return Problem(variant, size["outer"], size["numX"], size["numY"], size["numT"], **finpar_defaults)


def tokens(text: str) -> list[str]:
    """ParserC.h's tokenizer: whitespace separates, '/' starts a comment that runs to the end of the line."""
    out = []
    for line in text.splitlines():
        out.extend(line.split("/", 1)[0].split())
    return out


def _int(tok: str, name: str, where: str) -> int:
    try:
        return int(tok)
    except ValueError:
        raise TunerError(f"{where}: {name} must be an integer, got '{tok}'") from None


def _real(tok: str, name: str, where: str) -> float:
    try:
        value = float(tok)
    except ValueError:
        raise TunerError(f"{where}: {name} must be a number, got '{tok}'") from None
    if not math.isfinite(value):
        raise TunerError(f"{where}: {name} must be finite, got '{tok}'")
    return value


def parse_input(text: str, variant: str | None = None, where: str = "input") -> Problem:
    """An input.data: 9 values (Finpar) or 4 integers (course). `variant` None: told by the count."""
    toks = tokens(text)
    if variant is None:
        variant = {9: "finpar", 4: "course"}.get(len(toks))
        if variant is None:
            raise TunerError(
                f"{where}: expected 9 values (Finpar: OUTER NUM_X NUM_Y NUM_T s0 t alpha nu beta) "
                f"or 4 (course: OUTER NUM_X NUM_Y NUM_T), got {len(toks)}"
            )
    if variant not in VARIANTS:
        raise TunerError(f"{where}: unknown variant '{variant}' (finpar or course)")
    want = 9 if variant == "finpar" else 4
    if len(toks) != want:
        raise TunerError(f"{where}: a {variant} input has {want} values, got {len(toks)}")
    names = ("OUTER", "NUM_X", "NUM_Y", "NUM_T")
    k, m, n, t_steps = (_int(tok, name, where) for tok, name in zip(toks, names))
    if variant == "finpar":
        params = {name: _real(tok, name, where) for tok, name in zip(toks[4:], ("s0", "t", "alpha", "nu", "beta"))}
        limit, pow2 = 512, True  # OrigCpp's WORKGROUP_SIZE
    else:
        params, limit, pow2 = dict(COURSE_PARAMS), 1024, False
    if k <= 0:
        raise TunerError(f"{where}: OUTER must be positive, got {k}")
    for name, v in (("NUM_X", m), ("NUM_Y", n)):
        if not 2 <= v <= limit:
            raise TunerError(f"{where}: {name} must be in 2..{limit} for the {variant} variant, got {v}")
        if pow2 and v & (v - 1):
            raise TunerError(f"{where}: {name} must be a power of two for the Finpar variant, got {v}")
    if t_steps < 2:
        raise TunerError(f"{where}: NUM_T must be at least 2 (the time step divides by NUM_T-1), got {t_steps}")
    if params["s0"] <= 0 or params["t"] <= 0 or params["alpha"] <= 0:
        raise TunerError(f"{where}: s0, t and alpha must be positive (the grid takes their logarithm or root)")
    return Problem(variant, k, m, n, t_steps, **params)


def read_input(path: str | Path, variant: str | None = None) -> Problem:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise TunerError(f"cannot read {path}: {e.strerror}") from None
    return parse_input(text, variant, where=str(path))


def parse_output(text: str, where: str = "output") -> np.ndarray:
    """An output.data: `[ v0, v1, ... ]` (commas optional, a // comment allowed after it)."""
    body = "\n".join(line.split("/", 1)[0] for line in text.splitlines()).strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise TunerError(f"{where}: expected an array literal '[ v0, v1, ... ]'")
    items = body[1:-1].replace(",", " ").split()
    if not items:
        raise TunerError(f"{where}: the array is empty")
    try:
        return np.array([float(x) for x in items], dtype=np.float64)
    except ValueError:
        bad = next(x for x in items if not _is_float(x))
        raise TunerError(f"{where}: '{bad}' is not a number") from None


def _is_float(x: str) -> bool:
    try:
        float(x)
        return True
    except ValueError:
        return False


def read_output(path: str | Path) -> np.ndarray:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise TunerError(f"cannot read {path}: {e.strerror}") from None
    return parse_output(text, where=str(path))


def format_output(values: Iterable[float], variant: str) -> str:
    """Finpar's write_1Darr ('%f', ' , ' separated) or the course's 6 significant digits, one per line."""
    if variant == "finpar":
        body = " , ".join(f"{v:f}" for v in values)
        return f"[ {body} ]\n"
    return "[\n" + ",\n".join(f"{v:.6g}" for v in values) + "\n]\n"


def validate(result: ArrayLike, reference: ArrayLike) -> tuple[bool, str]:
    """ParseInput.h::validate: the first entry with |ref - res| > 1e-5 (held in a float) or a NaN/Inf
    result makes the whole result INVALID."""
    result, reference = np.asarray(result, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if result.shape != reference.shape:
        raise TunerError(f"the reference has {reference.size} values, the result {result.size}")
    for i, (res, ref) in enumerate(zip(result, reference)):
        if not math.isfinite(res):
            return False, f"entry {i} is {res}"
        err = float(np.float32(abs(ref - res)))
        if err > EPS:
            return False, f"entry {i}: |{ref} - {res}| = {err:.3g} > {EPS}"
    return True, f"max abs error {np.max(np.abs(result - reference)):.3g}"
