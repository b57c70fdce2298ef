"""How completely each recording covers a workload's space (`tuner list`, `tuner results`): the configs of the
space each holds, and the space's own count of them.

Both are counted without Kernel Tuner and without deriving a recording: a recording of the store's rows holds one
entry per config its rows record (tuner.store.kt_files.store_cache_doc), so the configs it holds are counted from
those rows, each checked against the space as a replay's searchspace would check it (its values among the
parameters', the restrictions for its dtype, at most MAX_THREADS threads a block); the space's count is the one
its loading counted (Space.configurations, tuner.space.configurations). A first `tuner list` of the store's 180
recordings derived each into the cache and built Kernel Tuner's searchspace of each space (Floyd-Warshall's
438,648 configs) to count them: about half a minute on the 2-core build machine, most of it deriving files that
only a replay reads (a replay still derives its own, tuner.store.recordings.replay_file)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import TunerError, one_line
from tuner.kept import Kept, code_digest, kept
from tuner.store.paths import read_roots
from tuner.store.recordings import (
    CacheNotWritable,
    Source,
    _left_out,
    derivable,
    derived_inputs,
    derived_path,
    found_sources,
    unread_line,
)
from tuner.store.schema import Degraded

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from tuner.space import Space
    from tuner.store.schema import StoreRead


@dataclass(frozen=True)
class Recording:
    """One recording and how completely it covers the space: `held` of the space's `space_size` configs
    (failed ones included: a replay knows they fail), None where the file cannot be read or derived (`error`
    says why; `unwritable`: the cache folder it could not be derived into, TUNER_CACHE)."""

    gpu: str  # the GPU's folder in the store, which --gpu takes
    size: str  # the size's name (Source.size)
    dtype: str
    held: int | None
    space_size: int
    path: Path | None  # the file replayed (derived when a replay first needs it); None where it cannot be made
    error: str | None = None
    unwritable: Path | None = None

    @property
    def complete(self) -> bool:
        return self.held is not None and self.held >= self.space_size

    @property
    def coverage(self) -> str:
        """Held of the space's configs ("576/576", "27/438648"), "unreadable", or "not derived (the cache
        folder is not writable: set TUNER_CACHE)"."""
        if self.held is not None:
            return f"{self.held}/{self.space_size}"
        return NOT_DERIVED if self.unwritable is not None else "unreadable"

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "size": self.size,
            "dtype": self.dtype,
            "recorded_configs": self.held,
            "space_configs": self.space_size,
            "complete": self.complete,
            "path": str(self.path) if self.path else None,
            # the file is derived from the rows when a replay first needs it (`tuner list` names it only)
            "derived": self.path is not None and self.path.is_file(),
            **({"error": self.error} if self.error else {}),
            **({"cache_not_writable": str(self.unwritable)} if self.unwritable is not None else {}),
        }


NOT_DERIVED = "not derived (the cache folder is not writable: set TUNER_CACHE)"


def recordings(root: Path, workload: str, space: Space) -> list[Recording]:
    """Every recording of `workload` in the store (and the package's), by GPU, size and dtype, with the
    number of the space's configs each holds: what `tuner tune --simulate` can replay. A config counts
    where the space still has it for the recording's dtype; a parameter added since with a default takes it, as
    a replay does. The store's recordings are counted from their rows (one read of each GPU's folder), and named
    by the file a replay derives them into (tuner.store.recordings.derivable), not derived here.

    The whole answer is kept (tuner.kept, folder "recordings-listed"), made from the content of every file it
    reads and the space file: a listing whose files are as they were reads the bytes of each and no Parquet at
    all (a second `tuner list` read every part of the store again, 3 columns of each, and each GPU's folder's
    kept rows). What its reads left out is said again as they said it; an answer where a part or a recording
    could not be read is not kept (the error may pass)."""
    roots = [[str(r), str(r.absolute())] for r in read_roots(root)]  # as given too: the paths kept are named so
    slot = Kept("recordings-listed", [workload, roots, _listing_key(space)])
    made_from = _inputs(root, workload, space)
    listed = slot.get(made_from, _is_listing)
    if listed is not None:
        for left_out in listed[1]:
            _left_out(left_out)
        return [_derivable_now(source, r, workload) for source, r in listed[0]]
    said: list[Degraded] = []
    found = _recordings(root, workload, space, said)
    if not any(r.error for _, r in found) and not any(left_out.parts for left_out in said):
        slot.put((found, said), made_from)
    return [r for _, r in found]


