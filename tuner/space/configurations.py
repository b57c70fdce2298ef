"""How many configurations a space holds, counted lazily before anything enumerates them (Kernel Tuner's
Searchspace keeps every valid config in memory: a space of 10^9 would get the tool killed), and the checks
of its values that make every restriction evaluable: at most MAX_CONFIGS valid configs, at least one, and
no restriction that raises for a config visited (its error named with the config). A config counts only where it
can be launched: at most MAX_THREADS threads a block, the product of the parameters Kernel Tuner reads as the
block (tuner.space.model.kt_block_names), as Kernel Tuner's Searchspace counts it (tuner.measure.kt.searchspace).

A count is kept in the user's cache (tuner.kept, folder "space-counts"), keyed by everything it
depends on: the parameters' values, the restrictions' text, the limits below and the code that counts and
evaluates. Counting GEMM's space took about 3 s (347,055 restriction tests in Python), Floyd-Warshall's 2.7 s,
and every command that loads the built-in spaces (`tuner list`) paid it each time. Only a count is kept: a space
that fails its checks fails them again on every load. A first count is quicker too: parameters that no
restriction ties together are counted apart (Floyd-Warshall's in 0.02 s: _solve), and each restriction is
evaluated once for each set of its values (_test); GEMM's two counts (its own, int32's) take about a second."""

from __future__ import annotations

import itertools
import math
import sys
import time
from pathlib import Path

import yaml
from constraint import FunctionConstraint, MaxProdConstraint, Problem

from tuner.errors import one_line
from tuner.kept import Kept, code_digest, kept
from tuner.space import expressions
from tuner.space.errors import SpaceError
from tuner.space.expressions import Expression
from tuner.space.model import MAX_THREADS, kt_block_names

MAX_CONFIGS = 1_000_000  # valid configs: Kernel Tuner holds ~400 bytes each, and lists them in ~1.5 s per 10^6
MAX_EVALUATIONS = 20_000_000  # restriction evaluations while counting (a few seconds at most)
MAX_SECONDS = 20.0


class _Budget(Exception):
    """Counting ran out of evaluations or time."""


def count_configurations(
    path: str | Path,
    params: dict,
    restrictions: list[Expression],
    dtype_restrictions: dict | None = None,
    block_names: list[str] | None = None,
) -> int:
    """The number of configs of `params` (name -> values) that meet every restriction and can be launched (at
    most MAX_THREADS threads a block: `block_names` is the space's launch.block, read as kt_block_names reads
    it; None: the launch.block of the space file at `path`), counted by python-constraint's solver over our own
    checked expressions (each restriction is tested as soon as its variables are set, so a restriction prunes
    whole branches). A SpaceError (naming `path`) when none is valid or none can be launched, more than
    MAX_CONFIGS are, a restriction raises, or counting takes too long. Each dtype of `dtype_restrictions`
    (dtype -> its own checked expressions) is counted with the space's too, and must leave a valid config."""
    given = _launch_block(path) if block_names is None else list(block_names)
    block = [n for n in kt_block_names(given) if n in params]
    return kept(
        "space-counts",
        _count_key(params, restrictions, dtype_restrictions or {}, block),
        lambda: _count_all(path, params, restrictions, dtype_restrictions or {}, _Block(block, bool(given))),
        lambda v: isinstance(v, int) and 0 < v <= MAX_CONFIGS,
    )


def _launch_block(path: str | Path) -> list:
    """The space file's launch.block (none for a 'host' kernel, which has no launch), for a caller that does not
    give it: the loader has checked the file, and the C parser reads it again in a few ms."""
    doc = yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    launch = doc.get("launch") if isinstance(doc, dict) else None
    block = launch.get("block") if isinstance(launch, dict) else None
    return [str(b) for b in block] if isinstance(block, list) else []


class _Block:
    """The parameters whose product is the thread block (those of kt_block_names the space has), and where a
    space whose every config exceeds MAX_THREADS is told its mistake (launch.block, or the parameter)."""

    def __init__(self, names: list[str], launched: bool) -> None:
        self.names = names
        self.at = ["launch", "block"] if launched else ["parameters", *names[:1]] if len(names) == 1 else ["parameters"]


