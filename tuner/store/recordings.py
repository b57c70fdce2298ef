"""Recordings: the Kernel Tuner cache beside each (GPU, workload, size, dtype) of the store, which Kernel
Tuner's simulation mode replays."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import TunerError
from tuner.store.gpu_choice import choose_gpu
from tuner.store.parts import recorded_gpu
from tuner.store.paths import cache_path, gpu_slug, read_roots

if TYPE_CHECKING:
    from collections.abc import Callable

    from kernel_tuner.searchspace import Searchspace

    from tuner.space import Space


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


@dataclass(frozen=True)
class Recording:
    """One recording and how completely it covers the space: `held` of the space's `space_size` configs
    (failed ones included: a replay knows they fail), None where the file cannot be read (`error` says why)."""

    gpu: str  # the GPU's folder in the store, which --gpu takes
    size: str  # the size as the file names it
    dtype: str
    held: int | None
    space_size: int
    path: Path
    error: str | None = None

    @property
    def complete(self) -> bool:
        return self.held is not None and self.held >= self.space_size

    @property
    def coverage(self) -> str:
        """Held of the space's configs ("576/576", "27/438648"), or "unreadable"."""
        return "unreadable" if self.held is None else f"{self.held}/{self.space_size}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "size": self.size,
            "dtype": self.dtype,
            "recorded_configs": self.held,
            "space_configs": self.space_size,
            "complete": self.complete,
            "path": str(self.path),
            **({"error": self.error} if self.error else {}),
        }


def recordings(
    root: Path, workload: str, space: Space, searchspace_of: Callable[[str | None], Searchspace]
) -> list[Recording]:
    """Every recording of `workload` in the store (and the package's), by GPU, size and dtype, with the
    number of the space's configs each holds: what `tuner tune --simulate` can replay. A config counts
    where the space still has it for the recording's dtype (`searchspace_of(dtype)`: tuner.measure.kt's
    searchspaces); a parameter added since with a default takes it, as a replay does."""
    found: dict[tuple[str, str], Path] = {}  # the project's own before one a package ships (choose_recording)
    for r in read_roots(root):
        for c in sorted(Path(r).glob(f"*/{workload}/*.cache.json")):
            found.setdefault((c.parent.parent.name, c.name), c)
    defaults = space.defaults or {}
    out = []
    for (gpu, file), path in sorted(found.items()):
        size, _, dtype = file.removesuffix(".cache.json").rpartition("_")
        searchspace = searchspace_of(dtype)
        names = list(searchspace.tune_params)
        try:
            cache = json.loads(_closed(path.read_text()))["cache"]
            held = sum(
                searchspace.is_param_config_valid(tuple(e.get(k, defaults.get(k)) for k in names))
                for e in cache.values()
                if isinstance(e, dict)
            )
            error = None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            held, error = None, f"{path}: cannot be read ({type(e).__name__}: {e})"
        out.append(Recording(gpu, size, dtype, held, searchspace.size, path, error))
    return out
