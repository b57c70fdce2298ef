"""LocVolCalib (seed 003, Finpar / PMPH course project): the whole ADI pipeline as one host function.
Inputs for a size, the numpy reference (stored for the named sizes, which take minutes in numpy), the
tolerances, the copy baseline, and `tuner run locvolcalib INPUT.data`."""

from __future__ import annotations

import ctypes
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tuner.errors import TunerError
from tuner.locations import BUILTIN_ROOT
from tuner.measure.vendor import copy_timer, cupy_or_none
from tuner.workloads import Workload
from tuner.workloads.locvolcalib_io import (
    VARIANT_CODE,
    VARIANTS,
    Problem,
    format_output,
    problem_from_size,
    read_input,
    read_output,
    validate,
)
from tuner.workloads.locvolcalib_ref import price

if TYPE_CHECKING:
    import argparse

# our own float64 numpy prices of the named sizes (benchmarks/locvolcalib/references.py)
REFERENCE_DIR = BUILTIN_ROOT / "data" / "locvolcalib" / "reference"
# Finpar's datasets with their outputs are public benchmark data that stays outside the project (SPEC, "Data
# here"): tests read them from ../shared/locvolcalib/data, or from TUNER_FINPAR_DATA, and skip without them
FINPAR_DATA = Path(os.environ.get("TUNER_FINPAR_DATA", BUILTIN_ROOT.parent / "shared" / "locvolcalib" / "data"))
TOLERANCES = {"float64": (1e-12, 1e-9), "float32": (5e-6, 0.0)}  # (atol, rtol) against the float64 reference


def reference_path(size_name: str) -> Path:
    return REFERENCE_DIR / f"{size_name}.txt"


def reference_prices(size: dict) -> np.ndarray:
    """The float64 numpy prices: read from data/locvolcalib/reference/ for a named size
    (benchmarks/locvolcalib/references.py writes them), else computed."""
    from tuner.workloads import get_workload

    for name, named in get_workload("locvolcalib").space.sizes.items():
        if named == size and reference_path(name).is_file():
            return np.loadtxt(reference_path(name), dtype=np.float64, ndmin=1)
    return price(problem_from_size(size))


def host_arguments(problem: Problem, dtype: str) -> list:
    """The host function's arguments: res[K], params[5] (double), K, M, N, T, variant."""
    return [
        np.zeros(problem.outer, dtype=dtype),
        problem.params,
        np.int32(problem.outer),
        np.int32(problem.num_x),
        np.int32(problem.num_y),
        np.int32(problem.num_t),
        np.int32(VARIANT_CODE[problem.variant]),
    ]


class LocVolCalib(Workload):
    name = "locvolcalib"
    check_reference = "copy"
    run_help = "price the options of a LocVolCalib input (Finpar or course format) on the GPU"

    def parse_size(self, text: str) -> dict | None:
        """variant:KxMxNxT, e.g. course:128x256x256x128."""
        m = re.fullmatch(r"\s*(finpar|course):(\d+)x(\d+)x(\d+)x(\d+)\s*", text)
        if m is None:
            return None
        k, mx, ny, t = map(int, m.groups()[1:])
        return {"outer": k, "numX": mx, "numY": ny, "numT": t, "variant": VARIANT_CODE[m.group(1)]}

    def arguments(self, size: dict, dtype: str, rng: np.random.Generator) -> list:
        return host_arguments(problem_from_size(size), dtype)

    def answer(self, args: list, size: dict, dtype: str) -> list:
        return [reference_prices(size)] + [None] * 6

    def tolerances(self, size: dict, dtype: str) -> tuple[float, float]:
        return TOLERANCES[dtype]

    def reference_timers(self, args: list, size: dict, dtype: str) -> dict:
        if cupy_or_none() is None:
            return {}
        nbytes = size["outer"] * size["numX"] * size["numY"] * np.dtype(dtype).itemsize  # one value array
        return {"copy": copy_timer(nbytes)}

    def baseline_metrics(self, name: str, time_ms: float, size: dict, dtype: str) -> dict:
        nbytes = size["outer"] * size["numX"] * size["numY"] * np.dtype(dtype).itemsize
        return {"GB/s": 2 * nbytes / (time_ms / 1e3) / 1e9} if name == "copy" else {}

    # ---- tuner run locvolcalib -----------------------------------------------------------------
    def add_run_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("input", help="input.data: Finpar (9 values) or course (4 integers)")
        parser.add_argument("--variant", choices=VARIANTS, help="the input's format (default: told by its length)")
        parser.add_argument(
            "--precision",
            choices=("float64", "float32"),
            help="REAL of the computation (default float64; same as --dtype)",
        )
        parser.add_argument("--reference", help="output.data to validate against (absolute 1e-5, the original rule)")
        parser.add_argument("-o", "--output", help="write the prices here (default: standard output)")

    def run(self, args: argparse.Namespace, config_for: Callable[[dict, str], dict]) -> int:
        from tuner.measure.hostcode import build

        if args.precision and args.dtype and args.precision != args.dtype:
            raise TunerError(f"--precision {args.precision} and --dtype {args.dtype} disagree")
        dtype = self.space.resolve_dtype(args.precision or args.dtype)
        problem = read_input(args.input, args.variant)
        reference = read_output(args.reference) if args.reference else None
        if reference is not None and reference.size != problem.outer:
            raise TunerError(
                f"{args.reference} has {reference.size} values, {args.input} prices {problem.outer} options"
            )
        config = config_for(problem.size, dtype)
        fn = build(self.space, config, dtype)
        host = host_arguments(problem, dtype)
        t0 = time.perf_counter()
        ms = fn(*[a.ctypes if isinstance(a, np.ndarray) else ctypes.c_int(int(a)) for a in host])
        wall = time.perf_counter() - t0
        if ms < 0:
            raise TunerError("the GPU pipeline failed (its CUDA error is printed above)")
        prices = host[0].astype(np.float64)
        lines = []
        ok = True
        if reference is not None:
            ok, detail = validate(prices, reference)
            lines.append(f"{int(ok)} // {'VALID' if ok else 'INVALID'} ({detail})")
        lines.append(f"{ms * 1e3:.0f} // GPU time in microseconds ({dtype}; {wall:.2f} s with set-up and copies)")
        text = format_output(prices, problem.variant)
        if args.output:
            Path(args.output).write_text(text)
            print("\n".join(lines))
        else:
            print("\n".join(lines) + "\n" + text, end="")
        return 0 if ok else 1


WORKLOAD = LocVolCalib()
