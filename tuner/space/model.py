"""A loaded tuning space: its parameters, restrictions, launch geometry, sizes, dtypes and metrics, and what
is derived from them (valid configs, grid dimensions, the source compiled for a config, metric values)."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from tuner.errors import TunerError, one_line
from tuner.space.declaration import MAX_THREADS, Declaration
from tuner.space.errors import SpaceError, one_of, value_kind
from tuner.space.expressions import Expression
from tuner.space.includes import QUOTED_INCLUDE, quoted_includes

# names every metric expression may read besides the parameters and the size variables
METRIC_INPUTS = ("time", "itemsize")
BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")  # Kernel Tuner's, for dimensions launch leaves
SIZE_MIN, SIZE_MAX = 1, 2**63 - 1  # a size variable's limits where size_limits gives none


def row_time(row: Mapping[str, Any]) -> float:
    """A measured config's time in ms as the store ranks it: the median of its launches (`times`), else its
    `time` (Kernel Tuner's result: the mean of the launches)."""
    times = row.get("times")
    return float(statistics.median(times)) if times else row["time"]


def kt_block_names(block: list) -> list[str]:
    """The three parameters Kernel Tuner reads as the thread block: launch.block's names, then its own default
    names for the dimensions launch.block leaves."""
    return (list(block) + list(BLOCK_NAMES[len(block) :]))[:3]


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
    restrictions: list  # as the checker accepted them (tuner.space.expressions): what Kernel Tuner compiles
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
    configurations: int = 0  # valid configs, counted on loading (tuner.space.configurations)
    doc: dict = field(default_factory=dict, repr=False)  # the YAML as written (keys a workload reads itself)
    # its `arguments`, `reference` and `seed`, parsed and checked (None where it declares no arguments)
    declaration: Declaration | None = field(default=None, repr=False)
    # dtype -> its own restrictions, checked as `restrictions` are (only dtypes that have some): configs that
    # exist for other dtypes alone (GEMM's tensor-core variant is float32 only)
    dtype_restrictions: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Kernel Tuner compiles restriction strings with Python's full globals: none reaches it unchecked
        for r in [*self.restrictions, *(r for rs in self.dtype_restrictions.values() for r in rs)]:
            try:
                Expression(r)
            except ValueError as e:
                raise TunerError(f"{self.path}: restriction '{r}': {e}") from None

    # ---- derived views -------------------------------------------------------------------------
    @property
    def compiler(self) -> str:
        """What builds a 'host' kernel: nvcc (default: host code that launches CUDA kernels) or g++ (CPU code)."""
        return str(self.doc.get("kernel", {}).get("compiler", "nvcc"))

    @property
    def on_cpu(self) -> bool:
        """Host code built by the system compiler runs on the CPU: its device is the CPU (provenance.device_info)."""
        return self.lang == "host" and self.compiler != "nvcc"

    def complete(self, config: dict) -> dict:
        """A config recorded before some parameters were added, with their defaults (the values it ran with)."""
        return {**{k: v for k, v in self.defaults.items() if k not in config}, **config}

    @cached_property
    def size_vars(self) -> tuple:
        return tuple(next(iter(self.sizes.values())).keys())

    def restrictions_for(self, dtype: str | None) -> list[str]:
        """The restrictions a campaign of `dtype` searches under: the space's and the dtype's own (None, or a
        dtype without any: the space's alone)."""
        return [*self.restrictions, *self.dtype_restrictions.get(dtype, [])]

    @cached_property
    def _restriction_exprs(self) -> dict[str | None, list[Expression]]:
        """restrictions_for each dtype with restrictions of its own, and for any other (None), compiled once."""
        return {d: [Expression(r) for r in self.restrictions_for(d)] for d in [None, *self.dtype_restrictions]}

    def is_valid(self, config: dict, dtype: str | None = None) -> bool:
        """Whether `config` meets restrictions_for(dtype)."""
        exprs = self._restriction_exprs.get(dtype, self._restriction_exprs[None])
        return all(bool(e(config)) for e in exprs)

    def holds(self, config: str, dtype: str | None = None) -> bool:
        """Whether `config`, as the store writes it (JSON), names a configuration of this space for `dtype`
        (checked); each text is checked once (an export asks it of the same configs at each of GEMM's sizes)."""
        key = (config, dtype)
        if key not in self._held:
            try:
                self.checked(json.loads(config), dtype=dtype)
                self._held[key] = True
            except TunerError:
                self._held[key] = False
        return self._held[key]

    @cached_property
    def _held(self) -> dict[tuple[str, str | None], bool]:
        return {}

    def checked(self, config: dict, what: str = "the config", dtype: str | None = None) -> dict:
        """`config` with the defaults of parameters it leaves out (see `defaults`), if it names a configuration
        of this space (for `dtype`: restrictions_for); else a TunerError saying what is wrong (`what`: how the
        message names it)."""
        config = self.complete(config)
        missing = set(self.params) - set(config)
        unknown = set(config) - set(self.params)
        if missing or unknown:
            raise TunerError(
                f"{what} must set the parameters of {self.workload} (those with a default may be "
                "left out): "
                + (f"missing {', '.join(sorted(missing))} " if missing else "")
                + (f"unknown {', '.join(sorted(unknown))}" if unknown else "")
            )
        bad = {k: v for k, v in config.items() if not one_of(v, self.params[k])}  # true is not 1
        if bad:
            raise TunerError(
                f"{what}: values outside the space: "
                + ", ".join(f"{k}={v} (allowed {self.params[k]})" for k, v in bad.items())
            )
        if not self.is_valid(config, dtype):
            raise TunerError(f"{what} breaks a restriction of the space{f' for {dtype}' if dtype else ''}: {config}")
        threads = math.prod(self.block_dims(config)) if self.lang != "host" else 1
        if threads > MAX_THREADS:  # as the space's count and Kernel Tuner leave it out: it cannot be launched
            raise TunerError(f"{what} launches {threads} threads a block, more than {MAX_THREADS}: {config}")
        return dict(config)

    def grid_dims(self, config: dict, size: dict) -> list:
        """The grid, in blocks, a config launches at a size: launch.grid's expressions, then 1 for the dimensions
        it leaves. An expression that raises, is not a whole number (a fraction that int() would truncate:
        too few blocks) or is below 1 is a SpaceError naming launch.grid.<i>, the config and the size."""
        scope = {**size, **config}
        return [self._grid_dim(i, g, scope, config, size) for i, g in enumerate(self.grid)] + [1] * (3 - len(self.grid))

    def _grid_dim(self, i: int, g: Expression, scope: dict, config: dict, size: dict) -> int:
        def fail(what: str) -> SpaceError:
            return SpaceError(
                self.path, ["launch", "grid", i], f"'{g.text}' for {config} at size {format_size(size)} {what}"
            )

        try:
            value = g(scope)
        except Exception as e:  # noqa: BLE001  (any error of evaluating it: ZeroDivisionError, ValueError...)
            raise fail(f"cannot be evaluated: {one_line(e)}") from None
        if value_kind(value) not in ("int", "float"):
            raise fail(f"is {value!r}, not a number of blocks")
        if value_kind(value) == "float" and not float(value).is_integer():
            raise fail(f"is {value}, not a whole number of blocks (use ceil() or //)")
        if value < 1:
            raise fail(f"is {value}, fewer than 1 block (every dimension of a grid has at least 1)")
        return int(value)

    def block_dims(self, config: dict) -> tuple[int, int, int]:
        """The thread block a config launches, as Kernel Tuner reads it (kt_block_names; a name the config
        lacks: 1)."""
        x, y, z = (int(config.get(name, 1)) for name in kt_block_names(self.block_names))
        return x, y, z

    def source_for(self, dtype: str, config: dict | None = None) -> str:
        """The kernel source with the dtype's #defines in front, as Kernel Tuner puts the parameters'; with a
        config, its parameters' #defines before those, which is what Kernel Tuner compiles for it.
        (Not -D options: CUDA 13's builtin headers use names such as T as template parameters.) A `#line 1`
        after the #defines keeps a compiler's line numbers those of the kernel file."""
        defines = [*(config or {}).items(), *self.dtypes[dtype].get("defines", {}).items()]
        if not defines:
            return self.source_text
        return "".join(f"#define {k} {v}\n" for k, v in defines) + "#line 1\n" + self.source_text

    def build_options(self, dtype: str) -> list:
        """Compiler options and dtype defines: what decides the binary besides the parameters (provenance)."""
        defines = self.dtypes[dtype].get("defines", {})
        return list(self.compiler_options) + [f"#define {k} {v}" for k, v in defines.items()]

    def itemsize(self, dtype: str) -> int:
        return np.dtype(dtype).itemsize

    def compute_metrics(self, row: dict, size: dict, dtype: str, *, strict: bool = False) -> dict:
        """Metrics of one measured config; `time` is the median of its repeats, in ms. A metric undefined for
        the config is NaN; `strict` (the loader's check, with a sample time): a SpaceError naming the metric,
        the size, the dtype, the time and the config instead, for one that raises or is not a finite number."""
        time = row_time(row) if row.get("times") or "time" in row else None
        config = {k: row[k] for k in self.params}
        scope = {**size, **config, "time": time, "itemsize": self.itemsize(dtype)}
        out = {}
        for name, expr in self.metrics.items():
            what = None
            try:
                out[name] = float(expr(scope))
            except Exception as e:  # noqa: BLE001  (a metric undefined for this config: ZeroDivisionError...)
                out[name] = float("nan")
                what = f"cannot be evaluated: {one_line(e)}"
            if strict and not math.isfinite(out[name]):
                where = (
                    f"for {config} at size {format_size(size)}, {dtype} (itemsize {scope['itemsize']}), time {time} ms"
                )
                what = what or f"is {out[name]}, not a finite number"
                raise SpaceError(self.path, ["metrics", name], f"'{expr.text}' {where} {what}")
            scope[metric_var(name)] = out[name]
        return out

    def objective_value(self, row: dict, size: dict, dtype: str) -> float:
        if self.objective == "time":
            return row_time(row)
        return self.compute_metrics(row, size, dtype)[self.objective]

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b

    # ---- sizes ---------------------------------------------------------------------------------
    def resolve_size(
        self, text: str | None, parse_hook: Callable[[str], dict | None] | None = None
    ) -> tuple[str, dict]:
        """A named size, `k=v,...`, or a workload's own notation (e.g. 1024x512x2048)."""
        if text is None:
            text = self.default_size
        if not text.strip():
            raise TunerError(f"empty size: give one of {', '.join(self.sizes)} (or leave --size out for the default)")
        if text in self.sizes:
            return text, self._within_limits(dict(self.sizes[text]))
        values = None
        if parse_hook is not None:
            values = parse_hook(text)
        if values is None and re.fullmatch(r"\s*\w+\s*=\s*-?\d+(\s*,\s*\w+\s*=\s*-?\d+)*\s*", text):
            pairs = [(k.strip(), v) for k, v in (p.split("=") for p in text.split(","))]
            given = [k for k, _ in pairs]
            twice = sorted({k for k in given if given.count(k) > 1})
            if twice:
                raise TunerError(f"size '{text}' sets {', '.join(twice)} more than once")
            if any(len(v.strip().lstrip("-")) > 19 for _, v in pairs):
                raise TunerError(f"size '{text}': a value beyond 64 bits")
            values = {k: int(v) for k, v in pairs}
        if values is None:
            raise TunerError(self._unknown_size(text))
        if set(values) != set(self.size_vars):
            raise TunerError(f"size '{text}' for {self.workload} must set exactly {', '.join(self.size_vars)}")
        self._within_limits(values)
        for name, named in self.sizes.items():
            if named == values:
                return name, values
        values = {k: values[k] for k in self.size_vars}  # one name for a size however its variables were ordered
        return format_size(values), values

    def _unknown_size(self, text: str) -> str:
        """Why `text` names no size: a variable's value that is not a whole number, else the sizes (the first 8 of
        many) and the nearest name where it looks misspelt (`16m` for 16M, `larg` for large)."""
        pairs = [p.partition("=") for p in text.split(",")]
        bad = [f"{k.strip()}={v.strip()}" for k, _, v in pairs if not re.fullmatch(r"\s*-?\d+\s*", v)]
        if bad and all(eq and k.strip() in self.size_vars for k, eq, _ in pairs):
            return f"size '{text}': {bad[0]} is not a whole number (sizes are integers: n=1000000, not 1e6)"
        names = list(self.sizes)
        shown = ", ".join(names) if len(names) <= 12 else f"{', '.join(names[:8])} and {len(names) - 8} more"
        near = [n for n in names if n.lower() == text.strip().lower()]
        if not near and len(names) <= 12:  # among many systematic names (gemm's MxNxK) the nearest text misleads
            near = difflib.get_close_matches(text, names, n=1)
        return (
            f"unknown size '{text}' for {self.workload}: "
            + (f"did you mean '{near[0]}'? " if near else "")
            + f"use one of {shown} (`tuner list {self.workload}` lists them) or give the variables, e.g. "
            + format_size(next(iter(self.sizes.values())))
        )

    def _within_limits(self, values: dict) -> dict:
        """`values`, once each is within its size_limits (a named size too: a Space made without the loader,
        which refuses a named size outside them)."""
        for k, v in values.items():
            lo, hi = size_range(self.size_limits.get(k, {}))
            if not lo <= v <= hi:
                raise TunerError(f"impossible size for {self.workload}: {k}={v} (allowed {lo}..{hi})")
        return values

    def resolve_dtype(self, dtype: str | None) -> str:
        dtype = dtype or next(iter(self.dtypes))
        if dtype not in self.dtypes:
            raise TunerError(f"{self.workload} has no dtype '{dtype}'; it has {', '.join(self.dtypes)}")
        return dtype

    @property
    def source_text(self) -> str:
        return self.kernel_source.read_text()

    @property
    def included_sources(self) -> list[tuple[str, bytes]]:
        """The files the kernel source #includes with quotes, found as its build finds them (quoted_includes),
        each once: its path relative to the kernel's folder and its bytes (b"" where it cannot be read). With the
        source's text, what the kernel hash covers (tuner.measure.provenance.kernel_hash); [] for a source without
        local includes, whose hash is that of its text alone."""
        out = []
        for include in quoted_includes(self.kernel_source):
            if include.path is None:  # left to the compiler, which may find it elsewhere or say it is missing
                continue
            try:
                content = include.path.read_bytes()
            except OSError:
                content = b""
            out.append((include.label, content))
        return out

    @property
    def build_flags(self) -> list[str]:
        """What a build of the kernel is given: the compiler options, and the kernel's folder on the include
        path where the source #includes a file with quotes (Kernel Tuner builds from a copy of the text, in
        memory or a temporary file, where such an include would not be found). Not recorded as provenance:
        the folder is this machine's, the options (build_options) are what decides the binary."""
        local = QUOTED_INCLUDE.search(self.source_text)
        return [*self.compiler_options, *([f"-I{self.kernel_source.parent}"] if local else [])]

    @cached_property
    def space_hash(self) -> str:
        """space_hash_for(None): the space whatever the dtype (every dtype's own restrictions hashed in)."""
        return self.space_hash_for(None)

    def space_hash_for(self, dtype: str | None) -> str:
        """The parameters' values and the restrictions a campaign of `dtype` searches under: what an Optuna
        trial's params (indices into the values) mean. A study resumed under another space would read its
        trials as other configs; it names the studies (tuner.campaign.local, tuner.campaign.distributed).

        Only the campaign's dtype's own restrictions are hashed in, and only where it has some: a dtype without
        any hashes the text it did before they existed, so its studies keep their names (GEMM float32's
        committed in results/store/nvidia-h200/gemm/optuna.sqlite3, although GEMM's int32 gained one; hashing
        every dtype's would have orphaned them). None: every dtype's."""
        own = self.dtype_restrictions if dtype is None else {dtype: self.dtype_restrictions.get(dtype, [])}
        doc: dict = {"params": self.params, "restrictions": self.restrictions}
        if any(own.values()):
            doc["dtype_restrictions"] = own
        text = json.dumps(doc, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def format_size(values: dict) -> str:
    """The `k=v,...` spelling of a problem size, as `--size` reads it and as ad-hoc sizes are named."""
    return ",".join(f"{k}={v}" for k, v in values.items())


def size_range(limits: dict) -> tuple[int, int]:
    """The values a size variable may take under its entry of size_limits ({min, max}, either left out)."""
    return limits.get("min", SIZE_MIN), limits.get("max", SIZE_MAX)


def size_distance(a: dict, b: dict) -> float:
    """How far apart two problem sizes are: Euclidean over the log2 of their variables."""
    return math.sqrt(sum(math.log2(max(a[k], 1) / max(b[k], 1)) ** 2 for k in a))


def metric_var(name: str) -> str:
    """Metrics may name earlier metrics; 'GB/s' is read as GB_s."""
    return re.sub(r"\W", "_", name)
