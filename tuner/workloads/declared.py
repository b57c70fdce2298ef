"""Workloads declared in YAML alone: the space file's `arguments` say how to build the kernel's inputs for a
problem size, and its `reference` what the outputs must hold (a numpy expression, a trusted config of the
same kernel, or a separate reference kernel). No Python is needed for a simple kernel.

The declaration is part of the space format: tuner.space.declaration parses and checks it when the space is
loaded, and keeps it as Space.declaration. DeclaredWorkload builds from it: the inputs for a size (the kernel's
parameters, and the arrays of its `__constant__` memory), and the reference (evaluated here, or run once on
the GPU)."""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from tuner.errors import TunerError
from tuner.space import Space
from tuner.space.declaration import DTYPE_VAR, Declaration
from tuner.space.expressions import Expression
from tuner.space.model import BLOCK_NAMES, kt_block_names
from tuner.workloads.base import Workload

CONSTANT_MEMORY = 64 * 1024  # bytes of __constant__ memory a CUDA module may hold


class DeclaredWorkload(Workload):
    """A workload whose space file declares its arguments and reference: no Python module of its own.

    The registry makes one with no arguments and sets `name` and `space_path`; tests and tools may give
    them here. A `config` or `kernel` reference runs once on the GPU (in the measuring process), on
    `device` with `reference_backend` (a tuner backend name, default: nvcuda where cuda-python is
    installed, else cupy)."""

    reference_backend: str | None = None
    # the kernel parameters arguments() last returned and the constant-memory arrays made with them
    _made: tuple[list, dict] | None = None

    def __init__(self, name: str = "", space_path: Path | None = None) -> None:
        if name:
            self.name = name
        if space_path is not None:
            self.space_path = Path(space_path)

    def _declaration(self) -> tuple[Space, Declaration]:
        space = self.space
        if space.declaration is None or not space.declaration.args:
            raise TunerError(
                f"{space.path}: at (top level): workload '{self.name}' has no Python module, so "
                "its space must declare 'arguments' (and a 'reference' for its outputs)"
            )
        return space, space.declaration

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        """The kernel's parameters for one size, in order: numpy arrays and numpy scalars of the declared
        dtypes. The constant-memory arrays (`memory: constant`) are made with them, from the same draws, and
        kept for answer() and constant_arguments() of these arguments."""
        space, decl = self._declaration()
        values = self._build(space, decl, size, dtype, rng)
        params = [v for a, v in zip(decl.args, values, strict=True) if a.parameter]
        # only an array that is not a parameter needs keeping: the others are in what the caller holds
        constants = {a.name: v for a, v in zip(decl.args, values, strict=True) if not a.parameter}
        self._made = (params, constants) if constants else None
        return params

    def constant_arguments(self, args: list, size: dict, dtype: str) -> dict:
        """{name: array} of the arguments in constant memory (`memory: constant` or `both`): the arrays
        arguments() made with `args`, those answer() computed the reference from."""
        space, decl = self._declaration()
        values = self._values(space, decl, args)
        return {a.name: values[a.name] for a in decl.args if a.constant}

    def answer(self, args: list, size: dict, dtype: str) -> list:
        """The reference: the outputs' expected contents, None for the other kernel parameters."""
        space, decl = self._declaration()
        params = [a for a in decl.args if a.parameter]
        answer: list[np.ndarray | None] = [None] * len(params)
        if decl.kind is None:
            return answer
        values = self._values(space, decl, args)
        index = {a.name: j for j, a in enumerate(params)}
        if decl.kind == "expression":
            for name, e in decl.expressions.items():
                # an argument named like a size variable (`n`, say) is read as the argument
                scope = {**size, **{n: _exact(values[n]) for n in e.names if n in values}}
                try:
                    value = e(scope)
                except Exception as err:  # noqa: BLE001  (numpy's complaint, said with the key it came from)
                    raise TunerError(
                        f"{space.path}: at reference.expression.{name}: {type(err).__name__}: {err}"
                    ) from None
                answer[index[name]] = _shaped(value, values[name], space.path, name)
            return answer
        constants = {a.name: values[a.name] for a in decl.args if a.constant}
        results = self._run_reference(space, decl, list(args), constants, size, dtype)
        for j, a in enumerate(params):
            if a.output:
                answer[j] = np.asarray(results[j]).reshape(np.shape(args[j]))
        return answer

    def _build(self, space: Space, decl: Declaration, size: dict, dtype: str, rng: np.random.Generator) -> list:
        """Every declared argument for one size, in order (kernel parameters and constant-memory arrays)."""
        if decl.seed is not None:
            rng = np.random.default_rng(decl.seed)
        out: list = []  # numpy scalars and arrays
        for i, a in enumerate(decl.args):
            dt = np.dtype(dtype if a.dtype == DTYPE_VAR else a.dtype)
            if a.scalar is not None:
                out.append(
                    _scalar(_evaluate(a.scalar, size, space.path, ["arguments", i, "scalar"]), dt, space.path, i)
                )
                continue
            assert a.shape is not None  # an argument is a scalar or an array
            shape = []
            for j, e in enumerate(a.shape):
                value = _evaluate(e, size, space.path, ["arguments", i, "shape", j])
                if value < 0 or not float(value).is_integer():
                    raise TunerError(
                        f"{space.path}: at arguments.{i}.shape.{j}: '{e.text}' is {value} for size {size}: not a size"
                    )
                shape.append(int(value))
            nbytes = math.prod(shape) * dt.itemsize
            if a.constant and nbytes > CONSTANT_MEMORY:
                raise TunerError(
                    f"{space.path}: at arguments.{i}.shape: {nbytes} bytes for size {size}, but constant memory "
                    f"holds {CONSTANT_MEMORY // 1024} KiB"
                )
            out.append(_fill(tuple(shape), dt, a.fill, rng))
        return out

    def _values(self, space: Space, decl: Declaration, args: list) -> dict:
        """Every argument by name: the kernel parameters `args`, and the constant-memory arrays that
        arguments() made with them."""
        params = [a for a in decl.args if a.parameter]
        if len(args) != len(params):
            raise TunerError(
                f"{space.path}: at arguments: {len(args)} values given for the kernel's {len(params)} parameters"
            )
        values = {a.name: v for a, v in zip(params, args, strict=True)}
        hidden = [i for i, a in enumerate(decl.args) if not a.parameter]
        if not hidden:
            return values
        made = self._made
        if made is None or len(made[0]) != len(args) or any(x is not y for x, y in zip(made[0], args, strict=True)):
            i = hidden[0]
            raise TunerError(
                f"{space.path}: at arguments.{i}: the constant-memory array '{decl.args[i].name}' is made "
                "with the kernel's parameters: pass the arguments the last arguments() call returned"
            )
        return {**values, **made[1]}

    def _run_reference(
        self, space: Space, decl: Declaration, args: list, constants: dict, size: dict, dtype: str
    ) -> list:
        """The kernel parameters after one run on the GPU of the trusted config (as the tuner would run it:
        the same source, #defines, grid, block names and constant memory as tuner.measure.kt.kernel_options)
        or of the reference kernel (given the constant-memory arrays its source names)."""
        from tuner.measure import kt

        backend = self.reference_backend or _default_backend()
        lang = kt.kt_lang(kt.effective_backend(space, backend))
        if decl.kind == "config":
            config = space.complete(decl.config)
            return _run_kernel(
                space.kernel_name,
                space.source_for(dtype),
                space.grid_dims(config, size),
                args,
                config,
                kt_block_names(space.block_names),
                lang,
                space.build_flags,
                self.device,
                constants,
            )
        ref, where = decl.kernel, ["reference", "kernel"]
        block = [int(_evaluate(b, size, space.path, [*where, "block", i])) for i, b in enumerate(ref["block"])]
        grid = [int(_evaluate(g, size, space.path, [*where, "grid", i])) for i, g in enumerate(ref["grid"])]
        block += [1] * (3 - len(block))
        grid += [1] * (3 - len(grid))
        defines = space.dtypes[dtype].get("defines", {})
        source = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + ref["source"].read_text()
        # a reference kernel may take the data as a parameter instead (memory: both): only the symbols it names
        named = {k: v for k, v in constants.items() if re.search(rf"\b{re.escape(k)}\b", source)}
        return _run_kernel(
            ref["name"],
            source,
            grid,
            args,
            dict(zip(BLOCK_NAMES, block, strict=True)),
            list(BLOCK_NAMES),
            lang,
            ref["compiler_options"],
            self.device,
            named,
        )


