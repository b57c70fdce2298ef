"""Recordings: the Kernel Tuner cache beside each (GPU, workload, size, dtype) of the store, which Kernel
Tuner's simulation mode replays."""

from __future__ import annotations

from pathlib import Path

from tuner.errors import TunerError
from tuner.store.paths import cache_path, gpu_slug, read_roots


def find_recording(root: Path, workload: str, size_name: str, dtype: str, gpu: str | None = None) -> Path:
    """The Kernel Tuner cache recorded for this workload, size and dtype (on `gpu`, or the only GPU)."""
    name = cache_path(root, "x", workload, size_name, dtype).name
    by_gpu: dict[str, Path] = {}  # the project's own recording of a GPU before one a package ships
    for r in read_roots(root):
        for c in sorted(Path(r).glob(f"*/{workload}/{name}")):
            by_gpu.setdefault(c.parent.parent.name, c)
    candidates = list(by_gpu.values())
    if gpu:
        candidates = [c for c in candidates if c.parent.parent.name == gpu_slug(gpu)]
    if not candidates:
        raise TunerError(
            f"nothing recorded to replay for {workload} {size_name} {dtype}"
            f"{' on ' + gpu if gpu else ''}: run `tuner tune` on a GPU first"
        )
    if len(candidates) > 1:
        raise TunerError(
            "recordings from several GPUs: choose one with --gpu ("
            + ", ".join(c.parent.parent.name for c in candidates)
            + ")"
        )
    return candidates[0]
