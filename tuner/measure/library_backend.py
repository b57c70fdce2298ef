"""Compiling ahead for host code: Kernel Tuner's C backend (CompilerFunctions) builds each config's shared
library with the system compiler (g++ for CPU code, nvcc for a host pipeline with CUDA) in the measuring
process, two compiler runs of a second or more that the GPU (or the CPU) waits for. Here the compile pool
(tuner/measure/compile_pool.py) builds them ahead with the same commands (`plan` makes Kernel Tuner's choices
of compiler, suffix and options for a source, `build_library` runs them), and the measuring process loads the
library as is (`install`), compiling it itself as before where none came.

A compiler that crashes or hangs in the pool fails that config as a `compile` failure (the pool's rule); one
that exits with an error is the compiler's verdict, raised where Kernel Tuner's compile raises it."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path
from typing import Any

from tuner.measure.compile_pool import Compiled, CompileJob, source_key

# Kernel Tuner's CompilerFunctions.compile, version 1.5: what marks a source as CUDA, and the compilers whose
# libraries it names as C (a Fortran compiler mangles the function's name: compiled by Kernel Tuner, as before)
DEVICE_CODE = ("__global", "__syncthreads()", "threadIdx")
C_COMPILERS = ("g++", "gcc", "nvcc", "clang", "clang++", "icpx", "icx", "nvc", "nvc++")


def install(dev: Any) -> dict | None:
    """Make Kernel Tuner's C backend object `dev` take ready libraries. Returns what the campaign needs to build
    them as it would ({"compiler", "compiler_options", "nvcc_available"}), or None for another backend."""
    from kernel_tuner.backends.compiler import CompilerFunctions

    if type(dev) is not CompilerFunctions:
        return None
    dev.__class__ = _library_class(CompilerFunctions)  # as cubin_backend.install: behaviour only
    dev.ready, dev.loaded, dev.pool_ms = {}, 0, 0.0
    return {
        "compiler": dev.compiler,
        "compiler_options": list(dev.compiler_options or []),
        "nvcc_available": bool(dev.nvcc_available),
    }


def plan(kernel_string: str, name: str, target: dict, user_suffix: str | None = None) -> CompileJob | None:
    """The build Kernel Tuner's C backend would run for this source (its compile's choices), as a pool job;
    None where it would do something this does not copy (a Fortran compiler, or g++ giving way to nvcc for
    CUDA code, which it does for good): Kernel Tuner builds that one itself."""
    compiler = target["compiler"]
    if compiler not in C_COMPILERS:
        return None
    suffix = ".cu" if any(s in kernel_string for s in DEVICE_CODE) else user_suffix
    cuda = suffix == ".cu" or "#include <cuda" in kernel_string or "cudaMemcpy" in kernel_string
    if cuda and compiler == "g++" and target["nvcc_available"]:
        return None
    options = ["-Xcompiler=-fPIC" if compiler == "nvcc" else "-fPIC", *target["compiler_options"]]
    return CompileJob(kernel_string, name, tuple(options), compiler=compiler, suffix=suffix or ".cc")


def build_library(job: CompileJob) -> tuple[bytes, str]:
    """The pool's compiler for host code: Kernel Tuner's two commands (compile, link a shared library), in the
    current folder as it does (a quoted #include resolves alike); the library's bytes and the function's name.
    A compiler error raises with the compiler's messages."""
    from kernel_tuner.util import delete_temp_file, get_temp_filename

    source = job.source
    if ".c" in job.suffix and 'extern "C"' not in source:  # Kernel Tuner's C linkage for C, C++ and CUDA
        source = 'extern "C" {\n' + source + "\n}"
    libs = ["-lOpenCL"] if "CL/cl.h" in source else []
    src = get_temp_filename(suffix=job.suffix)
    stem = src.rsplit(".", 1)[0]
    try:
        Path(src).write_text(source)
        _run([job.compiler, "-c", src, *job.options, "-o", stem + ".o"])
        _run([job.compiler, stem + ".o", *job.options, "-shared", "-o", stem + ".so", *libs])
        return Path(stem + ".so").read_bytes(), job.name
    finally:
        for path in (src, stem + ".o", stem + ".so"):
            delete_temp_file(path)


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed (exit code {done.returncode}):\n{done.stderr[-3000:]}")


_CLASSES: dict[type, type] = {}


def _library_class(base: type) -> type:
    """LibraryCompilerFunctions over Kernel Tuner's CompilerFunctions, made once."""
    if base in _CLASSES:
        return _CLASSES[base]

    class LibraryCompilerFunctions(base):
        ready: dict[str, Compiled]
        loaded: int  # libraries loaded from the pool
        pool_ms: float  # the pool's build time of the last one loaded
        lib: Any  # Kernel Tuner's: the library loaded last, and the runtimes used so far
        using_openmp: bool
        using_openacc: bool

        def compile(self, kernel_instance: Any) -> Any:
            # kept until the request is over: Kernel Tuner's warm-up compiles the first config twice
            ready = self.ready.get(source_key(kernel_instance.name, kernel_instance.kernel_string))
            self.pool_ms = 0.0
            if ready is None:
                return super().compile(kernel_instance)
            return self._load(ready, kernel_instance.kernel_string)

        def _load(self, ready: Compiled, kernel_string: str) -> Any:
            import numpy as np
            from kernel_tuner.util import delete_temp_file, get_temp_filename

            # what Kernel Tuner's compile does besides building: unload the last library (not one with OpenMP,
            # which must stay loaded), note the runtimes the source uses
            if self.lib is not None:
                self.cleanup_lib()
            self.using_openmp |= "#pragma omp" in kernel_string or "!$omp" in kernel_string
            self.using_openacc |= "#pragma acc" in kernel_string or "!$acc" in kernel_string
            self.pool_ms = ready.seconds * 1e3
            if ready.error or ready.binary is None:
                raise RuntimeError(ready.error)
            path = get_temp_filename(suffix=".so")  # a new name each time: dlopen of a loaded path reuses it
            try:
                Path(path).write_bytes(ready.binary)
                self.lib = np.ctypeslib.load_library(path, ".")
                func = getattr(self.lib, ready.lowered_name)
                func.restype = ctypes.c_float
            finally:
                delete_temp_file(path)
            self.loaded += 1
            return func

    _CLASSES[base] = LibraryCompilerFunctions
    return LibraryCompilerFunctions
