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
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from tuner.errors import TunerError
from tuner.kept import kept
from tuner.locations import user_cache
from tuner.store.gpu_choice import choose_gpu, named_gpu
from tuner.store.kt_files import closed_cache_text
from tuner.store.parts import _unreadable, read_store, recorded_gpu
from tuner.store.paths import gpu_slug, read_roots, results_root, safe_name
from tuner.store.schema import EVALUATION, Degraded, record

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from kernel_tuner.searchspace import Searchspace

    from tuner.space import Space
    from tuner.store.schema import StoreRead

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
    """Every recorded (GPU, size, dtype) of `workload` in the store and the recordings a package ships. A part
    whose rows cannot be told (unreadable, or without a required column) is said: to the
    tuner.store.schema.collect() around the call, else in a warning (once a process)."""
    scan = _scan(root, workload)
    _left_out(scan.left_out)
    found = {}
    for gpu, size, dtype in sorted(scan.groups):
        found[(gpu_slug(gpu), safe_name(size), dtype)] = Source(gpu_slug(gpu), size, dtype, gpu_name=gpu)
    for r in read_roots(root):  # the project's own file before one a package ships
        for c in sorted(Path(r).glob(f"*/{workload}/*.cache.json")):
            size, _, dtype = c.name.removesuffix(".cache.json").rpartition("_")
            found.setdefault((c.parent.parent.name, size, dtype), Source(c.parent.parent.name, size, dtype, file=c))
    return [found[k] for k in sorted(found)]


@dataclass
class _Scan:
    """What the parts of a workload record: (GPU, size, dtype) of their rows; the parts left out as read_parts
    leaves them out (unreadable, a required column missing), and of those the ones whose (GPU, size, dtype)
    could not be read at all (`unknown`: they may hold any recording of their GPU's folder)."""

    groups: set[tuple[str, str, str]] = field(default_factory=set)
    left_out: Degraded = field(default_factory=Degraded)
    unknown: dict[str, str] = field(default_factory=dict)  # path -> why


_KEYS = ("gpu", "size", "dtype")


def _scan(root: Path, workload: str) -> _Scan:
    """(GPU, size, dtype) of the rows of every part of `workload`. Only those three columns are read (every
    listing asks, for every workload), and the footer's schema: a part read_parts would leave out whole for
    being unreadable or lacking a required column is left out here too, and said (_left_out)."""
    scan = _Scan()
    for r in read_roots(root):
        for part in Path(r).glob(f"*/{workload}/evaluations/*.parquet"):
            try:  # one read of the whole file: a writer may replace it meanwhile
                parquet = pq.ParquetFile(io.BytesIO(part.read_bytes()))
                names = set(parquet.schema_arrow.names)
                table = parquet.read(columns=[c for c in _KEYS if c in names])
            except Exception as e:  # noqa: BLE001  (pyarrow's errors: truncated, not Parquet; or no permission)
                reason = _unreadable(e)
                scan.left_out.add_part(part, reason)
                scan.unknown[str(part)] = reason
                continue
            if not parquet.metadata.num_rows:  # nothing in it (read_parts checks no columns of an empty part)
                continue
            missing = [c for c in EVALUATION if c not in names]
            mistyped = [c for c in _KEYS if c in names and not _is_text(table.schema.field(c).type)]
            if missing:
                scan.left_out.add_part(part, "missing column(s) " + ", ".join(missing))
            elif mistyped:
                said = ", ".join(f"{c} ({table.schema.field(c).type})" for c in mistyped)
                scan.left_out.add_part(part, f"wrong type in column(s) {said}")
            if any(c in missing or c in mistyped for c in _KEYS):  # what it holds cannot be told
                scan.unknown[str(part)] = scan.left_out.parts[str(part)]
                continue
            # left out or not, what it holds is listed: a recording that only it holds cannot be derived then,
            # and says so (replay_file)
            columns = (table.column(c).to_pylist() for c in _KEYS)
            scan.groups.update(g for g in zip(*columns) if all(isinstance(v, str) for v in g))
    return scan


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)


