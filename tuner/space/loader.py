"""Loading a space file: YAML, then the JSON schema (tuner/space/space.schema.json), then the checks a schema
cannot say (expressions over known names, sizes that set the same variables, a kernel source that exists),
each error one line naming the file and the key path."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any, cast

import jsonschema
import yaml

from tuner.errors import TunerError
from tuner.space.configurations import count_configurations
from tuner.space.declaration import check_declaration
from tuner.space.errors import SpaceError, kernel_path
from tuner.space.expressions import Expression
from tuner.space.model import METRIC_INPUTS, Space, kt_block_names, metric_var


def _schema() -> dict:
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
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())  # one line
        raise TunerError(f"{path}: not valid YAML{where}: {problem}") from None
    if not isinstance(doc, dict):
        raise SpaceError(path, [], "expected a mapping of keys (workload, kernel, parameters, ...)")

    errors = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        # a parameter's values of mixed kinds: said as such (best_match would pick one branch of the anyOf)
        worst = next((e for e in errors if e.validator == "anyOf"), None) or jsonschema.exceptions.best_match(errors)
        raise SpaceError(path, list(worst.absolute_path), _explain(worst))

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
        if value not in params[name]:
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

    metrics, known = {}, set(params) | size_vars | set(METRIC_INPUTS)
    for name, text in doc["metrics"].items():
        metrics[name] = expr(text, ["metrics", name], known)
        known.add(metric_var(name))
    objective = doc["objective"]["metric"]
    if objective != "time" and objective not in metrics:
        raise SpaceError(
            path,
            ["objective", "metric"],
            f"'{objective}' is neither 'time' nor one of the metrics ({', '.join(metrics)})",
        )

    default_size = doc.get("default_size", next(iter(doc["sizes"])))
    if default_size not in doc["sizes"]:
        raise SpaceError(
            path, ["default_size"], f"'{default_size}' is not one of the sizes ({', '.join(doc['sizes'])})"
        )

    source = kernel_path(path, doc["kernel"]["source"], ["kernel", "source"], sources_within)
    configurations = count_configurations(path, params, checked, dtype_checked)
    declaration = check_declaration(doc, path, size_vars, set(params), list(doc["dtypes"]))

    verify = doc.get("verify", {})
    return Space(
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


def _explain(e: jsonschema.ValidationError) -> str:
    """Say what was expected in words, not in schema jargon."""
    v, expected = e.validator, cast(Any, e.validator_value)
    if v == "anyOf" and len(e.absolute_path) == 2 and e.absolute_path[0] in ("parameters", "defaults"):
        return (
            f"values must be all numbers (64-bit), all names (text, a C token such as float) or all booleans "
            f"(true is not 1); got {e.instance!r}"
        )
    if v in ("maximum", "minimum"):
        return f"{e.instance!r} is out of range ({'at most' if v == 'maximum' else 'at least'} {expected})"
    if v == "required":
        return f"missing key {e.message.split(' ')[0]}"
    if v == "additionalProperties":
        return f"unexpected key: {e.message.split('(')[-1].rstrip(')')}"
    if v == "type":
        return f"expected {expected if isinstance(expected, str) else ' or '.join(expected)}, got {e.instance!r}"
    if v == "enum":
        return f"expected one of {', '.join(map(str, expected))}, got {e.instance!r}"
    if v == "minItems":
        return "expected a non-empty list"
    if v == "uniqueItems":
        return f"values must be unique, got {e.instance!r}"
    if v == "pattern":
        return f"{e.instance!r} is not a valid name (expected to match {e.validator_value})"
    return e.message
