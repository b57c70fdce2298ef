"""How kernel times are taken. A timed launch is bracketed by two CUDA events; when the GPU is idle, the start
event is stamped as soon as it is recorded, so the host's work between it and the kernel's start (Kernel
Tuner's nvcuda backend builds the launch's argument types in Python, cupy its own) falls inside the interval:
on the H100 a median 20.8 us for 184 SpMV configs, 4-9 us for cuSPARSE through cupy (README, SpMV). So the GPU
first runs a short spin on the same stream, and the start event is stamped when the spin ends, by when the
launch is queued behind it: the interval is the kernel's.

PROTOCOL names this in the store's provenance (column `timing`); a time taken otherwise is measured again."""

from __future__ import annotations

from typing import Any

from tuner.vocabulary import PROTOCOL  # the name of this protocol, which store rows record

SPIN_NS = 100_000  # well above the host's launch overhead (tens of us), negligible beside a benchmark

_SOURCE = r"""
extern "C" __global__ void tuner_spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""
_kernel = None


def spin(stream: Any = None) -> None:
    """Queue a SPIN_NS busy wait of one thread on `stream` (a cupy stream, or a raw stream handle; default:
    cupy's current stream)."""
    global _kernel
    import cupy

    if _kernel is None:
        _kernel = cupy.RawKernel(_SOURCE, "tuner_spin")
    if stream is not None and not isinstance(stream, cupy.cuda.Stream):
        stream = cupy.cuda.ExternalStream(int(stream))
    with stream if stream is not None else cupy.cuda.get_current_stream():
        _kernel((1,), (1,), (cupy.uint64(SPIN_NS),))


def delay_start_events(backend_device: Any) -> str:
    """Make a Kernel Tuner backend's start_event() queue the spin first, on the backend's stream. Returns the
    protocol in effect: PROTOCOL, or "plain" where this backend's stream cannot take the spin (no cupy)."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no cupy or no GPU: times keep the launch overhead, and say so
        return "plain"
    if type(backend_device).__name__ == "PyCudaFunctions":  # its own context: cupy cannot launch on its stream
        return "plain"
    stream = backend_device.stream  # a cupy Stream (cupy backend) or a CUstream handle (nvcuda: primary context)
    record = backend_device.start_event

    def start_event() -> None:
        spin(stream)
        record()

    backend_device.start_event = start_event
    return PROTOCOL