_SAID: set[tuple[str, str]] = set()  # what _left_out warned of in this process


def _left_out(degraded: Degraded) -> None:
    """What a read of the store left out: to the tuner.store.schema.collect() around it (an answer says so), else
    one warning each part (and each part's rows left out for one reason), once a process: the scan of every
    listing and the reads of every recording derived must not say it again and again."""
    if not degraded or record(degraded):
        return
    for path, reason in degraded.parts.items():
        if (path, "") not in _SAID:
            _SAID.add((path, ""))
            warnings.warn(f"{path}: {reason}; left out: move it aside or copy it again", stacklevel=3)
    for path, by_reason in degraded.rows.items():
        said = ", ".join(f"{n} with {reason}" for reason, n in by_reason.items())
        if (path, said) not in _SAID:
            _SAID.add((path, said))
            warnings.warn(f"{path}: rows left out: {said}", stacklevel=3)


def _unread_line(unread: dict[str, str]) -> str:
    """Parts that may hold what was asked for but could not be read (path -> why), as one clause."""
    named = ", ".join(f"{path} ({why})" for path, why in sorted(unread.items()))
    one = len(unread) == 1
    return (
        f"the store could not be read in full: {named} {'was' if one else 'were'} left out and may hold it "
        f"(move {'it' if one else 'them'} aside or copy {'it' if one else 'them'} again)"
    )


def derived_path(root: Path, workload: str, source: Source) -> Path:
    """Where the recording of `source` (from the store's rows) is kept in this user's cache: named by its size
    and dtype and a key of the rows' parts and the workload's space file, so rows added later make a new one."""
    from tuner.workloads import get_workload

    pattern = f"{source.gpu}/{workload}/evaluations/*.parquet"
    key = hashlib.blake2b(f"{DERIVED_FORMAT}\n{source.gpu_name}\n{source.size}\n{source.dtype}\n".encode())
    space_file = get_workload(workload).space.path
    key.update(space_file.read_bytes() if space_file.is_file() else str(space_file).encode())
    for part in sorted(p for r in read_roots(root) for p in Path(r).glob(pattern)):
        key.update(part.name.encode() + _digest(part))
    name = f"{safe_name(source.size)}_{source.dtype}.{key.hexdigest()[:16]}.cache.json"
    return user_cache("recordings") / source.gpu / workload / name


def replay_file(root: Path, workload: str, source: Source, read_rows: Callable[[str], StoreRead] | None = None) -> Path:
    """The Kernel Tuner cache to replay for `source`: its file, or the one derived from its rows (written now
    where this version of the rows and space has none yet, or has one that no longer reads whole: the cache
    folder is this user's, and a file of it may be cut short or overwritten). `read_rows(pattern)`: how the
    parts matching `pattern` are read (read_store; a caller deriving many shares one read of a GPU's folder)."""
    if source.file is not None:
        return source.file
    from tuner.store.kt_files import store_cache_doc, write_cache

    path = derived_path(root, workload, source)
    if _whole(path):
        return path
    pattern = f"{source.gpu}/{workload}/evaluations/*.parquet"
    found = read_rows(pattern) if read_rows else read_store(pattern, root)
    _left_out(found.degraded)
    try:
        doc = store_cache_doc(workload, source.size, source.dtype, str(source.gpu_name), rows=found.frame)
    except TunerError as e:
        if found.degraded.parts:  # the parts left out held its rows
            raise TunerError(f"{e}: {_unread_line(found.degraded.parts)}") from None
        raise
    try:  # written whole (write_atomically): a concurrent reader sees all of it or none
        path.parent.mkdir(parents=True, exist_ok=True)
        write_cache(path, doc)
    except OSError as e:
        raise TunerError(
            f"cannot write the recording of {workload} {source.size} {source.dtype} on {source.gpu_name} derived "
            f"from the store's rows to {path.parent} ({e.strerror or e}): set TUNER_CACHE to a writable folder"
        ) from None
    return path


