"""Loading a space file: YAML, then the JSON schema (tuner/space/space.schema.json), then the checks a schema
cannot say (expressions over known names, sizes that set the same variables and stay within their limits,
names that would shadow one another, a kernel source that exists), and last the launch grid and the metrics
evaluated for every named size with a sample of valid configs; each error one line naming the file and the
key path."""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any, cast

import jsonschema
import yaml
from constraint import FunctionConstraint, Problem

from tuner.errors import TunerError
from tuner.space.configurations import count_configurations
from tuner.space.declaration import check_declaration
from tuner.space.errors import SpaceError, kernel_path, one_of
from tuner.space.expressions import Expression
from tuner.space.model import METRIC_INPUTS, Space, kt_block_names, metric_var, size_range

# the times (ms) every metric is evaluated with on loading, for every named size and dtype: 1 us to 1 s
SAMPLE_TIMES = (1e-3, 1.0, 1e3)
SAMPLE_EVALUATIONS = 100_000  # restriction tests spent finding each sample config (a few hundred ms at most)


def space_schema() -> dict:
    """The space format's JSON schema (space.schema.json)."""
    return json.loads(resources.files("tuner.space").joinpath("space.schema.json").read_text())


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (YAML's rule, which PyYAML does not
    enforce: the last would silently win, and a space would lose half its configs without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key '{key}' is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_space(path: str | Path, *, sources_within: Path | None = None) -> Space:
    """The space in `path`. Its kernel source is named relative to the space file and must lie inside
    `sources_within` (default: the space file's folder; the built-ins' spaces name `../kernels/...` and are
    loaded with the folder that holds both)."""
    path = Path(path)
    try:
        doc = yaml.load(path.read_text(), Loader=_StrictLoader)  # a SafeLoader that refuses duplicate keys
    except FileNotFoundError:
        raise TunerError(f"{path}: no such space file") from None
    except UnicodeDecodeError:
        raise TunerError(f"{path}: not a text file (UTF-8)") from None
    except OSError as e:
        raise TunerError(f"{path}: cannot read the space file: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise TunerError(f"{path}: not valid YAML {_yaml_problem(e)}") from None
    if not isinstance(doc, dict):
        raise SpaceError(path, [], "expected a mapping of keys (workload, kernel, parameters, ...)")

    errors = sorted(
        jsonschema.Draft202012Validator(space_schema()).iter_errors(doc), key=lambda e: list(e.absolute_path)
    )
    if errors:
        worst = _worst(errors)
        raise SpaceError(path, list(worst.absolute_path), explain_schema_error(worst))

    params = doc["parameters"]
    for name, values in params.items():
        odd = [v for v in values if isinstance(v, float) and not math.isfinite(v)]
        if odd:
            raise SpaceError(path, ["parameters", name], f"{odd[0]} is not a value a kernel can take")
    texts = {name for name, values in params.items() if any(isinstance(v, str) for v in values)}
    size_sets = {name: set(v) for name, v in doc["sizes"].items()}
    first = next(iter(size_sets.values()))
    for name, keys in size_sets.items():
        if keys != first:
            raise SpaceError(
                path, ["sizes", name], f"every size must set the same variables ({', '.join(sorted(first))})"
            )
    size_vars = set(first)
    clash = size_vars & set(params)
    if clash:
        raise SpaceError(path, ["sizes"], f"size variables clash with parameters: {', '.join(sorted(clash))}")
    first_name, first_size = next(iter(doc["sizes"].items()))
    for var in first_size:
        if var in METRIC_INPUTS:
            raise SpaceError(
                path,
                ["sizes", first_name, var],
                f"'{var}' is what metrics read as the {_INPUT_WORDS[var]}: rename the size variable",
            )
    _check_size_limits(path, doc, list(first_size))

    def expr(text: str, key_path: list, known: Iterable[str]) -> Expression:
        try:
            e = Expression(text)
            e.check_names(known, texts)
            e.check_exponents(params)  # the sizes' variables are checked as they are evaluated
            return e
        except ValueError as err:
            raise SpaceError(path, key_path, f"{err} in '{text}'") from None

    defaults = doc.get("defaults", {})
    for name, value in defaults.items():
        if name not in params:
            raise SpaceError(
                path, ["defaults", name], f"'{name}' is not a parameter; expected one of {', '.join(params)}"
            )
        if not one_of(value, params[name]):  # true is not 1, 2.0 is not 2
            raise SpaceError(
                path, ["defaults", name], f"{value!r} is not one of its values ({', '.join(map(str, params[name]))})"
            )

    restrictions = doc.get("restrictions", [])
    checked = [expr(r, ["restrictions", i], params) for i, r in enumerate(restrictions)]
    dtype_checked = {  # a dtype's own restrictions (those without any left out: Space.space_hash_for)
        dtype: [expr(r, ["dtypes", dtype, "restrictions", i], params) for i, r in enumerate(entry["restrictions"])]
        for dtype, entry in doc["dtypes"].items()
        if entry and entry.get("restrictions")
    }
    lang = doc["kernel"].get("lang", "cuda")
    if lang == "cuda" and "launch" not in doc:
        raise SpaceError(path, [], "missing key 'launch' (block and grid of the kernel; only a 'host' kernel has none)")
    if lang == "host" and "launch" in doc:
        raise SpaceError(path, ["launch"], "a 'host' kernel launches its own kernels: remove 'launch'")
    launch = doc.get("launch", {"block": [], "grid": []})
    for i, b in enumerate(launch["block"]):
        if b not in params:
            raise SpaceError(
                path, ["launch", "block", i], f"'{b}' is not a parameter; expected one of {', '.join(params)}"
            )
    _check_block_values(path, params, launch["block"] if lang == "cuda" else [])
    grid = [expr(str(g), ["launch", "grid", i], set(params) | size_vars) for i, g in enumerate(launch["grid"])]
    for dtype, entry in doc["dtypes"].items():
        for define in (entry or {}).get("defines", {}):
            if define in params:
                raise SpaceError(
                    path,
                    ["dtypes", dtype, "defines", define],
                    f"'{define}' is also a parameter: the dtype's #define would override its values (every "
                    "value would compile the same); rename one",
                )

    metrics, known = {}, set(params) | size_vars | set(METRIC_INPUTS)
    read_as: dict[str, str] = {}  # how later metrics read a metric -> its name
    for name, text in doc["metrics"].items():
        var = metric_var(name)  # how later metrics read it
        taken = (
            f"the metric '{read_as[var]}'"
            if var in read_as
            else f"the {_INPUT_WORDS[var]}"
            if var in METRIC_INPUTS
            else f"the size variable {var}"
            if var in size_vars
            else f"the parameter {var}"
            if var in params
            else None
        )
        if taken:
            raise SpaceError(
                path, ["metrics", name], f"metrics read '{name}' as {var}, which is already {taken}: rename the metric"
            )
        metrics[name] = expr(text, ["metrics", name], known)
        known.add(var)
        read_as[var] = name
    objective = doc["objective"]["metric"]
    if objective != "time" and objective not in metrics:
        raise SpaceError(
            path,
            ["objective", "metric"],
            f"'{objective}' is neither 'time' nor one of the metrics ({', '.join(metrics)})",
        )
    if objective == "time" and doc["objective"]["direction"] != "minimize":
        raise SpaceError(
            path,
            ["objective", "direction"],
            "'time' is minimized (the shortest is the best): say minimize, or maximize a metric (GB/s)",
        )

    default_size = doc.get("default_size", next(iter(doc["sizes"])))
    if default_size not in doc["sizes"]:
        raise SpaceError(
            path, ["default_size"], f"'{default_size}' is not one of the sizes ({', '.join(doc['sizes'])})"
        )

    source = kernel_path(path, doc["kernel"]["source"], ["kernel", "source"], sources_within)
    configurations = count_configurations(path, params, checked, dtype_checked, [str(b) for b in launch["block"]])
    declaration = check_declaration(doc, path, size_vars, set(params), list(doc["dtypes"]))

    verify = doc.get("verify", {})
    space = Space(
        path=path,
        workload=doc["workload"],
        description=doc.get("description", ""),
        kernel_source=source,
        kernel_name=doc["kernel"]["name"],
        lang=lang,
        compiler_options=doc["kernel"].get("compiler_options", []),
        params=params,
        restrictions=[e.text for e in checked],  # only what the checker accepted ever reaches Kernel Tuner
        dtype_restrictions={dtype: [e.text for e in exprs] for dtype, exprs in dtype_checked.items()},
        configurations=configurations,
        block_names=launch["block"],
        grid=grid,
        sizes=doc["sizes"],
        default_size=default_size,
        size_limits=doc.get("size_limits", {}),
        dtypes={k: (v or {}) for k, v in doc["dtypes"].items()},
        metrics=metrics,
        objective=objective,
        maximize=doc["objective"]["direction"] == "maximize",
        atol=float(verify.get("atol", 1e-6)),
        rtol=float(verify.get("rtol", 1e-5)),
        iterations=int(doc.get("iterations", 7)),
        baselines=doc.get("baselines", []),
        defaults=defaults,
        doc=doc,
        declaration=declaration,
    )
    samples: dict = {}  # restrictions_for(dtype), by the dtype with restrictions of its own (or None) -> configs
    for dtype in doc["dtypes"]:
        own = dtype if dtype in dtype_checked else None
        if own not in samples:
            samples[own] = _sample_configs(params, [*checked, *dtype_checked.get(dtype, [])])
        _check_samples(space, dtype, samples[own])
    return space


_INPUT_WORDS = {"time": "measured time (ms)", "itemsize": "dtype's size in bytes"}  # METRIC_INPUTS, in words

# PyYAML's contexts that open something the problem found later did not close: the mistake is where it opened
# (a `[` without its `]` is noticed lines further down, at the next key)
_OPENED = {
    "while parsing a flow sequence": "the list opened with '[' here is not closed",
    "while parsing a flow mapping": "the mapping opened with '{' here is not closed",
    "while scanning a quoted scalar": "the quoted text opened here is not closed",
    "while scanning a simple key": "this key has no ':' after it",
}
# PyYAML's tokens, as its messages name them ("but got '?'"), in words
_TOKENS = {
    "?": "a key",
    "<scalar>": "a value",
    "<block end>": "the end of an indented block",
    "<block mapping start>": "an indented mapping",
    "<block sequence start>": "an indented list",
    "<block entry>": "a list item ('-')",
    "<stream end>": "the end of the file",
    "<document start>": "'---'",
    "<document end>": "'...'",
    "<alias>": "an alias (*name)",
    "<anchor>": "an anchor (&name)",
    "<tag>": "a tag (!name)",
}


def _yaml_problem(e: yaml.YAMLError) -> str:
    """Where and what a YAML error is, in words: "(line 16, column 8): the list opened with '[' here is not
    closed: expected ',' or ']', but got a key at line 20, column 1"."""
    problem_mark, context_mark = getattr(e, "problem_mark", None), getattr(e, "context_mark", None)
    problem = " ".join(str(getattr(e, "problem", None) or e).split())  # one line
    if problem.startswith("expected <block end>"):  # a line indented unlike the block it is in
        problem = "this line is indented unlike the lines above it (a key, or a '-' item, out of line)"
    problem = re.sub(r"'(\?|<[a-z ]+>)'|(<[a-z ]+>)", lambda m: _TOKENS.get(m[1] or m[2], m[0]), problem)
    opened = _OPENED.get(str(getattr(e, "context", None)))
    if opened and context_mark is not None and problem_mark is not None:
        return f"({_at(context_mark)}): {opened}: {problem} at {_at(problem_mark)}"
    return f"({_at(problem_mark)}): {problem}" if problem_mark is not None else f": {problem}"


def _at(mark: yaml.Mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _worst(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    """The schema error to report: a parameter's values of mixed kinds as such (best_match would pick one branch
    of the anyOf); an unknown key rather than a missing one of the same mapping (a mistyped `src:` is why
    `source` is missing, and the unknown key's error suggests the right name); else jsonschema's best match."""
    mixed = next((e for e in errors if e.validator == "anyOf"), None)
    if mixed is not None:
        return mixed
    best = jsonschema.exceptions.best_match(errors)
    if best.validator != "required":
        return best
    unknown = (e for e in errors if e.validator == "additionalProperties" and e.absolute_path == best.absolute_path)
    return next(unknown, best)


def _check_size_limits(path: Path, doc: dict, size_vars: list) -> None:
    """size_limits name size variables, each with min <= max, and every named size lies within them (the
    named sizes are not checked again when a command resolves one)."""
    limits = doc.get("size_limits", {})
    for var, limit in limits.items():
        if var not in size_vars:
            raise SpaceError(
                path, ["size_limits", var], f"'{var}' is not a size variable; expected one of {', '.join(size_vars)}"
            )
        lo, hi = size_range(limit)
        if lo > hi:
            said = "" if "min" in limit else " (the default)"
            raise SpaceError(path, ["size_limits", var], f"no size is allowed: min {lo}{said} is above max {hi}")
    for name, size in doc["sizes"].items():
        for var, value in size.items():
            lo, hi = size_range(limits.get(var, {}))
            if not lo <= value <= hi:
                raise SpaceError(path, ["sizes", name, var], f"{value} is outside size_limits.{var} ({lo}..{hi})")


class _Spent(Exception):
    """Finding a sample config ran out of restriction tests."""


def _sample_configs(params: dict, restrictions: list[Expression]) -> list[dict]:
    """A few valid configs, found cheaply (python-constraint's first solution over the restrictions, each
    parameter's values tried first to last, then last to first; never a list of the space): the configs the
    grid and the metrics are evaluated with on loading. Fewer (none) where the search runs out of
    SAMPLE_EVALUATIONS or a restriction raises (the count of the configurations reports that)."""
    samples: list[dict] = []
    for order in (1, -1):
        problem = Problem()
        for name, values in params.items():
            problem.addVariable(name, list(values)[::-order])  # the solver tries a domain's values from its end
        spent = [0]
        for e in restrictions:
            names = sorted(e.names)
            if names:
                problem.addConstraint(FunctionConstraint(_sample_test(e, names, spent)), names)
        try:
            found = next(problem.getSolutionIter(), None)
        except Exception:  # noqa: BLE001  (out of tests, or a restriction that raises: no sample)
            found = None
        if found is not None:
            config = {k: found[k] for k in params}
            if not any(all(one_of(config[k], [c[k]]) for k in params) for c in samples):
                samples.append(config)
    return samples


def _sample_test(e: Expression, names: list, spent: list) -> object:
    def test(*values: object) -> bool:
        spent[0] += 1
        if spent[0] > SAMPLE_EVALUATIONS:
            raise _Spent
        return bool(e(dict(zip(names, values))))

    return test


def _check_samples(space: Space, dtype: str, configs: list[dict]) -> None:
    """The launch grid and every metric, evaluated for each named size with each sample config of `dtype`
    (the metrics with its itemsize and each of SAMPLE_TIMES): an expression that cannot be evaluated, a grid
    that is not a whole number >= 1 or a metric that is not finite is a mistake of the space, refused now
    rather than found in a campaign (a traceback, too few blocks, a NaN)."""
    for config in configs:
        for size in space.sizes.values():
            space.grid_dims(config, size)
            for time in SAMPLE_TIMES:
                space.compute_metrics({**config, "time": time}, size, dtype, strict=True)


def _check_block_values(path: Path, params: dict, block: list) -> None:
    """The parameters Kernel Tuner reads as the thread block (launch.block, then its default names for the
    dimensions left: tuner.measure.kt.kernel_options) take whole numbers >= 1 only."""
    for name in kt_block_names(block):
        bad = [v for v in params.get(name, []) if type(v) is not int or v < 1]
        if bad:
            raise SpaceError(
                path,
                ["parameters", name],
                f"'{name}' is a thread block dimension: {bad[0]!r} is not a whole number >= 1",
            )


IDENTIFIER = "^[A-Za-z_][A-Za-z0-9_]*$"  # the schema's pattern of a name that is a C identifier
_NO_BOOLEANS = (
    "use 0 and 1: a boolean would reach the kernel as `#define {name} True` (Python's spelling), which C reads "
    "as 0 in #if and as an undefined name in code (true is not 1); got {got!r}"
)


def explain_schema_error(e: jsonschema.ValidationError) -> str:
    """Say what was expected in words, not in schema jargon."""
    v, expected, instance, schema = (
        e.validator,
        cast(Any, e.validator_value),
        cast(Any, e.instance),
        cast(Any, e.schema),
    )
    if v == "anyOf" and len(e.absolute_path) == 2 and e.absolute_path[0] in ("parameters", "defaults"):
        given = e.instance if isinstance(e.instance, list) else [e.instance]
        if any(isinstance(x, bool) for x in given):
            return _NO_BOOLEANS.format(name=e.absolute_path[1], got=e.instance)
        return f"values must be all numbers (64-bit) or all names (text, a C token such as float); got {e.instance!r}"
    if v == "type" and isinstance(e.instance, bool) and list(e.absolute_path)[:2] == ["reference", "config"]:
        return _NO_BOOLEANS.format(name=e.absolute_path[-1], got=e.instance)
    if v in ("maximum", "minimum"):
        return f"{e.instance!r} is out of range ({'at most' if v == 'maximum' else 'at least'} {expected})"
    if v == "required":
        return f"missing key {e.message.split(' ')[0]}"
    if v == "additionalProperties" and isinstance(instance, dict):
        known = list(schema.get("properties", {}))
        key = next((str(k) for k in instance if k not in known), "?")
        close = difflib.get_close_matches(key, known, n=1)
        return f"unknown key '{key}' (known: {', '.join(known)})" + (f"; did you mean '{close[0]}'?" if close else "")
    if v == "type":
        return f"expected {expected if isinstance(expected, str) else ' or '.join(expected)}, got {e.instance!r}"
    if v == "enum":
        return f"expected one of {', '.join(map(str, expected))}, got {e.instance!r}"
    if v == "minItems":
        return "expected a non-empty list"
    if v == "maxItems":
        return f"expected at most {expected} entries, got {len(instance)}"
    if v == "uniqueItems":
        return f"values must be unique, got {e.instance!r}"
    if v == "pattern" and expected == IDENTIFIER:
        return f"{e.instance!r} is not a C identifier (letters, digits and _, not starting with a digit)"
    if v == "pattern":
        return f"{e.instance!r} is not a valid name (expected to match {e.validator_value})"
    return e.message
