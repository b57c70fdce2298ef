"""Values derived from files, kept in this user's cache (tuner.locations.user_cache) so that the next process
need not derive them again: a count of a space's valid configs, how many of a space's configs a recording holds
(tuner.kept.kept), the store's parts as parsed and its merged reads (tuner.store.parts, through Kept).

Each value is one file, named by a hash of its folder and the caller's key (what the value depends on that is
cheap to know: names, parameters, the code that derives it: code_digest), holding the value and what it was made
from (the digests of the bytes read, where those are what the key cannot hold), written whole or not at all. A
file that is missing, damaged, made from other bytes or failing the caller's check is derived again; the file is
rewritten in place, so the cache does not grow as its sources change; a cache that cannot be written costs only
time; any file of it can be deleted. Pickled: the store's frames come back exactly (dtypes, object columns), and
the folder is the user's own."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import pickle
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from tuner.atomic import write_atomically
from tuner.locations import user_cache

T = TypeVar("T")


class Kept:
    """One kept value's file: `Kept(kind, key)` names it (`key` JSON-able), get() reads it back, put() writes it."""

    def __init__(self, kind: str, key: object) -> None:
        name = hashlib.blake2b(json.dumps([kind, key], sort_keys=True).encode(), digest_size=16).hexdigest()
        self.path = user_cache(kind) / f"{name}.pickle"

    def get(self, made_from: object = None, valid: Callable[[Any], bool] = lambda value: True) -> Any:
        """The value kept, if it was made from `made_from` and `valid` holds for it; else None."""
        try:
            with self.path.open("rb") as f:
                source, value = pickle.load(f)
        except Exception:  # noqa: BLE001  (none kept, a damaged or foreign file: derived again)
            return None
        return value if source == made_from and value is not None and valid(value) else None

    def put(self, value: object, made_from: object = None) -> None:
        """Kept whole or not at all (write_atomically, no fsync: a cache)."""

        def dump(tmp: Path) -> None:
            with tmp.open("wb") as f:
                pickle.dump((made_from, value), f, protocol=pickle.HIGHEST_PROTOCOL)

        try:
            write_atomically(self.path, dump, durable=False)
        except (OSError, pickle.PicklingError):
            pass


def kept(kind: str, key: object, derive: Callable[[], T], valid: Callable[[Any], bool], made_from: object = None) -> T:
    """The value kept under `key` in the cache folder `kind`, if it was made from `made_from` and `valid` holds
    for it; else `derive()`, kept for next time. An exception of `derive` is not kept: it is raised again next
    time."""
    slot = Kept(kind, key)
    value = slot.get(made_from, valid)
    if value is None:
        value = derive()
        slot.put(value, made_from)
    return value


@cache
def code_digest(*modules: ModuleType | str) -> str:
    """A digest of these modules' source, read once a process: the code a kept value was derived by belongs in
    its key (a changed module derives it again). A module given by its name is read without being imported: a
    key checked before anything is derived need not import what deriving it would (`tuner list`: pandas)."""
    text = "".join(Path(_source_file(m)).read_text() for m in modules)
    return hashlib.sha256(text.encode()).hexdigest()


def _source_file(module: ModuleType | str) -> str:
    if isinstance(module, ModuleType):
        return str(module.__file__)
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no source of module {module}")
    return spec.origin
