"""Workloads declared in YAML alone: the space file's `arguments` say how to build the kernel's inputs for a
problem size, and its `reference` what the outputs must hold (a numpy expression, a trusted config of the
same kernel, or a separate reference kernel). No Python is needed for a simple kernel.

    arguments:
      - {name: n, scalar: n, dtype: int32}
      - {name: x, shape: [n], dtype: $dtype, fill: {kind: uniform, low: -1, high: 1}}
      - {name: y, shape: [n], dtype: $dtype, fill: {kind: normal}, output: true}
    reference:
      expression: {y: "2 * x + y"}

`check_declaration` says what is wrong with a declaration (one line naming the file and key); the loader
calls it after the schema, and DeclaredWorkload calls it again before it builds anything."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner.errors import TunerError
from tuner.workloads.base import Workload

# tuner.space is imported inside functions: its loader calls check_declaration, so a module-level import
# here would make the two import each other.

DTYPE_VAR = "$dtype"
FILL_KINDS = {  # kind: {key: default}
    "uniform": {"low": 0.0, "high": 1.0},
    "normal": {"mean": 0.0, "std": 1.0},
    "integers": {"low": -8, "high": 8},  # small integers: every summation order is exact, in float32 too
    "zeros": {},
    "arange": {},
    "constant": {"value": None},
}
REFERENCE_KINDS = ("expression", "config", "kernel")
MAX_THREADS = 1024  # per block on every CUDA GPU since Fermi

# what a reference expression may call: numpy's, by these names
ARRAY_FUNCTIONS = {
    **{name: getattr(np, name) for name in (
        "abs", "arange", "ceil", "clip", "cos", "cumsum", "diag", "dot", "einsum", "exp", "flip", "floor", "log",
        "log2", "log10", "matmul", "maximum", "mean", "minimum", "ones_like", "outer", "prod", "reshape", "roll",
        "sign", "sin", "sqrt", "square", "sum", "tanh", "trace", "transpose", "tril", "triu", "where",
        "zeros_like", "concatenate", "stack")},
    "min": np.min,
    "max": np.max,
}
ARRAY_KEYWORDS = {"axis", "axes", "keepdims", "k"}
ARRAY_ATTRIBUTES = {"T", "shape", "size", "ndim"}  # data, never methods: no way to reach Python internals


class ArrayExpression:
    """A numpy expression of a reference: tuner.space.expressions.Expression's whitelist of syntax, plus
    indexing, slicing, `@`, a few array attributes and numpy functions (ARRAY_FUNCTIONS) with a few keyword
    arguments. Checked once, evaluated with nothing but its variables and those functions in scope."""

    def __init__(self, text: str):
        from tuner.space.expressions import _ALLOWED_NODES

        allowed = (*_ALLOWED_NODES, ast.Subscript, ast.Slice, ast.Attribute, ast.keyword, ast.MatMult, ast.Invert)
        self.text = str(text)
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as e:
            raise ValueError(f"not a valid expression: {e.msg}") from None
        for node in ast.walk(tree):
            if not isinstance(node, allowed):
                raise ValueError(f"'{type(node).__name__}' is not allowed in an expression")
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in ARRAY_FUNCTIONS):
                raise ValueError(f"only these functions may be called: {', '.join(sorted(ARRAY_FUNCTIONS))}")
            if isinstance(node, ast.Attribute) and node.attr not in ARRAY_ATTRIBUTES:
                raise ValueError(f"'.{node.attr}' is not allowed; arrays have {', '.join(sorted(ARRAY_ATTRIBUTES))}")
            if isinstance(node, ast.keyword) and node.arg not in ARRAY_KEYWORDS:
                raise ValueError(f"keyword '{node.arg}' is not allowed; allowed: {', '.join(sorted(ARRAY_KEYWORDS))}")
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}
        self.names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called
        self._code = compile(tree, "<reference expression>", "eval")

    def check_names(self, known) -> None:
        unknown = sorted(self.names - set(known))
        if unknown:
            raise ValueError(f"unknown name(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")

    def __call__(self, variables: dict):
        return eval(self._code, {"__builtins__": {}, **ARRAY_FUNCTIONS}, dict(variables))

    def __repr__(self):
        return f"ArrayExpression({self.text!r})"


# ---- checks ------------------------------------------------------------------------------------------------
def check_declaration(doc: dict, path, size_vars: set, params: set, dtypes: list) -> None:
    """Checks of a space's `arguments`, `reference` and `seed` that its JSON schema cannot make: names,
    expressions over known names, the `$dtype` rules, outputs and their reference, a reference kernel inside
    the workload's folder. Raises tuner.space.SpaceError (one line naming the file and key); returns None
    when the declaration is sound or absent."""
    _parse(doc, Path(path), set(size_vars), set(params), list(dtypes))


@dataclass
class _Arg:
    name: str
    dtype: str  # DTYPE_VAR or a numpy dtype name
    scalar: object | None  # an Expression over the size variables
    shape: list | None  # Expressions over the size variables
    fill: dict  # kind and every parameter of the kind (defaults filled in)
    output: bool


@dataclass
class _Declaration:
    args: list  # of _Arg
    seed: int | None
    kind: str | None  # one of REFERENCE_KINDS, or None (nothing is checked)
    expressions: dict  # output name -> ArrayExpression (kind "expression")
    config: dict  # kind "config"
    kernel: dict  # kind "kernel": source (a Path), name, block, grid (Expressions), compiler_options


def _parse(doc: dict, path: Path, size_vars: set, params: set, dtypes: list) -> _Declaration:
    from tuner.space import SpaceError
    from tuner.space.expressions import Expression

    def fail(key_path, message):
        raise SpaceError(path, key_path, message)

    def size_expr(value, key_path):
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
        return _Declaration([], None, None, {}, {}, {})

    int_dtypes = [d for d in dtypes if np.issubdtype(np.dtype(d), np.integer)]
    args, seen = [], {}
    for i, a in enumerate(arguments):
        at = ["arguments", i]
        name = a["name"]
        if name in seen:
            fail([*at, "name"], f"'{name}' is already the name of arguments.{seen[name]}")
        seen[name] = i
        if ("scalar" in a) == ("shape" in a):
            fail(at, f"argument '{name}' needs exactly one of 'scalar' (a value) or 'shape' (an array)")
        dtype = a.get("dtype", "int32" if "scalar" in a else DTYPE_VAR)
        # the dtypes this argument takes across the campaign's dtypes
        concrete = list(dtypes) if dtype == DTYPE_VAR else [dtype]
        integral = [d for d in concrete if np.issubdtype(np.dtype(d), np.integer)]
        why = f" ('{DTYPE_VAR}' is {', '.join(int_dtypes)} in this space)" if dtype == DTYPE_VAR else ""
        if "scalar" in a:
            for key in ("fill", "output"):
                if key in a:
                    fail([*at, key], f"'{key}' is for arrays; '{name}' is a scalar (give it a 'shape' instead)")
            scalar = size_expr(a["scalar"], [*at, "scalar"])
            if integral and isinstance(a["scalar"], float) and not float(a["scalar"]).is_integer():
                fail([*at, "scalar"], f"{a['scalar']} is not a whole number, but the dtype is integral{why}")
            args.append(_Arg(name, dtype, scalar, None, {}, False))
            continue
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
        args.append(_Arg(name, dtype, None, shape, fill, bool(a.get("output", False))))

    outputs = [a.name for a in args if a.output]
    reference = doc.get("reference")
    if reference is None:
        if outputs:
            i = seen[outputs[0]]
            fail(["arguments", i, "output"], f"output '{outputs[0]}' has no reference: add 'reference' (an "
                 f"expression per output, a trusted config, or a reference kernel)")
        return _Declaration(args, doc.get("seed"), None, {}, {}, {})
    kinds = [k for k in REFERENCE_KINDS if k in reference]
    if len(kinds) != 1:
        fail(["reference"], f"give exactly one of {', '.join(REFERENCE_KINDS)}; got {', '.join(kinds)}")
    kind = kinds[0]
    if not outputs:
        fail(["reference"], "no argument is an output: mark the argument(s) the reference is for with 'output: true'")

    expressions, config, kernel = {}, {}, {}
    if kind == "expression":
        known = set(seen) | size_vars
        shadowed = sorted(set(seen) & set(ARRAY_FUNCTIONS))
        if shadowed:
            fail(["arguments", seen[shadowed[0]], "name"], f"'{shadowed[0]}' is a function of reference expressions: rename the argument")
        for name, text in reference["expression"].items():
            if name not in seen or name not in outputs:
                fail(["reference", "expression", name], f"'{name}' is not an output argument; outputs: {', '.join(outputs)}")
            try:
                e = ArrayExpression(text)
                e.check_names(known)
            except ValueError as err:
                fail(["reference", "expression", name], f"{err} in '{text}'")
            expressions[name] = e
        for name in outputs:
            if name not in expressions:
                fail(["reference", "expression"], f"no expression for output '{name}' (arguments.{seen[name]})")
    elif kind == "config":
        config = dict(reference["config"])
        _check_config(config, doc, params, fail)
    else:
        kernel = _check_reference_kernel(reference["kernel"], doc, path, size_expr, fail)
    return _Declaration(args, doc.get("seed"), kind, expressions, config, kernel)


def _check_config(config: dict, doc: dict, params: set, fail) -> None:
    """A trusted config: every parameter without a default, each to one of its values, and valid."""
    from tuner.space.expressions import Expression

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
        if k in values and v not in values[k]:
            fail([*at, k], f"{v!r} is not one of its values ({', '.join(map(str, values[k]))})")
    full = {**{k: v for k, v in defaults.items() if k not in config}, **config}
    for r in doc.get("restrictions", []):
        try:
            ok = bool(Expression(r)(full))
        except Exception:  # noqa: BLE001  (a bad restriction is the loader's to report)
            continue
        if not ok:
            fail(at, f"the config breaks the restriction '{r}'")


def _check_reference_kernel(ref: dict, doc: dict, path: Path, size_expr, fail) -> dict:
    at = ["reference", "kernel"]
    source = _inside_folder(path, ref["source"], [*at, "source"], fail)
    block = [size_expr(b, [*at, "block", i]) for i, b in enumerate(ref["block"])]
    numbers = [b for b in ref["block"] if isinstance(b, (int, float))]
    if any(b < 1 or not float(b).is_integer() for b in numbers):
        fail([*at, "block"], f"block dimensions must be whole numbers >= 1, got {ref['block']}")
    if len(numbers) == len(ref["block"]) and math.prod(numbers) > MAX_THREADS:
        fail([*at, "block"], f"{' x '.join(map(str, numbers))} threads: a block has at most {MAX_THREADS}")
    grid = [size_expr(g, [*at, "grid", i]) for i, g in enumerate(ref["grid"])]
    options = ref.get("compiler_options", doc.get("kernel", {}).get("compiler_options", []))
    return {"source": source, "name": ref["name"], "block": block, "grid": grid, "compiler_options": list(options)}


def _inside_folder(path: Path, name: str, key_path: list, fail) -> Path:
    """A file the space names, relative to the space file, which must exist and lie in the space file's
    folder: a workload may be shared, and must not make the tuner read files elsewhere."""
    folder = path.resolve().parent
    source = (folder / name).resolve()  # an absolute `name` stays itself; symbolic links are followed
    if not source.is_relative_to(folder):
        fail(key_path, f"'{name}' lies outside the workload's folder {folder}")
    if not source.is_file():
        fail(key_path, f"'{name}' does not exist (looked for {source})")
    return source


# ---- the workload ------------------------------------------------------------------------------------------
class DeclaredWorkload(Workload):
    """A workload whose space file declares its arguments and reference: no Python module of its own.

    The registry makes one with no arguments and sets `name` and `space_path`; tests and tools may give
    them here. A `config` or `kernel` reference runs once on the GPU (in the measuring process), on
    `reference_device` with `reference_backend` (a tuner backend name, default: nvcuda where cuda-python
    is installed, else cupy)."""

    reference_device: int = 0
    reference_backend: str | None = None

    def __init__(self, name: str = "", space_path: Path | None = None):
        if name:
            self.name = name
        if space_path is not None:
            self.space_path = Path(space_path)
        self._parsed: tuple | None = None  # (space, _Declaration): parsed again when the space is reloaded

    def _declaration(self):
        space = self.space
        if self._parsed is None or self._parsed[0] is not space:
            decl = _parse(space.doc, Path(space.path), set(space.size_vars), set(space.params), list(space.dtypes))
            if not decl.args:
                raise TunerError(f"{space.path}: at (top level): workload '{self.name}' has no Python module, so "
                                 "its space must declare 'arguments' (and a 'reference' for its outputs)")
            self._parsed = (space, decl)
        return space, self._parsed[1]

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        """The declared arguments for one size: numpy arrays and numpy scalars of the declared dtypes."""
        space, decl = self._declaration()
        if decl.seed is not None:
            rng = np.random.default_rng(decl.seed)
        out = []
        for i, a in enumerate(decl.args):
            dt = np.dtype(dtype if a.dtype == DTYPE_VAR else a.dtype)
            if a.scalar is not None:
                out.append(_scalar(_evaluate(a.scalar, size, space.path, ["arguments", i, "scalar"]), dt, space.path, i))
                continue
            shape = []
            for j, e in enumerate(a.shape):
                value = _evaluate(e, size, space.path, ["arguments", i, "shape", j])
                if value < 0 or not float(value).is_integer():
                    raise TunerError(f"{space.path}: at arguments.{i}.shape.{j}: '{e.text}' is {value} for size "
                                     f"{size}: not a size")
                shape.append(int(value))
            out.append(_fill(tuple(shape), dt, a.fill, rng))
        return out

    def answer(self, args: list, size: dict, dtype: str) -> list:
        """The reference: the outputs' expected contents, None for the other arguments."""
        space, decl = self._declaration()
        answer = [None] * len(decl.args)
        if decl.kind is None:
            return answer
        index = {a.name: i for i, a in enumerate(decl.args)}
        if decl.kind == "expression":
            for name, e in decl.expressions.items():
                # an argument named like a size variable (`n`, say) is read as the argument
                scope = {**size, **{n: _exact(args[index[n]]) for n in e.names if n in index}}
                try:
                    value = e(scope)
                except Exception as err:  # noqa: BLE001  (numpy's complaint, said with the key it came from)
                    raise TunerError(f"{space.path}: at reference.expression.{name}: {type(err).__name__}: "
                                     f"{err}") from None
                answer[index[name]] = _shaped(value, args[index[name]], space.path, name)
            return answer
        results = self._run_reference(space, decl, args, size, dtype)
        for i, a in enumerate(decl.args):
            if a.output:
                answer[i] = np.asarray(results[i]).reshape(np.shape(args[i]))
        return answer

    def _run_reference(self, space, decl: _Declaration, args: list, size: dict, dtype: str) -> list:
        """The arguments after one run on the GPU of the trusted config (as the tuner would run it: the
        same source, #defines, grid and block names as tuner.measure.kt.kernel_options) or of the reference
        kernel."""
        from tuner.measure import kt

        backend = self.reference_backend or _default_backend()
        lang = kt.kt_lang(kt.effective_backend(space, backend))
        if decl.kind == "config":
            config = space.complete(decl.config)
            default_names = ["block_size_x", "block_size_y", "block_size_z"]
            names = (list(space.block_names) + default_names[len(space.block_names):]) if space.block_names else default_names
            return _run_kernel(space.kernel_name, space.source_for(dtype), space.grid_dims(config, size), args, config,
                               names[:3], lang, list(space.compiler_options), self.reference_device)
        ref, where = decl.kernel, ["reference", "kernel"]
        block = [int(_evaluate(b, size, space.path, [*where, "block", i])) for i, b in enumerate(ref["block"])]
        grid = [int(_evaluate(g, size, space.path, [*where, "grid", i])) for i, g in enumerate(ref["grid"])]
        block += [1] * (3 - len(block))
        grid += [1] * (3 - len(grid))
        names = ["block_size_x", "block_size_y", "block_size_z"]
        defines = space.dtypes[dtype].get("defines", {})
        source = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + ref["source"].read_text()
        return _run_kernel(ref["name"], source, grid, args, dict(zip(names, block)), names, lang,
                           ref["compiler_options"], self.reference_device)


