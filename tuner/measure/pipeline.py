"""The campaign's side of compiling ahead: the kernel source of each config, made by Kernel Tuner's own source
preparation exactly as the measuring process's Kernel Tuner makes it, sent to the compile pool
(tuner/measure/compile_pool.py) ahead of its measurement; the binaries go with the requests.

Used for Kernel Tuner's nvcuda backend on GPU kernels (cubins: tuner/measure/cubin_backend.py loads them) and
for its C backend on host code (shared libraries: tuner/measure/library_backend.py); cupy and pycuda compile
in the measuring process as before. With as many compiler processes as TUNER_COMPILE_WORKERS says, by default
the machine's cores less two (one for the measuring process, one for the campaign); 0 turns it off.
TUNER_COMPILE_AHEAD (configs compiled ahead, by default twice the workers) set to 0 keeps the pool's binaries
but compiles each config just before it is measured, never meanwhile: a serial run with the parallel run's
binaries, which tells what concurrency does to the times from what the compiler does (benchmarks/throughput.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from tuner.measure.compile_pool import Compiled, CompileJob, CompilePool, Compiler

WORKERS_ENV = "TUNER_COMPILE_WORKERS"
AHEAD_ENV = "TUNER_COMPILE_AHEAD"
MAX_WORKERS = 16


def _env_count(name: str, what: str) -> int | None:
    given = os.environ.get(name, "").strip()
    if not given:
        return None
    try:
        return max(0, int(given))
    except ValueError:
        from tuner.errors import TunerError

        raise TunerError(f"{name}={given!r} is not a number of {what}") from None


def default_workers() -> int:
    """Compiler processes for this machine: TUNER_COMPILE_WORKERS, else its cores less two (0: none)."""
    given = _env_count(WORKERS_ENV, "compiler processes")
    if given is not None:
        return given
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(MAX_WORKERS, cores - 2))


def cubin_options(compiler_options: Sequence[str], cc: str) -> tuple[str, ...] | None:
    """Kernel Tuner's nvcuda compile options (its CudaFunctions.compile), with a real architecture in place of
    its virtual one; None where the space names an architecture itself (then Kernel Tuner compiles)."""
    from kernel_tuner.utils.nvcuda import find_cuda_home, to_valid_nvrtc_gpu_arch_cc

    options = list(compiler_options)
    if any(o.startswith(("-arch", "--arch", "--gpu-architecture=")) for o in options):
        return None
    if not any(o.startswith(("-std=", "--std=")) for o in options):
        options.append("--std=c++11")
    options.append(f"--gpu-architecture=sm_{to_valid_nvrtc_gpu_arch_cc(cc)}")
    cuda_home = find_cuda_home()
    if cuda_home:
        options.append(f"-I{os.path.join(cuda_home, 'include')}")
    return tuple(options)


class _SourceOnly:
    """What Kernel Tuner's DeviceInterface.create_kernel_instance reads of its device: the thread limit."""

    def __init__(self, max_threads: int) -> None:
        self.dev = type("Dev", (), {"max_threads": max_threads})()


def kernel_tuner_source(kernel_options: Any, params: dict, device: _SourceOnly | None = None) -> tuple[str, str] | None:
    """The source and kernel name Kernel Tuner compiles for a config: its kernel instance (its defines, the grid
    and block sizes, a templated kernel wrapped), or None where it would compile nothing (too many threads)."""
    from kernel_tuner.core import DeviceInterface

    # Kernel Tuner's own method, on a stand-in device: the source is byte for byte what it compiles
    instance = DeviceInterface.create_kernel_instance(
        device or _SourceOnly(1024), kernel_options.kernel_source, kernel_options, params, False
    )
    if not hasattr(instance, "kernel_string"):  # util.InvalidConfig
        return None
    instance.delete_temp_files()  # secondary sources in temporary files: that source will not match, no harm
    return instance.kernel_string, instance.name


