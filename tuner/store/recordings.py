"""Recordings: what Kernel Tuner's simulation mode replays for each (GPU, workload, size, dtype) the store
holds. A recording is the store's own rows as a Kernel Tuner cache (tuner.store.kt_files.store_cache_doc, what
`tuner export --format kt-cache` writes), derived when first needed into this user's cache folder and kept
there under a key of the rows and the space it was made from, so the store keeps one copy of each measurement.
A Kernel Tuner cache file in the store that no rows record (one copied in by hand) is replayed as it is.

This module finds the recordings (sources) and derives them (replay_file, recording_again; derivable: where one
is derived, without deriving it); choosing one by GPU is tuner.store.recording_choice, how much of a space each
covers (`tuner list`) tuner.store.coverage."""

from __future__ import annotations

import functools
import hashlib
import io
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.errors import TunerError
from tuner.locations import user_cache
from tuner.store.paths import gpu_slug, read_roots, results_root, safe_name
from tuner.store.schema import EVALUATION, Degraded, record, unreadable

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pyarrow as pa

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
    found, left_out = found_sources(root, workload)
    _left_out(left_out)
    return found


def found_sources(root: Path, workload: str) -> tuple[list[Source], Degraded]:
    """sources(), and what its scan left out, said to no one: the caller says it (_left_out)."""
    held = scan(root, workload)
    found = {}
    for gpu, size, dtype in sorted(held.groups):
        found[(gpu_slug(gpu), safe_name(size), dtype)] = Source(gpu_slug(gpu), size, dtype, gpu_name=gpu)
    for r in read_roots(root):  # the project's own file before one a package ships
        for c in sorted(Path(r).glob(f"*/{workload}/*.cache.json")):
            size, _, dtype = c.name.removesuffix(".cache.json").rpartition("_")
            found.setdefault((c.parent.parent.name, size, dtype), Source(c.parent.parent.name, size, dtype, file=c))
    return [found[k] for k in sorted(found)], held.left_out


@dataclass
class Scan:
    """What the parts of a workload record: (GPU, size, dtype) of their rows; the parts left out as read_parts
    leaves them out (unreadable, a required column missing), and of those the ones whose (GPU, size, dtype)
    could not be read at all (`unknown`: they may hold any recording of their GPU's folder)."""

    groups: set[tuple[str, str, str]] = field(default_factory=set)
    left_out: Degraded = field(default_factory=Degraded)
    unknown: dict[str, str] = field(default_factory=dict)  # path -> why


_KEYS = ("gpu", "size", "dtype")


def scan(root: Path, workload: str) -> Scan:
    """(GPU, size, dtype) of the rows of every part of `workload`. Only those three columns are read (every
    listing asks, for every workload), and the footer's schema: a part read_parts would leave out whole for
    being unreadable or lacking a required column is left out here too, and said (_left_out)."""
    import pyarrow.parquet as pq  # here, not at the top: a listing answered from what was kept reads no Parquet

    found = Scan()
    for r in read_roots(root):
        for part in Path(r).glob(f"*/{workload}/evaluations/*.parquet"):
            try:  # one read of the whole file: a writer may replace it meanwhile
                parquet = pq.ParquetFile(io.BytesIO(part.read_bytes()))
                names = set(parquet.schema_arrow.names)
                table = parquet.read(columns=[c for c in _KEYS if c in names])
            except Exception as e:  # noqa: BLE001  (pyarrow's errors: truncated, not Parquet; or no permission)
                reason = unreadable(e)
                found.left_out.add_part(part, reason)
                found.unknown[str(part)] = reason
                continue
            if not parquet.metadata.num_rows:  # nothing in it (read_parts checks no columns of an empty part)
                continue
            missing = [c for c in EVALUATION if c not in names]
            mistyped = [c for c in _KEYS if c in names and not _is_text(table.schema.field(c).type)]
            if missing:
                found.left_out.add_part(part, "missing column(s) " + ", ".join(missing))
            elif mistyped:
                said = ", ".join(f"{c} ({table.schema.field(c).type})" for c in mistyped)
                found.left_out.add_part(part, f"wrong type in column(s) {said}")
            if any(c in missing or c in mistyped for c in _KEYS):  # what it holds cannot be told
                found.unknown[str(part)] = found.left_out.parts[str(part)]
                continue
            # left out or not, what it holds is listed: a recording that only it holds cannot be derived then,
            # and says so (replay_file)
            columns = (table.column(c).to_pylist() for c in _KEYS)
            found.groups.update(g for g in zip(*columns) if all(isinstance(v, str) for v in g))
    return found


def _is_text(kind: pa.DataType) -> bool:
    import pyarrow as pa

    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)


_SAID: set[str] = set()  # what _left_out warned of in this process


