"""The committed store's recordings (results/store, whatever store a test points TUNER_RESULTS at), as the tests
replay them: the Kernel Tuner cache tuner.store.recordings derives from the rows of one (GPU, workload, size,
dtype)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from tuner.locations import BUILTIN_RESULTS
from tuner.store import gpu_slug, safe_name
from tuner.store.recording_choice import find_recording
from tuner.store.recordings import sources


@cache
def _recorded(workload: str) -> frozenset[tuple[str, str, str]]:
    return frozenset((s.gpu, safe_name(s.size), s.dtype) for s in sources(BUILTIN_RESULTS, workload))


def is_recorded(gpu: str, workload: str, size: str, dtype: str) -> bool:
    """Whether the committed store holds a recording of this (GPU folder or name, size, dtype); nothing is
    derived."""
    return (gpu_slug(gpu), safe_name(size), dtype) in _recorded(workload)


def recording(gpu: str, workload: str, size: str, dtype: str) -> Path:
    """The committed store's recording of this (GPU, size, dtype) as a Kernel Tuner cache (derived once)."""
    return find_recording(BUILTIN_RESULTS, workload, size, dtype, gpu)
