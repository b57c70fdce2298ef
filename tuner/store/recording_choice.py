"""Which recording a replay takes (tuner.store.recordings finds and derives them): the one of the GPU named
(--gpu, by its name, its folder's, or whole words of one), else the one `tuner best` would choose
(tuner.store.gpu_choice), and, where there is none, one line saying what is recorded instead."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tuner.errors import TunerError
from tuner.store.gpu_choice import choose_gpu, named_gpu
from tuner.store.kt_files import closed_cache_text
from tuner.store.parts import recorded_gpu
from tuner.store.paths import gpu_slug, safe_name
from tuner.store.recordings import Source, replay_file, scan, sources, unread_line


def find_recording(
    root: Path, workload: str, size_name: str, dtype: str, gpu: str | None = None, size: dict | None = None
) -> Path:
    """The Kernel Tuner cache recorded for this workload, size and dtype (on `gpu`, else chosen as
    choose_recording does, by the measurements at `size` where given)."""
    return choose_recording(root, workload, size_name, dtype, gpu, size=size)[0]


def choose_recording(
    root: Path,
    workload: str,
    size_name: str,
    dtype: str,
    gpu: str | None = None,
    *,
    size: dict | None = None,
    here: Callable[[], str | None] | None = None,
) -> tuple[Path, str | None]:
    """The recording for this workload, size and dtype on `gpu` (as replay_gpu names it); with none named and
    several GPUs recorded, chosen as `tuner best` chooses (tuner.store.gpu_choice: `here()`, this machine's GPU,
    where it has one, else the GPU with the most successful measurements at `size`, else overall). Returns it
    and, where it was chosen among several or `gpu` named it by some of its words, a line saying so. `here` is
    called only where there is a choice to make (it asks nvidia-smi: a second of a replay's start)."""
    recorded = sources(root, workload)  # read once (GEMM's: 0.6 s), for the name, the choice and the error
    gpu, taken = replay_gpu(root, workload, gpu, recorded)
    wanted = (safe_name(size_name), dtype)
    by_gpu = {s.gpu: s for s in recorded if (safe_name(s.size), s.dtype) == wanted}
    if gpu:
        by_gpu = {k: c for k, c in by_gpu.items() if k == gpu_slug(gpu)}
    if not by_gpu:
        raise TunerError(str(unrecorded(root, workload, size_name, dtype, gpu, recorded)))
    if len(by_gpu) == 1:
        return replay_file(root, workload, next(iter(by_gpu.values()))), taken
    names = {s.gpu_name or (s.file and recorded_gpu(s.file)) or folder: s for folder, s in by_gpu.items()}
    machine = here() if here is not None else None
    chosen, is_here = _choose(workload, dtype, names, root, machine, size)
    others = ", ".join(sorted(n for n in names if n != chosen))
    if is_here:
        why = "this machine's GPU"
    elif machine:
        why = f"nothing recorded on {machine}; the GPU with the most measurements"
    else:
        why = "no GPU found here; the GPU with the most measurements"
    note = f"replaying the recording from {chosen} ({why}; also recorded: {others}; choose with --gpu)"
    return replay_file(root, workload, names[chosen]), note


def replay_gpu(
    root: Path, workload: str, gpu: str | None, recorded: list[Source] | None = None
) -> tuple[str | None, str | None]:
    """--gpu of a replay as the recordings of `workload` name it (tuner.store.gpu_choice.stored_gpu_name: its name,
    its folder's, or whole words of one, `h200`), and a note where only some of its words named it; as given
    where it names none (unrecorded then lists those there are). `recorded`: sources(root, workload), if read."""
    if not gpu:
        return gpu, None
    recorded = sources(root, workload) if recorded is None else recorded
    name, note = named_gpu({s.gpu_name or s.gpu for s in recorded}, gpu, "recorded")
    return name or gpu, note


def unrecorded(
    root: Path,
    workload: str,
    size_name: str,
    dtype: str,
    gpu: str | None = None,
    recorded: list[Source] | None = None,
) -> str | None:
    """Where a replay finds no recording of `workload` at this size and dtype (on `gpu`, as --gpu names it, and
    as choose_recording looks): one line saying what is recorded instead (the GPUs, or the sizes and dtypes on
    them), or that nothing is and a GPU must record it first. None where there is one. `recorded`:
    sources(root, workload), if read."""
    recorded = sources(root, workload) if recorded is None else recorded
    on = [s for s in recorded if not gpu or s.gpu == gpu_slug(gpu)]
    if any((safe_name(s.size), s.dtype) == (safe_name(size_name), dtype) for s in on):
        return None
    # the parts whose rows could not be read may hold it: said, rather than that it was never recorded
    unread = {p: why for p, why in scan(root, workload).unknown.items() if not gpu or _folder(p) == gpu_slug(gpu)}
    damaged = f": {unread_line(unread)}" if unread else ""
    if not recorded:
        return f"nothing recorded to replay for {workload}{damaged}" + (
            ""
            if unread
            else f": a replay needs a campaign measured on a GPU first (`tuner tune {workload}` on a machine with one)"
        )
    names = {s.gpu: s.gpu_name or s.gpu for s in recorded}  # the GPUs' folders, which --gpu takes, and names
    if not on:
        return f"nothing recorded to replay for {workload} on {gpu}{damaged}; it is recorded on " + ", ".join(
            f"{name} (--gpu {folder})" for folder, name in sorted(names.items())
        )
    by_gpu: dict[str, list[str]] = {}
    for s in on:
        by_gpu.setdefault(names[s.gpu], []).append(f"{s.size} {s.dtype}")
    shown = "; ".join(
        f"on {name}: {', '.join(held[:8])}" + (f" and {len(held) - 8} more" if len(held) > 8 else "")
        for name, held in sorted(by_gpu.items())
    )
    return (
        f"nothing recorded to replay for {workload} {size_name} {dtype}{' on ' + gpu if gpu else ''}{damaged}; "
        f"recorded {shown} (choose with --size and --dtype; `tuner list {workload}` shows every recording)"
    )


def _folder(part: str) -> str:
    """The GPU folder of a part (<store>/<gpu>/<workload>/evaluations/<part>)."""
    return Path(part).parents[2].name


def _choose(
    workload: str, dtype: str, names: dict[str, Source], root: Path, here: str | None, size: dict | None
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
    held = {
        n: len(json.loads(closed_cache_text(replay_file(root, workload, s).read_text()))["cache"])
        for n, s in names.items()
    }
    return max(sorted(held), key=held.__getitem__), False
