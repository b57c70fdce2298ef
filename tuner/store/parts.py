"""Parquet parts: each campaign writes its own part, rewritten whole after every row (write beside, then
rename), so a killed campaign loses nothing it measured and concurrent writers never clobber each other.
Readers merge all parts."""

from __future__ import annotations

import io
import os
import time
import warnings
from pathlib import Path

import pandas as pd

from tuner.store.paths import read_roots


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
    """Whole or not at all: written beside, then renamed over (a reader, or a kill, never meets half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def read_parts(pattern: str, root: Path) -> pd.DataFrame:
    """The rows of every part matching `pattern` under the store `root` (and the recordings an installed
    package ships: tuner.store.paths.read_roots), merged."""
    frames = []
    for part in [p for r in read_roots(root) for p in sorted(Path(r).glob(pattern))]:
        try:  # one read of the whole file: a writer may replace it meanwhile, and the old inode stays whole
            frames.append(pd.read_parquet(io.BytesIO(part.read_bytes())))
        except Exception as e:  # noqa: BLE001  (pyarrow's errors: truncated, not Parquet at all)
            # one damaged file (copied in half from another host, say) must not take every query down with it
            warnings.warn(
                f"{part}: not a readable Parquet file ({str(e).splitlines()[0]}); left out: move it "
                "aside or copy it again",
                stacklevel=2,
            )
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def recorded_gpu(cachefile: Path) -> str | None:
    """The GPU a Kernel Tuner cache under results/<gpu>/<workload>/ was measured on, as the store names it.
    (The cache's own device name is the host CPU's for host-code spaces, which the C backend runs.)
    The folder is one GPU's, so the first part that names a GPU answers; only its `gpu` column is read
    (every replay asks, and a strategy comparison replays hundreds of times)."""
    for part in sorted((Path(cachefile).parent / "evaluations").glob("*.parquet")):
        gpus = pd.read_parquet(io.BytesIO(part.read_bytes()), columns=["gpu"])["gpu"].dropna()
        if len(gpus):
            return str(gpus.iloc[0])
    return None
