"""Build a 'host' space (a host function that runs a multi-kernel pipeline) for one configuration into a
shared library, as Kernel Tuner's C backend does when it tunes it, so `tuner run` executes exactly the
code that was timed: the source Kernel Tuner compiles for the config, built by the compile pool with the C
backend's own commands (tuner/measure/library_backend.py), the pipeline a campaign compiles ahead with. A
compiler that crashes or hangs is an error naming the config. Libraries are cached by the hash of what went
into them."""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.atomic import write_atomically
from tuner.errors import TunerError
from tuner.locations import user_cache
from tuner.measure.compile_pool import CompileJob
from tuner.space import Space


def cache_dir() -> Path:
    return user_cache("host")


BUILD_TIMEOUT_S = 900  # an nvcc build of a host pipeline takes a minute at most; past this it hangs
_pool: Any = None  # the compile pool of this process's builds, started on the first
_locks: dict[str, threading.Lock] = {}  # one build of a library at a time (benchmarks build from threads)
_lock = threading.Lock()


def _headers(space: Space) -> list[str]:
    """What a library's cache key adds for the local headers the source #includes (none for a source without):
    a header edited since must build anew, not load the library built with the old one."""
    return [f"{label}:{hashlib.sha256(content).hexdigest()}" for label, content in space.included_sources]


def build(space: Space, config: dict, dtype: str, size: dict | None = None) -> Callable[..., float]:
    """The entry point for `config`: a ctypes function returning the pipeline's time in ms. Pass arrays as
    `array.ctypes` and scalars as ctypes values (`ctypes.c_int(n)`), as Kernel Tuner's C backend does.
    `size`: the problem size, for a space whose launch grid depends on it (a host space's does not)."""
    job = config_job(space, config, dtype, size)
    what = [job.compiler, job.suffix, *job.options, job.source, *_headers(space)]
    key = hashlib.sha256("\0".join(what).encode()).hexdigest()
    lib = cache_dir() / f"{space.workload}-{key[:20]}.so"
    with _lock:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if not lib.exists():
            pool = _build_pool()
            out = pool.result(pool.submit(job))
            if out.error or out.binary is None:
                raise TunerError(f"{space.compiler} could not build {space.workload} with {config}:\n{out.error}")
            lib.parent.mkdir(parents=True, exist_ok=True)
            binary = out.binary
            write_atomically(lib, lambda tmp: tmp.write_bytes(binary))  # a concurrent load never sees half
    fn = getattr(ctypes.CDLL(str(lib)), job.name)
    fn.restype = ctypes.c_float
    return fn


def config_job(space: Space, config: dict, dtype: str, size: dict | None = None) -> CompileJob:
    """The build of a config as Kernel Tuner's C backend runs it when it times it: its source for the config,
    its compiler, suffix and options (library_backend.plan)."""
    from tuner.measure import kt
    from tuner.measure.library_backend import plan
    from tuner.measure.pipeline import kernel_tuner_source

    if space.lang != "host":
        raise TunerError(f"{space.workload} is not a host-code space")
    if shutil.which(space.compiler) is None:
        raise TunerError(f"{space.compiler} is not on the PATH: it builds {space.workload}")
    complete = space.complete(config)
    missing = [k for k in space.params if k not in complete]
    if missing:
        raise TunerError(f"{space.workload} with {config}: no value for {', '.join(missing)}")
    kernel_options = kt.kernel_options(space, size or {}, dtype, [], "nvcuda")
    made = kernel_tuner_source(kernel_options, {k: complete[k] for k in space.params})
    nvcc = shutil.which("nvcc") is not None
    target = {"compiler": space.compiler, "compiler_options": space.build_flags, "nvcc_available": nvcc}
    suffix = kernel_options.kernel_source.get_user_suffix()
    job = None if made is None else plan(*made, target, suffix)
    if made is not None and job is None and space.compiler == "g++":  # CUDA code: the C backend turns to nvcc
        job = plan(*made, {**target, "compiler": "nvcc"}, suffix)
    if job is None:
        raise TunerError(f"{space.workload} with {config}: not a config Kernel Tuner's C backend builds")
    return job


def _build_pool() -> Any:
    """The compile pool of this process's builds: a process per build at a time, as many as the cores."""
    global _pool
    from tuner.measure.compile_pool import CompilePool
    from tuner.measure.pipeline import HOST_BUILD

    with _lock:
        if _pool is None:
            _pool = CompilePool(HOST_BUILD, workers=os.cpu_count() or 1, timeout=BUILD_TIMEOUT_S)
            atexit.register(close_build_pool)
        return _pool


def close_build_pool() -> None:
    """Stop the builds' pool and its compiler processes (at exit, or when a caller is done building)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


def build_source(space: Space, source: str, name: str, what: str = "") -> Callable[..., float]:
    """Function `name` of `source` (C++ host code: the space's own, or a baseline beside it), built as the
    space's configurations are: by its compiler (nvcc, or g++ for CPU code) with its compiler options."""
    compiler = shutil.which(space.compiler)
    if compiler is None:
        raise TunerError(f"{space.compiler} is not on the PATH: it builds {space.workload}")
    if space.compiler == "nvcc":
        options = ["-O3", "-shared", "-Xcompiler=-fPIC", *space.build_flags]
    else:
        options = ["-shared", "-fPIC", *space.build_flags]
    key = hashlib.sha256("\0".join([source, *options, *_headers(space)]).encode()).hexdigest()[:20]
    lib = cache_dir() / f"{space.workload}-{key}.so"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        suffix = ".cu" if space.compiler == "nvcc" else ".cpp"
        src = lib.with_suffix(f".{os.getpid()}{suffix}")  # this process's: a concurrent build writes its own
        src.write_text(source)

        def compile_to(tmp: Path) -> None:
            out = subprocess.run([compiler, *options, "-o", str(tmp), str(src)], capture_output=True, text=True)
            if out.returncode != 0:
                where = f"{space.workload} {what}".strip()
                raise TunerError(f"{space.compiler} could not build {where}:\n{out.stderr[-3000:]}")

        try:  # atomic: a concurrent build never loads a half-written library
            write_atomically(lib, compile_to)
        finally:
            src.unlink(missing_ok=True)
    fn = getattr(ctypes.CDLL(str(lib)), name)
    fn.restype = ctypes.c_float
    return fn