def _recordings(root: Path, workload: str, space: Space, said: list[Degraded]) -> list[tuple[Source, Recording]]:
    """recordings(), each with its source; what the reads left out is said and added to `said`, in order."""
    from tuner.store.parts import read_store

    reads: dict[str, _Rows] = {}
    in_space = in_space_of(space)
    out = []
    sizes: dict[str, int] = {}  # a dtype's own restrictions are counted once
    inputs: dict[str, bytes] = {}  # a GPU's folder's parts, hashed once for all its recordings
    listed, scanned = found_sources(root, workload)
    _left_out(scanned)
    said.append(scanned)
    for source in listed:
        if source.dtype not in sizes:
            sizes[source.dtype] = space_size(space, source.dtype)
        size = sizes[source.dtype]
        path = source.file
        try:
            if source.file is not None:  # a Kernel Tuner cache put into the store by hand, counted as it is
                held = _held_in_file(source.file.read_text(), source.dtype, in_space)
            else:
                pattern = f"{source.gpu}/{workload}/evaluations/*.parquet"
                if pattern not in reads:  # read even where the counts are kept: what it leaves out is said
                    reads[pattern] = _Rows(read_store(pattern, root, columns=_READ), workload, space)
                    said.append(reads[pattern].found.degraded)
                if source.gpu not in inputs:
                    inputs[source.gpu] = derived_inputs(root, workload, source.gpu)
                derived = derived_path(root, workload, source, inputs[source.gpu])  # named by its rows and space
                held = kept(
                    "recordings-held",
                    [derived.name, source.gpu, workload, *_space_key(space, source.dtype)],
                    functools.partial(reads[pattern].held, source, in_space),
                    _is_count,
                )
                path = derivable(derived, workload, source)
            error, unwritable = None, None
        except CacheNotWritable as e:  # the recording is fine: this user's cache folder is not
            held, error, unwritable, path = None, str(e), e.folder, None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, TunerError) as e:
            held, error, unwritable = None, f"{path or source.gpu}: cannot be read ({one_line(e)})", None
        out.append((source, Recording(source.gpu, source.size, source.dtype, held, size, path, error, unwritable)))
    return out


def _derivable_now(source: Source, recording: Recording, workload: str) -> Recording:
    """A kept recording as recordings() finds it now: one derived from the rows still derivable into this user's
    cache folder (which may have become unwritable since), else said so, as it is said when counted."""
    if source.file is not None or recording.path is None:
        return recording
    try:
        derivable(recording.path, workload, source)
    except CacheNotWritable as e:
        return dataclasses.replace(recording, held=None, path=None, error=str(e), unwritable=e.folder)
    return recording


def _inputs(root: Path, workload: str, space: Space) -> list:
    """What recordings() reads, by path and content: the workload's parts of evaluations and Kernel Tuner caches
    in every folder the store reads (read_roots), `space`'s file, and the workload's (derived_path names
    recordings by it)."""
    from tuner.workloads import get_workload

    files = [Path(space.path)]
    try:
        files += [] if get_workload(workload).space.path == space.path else [get_workload(workload).space.path]
    except TunerError:  # none such: its recordings say so, and are not kept
        pass
    for r in read_roots(root):
        for pattern in (f"*/{workload}/evaluations/*.parquet", f"*/{workload}/*.cache.json"):
            files += sorted(Path(r).glob(pattern))
    return [(str(f), _content(f)) for f in files]


def _content(path: Path) -> str:
    """A file's content digest (read now: a file rewritten within its clock's tick is told apart too)."""
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    except OSError as e:  # its reader says why; a listing with it unread is not kept
        return f"unreadable: {type(e).__name__}"


