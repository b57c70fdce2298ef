"""Parquet parts: each campaign writes its own part, so concurrent writers never clobber each other, and every
row is on disk (write_atomically) as soon as it is measured, so a killed campaign loses nothing it measured.
A Parquet file cannot be appended to, so a part grows in chunks of CHUNK_ROWS rows: only the last chunk is
rewritten for a new row (the part itself first, then `<part>.chunkNNNN.parquet` files), and flush() merges
the chunks back into the part at the end. The merged part records the chunks it holds (CHUNKS_KEY in its
Parquet metadata), and a read leaves those out, so a kill between merging and deleting the chunks never
counts a row twice. Readers merge all parts, as their schema admits them (tuner.store.schema)."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import re
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tuner.atomic import write_atomically
from tuner.kept import Kept, code_digest
from tuner.store import parquet_runs, schema, schema_check
from tuner.store.parquet_runs import parse_together
from tuner.store.paths import read_roots
from tuner.store.schema import Degraded, StoreRead, record, schema_for, unreadable
from tuner.store.schema_check import check

CHUNK_ROWS = 128  # a row costs one rewrite of at most this many rows, however long the campaign
CHUNKS_KEY = b"tuner_chunks"  # in a merged part's metadata: its chunk files up to this number are in it
_CHUNK = re.compile(r"^(?P<stem>.+)\.chunk(?P<n>\d+)\.parquet$")


class PartWriter:
    """Rows of one campaign into one Parquet part, written in chunks as they come, each chunk atomically
    (write, then rename), and merged into the part by flush()."""

    def __init__(self, path: Path, min_interval_s: float = 0.0, chunk_rows: int = CHUNK_ROWS) -> None:
        self.path = Path(path)
        self.rows: list[dict] = []
        self.min_interval_s = min_interval_s
        self.chunk_rows = chunk_rows
        self.rows_written = 0  # rows written to disk in all, chunks and merges (what a row costs)
        self._last = 0.0
        self._sealed = 0  # rows in full chunks (or merged into the part): never written again until a merge
        self._chunk = 0  # the number of the chunk being filled (0: the part itself)
        self._merged = 0  # the chunk files up to this one are in the part
        self._on_disk = 0  # rows on disk

    def append(self, row: dict) -> None:
        self.rows.append(row)
        if time.monotonic() - self._last >= self.min_interval_s:
            self._write_chunks()

    def flush(self) -> None:
        """Every row on disk, in the one part (the chunks merged into it)."""
        self._write_chunks()
        last = self._chunk if self._sealed < len(self.rows) else self._chunk - 1  # the last chunk file written
        if last <= self._merged:
            return
        self._write(self.path, self.rows, covers=last)
        for n in range(self._merged + 1, last + 1):
            chunk_path(self.path, n).unlink(missing_ok=True)
        self._merged = last
        self._sealed, self._chunk = len(self.rows), last + 1

    def _write_chunks(self) -> None:
        while self._on_disk < len(self.rows):
            rows = self.rows[self._sealed : self._sealed + self.chunk_rows]
            path = self.path if self._chunk == 0 else chunk_path(self.path, self._chunk)
            self._write(path, rows, covers=0)
            self._on_disk = self._sealed + len(rows)
            if len(rows) == self.chunk_rows:  # full: the next row starts the next chunk
                self._sealed, self._chunk = self._on_disk, self._chunk + 1
        self._last = time.monotonic()

    def _write(self, path: Path, rows: list[dict], covers: int) -> None:
        table = pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False)
        if covers:
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), CHUNKS_KEY: str(covers).encode()})
        write_atomically(path, lambda tmp: pq.write_table(table, tmp))
        self.rows_written += len(rows)


def chunk_path(part: Path, n: int) -> Path:
    """A part's chunk file number n (n >= 1)."""
    return part.with_name(f"{part.name.removesuffix('.parquet')}.chunk{n:04d}.parquet")


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Whole or not at all (write_atomically): a reader, or a kill, never meets half a file."""
    write_atomically(path, lambda tmp: df.to_parquet(tmp, index=False))


def read_parts(pattern: str, root: Path, shipped: bool = True) -> pd.DataFrame:
    """The rows of every part matching `pattern` under the store `root` (and, unless `shipped` is False, the
    recordings shipped with the built-in workloads: tuner.store.paths.read_roots), merged, as the schema of their
    folder admits them (tuner.store.schema). What was left out goes to the tuner.store.schema.collect() around the
    read (an answer says so), else is a warning."""
    found = read_store(pattern, root, shipped)
    if found.degraded and not record(found.degraded):
        found.degraded.warn(stacklevel=2)
    return found.frame


def read_store(pattern: str, root: Path, shipped: bool = True, columns: Sequence[str] | None = None) -> StoreRead:
    """read_parts, with what it left out (StoreRead: .frame, .degraded), recorded nowhere. `columns`: of each
    part, only those columns and the ones its schema checks, so that what is left out is what a whole read
    leaves out (_narrow_read: what `tuner list` counts every recording from, 13 columns of a part's 45)."""
    rules = schema_for(pattern)
    wanted = None if columns is None else sorted({*columns, *(rules or {})})
    degraded = Degraded()
    parts, seen = [], set()
    for r in read_roots(root) if shipped else [Path(root)]:
        for part in sorted(Path(r).glob(pattern), key=_in_order):
            name = part.relative_to(r)  # a campaign's part copied into the project's store: its rows read once
            if name not in seen:
                seen.add(name)
                parts.append(part)
    merged = _merged_chunks(parts)
    read = []
    for part in parts:
        chunk = _CHUNK.match(part.name)
        if chunk and int(chunk["n"]) <= merged.get(part.with_name(chunk["stem"] + ".parquet"), 0):
            continue  # merged into its part already (a kill came before the chunk was deleted)
        try:  # one read of the whole file: a writer may replace it meanwhile, and the old inode stays whole
            data = part.read_bytes()
        except OSError as e:
            degraded.add_part(part, unreadable(e))
            continue
        read.append((part, data, hashlib.blake2b(data, digest_size=16).digest()))
    whole = _kept("read", [pattern, str(Path(root).resolve()), *([] if shipped else ["own"])], rules, wanted)
    contents = [(str(part), digest.hex()) for part, _, digest in read]
    kept = whole.get(contents, _is_parsed)
    if kept is not None:
        frame, left_out = kept
        degraded.merge(left_out)
        return StoreRead(frame, degraded)
    frames, left_out = [], Degraded()
    for checked, left in _read_parts(read, rules) if wanted is None else _narrow_read(read, rules, wanted):
        left_out.merge(left)
        if checked is not None and len(checked):
            frames.append(checked)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not left_out.parts:  # every part parsed: the same files give the same answer
        whole.put((frame, left_out), contents)
    degraded.merge(left_out)
    return StoreRead(frame, degraded)


def _read_parts(
    read: list[tuple[Path, bytes, bytes]], rules: dict[str, str] | None
) -> Iterator[tuple[pd.DataFrame | None, Degraded]]:
    """For each part of `read` (path, bytes, digest), in order: its rows as its schema admits them (None: left
    out whole) and what was left out of it. A part parsed before from the same bytes is taken from this process's
    memo (_PARSED) or the user's cache (_kept); the others are parsed together (parse_together: one frame a run of
    parts read alike), then each is checked, remembered and kept on its own, as if it had been read alone. A first
    `tuner best gemm` parses its 713 parts in 8 runs: 7.9 s instead of 13.3 s on the 2-core build machine."""
    answers: list[tuple[pd.DataFrame | None, Degraded] | Kept] = [
        _known(part, digest, rules) for part, _, digest in read
    ]
    todo = [(i, part, data, digest) for i, (part, data, digest) in enumerate(read) if isinstance(answers[i], Kept)]
    parsed = parse_together([(part, data) for _, part, data, _ in todo], None)
    for (i, part, _, digest), (_, frame) in zip(todo, parsed, strict=True):
        slot = answers[i]
        assert isinstance(slot, Kept)
        answers[i] = _remember(part, digest, rules, slot, frame)
    for answer in answers:
        assert not isinstance(answer, Kept)  # every part answered: known, or parsed just now
        yield answer


def _narrow_read(
    read: list[tuple[Path, bytes, bytes]], rules: dict[str, str] | None, columns: list[str]
) -> Iterator[tuple[pd.DataFrame | None, Degraded]]:
    """For each part of `read` (path, bytes, digest), in order: its rows of `columns` as its schema admits them
    (None: left out whole) and what was left out of it, a whole read's answer of those columns. Parsed together
    (parse_together; a first `tuner list` reads 397 parts, in 24 runs: 1.6 s instead of 5.6 s on the 2-core build
    machine), then checked part by part. Neither kept nor remembered part by part, as a whole read's parts are:
    the read as a whole is."""
    for part, frame in parse_together([(part, data) for part, data, _ in read], columns):
        left_out = Degraded()
        if isinstance(frame, str):
            left_out.add_part(part, frame)
            yield None, left_out
        else:
            yield check(frame, rules, part, left_out), left_out


# Parts already parsed in this process, by path and schema: (digest of the bytes, rows as checked, what was left
# out). An answer reads every part of a workload (hundreds in a store), and a caller asking many questions (`tuner
# export` over every size, `tuner report`, the Python API in a loop) would otherwise parse them all again for
# each; parsing is most of a read's time, reading the bytes a small part. Keyed by content, not by mtime, whose
# clock is coarser than two writes of a test or a fast campaign. A part parsed in a run with others (parse_together) is
# remembered alone, its rows as if read alone.
_PARSED: dict[tuple[Path, int], tuple[bytes, pd.DataFrame | None, Degraded]] = {}


def _known(part: Path, digest: bytes, rules: dict[str, str] | None) -> tuple[pd.DataFrame | None, Degraded] | Kept:
    """A part's answer if parsed before from these bytes (`digest`), in this process (_PARSED) or by one before
    (kept: then remembered here too); else its slot in the user's cache, to keep it in once parsed (_remember)."""
    key = (part, id(rules))
    known = _PARSED.get(key)
    if known is not None and known[0] == digest:
        return known[1], known[2]
    kept = _kept("part", [str(part.resolve())], rules)
    parsed = kept.get(digest.hex(), _is_parsed)
    if parsed is None:
        return kept
    _PARSED[key] = (digest, *parsed)
    return parsed


def _remember(
    part: Path, digest: bytes, rules: dict[str, str] | None, kept: Kept, frame: pd.DataFrame | str
) -> tuple[pd.DataFrame | None, Degraded]:
    """A part's rows (`frame`, just parsed; a str: why it could not be) as its schema admits them (None: left out
    whole), and what was left out of it; remembered in this process and kept (`kept`) for the next."""
    left_out = Degraded()
    if isinstance(frame, str):
        left_out.add_part(part, frame)
        checked = None
    else:
        checked = check(frame, rules, part, left_out)
    parsed = (checked, left_out)
    if checked is not None:  # a part that could not be parsed is tried again next time (the error may pass)
        kept.put(parsed, digest.hex())
    _PARSED[(part, id(rules))] = (digest, *parsed)
    return parsed


# What processes read before, kept in this user's cache (tuner.kept.Kept, folder "parts"): each part's rows as
# checked (on its own, though parsed in a run with others: _read_parts), and each read's merged rows, with what was
# left out of them. A store holds hundreds of small parts (GEMM's rows: 300 of them, 713 reads with their
# baselines), and parsing and merging them was most of each command's time: `tuner best gemm` took 8 s on the build
# machine, 4.7 s with the parts kept, 2.3 s with the merged reads kept too. One file a part (or a read: pattern and
# store), named by its path, schema and the code and libraries that read it, made from the digests of the bytes
# read: a file changed in any byte is parsed again.
def _kept(kind: str, names: list[str], rules: dict[str, str] | None, columns: list[str] | None = None) -> Kept:
    code = [code_digest(sys.modules[__name__], parquet_runs, schema, schema_check), pd.__version__, pa.__version__]
    return Kept("parts", [kind, names, rules, code, *([] if columns is None else [columns])])


def _is_parsed(value: object) -> bool:
    """A part's or a read's kept value: (rows or None, what was left out)."""
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and (value[0] is None or isinstance(value[0], pd.DataFrame))
        and isinstance(value[1], Degraded)
    )