def _count_all(
    path: str | Path, params: dict, restrictions: list[Expression], dtype_restrictions: dict, block: _Block
) -> int:
    space = [(["restrictions", i], e) for i, e in enumerate(restrictions)]
    count = _count(path, params, space, ["restrictions"], "the restrictions", block)
    for dtype, extra in dtype_restrictions.items():
        where = ["dtypes", dtype, "restrictions"]
        own = [([*where, i], e) for i, e in enumerate(extra)]
        counted = _count(path, params, [*space, *own], where, f"the space's restrictions and {dtype}'s", block)
        # kept as the count of the dtype's restrictions alone too: a listing asks it next (Space.restrictions_for,
        # tuner.store.coverage.space_size), and GEMM's int32 took another second to count again
        Kept("space-counts", _count_key(params, [*restrictions, *extra], {}, block.names)).put(counted)
    return count


def _count_key(params: dict, restrictions: list[Expression], dtype_restrictions: dict, block: list[str]) -> list:
    """What a count depends on. Values are named with their type (1, 1.0 and True are one key of a dict, but
    not one value here); the code is this module's and the expression evaluator's source."""
    return [
        [[name, [f"{type(v).__name__}:{v!r}" for v in values]] for name, values in params.items()],
        [e.text for e in restrictions],
        {dtype: [e.text for e in exprs] for dtype, exprs in sorted(dtype_restrictions.items())},
        [MAX_CONFIGS, MAX_EVALUATIONS, MAX_SECONDS],
        [block, MAX_THREADS],
        code_digest(expressions, sys.modules[__name__]),
    ]


def _count(
    path: str | Path, params: dict, restrictions: list[tuple[list, Expression]], where: list, whose: str, block: _Block
) -> int:
    """count_configurations over `restrictions`, each with its key path, under the thread limit; `where`: the
    key path of the list, `whose`: how the message names them."""
    count = _solve(path, params, restrictions, where, block.names)
    if count == 0 and block.names:  # the restrictions leave some, none of which can be launched?
        left = _solve(path, params, restrictions, where, [])
        if left:
            many = f"{left:,}" if left <= MAX_CONFIGS else f"more than {MAX_CONFIGS:,}"
            raise SpaceError(
                path,
                block.at,
                f"no configuration can be launched: all {many} {'valid ones' if restrictions else 'of them'} have "
                f"more than {MAX_THREADS} threads a block ({' * '.join(block.names)})",
            )
    if count == 0:
        at = where if restrictions else ["parameters"]
        product = math.prod(len(v) for v in params.values())
        raise SpaceError(path, at, f"{whose} leave no valid configuration of {product:,}")
    if count > MAX_CONFIGS:
        product = math.prod(len(v) for v in params.values())
        raise SpaceError(
            path,
            ["parameters"],
            f"more than {MAX_CONFIGS:,} valid configurations ({product:,} before the restrictions): "
            "give fewer values or restrict them",
        )
    return count