def _evaluate(e: Expression, size: dict, path: Path, key_path: list) -> Any:
    try:
        return e(size)
    except Exception as err:  # noqa: BLE001  (division by zero, a math domain error: said with the key)
        where = ".".join(map(str, key_path))
        raise TunerError(f"{path}: at {where}: '{e.text}' cannot be computed for size {size}: {err}") from None


def _scalar(value: Any, dt: np.dtype, path: Path, i: int) -> np.generic:
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
        draw = next(
            t for t in (np.int8, np.int16, np.int32, np.int64) if np.iinfo(t).min <= low and high <= np.iinfo(t).max
        )
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


def _exact(value: Any) -> Any:
    """An input as a reference expression reads it: floating point in float64 and integers in int64, so the
    reference is computed more accurately than the kernel, then cast back to the output's dtype."""
    a = np.asarray(value)
    if np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64, copy=False)
    elif np.issubdtype(a.dtype, np.integer):
        a = a.astype(np.int64, copy=False)
    return a[()] if a.ndim == 0 else a


def _shaped(value: Any, output: np.ndarray, path: Path, name: str) -> np.ndarray:
    """The expression's value in the output's dtype and shape (the same number of elements in another shape,
    or a value that broadcasts to it, such as a constant)."""
    value = np.asarray(value)
    if value.size == output.size:
        return value.reshape(output.shape).astype(output.dtype)
    try:
        return np.broadcast_to(value, output.shape).astype(output.dtype)
    except ValueError:
        raise TunerError(
            f"{path}: at reference.expression.{name}: the expression has shape {value.shape}, but "
            f"'{name}' has shape {output.shape}"
        ) from None


