"""Recordings: what Kernel Tuner's simulation mode replays for each (GPU, workload, size, dtype) the store
holds. A recording is the store's own rows as a Kernel Tuner cache (tuner.store.kt_files.store_cache_doc, what
`tuner export --format kt-cache` writes), derived when first needed into this user's cache folder and kept
there under a key of the rows and the space it was made from, so the store keeps one copy of each measurement.
A Kernel Tuner cache file in the store that no rows record (one copied in by hand) is replayed as it is."""

from __future__ import annotations

import functools
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from tuner.errors import TunerError
from tuner.kept import kept
from tuner.locations import user_cache
from tuner.store.gpu_choice import choose_gpu, named_gpu
from tuner.store.kt_files import closed_cache_text
from tuner.store.parts import read_parts, recorded_gpu
from tuner.store.paths import gpu_slug, read_roots, safe_name

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd
    from kernel_tuner.searchspace import Searchspace

    from tuner.space import Space

DERIVED_FORMAT = 2  # part of every derived cache's key: raise it where store_cache_doc's output changes


@dataclass(frozen=True)
class Source:
    """One recorded (GPU, size, dtype) of a workload: from the store's rows (`gpu_name` the rows' GPU), or a
    Kernel Tuner cache `file` in the store that no rows record."""

    gpu: str  # the GPU's folder in the store, which --gpu takes
    size: str  # the size's name (a file's: as its name gives it, ',' written '_')
    dtype: str
    gpu_name: str | None = None
    file: Path | None = None


def sources(root: Path, workload: str) -> list[Source]:
    """Every recorded (GPU, size, dtype) of `workload` in the store and the recordings a package ships."""
    found = {}
    for gpu, size, dtype in sorted(_recorded_groups(root, workload)):
        found[(gpu_slug(gpu), safe_name(size), dtype)] = Source(gpu_slug(gpu), size, dtype, gpu_name=gpu)
    for r in read_roots(root):  # the project's own file before one a package ships
        for c in sorted(Path(r).glob(f"*/{workload}/*.cache.json")):
            size, _, dtype = c.name.removesuffix(".cache.json").rpartition("_")
            found.setdefault((c.parent.parent.name, size, dtype), Source(c.parent.parent.name, size, dtype, file=c))
    return [found[k] for k in sorted(found)]


def _recorded_groups(root: Path, workload: str) -> set[tuple[str, str, str]]:
    """(GPU, size, dtype) of the rows of every part of `workload`. Only those three columns are read (every
    listing asks, for every workload); a part that cannot be read is passed over here, and read_parts says why
    where the rows themselves are read."""
    found: set[tuple[str, str, str]] = set()
    for r in read_roots(root):
        for part in Path(r).glob(f"*/{workload}/evaluations/*.parquet"):
            try:
                table = pq.read_table(io.BytesIO(part.read_bytes()), columns=["gpu", "size", "dtype"])
            except Exception:  # noqa: BLE001  (damaged, unreadable, or without those columns)
                continue
            columns = (table.column(c).to_pylist() for c in ("gpu", "size", "dtype"))
            found.update(g for g in zip(*columns) if all(isinstance(v, str) for v in g))
    return found


def replay_file(
    root: Path, workload: str, source: Source, read_rows: Callable[[str], pd.DataFrame] | None = None
) -> Path:
    """The Kernel Tuner cache to replay for `source`: its file, or the one derived from its rows (written now
    where this version of the rows and space has none yet). `read_rows(pattern)`: how the rows of the parts
    matching `pattern` are read (read_parts; a caller deriving many shares one read of a GPU's folder)."""
    if source.file is not None:
        return source.file
    from tuner.store.kt_files import store_cache_doc, write_cache
    from tuner.workloads import get_workload

    pattern = f"{source.gpu}/{workload}/evaluations/*.parquet"
    key = hashlib.blake2b(f"{DERIVED_FORMAT}\n{source.gpu_name}\n{source.size}\n{source.dtype}\n".encode())
    space_file = get_workload(workload).space.path
    key.update(space_file.read_bytes() if space_file.is_file() else str(space_file).encode())
    for part in sorted(p for r in read_roots(root) for p in Path(r).glob(pattern)):
        key.update(part.name.encode() + _digest(part))
    name = f"{safe_name(source.size)}_{source.dtype}.{key.hexdigest()[:16]}.cache.json"
    path = user_cache("recordings") / source.gpu / workload / name
    if path.is_file():
        return path
    rows = read_rows(pattern) if read_rows else read_parts(pattern, root)
    doc = store_cache_doc(workload, source.size, source.dtype, str(source.gpu_name), rows=rows)
    try:  # written whole (write_atomically): a concurrent reader sees all of it or none
        path.parent.mkdir(parents=True, exist_ok=True)
        write_cache(path, doc)
    except OSError as e:
        raise TunerError(
            f"cannot write the recording of {workload} {source.size} {source.dtype} on {source.gpu_name} derived "
            f"from the store's rows to {path.parent} ({e.strerror or e}): set TUNER_CACHE to a writable folder"
        ) from None
    return path


def _digest(part: Path) -> bytes:
    """A part's content hash, kept while its size and time stay (a listing hashes a GPU's parts once, not once
    for each of its recordings)."""
    try:
        st = part.stat()
        return _content_digest(str(part), st.st_size, st.st_mtime_ns)
    except OSError as e:  # read_parts leaves it out and says so; the key notes it was unreadable
        return f"unreadable: {type(e).__name__}".encode()


