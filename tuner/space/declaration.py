"""The declaration of a space file: its `arguments` (how to build the kernel's inputs for a problem size),
its `reference` (what the outputs must hold: a numpy expression, a trusted config of the same kernel, or a
separate reference kernel) and its `seed`. With them a workload needs no Python module.

    arguments:
      - {name: n, scalar: n, dtype: int32}
      - {name: x, shape: [n], dtype: $dtype, fill: {kind: uniform, low: -1, high: 1}}
      - {name: y, shape: [n], dtype: $dtype, fill: {kind: normal}, output: true}
      - {name: coeffs, shape: [16], memory: constant, fill: {kind: uniform}}  # __constant__ float coeffs[16]
    reference:
      expression: {y: "2 * x + y"}

`check_declaration` checks what the JSON schema cannot say and returns the parsed Declaration; the loader
calls it after its own checks and keeps the result as Space.declaration (tuner.workloads.declared builds
the arguments and the reference from it)."""

from __future__ import annotations

import ast
import keyword
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from tuner.space.array_expressions import ARRAY_FUNCTIONS, ArrayExpression
from tuner.space.errors import SpaceError, kernel_path, one_of
from tuner.space.expressions import Expression

DTYPE_VAR = "$dtype"
FILL_KINDS: dict[str, dict[str, float | None]] = {  # kind: {key: default}
    "uniform": {"low": 0.0, "high": 1.0},
    "normal": {"mean": 0.0, "std": 1.0},
    "integers": {"low": -8, "high": 8},  # small integers: every summation order is exact, in float32 too
    "zeros": {},
    "arange": {},
    "constant": {"value": None},
}
REFERENCE_KINDS = ("expression", "config", "kernel")
# where an array goes: a kernel parameter (global), the kernel's __constant__ array of the same name (constant,
# copied there before the kernel runs: Kernel Tuner's cmem_args), or both, with the same data (how Kernel
# Tuner and BAT read a T1 file's `MemType: Constant`)
MEMORY_KINDS = ("global", "constant", "both")

if TYPE_CHECKING:
    # check_declaration's helpers, passed to the checks of each part: raise a SpaceError at a key path; parse
    # a size expression (an Expression over the size variables) at a key path
    Fail = Callable[[list, str], NoReturn]
    SizeExpr = Callable[[Any, list], Expression]


MAX_THREADS = 1024  # per block on every CUDA GPU since Fermi (Kernel Tuner's max_threads)


@dataclass
class Argument:
    name: str
    dtype: str  # DTYPE_VAR or a numpy dtype name
    scalar: Expression | None  # over the size variables
    shape: list[Expression] | None  # over the size variables
    fill: dict  # kind and every parameter of the kind (defaults filled in)
    output: bool
    memory: str = "global"  # one of MEMORY_KINDS

    @property
    def parameter(self) -> bool:
        """Passed to the kernel as a parameter (in the order of `arguments`)."""
        return self.memory != "constant"

    @property
    def constant(self) -> bool:
        """Copied to the kernel's `__constant__` array of the same name before it runs."""
        return self.memory != "global"


@dataclass
class Declaration:
    args: list[Argument]  # every argument, in order: kernel parameters and constant-memory arrays
    seed: int | None
    kind: str | None  # one of REFERENCE_KINDS, or None (nothing is checked)
    expressions: dict[str, ArrayExpression]  # output name -> its reference (kind "expression")
    config: dict  # kind "config"
    kernel: dict  # kind "kernel": source (a Path), name, block, grid (Expressions), compiler_options


