"""Which GPU's measurements answer when none is named: this machine's GPU where it has some, else the GPU
with the most successful measurements at the size, else overall (a tie: the first name). `tuner best`
(tuner.answers.best_config) and a replay (tuner.store.recordings) choose by this one rule."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def choose_gpu(ok: pd.DataFrame, wanted: str | None, size: dict | None = None) -> tuple[str, bool]:
    """The GPU to answer from among the successful rows `ok` (columns gpu and size_vars, not empty), and
    whether it is `wanted` (this machine's, or the one asked for)."""
    if wanted and (ok["gpu"] == wanted).any():
        return wanted, True
    pool = ok
    if size is not None:
        at_size = ok[ok["size_vars"] == json.dumps(size, sort_keys=True)]
        pool = at_size if not at_size.empty else ok
    counts = pool["gpu"].value_counts()
    return str(min(counts[counts == counts.max()].index)), False  # a tie: the first name, whatever the file order