def _evaluate(e, size: dict, path, key_path: list):
    try:
        return e(size)
    except Exception as err:  # noqa: BLE001  (division by zero, a math domain error: said with the key)
        where = ".".join(map(str, key_path))
        raise TunerError(f"{path}: at {where}: '{e.text}' cannot be computed for size {size}: {err}") from None


def _scalar(value, dt: np.dtype, path, i: int):
    """A scalar argument in its dtype; a fraction or an overflow for an integer dtype is an error, not a
    silently different number."""
    if np.issubdtype(dt, np.integer):
        if not float(value).is_integer() or not np.iinfo(dt).min <= value <= np.iinfo(dt).max:
            raise TunerError(f"{path}: at arguments.{i}.scalar: {value} is not a value of {dt}")
        value = int(value)
    return dt.type(value)


def _fill(shape: tuple, dt: np.dtype, fill: dict, rng: np.random.Generator) -> np.ndarray:
    """An array of `shape` and `dt` filled as declared. Random draws are made in float32 where the array
    is float32 or float16 (half the memory and time of float64, for arrays of 2^26 elements and more)."""
    kind = fill["kind"]
    if kind == "zeros":
        return np.zeros(shape, dt)
    if kind == "constant":
        return np.full(shape, fill["value"], dt)
    if kind == "arange":
        return np.arange(math.prod(shape)).astype(dt).reshape(shape)
    if kind == "integers":
        low, high = int(fill["low"]), int(fill["high"])
        draw = next(t for t in (np.int8, np.int16, np.int32, np.int64)
                    if np.iinfo(t).min <= low and high <= np.iinfo(t).max)
        return rng.integers(low, high, shape, dtype=draw, endpoint=True).astype(dt, copy=False)
    work = np.float64 if dt == np.float64 else np.float32
    if kind == "uniform":
        x = rng.random(shape, dtype=work)
        x *= fill["high"] - fill["low"]
        x += fill["low"]
    else:  # normal
        x = rng.standard_normal(shape, dtype=work)
        x *= fill["std"]
        x += fill["mean"]
    return x.astype(dt, copy=False)