def _solve(
    path: str | Path, params: dict, restrictions: list[tuple[list, Expression]], where: list, block: list
) -> int:
    """How many configs (up to MAX_CONFIGS + 1) meet `restrictions` with at most MAX_THREADS threads a block, the
    product of the `block` parameters (whole numbers >= 1: the loader checked them).

    Parameters that no restriction (nor the block) ties together are independent: the count is the product of
    each group's count, and a parameter in none is a factor of its values alone. Floyd-Warshall's 438,648 configs
    are 2,611 of its seven tied parameters times 168 of its other five: counting them one by one took 1.5 s of a
    first `tuner list`. A space whose groups all hold configs is counted so; one where any holds none, or a
    restriction cannot be evaluated, is searched whole, so that what it is told (the first restriction that
    fails, for which config) is what a search of the whole space meets first. The groups' searches share one
    budget, and ask fewer evaluations than the whole space's search did (which asked a group's again for each
    config of the others): a space counted in groups may stay within a budget that its whole search exceeded."""
    product = math.prod(len(v) for v in params.values())
    for key_path, expr in restrictions:
        if not expr.names and not _holds(path, key_path, expr, {}):
            raise SpaceError(path, key_path, f"'{expr.text}' holds for no configuration")
    spent = {"evaluations": 0, "deadline": time.monotonic() + MAX_SECONDS}
    try:
        groups = _groups(params, restrictions, block)
        if len(groups) > 1:
            counts = []
            for names in groups:
                tied = [(k, e) for k, e in restrictions if e.names and e.names <= names]
                within = {n: params[n] for n in params if n in names}
                try:
                    counts.append(_solutions(path, within, tied, [b for b in block if b in names], spent))
                except SpaceError:  # said as the whole space's search says it
                    break
                if not counts[-1]:
                    break
            else:
                return min(math.prod(counts), MAX_CONFIGS + 1)
            spent = {"evaluations": 0, "deadline": time.monotonic() + MAX_SECONDS}
        return _solutions(path, params, restrictions, block, spent)
    except _Budget:
        raise SpaceError(
            path,
            where,
            f"counting the valid configurations of {product:,} (the product of the parameters' value counts) "
            f"took more than {MAX_EVALUATIONS:,} evaluations or {MAX_SECONDS:.0f} s: give fewer values",
        ) from None


def _groups(params: dict, restrictions: list[tuple[list, Expression]], block: list) -> list[set[str]]:
    """The parameters in groups that no restriction (nor the thread block's product) ties to another: one group
    where a restriction names what is not a parameter (left to the solver to reject)."""
    group = {name: {name} for name in params}
    for names in [*(e.names for _, e in restrictions), block]:
        if not set(names) <= group.keys():
            return [set(params)]
        merged = set().union(*(group[n] for n in names))
        for n in merged:
            group[n] = merged
    return list({id(g): g for g in group.values()}.values())


def _solutions(
    path: str | Path, params: dict, restrictions: list[tuple[list, Expression]], block: list, spent: dict
) -> int:
    """python-constraint's count of the configs of `params` (up to MAX_CONFIGS + 1) that meet `restrictions`
    (each named by its key path) and `block`'s MAX_THREADS; a _Budget where `spent` runs out."""
    problem = Problem()
    for name, values in params.items():
        problem.addVariable(name, list(values))
    for key_path, expr in restrictions:
        names = sorted(expr.names)
        if names:
            problem.addConstraint(FunctionConstraint(_test(path, key_path, expr, names, spent)), names)
    if block:
        problem.addConstraint(MaxProdConstraint(MAX_THREADS), block)
    return sum(1 for _ in itertools.islice(problem.getSolutionIter(), MAX_CONFIGS + 1))


def _test(path: str | Path, key_path: list, expr: Expression, names: list, spent: dict) -> object:
    """The solver's test of `expr` over `names`. Each set of values is evaluated once (the solver asks GEMM's
    restrictions 185,018 times of 52,048), known by its values' types too (1, 1.0 and True are one key of a dict,
    not one value of an expression); every ask counts against the budget, as when each was evaluated."""
    known: dict[tuple, bool] = {}

    def test(*values: object) -> bool:
        spent["evaluations"] += 1
        if spent["evaluations"] > MAX_EVALUATIONS or (
            spent["evaluations"] % 4096 == 0 and time.monotonic() > spent["deadline"]
        ):
            raise _Budget
        try:
            key = (values, tuple(map(type, values)))
            holds = known.get(key)
        except TypeError:  # a value that cannot be a key (a list): evaluated each time
            return _holds(path, key_path, expr, dict(zip(names, values)))
        if holds is None:
            holds = known[key] = _holds(path, key_path, expr, dict(zip(names, values)))
        return holds

    return test


def _holds(path: str | Path, key_path: list, expr: Expression, config: dict) -> bool:
    try:
        return bool(expr(config))
    except Exception as e:  # noqa: BLE001  (any error of evaluating it: a TypeError, a ZeroDivisionError...)
        raise SpaceError(path, key_path, f"'{expr.text}' cannot be evaluated for {config}: {one_line(e)}") from None