def _listing_key(space: Space) -> list:
    """What a kept listing depends on beside the files it reads: the space as loaded (its parameters,
    restrictions, counts, and what tells superseded rows: its launches and language) and the code, named, not
    imported: a listing kept is answered without pandas (0.5 s of a warm `tuner list`), which reading imports."""
    from tuner.space import model

    store = ("recordings", "paths", "kt_files", "parts", "rows", "schema", "schema_check")
    modules = [f"tuner.store.{m}" for m in store]
    modules += ["tuner.space.expressions", "tuner.space.configurations", "tuner.space.model", "tuner.vocabulary"]
    return [
        space.space_hash_for(None),
        space.configurations,
        space.defaults,
        [space.block_names, model.MAX_THREADS],
        [space.iterations, space.lang],
        code_digest(sys.modules[__name__], *modules),
    ]


def _is_listing(value: object) -> bool:
    """A kept listing: ([(Source, Recording)], [Degraded])."""
    if not (isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, list) for v in value)):
        return False
    found, said = value
    pairs = all(isinstance(p, tuple) and len(p) == 2 for p in found)
    return (
        pairs
        and all(isinstance(s, Source) and isinstance(r, Recording) for s, r in found)
        and all(isinstance(d, Degraded) for d in said)
    )


def space_size(space: Space, dtype: str | None) -> int:
    """The space's valid configs for `dtype`: those its loading counted (Space.configurations) where the dtype has
    no restrictions of its own, else counted with them (tuner.space.configurations, kept: GEMM's int32 takes a
    second once). The count Kernel Tuner's searchspace of the same restrictions gives (tuner.measure.kt)."""
    if not space.dtype_restrictions.get(dtype):
        return space.configurations
    from tuner.space.configurations import count_configurations
    from tuner.space.expressions import Expression

    restrictions = [Expression(r) for r in space.restrictions_for(dtype)]
    return count_configurations(space.path, space.params, restrictions, None, [str(b) for b in space.block_names])


# what a recording's entries are drawn from: its key, the columns without_superseded reads, the configs and their times
_COLUMNS = ["config", "status", "times", "timing", "gpu", "size", "size_vars", "dtype", "timestamp"]
_READ = [*_COLUMNS, "workload"]  # of a part's columns, what is read (and those the schema checks: read_store)


def _space_key(space: Space, dtype: str) -> list:
    """What a kept count of a recording depends on beside its rows: the space's parameters, restrictions for the
    dtype, defaults and thread block, and the code that reads the rows and tests the configs."""
    from tuner.space import expressions, model
    from tuner.store import kt_files, parts, rows, schema, schema_check

    # kt_files: recorded_configs
    code = code_digest(sys.modules[__name__], kt_files, parts, rows, schema, schema_check, expressions)
    return [space.space_hash_for(dtype), space.defaults, [space.block_names, model.MAX_THREADS], code]


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class _Rows:
    """One read of a GPU's folder of the store (its rows, what it left out), read as store_cache_doc reads each
    recording's rows (by workload, size, dtype and GPU; without_superseded), for all its recordings at once."""

    def __init__(self, found: StoreRead, workload: str, space: Space) -> None:
        _left_out(found.degraded)  # said once a read, as each replay of its rows would say it
        self.found, self.workload, self.space = found, workload, space
        self._now: pd.DataFrame | None = None
        self._groups: dict = {}

    def groups(self) -> tuple[pd.DataFrame, dict]:
        """The rows of the workload as the current protocol reads them, and the positions of each (GPU, size,
        dtype)'s, made once (a listing whose counts are all kept needs none)."""
        from tuner.store.rows import without_superseded

        frame = self.found.frame
        if self._now is None and not frame.empty:
            mine = frame.loc[frame["workload"] == self.workload, [c for c in _COLUMNS if c in frame]]
            # without_superseded compares the rows of each (GPU, size_vars, dtype); store_cache_doc hands it one
            # recording's, and two sizes' names may share their variables: keyed by the size's name too, one call
            # over all the rows leaves out what one call over each recording's would
            now = without_superseded(mine.assign(size_vars=mine["size"] + "\n" + mine["size_vars"]), self.space)
            self._now, self._groups = now, now.groupby(["gpu", "size", "dtype"], sort=False).indices
        return self._now if self._now is not None else frame, self._groups

    def held(self, source: Source, in_space: Callable[[dict, str], bool]) -> int:
        """How many configs the recording of `source` derived from these rows holds (store_cache_doc's entries)
        that the space has for its dtype (`in_space`); a TunerError as store_cache_doc's where it derives none."""
        try:
            if self.found.frame.empty:
                raise TunerError(f"nothing stored for {self.workload}")
            now, groups = self.groups()
            at = groups.get((source.gpu_name, source.size, source.dtype))
            if at is None:
                raise TunerError(
                    f"nothing stored for {self.workload} {source.size} {source.dtype} on {source.gpu_name}"
                )
            entries = _entries(now.iloc[at], self.space)
            if not entries:
                raise TunerError(
                    f"no config stored for {self.workload} {source.size} {source.dtype} on {source.gpu_name} lies "
                    "within the space's parameters"
                )
        except TunerError as e:
            if self.found.degraded.parts:  # the parts left out held its rows
                raise TunerError(f"{e}: {unread_line(self.found.degraded.parts)}") from None
            raise
        return sum(in_space(entry, source.dtype) for entry in entries)