def _default_backend() -> str:
    """The project's default backend (cuda-python) where it is installed, else cupy."""
    for module, backend in (("cuda.bindings", "nvcuda"), ("cupy", "cupy"), ("pycuda", "pycuda")):
        try:
            if importlib.util.find_spec(module) is not None:
                return backend
        except ModuleNotFoundError:  # `cuda` missing altogether
            continue
    return "nvcuda"


def _run_kernel(
    name: str,
    source: str,
    grid: list,
    args: list,
    params: dict,
    block_names: list,
    lang: str,
    compiler_options: list,
    device: int,
    constants: dict,
) -> list:
    """One run with Kernel Tuner: the grid is given as the problem size with divisors of 1, as the tuner
    launches kernels; `constants` ({symbol: array}) are copied to constant memory after the compile; the
    arguments are copied back afterwards."""
    from kernel_tuner import run_kernel

    return run_kernel(
        name,
        source,
        tuple(grid),
        list(args),
        dict(params),
        grid_div_x=[],
        grid_div_y=[],
        grid_div_z=[],
        lang=lang,
        device=device,
        compiler_options=list(compiler_options),
        block_size_names=list(block_names),
        cmem_args=dict(constants) or None,
        quiet=True,
    )


def first_valid_config(params: dict, restrictions: list, limit: int = 1_000_000) -> dict | None:
    """The first config, in the order of the parameters' values, that meets every restriction (None if
    none does among the first `limit`)."""
    exprs = [Expression(r) for r in restrictions]
    for values in itertools.islice(itertools.product(*params.values()), limit):
        config = dict(zip(params, values, strict=True))
        if all(bool(e(config)) for e in exprs):
            return config
    return None