def _exact(value):
    """An input as a reference expression reads it: floating point in float64 and integers in int64, so the
    reference is computed more accurately than the kernel, then cast back to the output's dtype."""
    a = np.asarray(value)
    if np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64, copy=False)
    elif np.issubdtype(a.dtype, np.integer):
        a = a.astype(np.int64, copy=False)
    return a[()] if a.ndim == 0 else a


def _shaped(value, output: np.ndarray, path, name: str) -> np.ndarray:
    """The expression's value in the output's dtype and shape (the same number of elements in another shape,
    or a value that broadcasts to it, such as a constant)."""
    value = np.asarray(value)
    if value.size == output.size:
        return value.reshape(output.shape).astype(output.dtype)
    try:
        return np.broadcast_to(value, output.shape).astype(output.dtype)
    except ValueError:
        raise TunerError(f"{path}: at reference.expression.{name}: the expression has shape {value.shape}, but "
                         f"'{name}' has shape {output.shape}") from None


def _default_backend() -> str:
    """The project's default backend (cuda-python) where it is installed, else cupy."""
    for module, backend in (("cuda.bindings", "nvcuda"), ("cupy", "cupy"), ("pycuda", "pycuda")):
        try:
            if importlib.util.find_spec(module) is not None:
                return backend
        except ModuleNotFoundError:  # `cuda` missing altogether
            continue
    return "nvcuda"


def _run_kernel(name: str, source: str, grid: list, args: list, params: dict, block_names: list, lang: str,
                compiler_options: list, device: int) -> list:
    """One run with Kernel Tuner: the grid is given as the problem size with divisors of 1, as the tuner
    launches kernels; the arguments are copied back afterwards."""
    from kernel_tuner import run_kernel

    return run_kernel(name, source, tuple(grid), list(args), dict(params), grid_div_x=[], grid_div_y=[], grid_div_z=[],
                      lang=lang, device=device, compiler_options=list(compiler_options),
                      block_size_names=list(block_names), quiet=True)


def first_valid_config(params: dict, restrictions: list, limit: int = 1_000_000) -> dict | None:
    """The first config, in the order of the parameters' values, that meets every restriction (None if
    none does among the first `limit`)."""
    from tuner.space.expressions import Expression

    exprs = [Expression(r) for r in restrictions]
    for values in itertools.islice(itertools.product(*params.values()), limit):
        config = dict(zip(params, values))
        if all(bool(e(config)) for e in exprs):
            return config
    return None
