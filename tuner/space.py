"""YAML tuning spaces: loading, validation with messages that name the file and key path, and the
derived pieces Kernel Tuner needs (tune_params, restrictions, launch geometry, metrics)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path

import jsonschema
import numpy as np
import yaml

from tuner.errors import TunerError
from tuner.expressions import Expression

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SPACES_DIR = PROJECT_ROOT / "spaces"
# names every metric expression may read besides the parameters and the size variables
METRIC_INPUTS = ("time", "itemsize")


def _schema() -> dict:
    return json.loads(resources.files("tuner").joinpath("schema/space.schema.json").read_text())


class SpaceError(TunerError):
    def __init__(self, path, key_path, message):
        where = ".".join(str(k) for k in key_path) or "(top level)"
        super().__init__(f"{path}: at {where}: {message}")


@dataclass
class Space:
    path: Path
    workload: str
    description: str
    kernel_source: Path
    kernel_name: str
    lang: str  # "cuda": one kernel Kernel Tuner launches; "host": a host function that runs a pipeline
    compiler_options: list
    params: dict
    restrictions: list
    block_names: list
    grid: list
    sizes: dict
    default_size: str
    size_limits: dict
    dtypes: dict
    metrics: dict
    objective: str
    maximize: bool
    atol: float
    rtol: float
    iterations: int
    baselines: list = field(default_factory=list)
    # parameters added to a space after configs were recorded: the value those configs ran with (the
    # kernel's own default), so older recordings keep counting (store.load_evaluations, kt.align_cache)
    defaults: dict = field(default_factory=dict)

    # ---- derived views -------------------------------------------------------------------------
    def complete(self, config: dict) -> dict:
        """A config recorded before some parameters were added, with their defaults (the values it ran with)."""
        return {**{k: v for k, v in self.defaults.items() if k not in config}, **config}

    @cached_property
    def size_vars(self) -> tuple:
        return tuple(next(iter(self.sizes.values())).keys())

    @cached_property
    def restriction_exprs(self) -> list:
        return [Expression(r) for r in self.restrictions]

    def is_valid(self, config: dict) -> bool:
        return all(bool(e(config)) for e in self.restriction_exprs)

    def checked(self, config: dict, what: str = "the config") -> dict:
        """`config` with the defaults of parameters it leaves out (see `defaults`), if it names a configuration
        of this space; else a TunerError saying what is wrong (`what`: how the message names it)."""
        config = self.complete(config)
        missing = set(self.params) - set(config)
        unknown = set(config) - set(self.params)
        if missing or unknown:
            raise TunerError(f"{what} must set the parameters of {self.workload} (those with a default may be "
                             "left out): " + (f"missing {', '.join(sorted(missing))} " if missing else "")
                             + (f"unknown {', '.join(sorted(unknown))}" if unknown else ""))
        bad = {k: v for k, v in config.items() if v not in self.params[k]}
        if bad:
            raise TunerError(f"{what}: values outside the space: "
                             + ", ".join(f"{k}={v} (allowed {self.params[k]})" for k, v in bad.items()))
        if not self.is_valid(config):
            raise TunerError(f"{what} breaks a restriction of the space: {config}")
        return dict(config)

    def grid_dims(self, config: dict, size: dict) -> list:
        scope = {**size, **config}
        return [int(g(scope)) for g in self.grid] + [1] * (3 - len(self.grid))

    def source_for(self, dtype: str, config: dict | None = None) -> str:
        """The kernel source with the dtype's #defines in front, as Kernel Tuner puts the parameters'; with a
        config, its parameters' #defines before those, which is what Kernel Tuner compiles for it.
        (Not -D options: CUDA 13's builtin headers use names such as T as template parameters.)"""
        defines = [*(config or {}).items(), *self.dtypes[dtype].get("defines", {}).items()]
        return "".join(f"#define {k} {v}\n" for k, v in defines) + self.source_text

    def build_options(self, dtype: str) -> list:
        """Compiler options and dtype defines: what decides the binary besides the parameters (provenance)."""
        defines = self.dtypes[dtype].get("defines", {})
        return list(self.compiler_options) + [f"#define {k} {v}" for k, v in defines.items()]

    def itemsize(self, dtype: str) -> int:
        return np.dtype(dtype).itemsize

    def compute_metrics(self, row: dict, size: dict, dtype: str) -> dict:
        """Metrics of one measured config; `time` is the median of its repeats, in ms."""
        times = row.get("times")
        time = statistics.median(times) if times else row.get("time")
        scope = {**size, **{k: row[k] for k in self.params}, "time": time, "itemsize": self.itemsize(dtype)}
        out = {}
        for name, expr in self.metrics.items():
            try:
                out[name] = float(expr(scope))
            except ZeroDivisionError:
                out[name] = float("nan")
            scope[_metric_var(name)] = out[name]
        return out

    def objective_value(self, row: dict, size: dict, dtype: str) -> float:
        if self.objective == "time":
            times = row.get("times")
            return statistics.median(times) if times else row["time"]
        return self.compute_metrics(row, size, dtype)[self.objective]

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b

    # ---- sizes ---------------------------------------------------------------------------------
    def resolve_size(self, text: str | None, parse_hook=None) -> tuple[str, dict]:
        """A named size, `k=v,...`, or a workload's own notation (e.g. 1024x512x2048)."""
        text = text or self.default_size
        if text in self.sizes:
            return text, dict(self.sizes[text])
        values = None
        if parse_hook is not None:
            values = parse_hook(text)
        if values is None and re.fullmatch(r"\s*\w+\s*=\s*-?\d+(\s*,\s*\w+\s*=\s*-?\d+)*\s*", text):
            values = {k.strip(): int(v) for k, v in (p.split("=") for p in text.split(","))}
        if values is None:
            raise TunerError(
                f"unknown size '{text}' for {self.workload}: use one of {', '.join(self.sizes)} "
                f"or give the variables, e.g. {','.join(f'{k}={v}' for k, v in next(iter(self.sizes.values())).items())}"
            )
        if set(values) != set(self.size_vars):
            raise TunerError(f"size '{text}' for {self.workload} must set exactly {', '.join(self.size_vars)}")
        for k, v in values.items():
            lim = self.size_limits.get(k, {})
            lo, hi = lim.get("min", 1), lim.get("max")
            if v < lo or (hi is not None and v > hi):
                raise TunerError(f"impossible size for {self.workload}: {k}={v} (allowed {lo}..{hi if hi else 'any'})")
        for name, named in self.sizes.items():
            if named == values:
                return name, values
        values = {k: values[k] for k in self.size_vars}  # one name for a size however its variables were ordered
        return format_size(values), values

    def resolve_dtype(self, dtype: str | None) -> str:
        dtype = dtype or next(iter(self.dtypes))
        if dtype not in self.dtypes:
            raise TunerError(f"{self.workload} has no dtype '{dtype}'; it has {', '.join(self.dtypes)}")
        return dtype

    @property
    def source_text(self) -> str:
        return self.kernel_source.read_text()

    @cached_property
    def space_hash(self) -> str:
        """The parameters' values and the restrictions: what an Optuna trial's params (indices into the values)
        mean. A study resumed under another space would read its trials as other configs."""
        text = json.dumps({"params": self.params, "restrictions": self.restrictions}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def format_size(values: dict) -> str:
    """The `k=v,...` spelling of a problem size, as `--size` reads it and as ad-hoc sizes are named."""
    return ",".join(f"{k}={v}" for k, v in values.items())


def size_distance(a: dict, b: dict) -> float:
    """How far apart two problem sizes are: Euclidean over the log2 of their variables."""
    return math.sqrt(sum(math.log2(max(a[k], 1) / max(b[k], 1)) ** 2 for k in a))


def _metric_var(name: str) -> str:
    """Metrics may name earlier metrics; 'GB/s' is read as GB_s."""
    return re.sub(r"\W", "_", name)


def load_space(path: str | Path) -> Space:
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise TunerError(f"{path}: no such space file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise TunerError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(doc, dict):
        raise SpaceError(path, [], "expected a mapping of keys (workload, kernel, parameters, ...)")

    errors = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = jsonschema.exceptions.best_match(errors)
        raise SpaceError(path, list(e.absolute_path), _explain(e))

    params = doc["parameters"]
    size_sets = {name: set(v) for name, v in doc["sizes"].items()}
    first = next(iter(size_sets.values()))
    for name, keys in size_sets.items():
        if keys != first:
            raise SpaceError(path, ["sizes", name], f"every size must set the same variables ({', '.join(sorted(first))})")
    size_vars = set(first)
    clash = size_vars & set(params)
    if clash:
        raise SpaceError(path, ["sizes"], f"size variables clash with parameters: {', '.join(sorted(clash))}")

    def expr(text, key_path, known):
        try:
            e = Expression(text)
            e.check_names(known)
            return e
        except ValueError as err:
            raise SpaceError(path, key_path, f"{err} in '{text}'") from None

    defaults = doc.get("defaults", {})
    for name, value in defaults.items():
        if name not in params:
            raise SpaceError(path, ["defaults", name], f"'{name}' is not a parameter; expected one of {', '.join(params)}")
        if value not in params[name]:
            raise SpaceError(path, ["defaults", name], f"{value!r} is not one of its values ({', '.join(map(str, params[name]))})")

    restrictions = doc.get("restrictions", [])
    for i, r in enumerate(restrictions):
        expr(r, ["restrictions", i], params)
    lang = doc["kernel"].get("lang", "cuda")
    if lang == "cuda" and "launch" not in doc:
        raise SpaceError(path, [], "missing key 'launch' (block and grid of the kernel; only a 'host' kernel has none)")
    if lang == "host" and "launch" in doc:
        raise SpaceError(path, ["launch"], "a 'host' kernel launches its own kernels: remove 'launch'")
    launch = doc.get("launch", {"block": [], "grid": []})
    for i, b in enumerate(launch["block"]):
        if b not in params:
            raise SpaceError(path, ["launch", "block", i], f"'{b}' is not a parameter; expected one of {', '.join(params)}")
    grid = [expr(str(g), ["launch", "grid", i], set(params) | size_vars) for i, g in enumerate(launch["grid"])]

    metrics, known = {}, set(params) | size_vars | set(METRIC_INPUTS)
    for name, text in doc["metrics"].items():
        metrics[name] = expr(text, ["metrics", name], known)
        known.add(_metric_var(name))
    objective = doc["objective"]["metric"]
    if objective != "time" and objective not in metrics:
        raise SpaceError(path, ["objective", "metric"], f"'{objective}' is neither 'time' nor one of the metrics ({', '.join(metrics)})")

    default_size = doc.get("default_size", next(iter(doc["sizes"])))
    if default_size not in doc["sizes"]:
        raise SpaceError(path, ["default_size"], f"'{default_size}' is not one of the sizes ({', '.join(doc['sizes'])})")

    source = PROJECT_ROOT / doc["kernel"]["source"]
    if not source.is_file():
        raise SpaceError(path, ["kernel", "source"], f"kernel source '{doc['kernel']['source']}' does not exist")

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
        restrictions=restrictions,
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
    )


def _explain(e: jsonschema.ValidationError) -> str:
    """Say what was expected in words, not in schema jargon."""
    v = e.validator
    if v == "required":
        return f"missing key {e.message.split(' ')[0]}"
    if v == "additionalProperties":
        return f"unexpected key: {e.message.split('(')[-1].rstrip(')')}"
    if v == "type":
        return f"expected {e.validator_value if isinstance(e.validator_value, str) else ' or '.join(e.validator_value)}, got {e.instance!r}"
    if v == "enum":
        return f"expected one of {', '.join(map(str, e.validator_value))}, got {e.instance!r}"
    if v == "minItems":
        return "expected a non-empty list"
    if v == "uniqueItems":
        return f"values must be unique, got {e.instance!r}"
    if v == "pattern":
        return f"{e.instance!r} is not a valid name (expected to match {e.validator_value})"
    return e.message