def check_declaration(doc: dict, path: str | Path, size_vars: set, params: set, dtypes: list) -> Declaration | None:
    """The parsed `arguments`, `reference` and `seed` of the space document `doc` (None where it has no
    `arguments`), after the checks its JSON schema cannot make: names, expressions over known names, the
    `$dtype` rules, outputs and their reference, a reference kernel inside the workload's folder. A mistake
    is a SpaceError (one line naming the file and key)."""
    path, size_vars, params, dtypes = Path(path), set(size_vars), set(params), list(dtypes)

    def fail(key_path: list, message: str) -> NoReturn:
        raise SpaceError(path, key_path, message)

    def size_expr(value: Any, key_path: list) -> Expression:
        try:
            e = Expression(str(value))
            e.check_names(size_vars)
        except ValueError as err:
            fail(key_path, f"{err} in '{value}'")
        return e

    arguments = doc.get("arguments")
    if arguments is None:
        for key in ("reference", "seed"):
            if key in doc:
                fail([key], f"'{key}' needs 'arguments' (the kernel's arguments, in order)")
        return None

    args: list[Argument] = []
    seen: dict[str, int] = {}  # argument name -> its index
    for i, a in enumerate(arguments):
        if a["name"] in seen:
            fail(["arguments", i, "name"], f"'{a['name']}' is already the name of arguments.{seen[a['name']]}")
        if keyword.iskeyword(a["name"]):
            fail(
                ["arguments", i, "name"],
                f"'{a['name']}' is a Python keyword, which the reference's expressions cannot read: rename it "
                f"({a['name']}_; the names are labels, the kernel takes its arguments by position)",
            )
        seen[a["name"]] = i
        args.append(_argument(a, ["arguments", i], dtypes, size_expr, fail))
        if args[-1].constant and doc.get("kernel", {}).get("lang") == "host":
            fail(
                ["arguments", i, "memory"],
                "constant memory is for CUDA kernels: a 'host' function takes its data as arguments",
            )

    outputs = [a.name for a in args if a.output]
    reference = doc.get("reference")
    if reference is None:
        if outputs:
            i = seen[outputs[0]]
            fail(
                ["arguments", i, "output"],
                f"output '{outputs[0]}' has no reference: add 'reference' (an "
                f"expression per output, a trusted config, or a reference kernel)",
            )
        return Declaration(args, doc.get("seed"), None, {}, {}, {})
    kinds = [k for k in REFERENCE_KINDS if k in reference]
    if len(kinds) != 1:
        fail(["reference"], f"give exactly one of {', '.join(REFERENCE_KINDS)}; got {', '.join(kinds)}")
    kind = kinds[0]
    if kind != "expression" and doc.get("kernel", {}).get("lang") == "host":
        fail(["reference", kind], "a 'host' function's reference must be an 'expression'")
    if not outputs:
        fail(["reference"], "no argument is an output: mark the argument(s) the reference is for with 'output: true'")

    expressions, config, kernel = {}, {}, {}
    if kind == "expression":
        expressions = _check_expressions(reference["expression"], seen, outputs, size_vars, fail)
    elif kind == "config":
        config = dict(reference["config"])
        _check_config(config, doc, params, fail)
    else:
        kernel = _check_reference_kernel(reference["kernel"], doc, path, size_expr, fail)
    return Declaration(args, doc.get("seed"), kind, expressions, config, kernel)


def _argument(a: dict, at: list, dtypes: list, size_expr: SizeExpr, fail: Fail) -> Argument:
    """One entry of `arguments`, at key path `at`: a scalar or an array and its fill, checked against every
    dtype it takes in this space."""
    int_dtypes = [d for d in dtypes if np.issubdtype(np.dtype(d), np.integer)]
    name = a["name"]
    if ("scalar" in a) == ("shape" in a):
        fail(at, f"argument '{name}' needs exactly one of 'scalar' (a value) or 'shape' (an array)")
    dtype = a.get("dtype", "int32" if "scalar" in a else DTYPE_VAR)
    # the dtypes this argument takes across the campaign's dtypes
    concrete = list(dtypes) if dtype == DTYPE_VAR else [dtype]
    integral = [d for d in concrete if np.issubdtype(np.dtype(d), np.integer)]
    why = f" ('{DTYPE_VAR}' is {', '.join(int_dtypes)} in this space)" if dtype == DTYPE_VAR else ""
    if "scalar" in a:
        for key in ("fill", "output", "memory"):
            if key in a:
                fail([*at, key], f"'{key}' is for arrays; '{name}' is a scalar (give it a 'shape' instead)")
        scalar = size_expr(a["scalar"], [*at, "scalar"])
        if integral and isinstance(a["scalar"], float) and not float(a["scalar"]).is_integer():
            fail([*at, "scalar"], f"{a['scalar']} is not a whole number, but the dtype is integral{why}")
        return Argument(name, dtype, scalar, None, {}, False)
    shape = [size_expr(s, [*at, "shape", j]) for j, s in enumerate(a["shape"])]
    for j, s in enumerate(a["shape"]):
        if isinstance(s, (int, float)) and (s < 0 or not float(s).is_integer()):
            fail([*at, "shape", j], f"{s} is not a size (a whole number >= 0)")
    fill = dict(a.get("fill", {"kind": "zeros"}))
    kind = fill.pop("kind")
    extra = sorted(set(fill) - set(FILL_KINDS[kind]))
    if extra:
        takes = ", ".join(FILL_KINDS[kind]) or "nothing"
        fail([*at, "fill", extra[0]], f"fill kind '{kind}' takes {takes}, not {', '.join(extra)}")
    fill = {"kind": kind, **FILL_KINDS[kind], **fill}
    if kind == "constant" and fill["value"] is None:
        fail([*at, "fill"], "fill kind 'constant' needs 'value'")
    if kind in ("uniform", "integers") and fill["low"] > fill["high"]:
        fail([*at, "fill"], f"low ({fill['low']}) is above high ({fill['high']})")
    if kind == "integers" and not all(float(fill[k]).is_integer() for k in ("low", "high")):
        fail([*at, "fill"], "fill kind 'integers' needs whole numbers for low and high")
    if integral and kind in ("uniform", "normal"):
        fail([*at, "fill", "kind"], f"'{kind}' draws fractions, but the dtype is integral{why}: use 'integers'")
    if integral and kind == "constant" and not float(fill["value"]).is_integer():
        fail([*at, "fill", "value"], f"{fill['value']} is not a whole number, but the dtype is integral{why}")
    if kind in ("integers", "constant"):
        low, high = (fill["low"], fill["high"]) if kind == "integers" else (fill["value"], fill["value"])
        for d in integral:
            info = np.iinfo(np.dtype(d))
            if low < info.min or high > info.max:
                fail([*at, "fill"], f"values {low}..{high} do not fit {d}{why}")
    memory = a.get("memory", "global")
    if memory != "global" and a.get("output"):
        fail(
            [*at, "output"],
            f"'{name}' is in constant memory (memory: {memory}), which the kernel cannot write: it cannot be an output",
        )
    return Argument(name, dtype, None, shape, fill, bool(a.get("output", False)), memory)


