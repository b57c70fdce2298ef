"""Loading a space file: its document (YAML and the JSON schema: tuner.space.document), then the checks a schema
cannot say (expressions over known names, sizes that set the same variables and stay within their limits,
names that would shadow one another, a kernel source that exists), and last the launch grid and the metrics
evaluated for every named size with a sample of valid configs; each error one line naming the file and the
key path. `load_space` runs these steps in order; each step is a function of its own below."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from constraint import FunctionConstraint, Problem

from tuner.space.configurations import count_configurations
from tuner.space.declaration import check_declaration
from tuner.space.document import read_document
from tuner.space.errors import SpaceError, kernel_path, one_of
from tuner.space.expressions import Expression
from tuner.space.model import METRIC_INPUTS, Space, kt_block_names, metric_var, size_range

__all__ = ["SpaceError", "load_space"]

# the times (ms) every metric is evaluated with on loading, for every named size and dtype: 1 us to 1 s
SAMPLE_TIMES = (1e-3, 1.0, 1e3)
SAMPLE_EVALUATIONS = 100_000  # restriction tests spent finding each sample config (a few hundred ms at most)
_INPUT_WORDS = {"time": "measured time (ms)", "itemsize": "dtype's size in bytes"}  # METRIC_INPUTS, in words


def load_space(path: str | Path, *, sources_within: Path | None = None) -> Space:
    """The space in `path`. Its kernel source is named relative to the space file and must lie inside
    `sources_within` (default: the space file's folder; the built-ins' spaces name `../kernels/...` and are
    loaded with the folder that holds both)."""
    path = Path(path)
    doc = read_document(path)
    params = doc["parameters"]
    _check_parameter_values(path, params)
    size_vars = _size_variables(path, doc)
    expressions = _Expressions(path, params)
    defaults = doc.get("defaults", {})
    _check_defaults(path, defaults, params)
    checked = [expressions.parse(r, ["restrictions", i], params) for i, r in enumerate(doc.get("restrictions", []))]
    dtype_checked = {  # a dtype's own restrictions (those without any left out: Space.space_hash_for)
        dtype: [
            expressions.parse(r, ["dtypes", dtype, "restrictions", i], params)
            for i, r in enumerate(entry["restrictions"])
        ]
        for dtype, entry in doc["dtypes"].items()
        if entry and entry.get("restrictions")
    }
    lang, block = _launch_block(path, doc, params)
    grid = [
        expressions.parse(str(g), ["launch", "grid", i], set(params) | size_vars)
        for i, g in enumerate(doc.get("launch", {}).get("grid", []))
    ]
    _check_defines(path, doc, params)
    metrics = _metrics(path, doc, params, size_vars, expressions)
    objective = _objective(path, doc, metrics)
    default_size = _default_size(path, doc)
    source = kernel_path(path, doc["kernel"]["source"], ["kernel", "source"], sources_within)
    configurations = count_configurations(path, params, checked, dtype_checked, [str(b) for b in block])
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
        block_names=block,
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
    _check_every_dtype_samples(space, params, checked, dtype_checked)
    return space


# ---- the steps, in load_space's order -------------------------------------------------------------------


def _check_parameter_values(path: Path, params: dict) -> None:
    for name, values in params.items():
        odd = [v for v in values if isinstance(v, float) and not math.isfinite(v)]
        if odd:
            raise SpaceError(path, ["parameters", name], f"{odd[0]} is not a value a kernel can take")


def _size_variables(path: Path, doc: dict) -> set[str]:
    """The variables every named size sets (the same in each), none a parameter's or a metric input's name, and
    each size within size_limits."""
    size_sets = {name: set(v) for name, v in doc["sizes"].items()}
    first = next(iter(size_sets.values()))
    for name, keys in size_sets.items():
        if keys != first:
            raise SpaceError(
                path, ["sizes", name], f"every size must set the same variables ({', '.join(sorted(first))})"
            )
    clash = first & set(doc["parameters"])
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
    return first


class _Expressions:
    """The space's expressions (restrictions, grid, metrics) parsed and checked against the names they may read."""

    def __init__(self, path: Path, params: dict):
        self.path, self.params = path, params
        self.texts = {name for name, values in params.items() if any(isinstance(v, str) for v in values)}

    def parse(self, text: str, key_path: list, known: Iterable[str]) -> Expression:
        try:
            e = Expression(text)
            e.check_names(known, self.texts)
            e.check_exponents(self.params)  # the sizes' variables are checked as they are evaluated
            return e
        except ValueError as err:
            quoted = text if len(text) <= 80 else text[:77] + "..."  # one line, not an expression of thousands
            raise SpaceError(self.path, key_path, f"{err} in '{quoted}'") from None


