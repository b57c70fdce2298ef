"""Small values derived from files, kept in this user's cache (tuner.locations.user_cache): a count of a space's
valid configs, how many of a space's configs a recording holds. Each is one JSON file named by a hash of what
the value depends on (the caller's key: contents or their digests, and the code that derives it), written whole
or not at all; a file that is missing, damaged or fails the caller's check is derived again, and a cache that
cannot be written costs only time. Any file of it can be deleted. (The store's parsed parts are kept the same
way, as pickles: tuner.store.parts.)"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from tuner.atomic import write_atomically
from tuner.locations import user_cache

T = TypeVar("T")


def kept(kind: str, key: object, derive: Callable[[], T], valid: Callable[[object], bool]) -> T:
    """The value kept under `key` (JSON-able) in the cache folder `kind`, if `valid` holds for it; else
    `derive()`, kept for next time. An exception of `derive` is not kept: it is raised again next time."""
    name = hashlib.sha256(json.dumps([kind, key], sort_keys=True).encode()).hexdigest()
    path = user_cache(kind) / f"{name}.json"
    try:
        value = json.loads(path.read_text())["value"]
        if valid(value):
            return value
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = derive()
    try:
        write_atomically(path, lambda tmp: tmp.write_text(json.dumps({"value": value})), durable=False)
    except (OSError, TypeError, ValueError):
        pass
    return value


@cache
def code_digest(*modules: ModuleType) -> str:
    """A digest of these modules' source, read once a process: the code a kept value was derived by belongs in
    its key (a changed module derives it again)."""
    text = "".join(Path(str(m.__file__)).read_text() for m in modules)
    return hashlib.sha256(text.encode()).hexdigest()
