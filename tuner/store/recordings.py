"""Recordings: the Kernel Tuner cache beside each (GPU, workload, size, dtype) of the store, which Kernel
Tuner's simulation mode replays."""

from __future__ import annotations

import json
from pathlib import Path

from tuner.errors import TunerError
from tuner.store.gpu_choice import choose_gpu
from tuner.store.parts import recorded_gpu
from tuner.store.paths import cache_path, gpu_slug, read_roots


def find_recording(root: Path, workload: str, size_name: str, dtype: str, gpu: str | None = None) -> Path:
    """The Kernel Tuner cache recorded for this workload, size and dtype (on `gpu`, else chosen as
    choose_recording does)."""
    return choose_recording(root, workload, size_name, dtype, gpu)[0]


def choose_recording(
    root: Path,
    workload: str,
    size_name: str,
    dtype: str,
    gpu: str | None = None,
    *,
    size: dict | None = None,
    here: str | None = None,
) -> tuple[Path, str | None]:
    """The recording for this workload, size and dtype on `gpu`; with none named and several GPUs recorded,
    chosen as `tuner best` chooses (tuner.store.gpu_choice: `here`, this machine's GPU, where it has one, else
    the GPU with the most successful measurements at `size`, else overall). Returns it and, where it was
    chosen among several, a line saying which and why."""
    name = cache_path(root, "x", workload, size_name, dtype).name
    by_gpu: dict[str, Path] = {}  # the project's own recording of a GPU before one a package ships
    for r in read_roots(root):
        for c in sorted(Path(r).glob(f"*/{workload}/{name}")):
            by_gpu.setdefault(c.parent.parent.name, c)
    if gpu:
        by_gpu = {k: c for k, c in by_gpu.items() if k == gpu_slug(gpu)}
    if not by_gpu:
        raise TunerError(
            f"nothing recorded to replay for {workload} {size_name} {dtype}"
            f"{' on ' + gpu if gpu else ''}: run `tuner tune` on a GPU first"
        )
    if len(by_gpu) == 1:
        return next(iter(by_gpu.values())), None
    names = {recorded_gpu(c) or folder: c for folder, c in by_gpu.items()}
    chosen, is_here = _choose(workload, dtype, names, root, here, size)
    others = ", ".join(sorted(n for n in names if n != chosen))
    if is_here:
        why = "this machine's GPU"
    elif here:
        why = f"nothing recorded on {here}; the GPU with the most measurements"
    else:
        why = "no GPU found here; the GPU with the most measurements"
    return names[chosen], f"replaying the recording from {chosen} ({why}; also recorded: {others}; choose with --gpu)"


def _choose(
    workload: str, dtype: str, names: dict[str, Path], root: Path, here: str | None, size: dict | None
) -> tuple[str, bool]:
    """choose_gpu over the store's successful rows of the GPUs with a recording; where the store has none of
    them, the recording holding the most configs."""
    from tuner.store.rows import load_evaluations

    df = load_evaluations(workload, root)
    if not df.empty:
        df = df[(df["dtype"] == dtype) & (df["status"] == "ok") & df["gpu"].isin(list(names))]
    if not df.empty:
        return choose_gpu(df, here, size)
    if here in names:
        return str(here), True
    held = {n: len(json.loads(_closed(c.read_text()))["cache"]) for n, c in names.items()}
    return max(sorted(held), key=held.__getitem__), False


def _closed(text: str) -> str:
    """A Kernel Tuner cache's text, closed where a campaign left it open for appending."""
    text = text.strip()
    if text[-3:] not in ("}\n}", "}}}"):
        text = text.rstrip(",") + "}\n}"
    return text