def _check_defaults(path: Path, defaults: dict, params: dict) -> None:
    for name, value in defaults.items():
        if name not in params:
            raise SpaceError(
                path, ["defaults", name], f"'{name}' is not a parameter; expected one of {', '.join(params)}"
            )
        if not one_of(value, params[name]):  # true is not 1, 2.0 is not 2
            raise SpaceError(
                path, ["defaults", name], f"{value!r} is not one of its values ({', '.join(map(str, params[name]))})"
            )


def _launch_block(path: Path, doc: dict, params: dict) -> tuple[str, list]:
    """The kernel's language and the parameters of its thread block: a CUDA kernel's `launch`, none for a host one."""
    lang = doc["kernel"].get("lang", "cuda")
    if lang == "cuda" and "launch" not in doc:
        raise SpaceError(path, [], "missing key 'launch' (block and grid of the kernel; only a 'host' kernel has none)")
    if lang == "host" and "launch" in doc:
        raise SpaceError(path, ["launch"], "a 'host' kernel launches its own kernels: remove 'launch'")
    block = doc.get("launch", {"block": []})["block"]
    for i, b in enumerate(block):
        if b not in params:
            raise SpaceError(
                path, ["launch", "block", i], f"'{b}' is not a parameter; expected one of {', '.join(params)}"
            )
    _check_block_values(path, params, block if lang == "cuda" else [])
    return lang, block


def _check_defines(path: Path, doc: dict, params: dict) -> None:
    for dtype, entry in doc["dtypes"].items():
        for define in (entry or {}).get("defines", {}):
            if define in params:
                raise SpaceError(
                    path,
                    ["dtypes", dtype, "defines", define],
                    f"'{define}' is also a parameter: the dtype's #define would override its values (every "
                    "value would compile the same); rename one",
                )


def _metrics(path: Path, doc: dict, params: dict, size_vars: set[str], expressions: _Expressions) -> dict:
    """Each metric parsed in order: it reads the parameters, the size variables, the metric inputs and the
    metrics before it, by a name no other of those has."""
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
        metrics[name] = expressions.parse(text, ["metrics", name], known)
        known.add(var)
        read_as[var] = name
    return metrics


def _objective(path: Path, doc: dict, metrics: dict) -> str:
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
    return objective


def _default_size(path: Path, doc: dict) -> str:
    default_size = doc.get("default_size", next(iter(doc["sizes"])))
    if default_size not in doc["sizes"]:
        raise SpaceError(
            path, ["default_size"], f"'{default_size}' is not one of the sizes ({', '.join(doc['sizes'])})"
        )
    return default_size


def _check_every_dtype_samples(space: Space, params: dict, checked: list, dtype_checked: dict) -> None:
    """The launch grid and the metrics evaluated with sample configs of every dtype (_check_samples); one sample
    search for the dtypes that share their restrictions."""
    samples: dict = {}  # restrictions_for(dtype), by the dtype with restrictions of its own (or None) -> configs
    for dtype in space.dtypes:
        own = dtype if dtype in dtype_checked else None
        if own not in samples:
            samples[own] = _sample_configs(params, [*checked, *dtype_checked.get(dtype, [])])
        _check_samples(space, dtype, samples[own])


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
