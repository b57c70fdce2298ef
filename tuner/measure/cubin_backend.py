"""The measuring process's side of compiling ahead: Kernel Tuner's nvcuda backend, loading the cubin the compile
pool made for a kernel source (tuner/measure/compile_pool.py) instead of compiling it, and compiling it
itself as before where no cubin came (a source the pool did not see, another backend's config).

Kernel Tuner's nvcuda backend compiles with NVRTC to PTX and leaves the PTX to the driver, which compiles it
to machine code when cuModuleLoadData loads it: about 80% of a trial on the H100 with the driver's JIT cache
cold. The pool compiles to a cubin for the GPU's architecture with the same source and options, and here the
cubin is loaded as is.

It also makes the backend check every driver call it makes (see check_driver_calls), and tells a launch refused
for its block size from other errors (run_kernel: LaunchRefused, a `launch` failure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.measure.compile_pool import Compiled, source_key
from tuner.measure.protocol import LaunchRefused

# the driver's answers to a launch it refuses for the block's size (the context stays usable)
REFUSALS = ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "CUDA_ERROR_INVALID_VALUE")


def install(dev: Any) -> dict | None:
    """Make Kernel Tuner's backend object `dev` (a DeviceInterface's .dev) take ready cubins. Returns what the
    campaign needs to compile for it ({"cc", "compiler_options"}), or None for a backend that cannot."""
    try:
        from kernel_tuner.backends.nvcuda import CudaFunctions
    except ImportError:
        return None
    if type(dev) is not CudaFunctions:  # cupy, pycuda, the C backend: they compile as they always did
        return None
    check_driver_calls()
    # the subclass adds behaviour and a few attributes, no state of its own to initialise: re-class the object
    # Kernel Tuner's DeviceInterface built (it builds the backend itself, by language)
    dev.__class__ = _cubin_class(CudaFunctions)
    dev.ready, dev.loaded, dev.pool_ms, dev.launch_refused = {}, 0, 0.0, None
    return {"cc": str(dev.cc), "compiler_options": list(dev.compiler_options)}


def check_driver_calls() -> None:
    """Kernel Tuner 1.5's nvcuda backend hands cuda_error_check what some driver calls return whole (`err =
    driver.cuLaunchKernel(...)`, the memory copies), a 1-tuple in cuda-python, and cuda_error_check checks only a
    bare CUresult: a launch the driver refused (too many registers for the block) went unseen, the kernel never
    ran, and its config read as a wrong answer (verified) or an impossibly fast one (not). The backend module's
    check is made to look inside the tuple; a refused launch is then Kernel Tuner's own skippable launch
    failure (a RuntimeFailedConfig: status `launch`)."""
    from kernel_tuner.backends import nvcuda

    nvcuda.cuda_error_check = tuple_aware(nvcuda.cuda_error_check)


def tuple_aware(check: Callable[[Any], None]) -> Callable[[Any], None]:
    """`check`, given the first item of a tuple in place of the tuple (idempotent)."""
    if getattr(check, "tuple_aware", False):
        return check

    def checked(error: Any) -> None:
        check(error[0] if isinstance(error, tuple) and error else error)

    checked.tuple_aware = True  # type: ignore[attr-defined]
    return checked


def offer(dev: Any, compiled: tuple[Compiled, ...]) -> None:
    """Cubins (or compile errors) the pool made for the configs of the next request."""
    if hasattr(dev, "ready"):
        dev.ready.update((c.key, c) for c in compiled)


_CLASSES: dict[type, type] = {}


def _cubin_class(base: type) -> type:
    """CubinCudaFunctions over Kernel Tuner's CudaFunctions (defined on first use: Kernel Tuner's nvcuda module
    imports cuda-python, which a process that never measures need not have)."""
    if base in _CLASSES:
        return _CLASSES[base]

    class CubinCudaFunctions(base):
        ready: dict[str, Compiled]
        loaded: int  # kernels loaded from the pool's cubins
        pool_ms: float  # the pool's compile time of the last one loaded
        launch_refused: str | None  # why the driver refused this config's launch, if it did for the block size

        def compile(self, kernel_instance: Any) -> Any:
            # kept until the request is over: Kernel Tuner's warm-up compiles the first config twice
            ready = self.ready.get(source_key(kernel_instance.name, kernel_instance.kernel_string))
            self.pool_ms = 0.0
            if ready is None:
                return super().compile(kernel_instance)
            return self._load(ready)

        def run_kernel(self, func: Any, gpu_args: Any, threads: Any, grid: Any, stream: Any = None) -> None:
            try:
                super().run_kernel(func, gpu_args, threads, grid, stream)
            except RuntimeError as e:
                # a refusal leaves the context usable, so the kernel's limit can be asked (only after a failure:
                # a launch that runs pays nothing); Kernel Tuner turns OUT_OF_RESOURCES (too many registers)
                # into a bare RuntimeFailedConfig, so the reason is kept for the row (tuner/measure/evaluate.py)
                if not any(code in str(e) for code in REFUSALS):
                    raise
                allowed = self._max_threads(func)
                wanted = threads[0] * threads[1] * threads[2]
                if wanted <= allowed:
                    raise
                self.launch_refused = (
                    f"{e}: {wanted} threads a block, the kernel allows at most {allowed} "
                    "(its registers a thread and its __launch_bounds__)"
                )
                if "CUDA_ERROR_INVALID_VALUE" in str(e):
                    # a block beyond __launch_bounds__: not among the failures Kernel Tuner skips
                    raise LaunchRefused(self.launch_refused) from e
                raise

        @staticmethod
        def _max_threads(func: Any) -> int:
            from cuda.bindings import driver
            from kernel_tuner.utils.nvcuda import cuda_error_check

            err, allowed = driver.cuFuncGetAttribute(
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, func
            )
            cuda_error_check(err)
            return int(allowed)

        def _load(self, ready: Compiled) -> Any:
            from cuda.bindings import driver
            from kernel_tuner.utils.nvcuda import cuda_error_check

            self.pool_ms = ready.seconds * 1e3
            if ready.error or ready.binary is None:
                # the compiler's verdict, raised where Kernel Tuner's compile raises it: its compile_kernel tells
                # a config that needs too much shared memory (skipped) from any other error, as it does for its own
                print(ready.error)
                raise RuntimeError(ready.error)
            err, self.current_module = driver.cuModuleLoadData(ready.binary)
            cuda_error_check(err)
            err, self.func = driver.cuModuleGetFunction(self.current_module, ready.lowered_name.encode())
            cuda_error_check(err)
            err, self.num_regs = driver.cuFuncGetAttribute(
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, self.func
            )
            cuda_error_check(err)
            self.loaded += 1
            return self.func

    _CLASSES[base] = CubinCudaFunctions
    return CubinCudaFunctions
