"""How many configurations a space holds, counted lazily before anything enumerates them (Kernel Tuner's
Searchspace keeps every valid config in memory: a space of 10^9 would get the tool killed), and the checks
of its values that make every restriction evaluable: at most MAX_CONFIGS valid configs, at least one, and
no restriction that raises for a config visited (its error named with the config).

A count is kept in the user's cache (tuner.kept, folder "space-counts"), keyed by everything it
depends on: the parameters' values, the restrictions' text, the limits below and the code that counts and
evaluates. Counting GEMM's space takes about 3 s (347,055 restriction tests in Python), Floyd-Warshall's 2.7 s,
and every command that loads the built-in spaces (`tuner list`) paid it each time. Only a count is kept: a space
that fails its checks fails them again on every load."""

from __future__ import annotations

import itertools
import math
import sys
import time
from pathlib import Path

from constraint import FunctionConstraint, Problem

from tuner.kept import code_digest, kept
from tuner.space import expressions
from tuner.space.errors import SpaceError
from tuner.space.expressions import Expression

MAX_CONFIGS = 1_000_000  # valid configs: Kernel Tuner holds ~400 bytes each, and lists them in ~1.5 s per 10^6
MAX_EVALUATIONS = 20_000_000  # restriction evaluations while counting (a few seconds at most)
MAX_SECONDS = 20.0


class _Budget(Exception):
    """Counting ran out of evaluations or time."""


def count_configurations(
    path: str | Path, params: dict, restrictions: list[Expression], dtype_restrictions: dict | None = None
) -> int:
    """The number of configs of `params` (name -> values) that meet every restriction, counted by
    python-constraint's solver over our own checked expressions (each restriction is tested as soon as its
    variables are set, so a restriction prunes whole branches). A SpaceError (naming `path`) when none is
    valid, more than MAX_CONFIGS are, a restriction raises, or counting takes too long. Each dtype of
    `dtype_restrictions` (dtype -> its own checked expressions) is counted with the space's too, and must
    leave a valid config."""
    return kept(
        "space-counts",
        _count_key(params, restrictions, dtype_restrictions or {}),
        lambda: _count_all(path, params, restrictions, dtype_restrictions or {}),
        lambda v: isinstance(v, int) and 0 < v <= MAX_CONFIGS,
    )


def _count_all(path: str | Path, params: dict, restrictions: list[Expression], dtype_restrictions: dict) -> int:
    space = [(["restrictions", i], e) for i, e in enumerate(restrictions)]
    count = _count(path, params, space, ["restrictions"], "the restrictions")
    for dtype, extra in dtype_restrictions.items():
        where = ["dtypes", dtype, "restrictions"]
        own = [([*where, i], e) for i, e in enumerate(extra)]
        _count(path, params, [*space, *own], where, f"the space's restrictions and {dtype}'s")
    return count


def _count_key(params: dict, restrictions: list[Expression], dtype_restrictions: dict) -> list:
    """What a count depends on. Values are named with their type (1, 1.0 and True are one key of a dict, but
    not one value here); the code is this module's and the expression evaluator's source."""
    return [
        [[name, [f"{type(v).__name__}:{v!r}" for v in values]] for name, values in params.items()],
        [e.text for e in restrictions],
        {dtype: [e.text for e in exprs] for dtype, exprs in sorted(dtype_restrictions.items())},
        [MAX_CONFIGS, MAX_EVALUATIONS, MAX_SECONDS],
        code_digest(expressions, sys.modules[__name__]),
    ]


def _count(path: str | Path, params: dict, restrictions: list[tuple[list, Expression]], where: list, whose: str) -> int:
    """count_configurations over `restrictions`, each with its key path; `where`: the key path of the list,
    `whose`: how the message names them."""
    product = math.prod(len(v) for v in params.values())
    problem = Problem()
    for name, values in params.items():
        problem.addVariable(name, list(values))
    spent = {"evaluations": 0, "deadline": time.monotonic() + MAX_SECONDS}
    for key_path, expr in restrictions:
        names = sorted(expr.names)
        if names:
            problem.addConstraint(FunctionConstraint(_test(path, key_path, expr, names, spent)), names)
        elif not _holds(path, key_path, expr, {}):
            raise SpaceError(path, key_path, f"'{expr.text}' holds for no configuration")
    try:
        count = sum(1 for _ in itertools.islice(problem.getSolutionIter(), MAX_CONFIGS + 1))
    except _Budget:
        raise SpaceError(
            path,
            where,
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
        at = where if restrictions else ["parameters"]
        raise SpaceError(path, at, f"{whose} leave no valid configuration of {product:,}")
    return count


def _test(path: str | Path, key_path: list, expr: Expression, names: list, spent: dict) -> object:
    def test(*values: object) -> bool:
        spent["evaluations"] += 1
        if spent["evaluations"] > MAX_EVALUATIONS or (
            spent["evaluations"] % 4096 == 0 and time.monotonic() > spent["deadline"]
        ):
            raise _Budget
        return _holds(path, key_path, expr, dict(zip(names, values)))

    return test


def _holds(path: str | Path, key_path: list, expr: Expression, config: dict) -> bool:
    try:
        return bool(expr(config))
    except Exception as e:  # noqa: BLE001  (any error of evaluating it: a TypeError, a ZeroDivisionError...)
        raise SpaceError(
            path, key_path, f"'{expr.text}' cannot be evaluated for {config}: {type(e).__name__}: {e}"
        ) from None
