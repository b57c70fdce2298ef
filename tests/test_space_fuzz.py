"""A fuzzer of the real spaces (spaces/*.yaml): Hypothesis mutates each (drops, duplicates and renames keys,
swaps types, puts random values and hostile expressions in, edits the YAML text), then loads it and uses it
as the tool does (Kernel Tuner's search space, the launch grid, the metrics, a size). The only exception
allowed is the tool's own (TunerError, SpaceError among them): one line, never a traceback.

Three things are done once, not once per example, for the same outcome: the space file is parsed once and each
example mutates a copy of it, Kernel Tuner's search space is built once per distinct input it is built from
(the parameters, the restrictions, the block's names: most mutations change none of them, and building GEMM's
takes seconds), and a text that passed the exercise is not exercised again (about one example in five repeats
an earlier one's text, often the unmutated space: a mutation that does not apply leaves it as it is)."""

from __future__ import annotations

import copy
import time
from functools import cache
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuner.errors import TunerError
from tuner.locations import BUILTIN_KERNELS, BUILTIN_SPACES
from tuner.measure import kt
from tuner.space import load_space

SPACES = sorted(p.stem for p in BUILTIN_SPACES.glob("*.yaml"))
# examples per space: at least 1000 in all; fewer for the spaces that take longest to count on every load
EXAMPLES = {"floyd-warshall": 25, "gemm": 120, "locvolcalib": 120, "spmv": 150}
DEFAULT_EXAMPLES = 300
LISTED = 20_000  # Kernel Tuner lists a loaded space's configs only up to this many here (time, not safety)

HOSTILE = [
    "9**9**9",
    "2**(2**64)",
    "1 << 10**6",
    "'a' * 10**9",
    "[0] * 10**9",
    "(10**19) ** 64",
    "__import__('os').system('true')",
    "().__class__.__bases__",
    "x.y",
    "lambda: 1",
    "1/0",
    "ceil(1e400)",
    "int('1' * 5000)",
    "max()",
    "sqrt(-1)",
    "(" * 300 + "1" + ")" * 300,
    "+".join(["1"] * 1000),
    "a < b < c",
    "",
    "   ",
    "1 if",
    "{1: 2}",
    "f'{1}'",
    "[i for i in range(10**9)]",
]
EXPR_TOKENS = ["n", "m", "k", "variant", "block_size_x", "tile_m", "time", "1", "0", "-1", "2", "1e308", "'s'"]
EXPR_OPS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "<", "==", " and ", " or ", " in ", "&", "|"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(HOSTILE),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
expressions = st.one_of(
    st.sampled_from(HOSTILE),
    st.lists(st.sampled_from(EXPR_TOKENS), min_size=1, max_size=6).flatmap(
        lambda toks: st.lists(st.sampled_from(EXPR_OPS), min_size=len(toks) - 1, max_size=len(toks) - 1).map(
            lambda ops: "".join(t + o for t, o in zip(toks, [*ops, ""]))
        )
    ),
)


def paths(node: Any, at: tuple = ()) -> list[tuple]:
    """Every key path of a document, the root included."""
    out = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*at, i))
    return out


def parent(doc: Any, path: tuple) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


@cache
def original(name: str) -> dict:
    """Space `name` as parsed from its file, its kernel's path made absolute (never changed: copied to mutate)."""
    doc = yaml.safe_load((BUILTIN_SPACES / f"{name}.yaml").read_text())
    doc["kernel"]["source"] = str(BUILTIN_KERNELS.parent / "spaces" / doc["kernel"]["source"])
    return doc


@st.composite
def mutated(draw: st.DrawFn, name: str) -> str:
    """The YAML text of space `name`, mutated 1-3 times."""
    doc = copy.deepcopy(original(name))
    text_edits = []
    for _ in range(draw(st.integers(1, 3))):
        where = [p for p in paths(doc) if p]
        path = draw(st.sampled_from(where))
        holder, key = parent(doc, path), path[-1]
        kind = draw(
            st.sampled_from(["drop", "retag", "value", "expression", "duplicate", "add", "text", "list-item"])
        )
        if kind == "drop":
            del holder[key]
        elif kind == "retag" and isinstance(holder, dict):
            holder[draw(st.text(min_size=1, max_size=10))] = holder.pop(key)
        elif kind == "value":
            holder[key] = draw(values)
        elif kind == "expression":
            holder[key] = draw(expressions)
        elif kind == "add" and isinstance(holder, dict):
            holder[draw(st.sampled_from(["defaults", "restrictions", "size_limits", "launch", "block_size_y"]))] = (
                draw(values)
            )
        elif kind == "list-item" and isinstance(holder[key], list):
            holder[key].append(draw(st.one_of(scalars, expressions)))
        elif kind in ("duplicate", "text"):
            text_edits.append(kind)
        # else: the mutation does not apply here: the document as it is
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    for kind in text_edits:
        lines = text.splitlines()
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "duplicate":  # a line twice: a duplicate key, or a list item twice
            lines.insert(i, lines[i])
        else:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))] + draw(st.text(max_size=6))
        text = "\n".join(lines) + "\n"
    return text


_searchspaces: dict[str, Any] = {}


def searchspace(space: Any) -> Any:
    """kt.searchspace(space), built once per distinct input: what kt.searchspace hands Kernel Tuner is a function
    of the space's parameters (values and types: repr), its restrictions' texts and its block's names alone, and
    the test only reads the result. An input that raises raises each time (nothing is kept)."""
    key = repr((kt.tune_params(space), space.restrictions_for(None), space.block_names))
    if key not in _searchspaces:
        _searchspaces[key] = kt.searchspace(space)
    return _searchspaces[key]


def exercise(path: Any) -> None:
    """Load the space and use it as the tool does; only TunerError may escape."""
    try:
        space = load_space(path, sources_within=BUILTIN_KERNELS.parent)
        if space.configurations > LISTED:
            return
        ss = searchspace(space)
        assert ss.size == space.configurations
        config = dict(zip(space.params, ss.list[0]))
        size_name, size = space.resolve_size(None)
        space.grid_dims(config, size)
        dtype = space.resolve_dtype(None)
        space.compute_metrics({**config, "time": 1.0}, size, dtype)
        space.objective_value({**config, "time": 1.0}, size, dtype)
        space.space_hash  # noqa: B018
    except TunerError as e:
        assert "\n" not in str(e), str(e)


@pytest.mark.parametrize("name", SPACES)
def test_mutated_spaces_fail_only_with_the_tools_error(name, tmp_path):
    path = tmp_path / f"{name}.yaml"
    passed: set[str] = set()  # texts exercised without an error: the exercise is a function of the text alone

    @settings(
        max_examples=EXAMPLES.get(name, DEFAULT_EXAMPLES),
        deadline=None,
        derandomize=True,  # the same examples in CI every time: a failure reproduces
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(mutated(name))
    def check(text: str) -> None:
        if text in passed:
            return
        path.write_text(text)
        exercise(path)
        passed.add(text)

    check()


def test_the_fuzzer_runs_a_thousand_examples():
    assert sum(EXAMPLES.get(n, DEFAULT_EXAMPLES) for n in SPACES) >= 1000


def test_the_unmutated_spaces_pass_the_same_exercise(tmp_path):
    start = time.monotonic()
    for name in SPACES:
        exercise(BUILTIN_SPACES / f"{name}.yaml")
    assert time.monotonic() - start < 30
