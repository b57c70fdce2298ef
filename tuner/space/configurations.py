"""How many configurations a space holds, counted lazily before anything enumerates them (Kernel Tuner's
Searchspace keeps every valid config in memory: a space of 10^9 would get the tool killed), and the checks
of its values that make every restriction evaluable: at most MAX_CONFIGS valid configs, at least one, and
no restriction that raises for a config visited (its error named with the config)."""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path

from constraint import FunctionConstraint, Problem

from tuner.space.errors import SpaceError
from tuner.space.expressions import Expression

MAX_CONFIGS = 1_000_000  # valid configs: Kernel Tuner holds ~400 bytes each, and lists them in ~1.5 s per 10^6
MAX_EVALUATIONS = 20_000_000  # restriction evaluations while counting (a few seconds at most)
MAX_SECONDS = 20.0


class _Budget(Exception):
    """Counting ran out of evaluations or time."""


def count_configurations(path: str | Path, params: dict, restrictions: list[Expression]) -> int:
    """The number of configs of `params` (name -> values) that meet every restriction, counted by
    python-constraint's solver over our own checked expressions (each restriction is tested as soon as its
    variables are set, so a restriction prunes whole branches). A SpaceError (naming `path`) when none is
    valid, more than MAX_CONFIGS are, a restriction raises, or counting takes too long."""
    product = math.prod(len(v) for v in params.values())
    problem = Problem()
    for name, values in params.items():
        problem.addVariable(name, list(values))
    spent = {"evaluations": 0, "deadline": time.monotonic() + MAX_SECONDS}
    for i, expr in enumerate(restrictions):
        names = sorted(expr.names)
        if names:
            problem.addConstraint(FunctionConstraint(_test(path, i, expr, names, spent)), names)
        elif not _holds(path, i, expr, {}):
            raise SpaceError(path, ["restrictions", i], f"'{expr.text}' holds for no configuration")
    try:
        count = sum(1 for _ in itertools.islice(problem.getSolutionIter(), MAX_CONFIGS + 1))
    except _Budget:
        raise SpaceError(
            path,
            ["restrictions"],
            f"counting the valid configurations of {product:,} (the product of the parameters' value counts) "
            f"took more than {MAX_EVALUATIONS:,} evaluations or {MAX_SECONDS:.0f} s: give fewer values",
        ) from None
    if count > MAX_CONFIGS:
        raise SpaceError(
            path,
            ["parameters"],
            f"more than {MAX_CONFIGS:,} valid configurations ({product:,} before the restrictions): "
            "give fewer values or restrict them",
        )
    if count == 0:
        where = ["restrictions"] if restrictions else ["parameters"]
        raise SpaceError(path, where, f"the restrictions leave no valid configuration of {product:,}")
    return count


def _test(path: str | Path, i: int, expr: Expression, names: list, spent: dict) -> object:
    def test(*values: object) -> bool:
        spent["evaluations"] += 1
        if spent["evaluations"] > MAX_EVALUATIONS or (
            spent["evaluations"] % 4096 == 0 and time.monotonic() > spent["deadline"]
        ):
            raise _Budget
        return _holds(path, i, expr, dict(zip(names, values)))

    return test


def _holds(path: str | Path, i: int, expr: Expression, config: dict) -> bool:
    try:
        return bool(expr(config))
    except Exception as e:  # noqa: BLE001  (any error of evaluating it: a TypeError, a ZeroDivisionError...)
        raise SpaceError(
            path, ["restrictions", i], f"'{expr.text}' cannot be evaluated for {config}: {type(e).__name__}: {e}"
        ) from None