def _in_order(path: Path) -> tuple:
    """Parts by name, each followed by its chunks in order (a chunk's name sorts before its part's)."""
    chunk = _CHUNK.match(path.name)
    return (
        (path.parent.parts, chunk["stem"] + ".parquet", int(chunk["n"])) if chunk else (path.parent.parts, path.name, 0)
    )


def _merged_chunks(parts: list[Path]) -> dict[Path, int]:
    """For each part with chunk files beside it: the chunk files it holds (its CHUNKS_KEY), read from its footer."""
    merged = {}
    for part in {p.with_name(m["stem"] + ".parquet") for p in parts if (m := _CHUNK.match(p.name))}:
        try:
            meta = pq.read_metadata(io.BytesIO(part.read_bytes())).metadata or {}
            merged[part] = int(meta.get(CHUNKS_KEY, b"0"))
        except Exception:  # noqa: BLE001  (no part, or a damaged one: its chunks are read, the part's damage said)
            continue
    return merged


def recorded_gpu(cachefile: Path) -> str | None:
    """The GPU a Kernel Tuner cache was measured on, as the store names it. For a cache beside parts, under
    results/<gpu>/<workload>/, the parts say (the cache's own device name is the host CPU's for host-code spaces,
    which the C backend runs). The folder is one GPU's, so the first part that names a GPU answers; only its `gpu`
    column is read (every replay asks, and a strategy comparison replays hundreds of times). With no parts
    beside it (a recording derived from the rows: tuner.store.recordings), the cache's header names the GPU."""
    parts = sorted((Path(cachefile).parent / "evaluations").glob("*.parquet"))
    for part in parts:
        try:
            gpus = pd.read_parquet(io.BytesIO(part.read_bytes()), columns=["gpu"])["gpu"].dropna()
        except Exception:  # noqa: BLE001  (damaged, unreadable or without a gpu column: another part answers)
            continue
        if len(gpus) and isinstance(gpus.iloc[0], str):
            return str(gpus.iloc[0])
    return None if parts else _header_device(Path(cachefile))


def _header_device(cachefile: Path) -> str | None:
    """The device_name in the header of a cache as Kernel Tuner lays it out (one key a line, first), read
    without the whole file."""
    try:
        with cachefile.open() as f:
            for line in itertools.islice(f, 16):
                if line.startswith('"device_name":'):
                    name = json.loads(line.split(":", 1)[1].strip().rstrip(","))
                    return name if isinstance(name, str) else None
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    return None
