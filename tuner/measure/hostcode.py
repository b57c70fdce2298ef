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
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise TunerError("nvcc is not on the PATH: it builds the pipeline")
    source = space.source_for(dtype, config)
    options = ["-O3", "-shared", "-Xcompiler=-fPIC", *space.compiler_options]
    key = hashlib.sha256("\0".join([source, *options]).encode()).hexdigest()[:20]
    lib = cache_dir() / f"{space.workload}-{key}.so"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        src = lib.with_suffix(f".{os.getpid()}.cu")  # this process's: a concurrent build writes its own
        src.write_text(source)

        def compile_to(tmp: Path) -> None:
            out = subprocess.run([nvcc, *options, "-o", str(tmp), str(src)], capture_output=True, text=True)
            if out.returncode != 0:
                raise TunerError(f"nvcc could not build {space.workload} with {config}:\n{out.stderr[-3000:]}")

        try:  # atomic: a concurrent build never loads a half-written library
            write_atomically(lib, compile_to)
        finally:
            src.unlink(missing_ok=True)
    fn = getattr(ctypes.CDLL(str(lib)), space.kernel_name)
    fn.restype = ctypes.c_float
    return fn