@functools.lru_cache(maxsize=8192)
def _content_digest(path: str, size: int, mtime_ns: int) -> bytes:
    return hashlib.blake2b(Path(path).read_bytes(), digest_size=16).digest()


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
    """The recording for this workload, size and dtype on `gpu` (as replay_gpu names it); with none named and
    several GPUs recorded, chosen as `tuner best` chooses (tuner.store.gpu_choice: `here`, this machine's GPU,
    where it has one, else the GPU with the most successful measurements at `size`, else overall). Returns it
    and, where it was chosen among several or `gpu` named it by some of its words, a line saying so."""
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
    chosen, is_here = _choose(workload, dtype, names, root, here, size)
    others = ", ".join(sorted(n for n in names if n != chosen))
    if is_here:
        why = "this machine's GPU"
    elif here:
        why = f"nothing recorded on {here}; the GPU with the most measurements"
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
    if not recorded:
        return (
            f"nothing recorded to replay for {workload}: a replay needs a campaign measured on a GPU first "
            f"(`tuner tune {workload}` on a machine with one)"
        )
    on = [s for s in recorded if not gpu or s.gpu == gpu_slug(gpu)]
    if any((safe_name(s.size), s.dtype) == (safe_name(size_name), dtype) for s in on):
        return None
    names = {s.gpu: s.gpu_name or s.gpu for s in recorded}  # the GPUs' folders, which --gpu takes, and names
    if not on:
        return f"nothing recorded to replay for {workload} on {gpu}; it is recorded on " + ", ".join(
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
        f"nothing recorded to replay for {workload} {size_name} {dtype}{' on ' + gpu if gpu else ''}; recorded "
        f"{shown} (choose with --size and --dtype; `tuner list {workload}` shows every recording)"
    )


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


@dataclass(frozen=True)
class Recording:
    """One recording and how completely it covers the space: `held` of the space's `space_size` configs
    (failed ones included: a replay knows they fail), None where the file cannot be read (`error` says why)."""

    gpu: str  # the GPU's folder in the store, which --gpu takes
    size: str  # the size's name (Source.size)
    dtype: str
    held: int | None
    space_size: int
    path: Path | None  # the file replayed; None where it could not be made
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
            "path": str(self.path) if self.path else None,
            **({"error": self.error} if self.error else {}),
        }


def recordings(
    root: Path, workload: str, space: Space, searchspace_of: Callable[[str | None], Searchspace]
) -> list[Recording]:
    """Every recording of `workload` in the store (and the package's), by GPU, size and dtype, with the
    number of the space's configs each holds: what `tuner tune --simulate` can replay. A config counts
    where the space still has it for the recording's dtype (`searchspace_of(dtype)`: tuner.measure.kt's
    searchspaces); a parameter added since with a default takes it, as a replay does."""
    defaults = space.defaults or {}
    read_rows = functools.cache(lambda pattern: read_parts(pattern, root))  # one read of each GPU's folder
    out = []
    for source in sources(root, workload):
        dtype = source.dtype
        key = _searchspace_key(space, dtype)
        size = _space_size(key, searchspace_of, dtype)
        path = source.file
        try:
            path = replay_file(root, workload, source, read_rows)
            text = path.read_text()
            digest = hashlib.sha256(text.encode()).hexdigest()
            held = kept(  # one file a recording, however often its bytes change
                "recordings-held",
                [*key, defaults, str(path)],
                functools.partial(_held, text, searchspace_of, dtype, defaults),
                _is_count,
                made_from=digest,
            )
            error = None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, TunerError) as e:
            held, error = None, f"{path or source.gpu}: cannot be read ({type(e).__name__}: {e})"
        out.append(Recording(source.gpu, source.size, source.dtype, held, size, path, error))
    return out


# Kernel Tuner's searchspace of a large space takes seconds to build (Floyd-Warshall's 438,648 configs), and
# `tuner list` asked it of every workload and recording each time: what it answers is kept (tuner.kept) under the
# space's parameters and its restrictions for the dtype, Kernel Tuner's release, and a recording's bytes.
def space_size(space: Space, searchspace_of: Callable[[str | None], Searchspace], dtype: str | None) -> int:
    """Kernel Tuner's count of the space's valid configs for `dtype` (searchspace_of(dtype).size), kept."""
    return _space_size(_searchspace_key(space, dtype), searchspace_of, dtype)


def _space_size(key: list, searchspace_of: Callable[[str | None], Searchspace], dtype: str | None) -> int:
    return kept("space-sizes", key, functools.partial(_size, searchspace_of, dtype), _is_count)


def _searchspace_key(space: Space, dtype: str | None) -> list:
    from tuner.measure.provenance import package_version

    return [space.space_hash_for(dtype), space.restrictions_for(dtype), package_version("kernel_tuner")]


def _size(searchspace_of: Callable[[str | None], Searchspace], dtype: str | None) -> int:
    return int(searchspace_of(dtype).size)


def _held(text: str, searchspace_of: Callable[[str | None], Searchspace], dtype: str, defaults: dict) -> int:
    """How many of a Kernel Tuner cache's configs (its text) the space still has for `dtype`; a parameter added
    since with a default takes it, as a replay does."""
    searchspace = searchspace_of(dtype)
    names = list(searchspace.tune_params)
    cache = json.loads(closed_cache_text(text))["cache"]
    return sum(
        searchspace.is_param_config_valid(tuple(e.get(k, defaults.get(k)) for k in names))
        for e in cache.values()
        if isinstance(e, dict)
    )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
