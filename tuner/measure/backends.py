"""The backends that run a space's code, by the names the command line takes: a leaf module (no Kernel Tuner),
so that `tuner`'s parser lists them without importing the measure stage (tuner.measure.kt re-exports them)."""

from __future__ import annotations

BACKENDS = {"nvcuda": "NVCUDA", "cupy": "CUPY", "pycuda": "CUDA"}  # ours -> Kernel Tuner's `lang`
HOST_BACKEND = "host-nvcc"  # a 'host' space: nvcc builds a shared library, Kernel Tuner's C backend calls it
CPU_BACKEND = "host-g++"  # a 'host' space with `compiler: g++`: CPU code, built and called the same way