def _whole(path: Path) -> bool:
    """Whether a recording derived into the cache is there whole: as write_cache leaves it, a JSON object closed
    after its last entry (`}\n}`). One missing, cut short, overwritten or unreadable is derived again. Only its
    ends are read: `tuner list` asks it of every recording (221 files, 38 MB in the test cache), and a cache
    file is written whole or not at all (write_atomically), so what damages one is a cut or an overwrite."""
    try:
        with path.open("rb") as f:
            head = f.read(1)
            size = f.seek(0, 2)
            f.seek(max(0, size - 3))
            tail = f.read()
    except OSError:  # none, or unreadable
        return False
    return head == b"{" and tail == b"}\n}"


_DERIVED = re.compile(r"^(?P<size>.+)_(?P<dtype>[^_/]+)\.(?P<key>[0-9a-f]{16})\.cache\.json$")


def recording_again(path: str | Path, root: Path | None = None, likely: Sequence[Path] = ()) -> Path:
    """`path`, a recording a replay was handed earlier (a distributed campaign keeps its path in the study), as it
    can be read now: itself where it reads whole, or is not one derived into the cache (its reader says what is
    wrong with it); one derived into this user's cache (recordings/<gpu>/<workload>/<size>_<dtype>.<key>.cache.json)
    that has gone since (the folder may be deleted at any time) or no longer reads whole, derived again from the
    rows of the store it was made from: the first of `root`, `likely` and the project's store that still holds
    the same rows (the same file again). Where none does, `root`'s rows as they are now, if given (rows added
    since make a new file); else a TunerError naming it."""
    path = Path(path)
    named = _DERIVED.match(path.name)
    if named is None or len(path.parents) < 4 or path.parents[2].name != "recordings" or _whole(path):
        return path
    gpu, workload = path.parent.parent.name, path.parent.name
    stores = list(dict.fromkeys(Path(s) for s in [*([root] if root else []), *likely, results_root()]))
    changed = None
    for store_root in stores:
        for s in sources(store_root, workload):
            if s.file is None and (s.gpu, safe_name(s.size), s.dtype) == (gpu, named["size"], named["dtype"]):
                if derived_path(store_root, workload, s).name == path.name:
                    return replay_file(store_root, workload, s)
                if root is not None and store_root == Path(root):
                    changed = s
    if changed is not None and root is not None:
        return replay_file(Path(root), workload, changed)
    state = "is gone" if not path.exists() else "does not read whole"
    raise TunerError(
        f"{path}: this recording {state} (the cache folder may be deleted at any time) and cannot be derived "
        f"again: no store looked at ({', '.join(map(str, stores))}) holds the rows of {workload} "
        f"{named['size']} {named['dtype']} on {gpu} it was made from; run it where its store is the project's "
        "(--results, TUNER_RESULTS)"
    )


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
    on = [s for s in recorded if not gpu or s.gpu == gpu_slug(gpu)]
    if any((safe_name(s.size), s.dtype) == (safe_name(size_name), dtype) for s in on):
        return None
    # the parts whose rows could not be read may hold it: said, rather than that it was never recorded
    unread = {p: why for p, why in _scan(root, workload).unknown.items() if not gpu or _folder(p) == gpu_slug(gpu)}
    damaged = f": {_unread_line(unread)}" if unread else ""
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
    read_rows = functools.cache(lambda pattern: read_store(pattern, root))  # one read of each GPU's folder
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
    from tuner.space.model import kt_block_names

    # the thread block's parameters: a space's configs over 1024 threads a block are not in its search space
    block = kt_block_names(space.block_names)
    return [space.space_hash_for(dtype), space.restrictions_for(dtype), block, package_version("kernel_tuner")]


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
