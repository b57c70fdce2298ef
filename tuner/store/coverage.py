"""How completely each recording covers a workload's space (`tuner list`, `tuner results`): the configs of the
space each holds, and the space's own count of them, both kept (tuner.kept), as Kernel Tuner's searchspace of a
large space takes seconds to build."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import TunerError, one_line
from tuner.kept import kept
from tuner.store.kt_files import closed_cache_text
from tuner.store.parts import read_store
from tuner.store.recordings import CacheNotWritable, replay_file, sources
from tuner.vocabulary import package_version

if TYPE_CHECKING:
    from collections.abc import Callable

    from kernel_tuner.searchspace import Searchspace

    from tuner.space import Space


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
    path: Path | None  # the file replayed; None where it could not be made
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
            **({"error": self.error} if self.error else {}),
            **({"cache_not_writable": str(self.unwritable)} if self.unwritable is not None else {}),
        }


NOT_DERIVED = "not derived (the cache folder is not writable: set TUNER_CACHE)"


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
            error, unwritable = None, None
        except CacheNotWritable as e:  # the recording is fine: this user's cache folder is not
            held, error, unwritable = None, str(e), e.folder
        except (OSError, ValueError, KeyError, TypeError, AttributeError, TunerError) as e:
            held, error, unwritable = None, f"{path or source.gpu}: cannot be read ({one_line(e)})", None
        out.append(Recording(source.gpu, source.size, source.dtype, held, size, path, error, unwritable))
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