def _left_out(degraded: Degraded) -> None:
    """What a read of the store left out: to the tuner.store.schema.collect() around it (an answer says so), else
    one warning each part (Degraded.warn), once a process: the scan of every listing and the reads of every
    recording derived must not say it again and again."""
    if degraded and not record(degraded):
        degraded.warn(stacklevel=3, said=_SAID)


def unread_line(unread: dict[str, str]) -> str:
    """Parts that may hold what was asked for but could not be read (path -> why), as one clause."""
    named = ", ".join(f"{path} ({why})" for path, why in sorted(unread.items()))
    one = len(unread) == 1
    return (
        f"the store could not be read in full: {named} {'was' if one else 'were'} left out and may hold it "
        f"(move {'it' if one else 'them'} aside or copy {'it' if one else 'them'} again)"
    )


def derived_path(root: Path, workload: str, source: Source, inputs: bytes | None = None) -> Path:
    """Where the recording of `source` (from the store's rows) is kept in this user's cache: named by its size
    and dtype and a key of the rows' parts and the workload's space file, so rows added later make a new one.
    `inputs`: derived_inputs of its GPU's folder, where the caller has them (one for all the folder's recordings)."""
    key = hashlib.blake2b(f"{DERIVED_FORMAT}\n{source.gpu_name}\n{source.size}\n{source.dtype}\n".encode())
    key.update(derived_inputs(root, workload, source.gpu) if inputs is None else inputs)
    name = f"{safe_name(source.size)}_{source.dtype}.{key.hexdigest()[:16]}.cache.json"
    return user_cache("recordings") / source.gpu / workload / name


def derived_inputs(root: Path, workload: str, gpu: str) -> bytes:
    """What the recordings derived from the rows of the store's folder `gpu` are named by, besides their own
    names (derived_path): the workload's space file and the folder's parts, by their content."""
    from tuner.workloads import get_workload

    pattern = f"{gpu}/{workload}/evaluations/*.parquet"
    space_file = get_workload(workload).space.path
    said = [space_file.read_bytes() if space_file.is_file() else str(space_file).encode()]
    for part in sorted(p for r in read_roots(root) for p in Path(r).glob(pattern)):
        said.append(part.name.encode() + _digest(part))
    return b"".join(said)


def replay_file(root: Path, workload: str, source: Source, read_rows: Callable[[str], StoreRead] | None = None) -> Path:
    """The Kernel Tuner cache to replay for `source`: its file, or the one derived from its rows (written now
    where this version of the rows and space has none yet, or has one that no longer reads whole: the cache
    folder is this user's, and a file of it may be cut short or overwritten). `read_rows(pattern)`: how the
    parts matching `pattern` are read (read_store; a caller deriving many shares one read of a GPU's folder)."""
    if source.file is not None:
        return source.file
    from tuner.store.kt_files import store_cache_doc, write_cache
    from tuner.store.parts import read_store

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
            raise TunerError(f"{e}: {unread_line(found.degraded.parts)}") from None
        raise
    try:  # written whole (write_atomically): a concurrent reader sees all of it or none
        path.parent.mkdir(parents=True, exist_ok=True)
        write_cache(path, doc)
    except OSError as e:
        raise _not_writable(workload, source, path, e) from None
    return path


def derivable(path: Path, workload: str, source: Source) -> Path:
    """`path`, where replay_file derives the recording of `source` (derived_path), checked without deriving it:
    there whole, or its folder in this user's cache can take it; else the CacheNotWritable that replay_file would
    raise. `tuner list` names every recording so, and counts what each holds from the rows
    (tuner.store.coverage): deriving all 180 of the store took most of a first listing's half minute."""
    if _whole(path) or path.parent in _WRITABLE:
        return path
    try:  # as replay_file would write it: its folder made, a file made in it
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as e:
        raise _not_writable(workload, source, path, e) from None
    _WRITABLE.add(path.parent)
    return path


_WRITABLE: set[Path] = set()  # the cache folders derivable found writable in this process: tried once each


def _not_writable(workload: str, source: Source, path: Path, e: OSError) -> CacheNotWritable:
    return CacheNotWritable(
        f"cannot write the recording of {workload} {source.size} {source.dtype} on {source.gpu_name} derived "
        f"from the store's rows to {path.parent} ({e.strerror or e}): set TUNER_CACHE to a writable folder",
        user_cache("recordings"),
        str(e.strerror or e),
    )


class CacheNotWritable(TunerError):
    """A recording derived from the store's rows could not be written to this user's cache folder (`folder`,
    `why`): the recording itself is fine, and a writable folder (TUNER_CACHE) derives it."""

    def __init__(self, message: str, folder: Path, why: str) -> None:
        super().__init__(message)
        self.folder, self.why = folder, why


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
