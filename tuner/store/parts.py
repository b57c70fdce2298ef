"""Parquet parts: each campaign writes its own part, rewritten whole after every row (write_atomically), so a
killed campaign loses nothing it measured and concurrent writers never clobber each other. Readers merge all
parts, as their schema admits them (tuner.store.schema)."""

from __future__ import annotations

import io
import time
import warnings
from pathlib import Path

import pandas as pd

from tuner.atomic import write_atomically
from tuner.store.paths import read_roots
from tuner.store.schema import Degraded, StoreRead, check, record, schema_for


class PartWriter:
    """Rows of one campaign into one Parquet part, rewritten atomically (write, then rename)."""

    def __init__(self, path: Path, min_interval_s: float = 0.0) -> None:
        self.path = Path(path)
        self.rows: list[dict] = []
        self.min_interval_s = min_interval_s
        self._last = 0.0

    def append(self, row: dict) -> None:
        self.rows.append(row)
        if time.monotonic() - self._last >= self.min_interval_s:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        write_parquet(pd.DataFrame(self.rows), self.path)
        self._last = time.monotonic()


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Whole or not at all (write_atomically): a reader, or a kill, never meets half a file."""
    write_atomically(path, lambda tmp: df.to_parquet(tmp, index=False))


def read_parts(pattern: str, root: Path) -> pd.DataFrame:
    """The rows of every part matching `pattern` under the store `root` (and the recordings an installed
    package ships: tuner.store.paths.read_roots), merged, as the schema of their folder admits them
    (tuner.store.schema). What was left out goes to the tuner.store.schema.collect() around the read (an answer says
    so), else is a warning."""
    found = read_store(pattern, root)
    if found.degraded and not record(found.degraded):
        for path, reason in found.degraded.parts.items():
            warnings.warn(f"{path}: {reason}; left out: move it aside or copy it again", stacklevel=2)
        for path, by_reason in found.degraded.rows.items():
            said = ", ".join(f"{n} with {reason}" for reason, n in by_reason.items())
            warnings.warn(f"{path}: rows left out: {said}", stacklevel=2)
    return found.frame


def read_store(pattern: str, root: Path) -> StoreRead:
    """read_parts, with what it left out (StoreRead: .frame, .degraded), recorded nowhere."""
    rules = schema_for(pattern)
    degraded = Degraded()
    frames = []
    for part in [p for r in read_roots(root) for p in sorted(Path(r).glob(pattern))]:
        try:  # one read of the whole file: a writer may replace it meanwhile, and the old inode stays whole
            frame = pd.read_parquet(io.BytesIO(part.read_bytes()))
        except Exception as e:  # noqa: BLE001  (pyarrow's errors: truncated, not Parquet at all; unreadable)
            # one damaged file (copied in half from another host, say) must not take every query down with it
            degraded.add_part(part, f"not a readable Parquet file: {(str(e).splitlines() or [type(e).__name__])[0]}")
            continue
        checked = check(frame, rules, part, degraded)
        if checked is not None and len(checked):
            frames.append(checked)
    return StoreRead(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), degraded)


def recorded_gpu(cachefile: Path) -> str | None:
    """The GPU a Kernel Tuner cache under results/<gpu>/<workload>/ was measured on, as the store names it.
    (The cache's own device name is the host CPU's for host-code spaces, which the C backend runs.)
    The folder is one GPU's, so the first part that names a GPU answers; only its `gpu` column is read
    (every replay asks, and a strategy comparison replays hundreds of times)."""
    for part in sorted((Path(cachefile).parent / "evaluations").glob("*.parquet")):
        try:
            gpus = pd.read_parquet(io.BytesIO(part.read_bytes()), columns=["gpu"])["gpu"].dropna()
        except Exception:  # noqa: BLE001  (damaged, unreadable or without a gpu column: another part answers)
            continue
        if len(gpus) and isinstance(gpus.iloc[0], str):
            return str(gpus.iloc[0])
    return None
