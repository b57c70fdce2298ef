"""Kernel Tuner's cache of a campaign: one part per worker, merged into the shared file."""

from __future__ import annotations

import fcntl
import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from tuner import store
from tuner.atomic import write_atomically

if TYPE_CHECKING:
    from tuner.campaign.distributed.study import Campaign


def cache_part(root: Path, gpu: str, camp: Campaign, me: str) -> Path:
    """Worker `me`'s part, beside the campaign's cache on `gpu`."""
    return (
        store.cache_path(root, gpu, camp.workload, camp.size, camp.dtype).parent / "cache-parts" / part_name(camp, me)
    )


def part_name(camp: Campaign, me: str) -> str:
    """Named by its campaign and worker, so nothing merges another campaign's live part."""
    main = store.cache_path(Path("."), "x", camp.workload, camp.size, camp.dtype).name
    return f"{main[: -len('.cache.json')]}.{store.safe_name(camp.name)}.{me}.cache.json"


def merge_cache_parts(main: Path, parts: list[Path]) -> int:
    """Merge Kernel Tuner cache parts into `main` (under a file lock) and delete them. A config in several
    keeps its latest entry (the parts' over the main file's), as Kernel Tuner's own appends do: a config
    measured again (a longer timeout, another timing protocol) replaces its old time. Kernel Tuner appends
    to its cache without locking, so workers never share one file. A part that cannot be read is left
    where it is, with a warning."""
    from kernel_tuner.util import ErrorConfig, NpEncoder, read_cache

    parts = [p for p in parts if Path(p).is_file()]
    if not parts:
        return 0
    main = Path(main)
    main.parent.mkdir(parents=True, exist_ok=True)
    with open(main.with_name(main.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        docs = [read_cache(str(main), open_cache=False)] if main.is_file() else []
        readable = []
        for p in parts:
            try:
                docs.append(read_cache(str(p), open_cache=False))
                readable.append(p)
            except (ValueError, KeyError) as e:  # cut short by a kill mid-write, say
                warnings.warn(f"{p}: not a readable Kernel Tuner cache ({e}); left out of {main.name}", stacklevel=2)
        parts = readable
        if not parts:
            return 0
        header = {k: v for k, v in docs[0].items() if k != "cache"}
        merged = {}
        for doc in docs:
            for key, entry in doc["cache"].items():
                merged[key] = {
                    k: (str(v) if isinstance(v, ErrorConfig) else v)
                    for k, v in entry.items()
                    if not (k == "__error__" and not isinstance(v, str))
                }
        # Kernel Tuner's own layout (header, then one entry a line), so it can append to it later
        text = json.dumps({**header, "cache": {}}, cls=NpEncoder, indent="")[:-3]
        text += "".join("\n" + json.dumps({k: v}, cls=NpEncoder)[1:-1] + "," for k, v in merged.items())
        write_atomically(main, lambda tmp: tmp.write_text(text))
        for p in parts:
            p.unlink()
    return len(merged)