def _entries(rows: pd.DataFrame, space: Space) -> list[dict]:
    """The entries (parameters only) that store_cache_doc makes of a recording's rows (as the current protocol
    reads them: without_superseded), one per key, from the same derivation (recorded_configs)."""
    from tuner.store.kt_files import recorded_configs

    configs = recorded_configs(rows, space)[1].values()
    return list({key: params for key, params in filter(None, configs)}.values())  # of one key, the last


def _held_in_file(text: str, dtype: str, in_space: Callable[[dict, str], bool]) -> int:
    """How many of a Kernel Tuner cache's configs (its text) the space still has for `dtype` (`in_space`)."""
    from tuner.store.kt_files import closed_cache_text

    cache = json.loads(closed_cache_text(text))["cache"]
    return sum(in_space(e, dtype) for e in cache.values() if isinstance(e, dict))


def in_space_of(space: Space) -> Callable[[dict, str | None], bool]:
    """Whether a cache entry is a config of the space for a dtype, as Kernel Tuner's searchspace of the space
    (tuner.measure.kt.searchspace) has it: a parameter the entry lacks takes its default (a replay's alignment),
    every value is one of the parameter's, the restrictions for the dtype hold and the thread block (the product
    of the parameters kt_block_names reads as it) is at most MAX_THREADS. Each config is tested once (the
    recordings of a space share most of theirs).

    Deliberately not Space.holds / Space.checked: "one of the parameter's" is Kernel Tuner's `in` (equality, so
    True is 1 and 2.0 is 2), since what is counted here is what a replay's searchspace holds of the file. Space.holds
    is the tool's strict notion (one_of: of the same kind too, as a kernel compiled with `#define X True` is no
    X=1), for the configs the tool itself answers with or runs (`tuner best`'s answers, --config, configs to
    measure first)."""
    from tuner.space.model import MAX_THREADS, kt_block_names

    defaults = space.defaults or {}
    block = [n for n in kt_block_names(space.block_names) if n in space.params]
    known: dict[tuple, bool] = {}

    def test(config: dict, dtype: str | None) -> bool:
        if not all(v in values for v, values in zip(config.values(), space.params.values())):
            return False
        try:
            holds = space.is_valid(config, dtype)
        except Exception:  # noqa: BLE001  (a restriction that cannot be evaluated for it: not a config of the space)
            return False
        return holds and math.prod(config[n] for n in block) <= MAX_THREADS

    def in_space(entry: dict, dtype: str | None) -> bool:
        values = [entry.get(k, defaults.get(k)) for k in space.params]
        own = tuple(space.dtype_restrictions.get(dtype, ()))  # dtypes without restrictions of their own: one test
        try:
            key = (own, *values)
            if key not in known:
                known[key] = test(dict(zip(space.params, values)), dtype)
            return known[key]
        except TypeError:  # a value that cannot be a key (a list): tested each time
            return test(dict(zip(space.params, values)), dtype)

    return in_space