JobMaker = Callable[[str, str], "CompileJob | None"]  # Kernel Tuner's source and name of a config -> its job
NVRTC = "tuner.measure.compile_pool:nvrtc_cubin"
HOST_BUILD = "tuner.measure.library_backend:build_library"


class CompilePipeline:
    """Compiles the configs a campaign will measure next, `depth` ahead, on `workers` processes."""

    def __init__(
        self,
        kernel_options: Any,
        make_job: JobMaker,
        keys: list[str],
        *,
        workers: int,
        timeout: float,
        compiler: Compiler | str = NVRTC,
        max_threads: int = 1024,
    ) -> None:
        self.kernel_options, self.make_job, self.keys = kernel_options, make_job, keys
        self.pool = CompilePool(compiler, workers, timeout)
        ahead = _env_count(AHEAD_ENV, "configs compiled ahead")
        self.depth = 2 * max(1, workers) if ahead is None else ahead  # twice: no worker waits for the next job
        self._device = _SourceOnly(max_threads)
        self._pending: dict[tuple, str] = {}  # config values -> job key

    @classmethod
    def for_space(
        cls,
        workload: str,
        size: dict,
        dtype: str,
        backend: str,
        target: dict,
        *,
        workers: int,
        timeout: float,
        compiler: Compiler | str | None = None,
    ) -> CompilePipeline | None:
        """The pipeline of a campaign's space, for the device the measuring process set up (`target`: its
        cubin_backend.install answer for a kernel on nvcuda, its library_backend.install answer for host code);
        None where configs are compiled by the measuring process. `compiler`: the pool's (default: NVRTC to a
        cubin, or the host code's compiler to a shared library)."""
        from tuner.measure import kt
        from tuner.workloads import get_workload

        if workers <= 0:
            return None
        space = get_workload(workload).space
        kernel_options = kt.kernel_options(space, size, dtype, [], backend)
        run_by = kt.effective_backend(space, backend)
        if run_by == "nvcuda" and "cc" in target:
            options = cubin_options(target["compiler_options"], target["cc"])
            if options is None:
                return None
            make_job: JobMaker = lambda source, name: CompileJob(source, name, options)  # noqa: E731
            default = NVRTC
        elif run_by in (kt.HOST_BACKEND, kt.CPU_BACKEND) and "compiler" in target:
            from tuner.measure.library_backend import plan

            suffix = kernel_options.kernel_source.get_user_suffix()
            make_job, default = (lambda source, name: plan(source, name, target, suffix)), HOST_BUILD  # noqa: E731
        else:
            return None
        keys = list(space.params)
        return cls(kernel_options, make_job, keys, workers=workers, timeout=timeout, compiler=compiler or default)

    def job(self, values: Sequence) -> CompileJob | None:
        """The compile job of a config (None where Kernel Tuner would compile nothing, too many threads, or the
        pool would not: make_job's call)."""
        made = kernel_tuner_source(self.kernel_options, dict(zip(self.keys, values)), self._device)
        return None if made is None else self.make_job(*made)

    def ahead(self, configs: Sequence[Sequence]) -> None:
        """Start compiling these configs (those not started yet)."""
        for values in configs:
            values = tuple(values)
            if values in self._pending:
                continue
            job = self.job(values)
            if job is not None:
                self._pending[values] = self.pool.submit(job)

    def started(self, values: Sequence) -> bool:
        return tuple(values) in self._pending

    def done(self, values: Sequence) -> bool:
        """Its compile has ended (take will not wait)."""
        key = self._pending.get(tuple(values))
        return key is not None and self.pool.done(key)

    def take(self, values: Sequence) -> Compiled | None:
        """The config's cubin (compiled now if it was not started), or None: Kernel Tuner compiles it."""
        values = tuple(values)
        self.ahead([values])
        key = self._pending.pop(values, None)
        return None if key is None else self.pool.result(key)

    def close(self) -> None:
        self.pool.close()
