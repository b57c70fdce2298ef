"""What this machine lacks to measure on a GPU (a backend's Python package, the CUDA driver, a GPU), in the words
`tuner tune`, `tuner baseline` and the dry run all say it. Asks the driver through ctypes: no CUDA context is made
here (the measuring process makes its own)."""

from __future__ import annotations

import ctypes
import importlib.util

# what each backend imports, and the extra that installs it
BACKEND_PACKAGES = {
    "nvcuda": ("cuda", "cuda-python", "cuda"),
    "cupy": ("cupy", "CuPy", "cupy"),
    "pycuda": ("pycuda", "PyCUDA", "pycuda"),
}
CUDA_ERROR_NO_DEVICE = 100


def gpu_missing(backend: str) -> str | None:
    """What this machine lacks to measure on a GPU with `backend` (kt.BACKENDS, or host-nvcc: no Python
    package), in words; None where nothing is missing. Asks the CUDA driver through ctypes: no CUDA
    context is made here (the measuring process makes its own)."""
    if backend in BACKEND_PACKAGES:
        module, package, extra = BACKEND_PACKAGES[backend]
        if importlib.util.find_spec(module) is None:
            return f"the {backend} backend needs {package}, which is not installed (pip install 'gpu-tuner[{extra}]')"
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver on this machine (libcuda.so.1 not found)"
    status = driver.cuInit(0)
    count = ctypes.c_int(0)
    if status == CUDA_ERROR_NO_DEVICE or (
        status == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0 and not count.value
    ):
        return "no CUDA GPU on this machine"
    if status != 0:
        return f"the CUDA driver does not start (cuInit error {status})"
    return None
