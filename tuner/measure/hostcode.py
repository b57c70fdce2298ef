"""Build a 'host' space (a host function that runs a multi-kernel pipeline) for one configuration into a
shared library, as Kernel Tuner's C backend does when it tunes it, so `tuner run` executes exactly the
code that was timed. Libraries are cached by the hash of what went into them."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tuner.atomic import write_atomically
from tuner.errors import TunerError
from tuner.space import Space


def cache_dir() -> Path:
    root = os.environ.get("TUNER_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-tuner"
    return Path(root) / "host"


def build(space: Space, config: dict, dtype: str) -> Callable[..., float]:
    """The entry point for `config`: a ctypes function returning the pipeline's time in ms. Pass arrays as
    `array.ctypes` and scalars as ctypes values (`ctypes.c_int(n)`), as Kernel Tuner's C backend does."""
    if space.lang != "host":
        raise TunerError(f"{space.workload} is not a host-code space")
    return build_source(space, space.source_for(dtype, config), space.kernel_name, f"with {config}")


def build_source(space: Space, source: str, name: str, what: str = "") -> Callable[..., float]:
    """Function `name` of `source` (C++ host code: the space's own, or a baseline beside it), built as the
    space's configurations are: by its compiler (nvcc, or g++ for CPU code) with its compiler options."""
    compiler = shutil.which(space.compiler)
    if compiler is None:
        raise TunerError(f"{space.compiler} is not on the PATH: it builds {space.workload}")
    if space.compiler == "nvcc":
        options = ["-O3", "-shared", "-Xcompiler=-fPIC", *space.compiler_options]
    else:
        options = ["-shared", "-fPIC", *space.compiler_options]
    key = hashlib.sha256("\0".join([source, *options]).encode()).hexdigest()[:20]
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