def _check_expressions(texts: dict, seen: dict, outputs: list, size_vars: set, fail: Fail) -> dict:
    """The `expression` reference: one ArrayExpression per output, over the argument names and the size
    variables."""
    expressions = {}
    known = {n for n in set(seen) | size_vars if not keyword.iskeyword(n)}  # a keyword is never read as a name
    shadowed = sorted(set(seen) & set(ARRAY_FUNCTIONS))
    if shadowed:
        fail(
            ["arguments", seen[shadowed[0]], "name"],
            f"'{shadowed[0]}' is a function of reference expressions: rename the argument",
        )
    for name, text in texts.items():
        if name not in seen or name not in outputs:
            fail(
                ["reference", "expression", name],
                f"'{name}' is not an output argument; outputs: {', '.join(outputs)}",
            )
        try:
            e = ArrayExpression(text)
            e.check_names(known)
        except ValueError as err:
            fail(["reference", "expression", name], f"{err}{_method_hint(text)} in '{text}'")
        expressions[name] = e
    for name in outputs:
        if name not in expressions:
            fail(["reference", "expression"], f"no expression for output '{name}' (arguments.{seen[name]})")
    return expressions


def _method_hint(text: object) -> str:
    """What to say besides the allowed functions of an expression that calls a method (`x.reshape(n)`): that
    methods cannot be called, and the function to call instead."""
    try:
        tree = ast.parse(str(text), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, on = node.func.attr, ast.unparse(node.func.value)
            if len(on) > 40:
                on = "x"
            instead = f": write {method}({on}, ...)" if method in ARRAY_FUNCTIONS else ""
            return f"; methods cannot be called ({on}.{method}(...)){instead}"
    return ""


def _check_config(config: dict, doc: dict, params: set, fail: Fail) -> None:
    """A trusted config: every parameter without a default, each to one of its values, and valid (for every
    dtype: it is the reference of each dtype's campaigns)."""
    at = ["reference", "config"]
    values = doc.get("parameters", {})
    defaults = doc.get("defaults", {})
    unknown = sorted(set(config) - set(params))
    if unknown:
        fail([*at, unknown[0]], f"'{unknown[0]}' is not a parameter; expected one of {', '.join(sorted(params))}")
    missing = sorted(set(params) - set(config) - set(defaults))
    if missing:
        fail(at, f"missing parameter(s) {', '.join(missing)} (only those with a default may be left out)")
    for k, v in config.items():
        if k in values and not one_of(v, values[k]):  # true is not 1, 2.0 is not 2
            fail([*at, k], f"{v!r} is not one of its values ({', '.join(map(str, values[k]))})")
    full = {**{k: v for k, v in defaults.items() if k not in config}, **config}
    own = [(f"dtype {d}'s ", r) for d, e in doc.get("dtypes", {}).items() for r in (e or {}).get("restrictions", [])]
    for whose, r in [*(("", r) for r in doc.get("restrictions", [])), *own]:
        try:
            ok = bool(Expression(r)(full))
        except Exception:  # noqa: BLE001  (a bad restriction is the loader's to report)
            continue
        if not ok:
            fail(at, f"the config breaks {whose or 'the '}restriction '{r}'")


def _check_reference_kernel(ref: dict, doc: dict, path: Path, size_expr: SizeExpr, fail: Fail) -> dict:
    """A reference kernel: its source in the workload's folder (the rule of the kernel source), its launch
    geometry over the size variables."""
    at = ["reference", "kernel"]
    source = kernel_path(path, ref["source"], [*at, "source"])
    block = [size_expr(b, [*at, "block", i]) for i, b in enumerate(ref["block"])]
    numbers = [b for b in ref["block"] if isinstance(b, (int, float))]
    if any(b < 1 or not float(b).is_integer() for b in numbers):
        fail([*at, "block"], f"block dimensions must be whole numbers >= 1, got {ref['block']}")
    if len(numbers) == len(ref["block"]) and math.prod(numbers) > MAX_THREADS:
        fail([*at, "block"], f"{' x '.join(map(str, numbers))} threads: a block has at most {MAX_THREADS}")
    grid = [size_expr(g, [*at, "grid", i]) for i, g in enumerate(ref["grid"])]
    options = ref.get("compiler_options", doc.get("kernel", {}).get("compiler_options", []))
    return {"source": source, "name": ref["name"], "block": block, "grid": grid, "compiler_options": list(options)}
