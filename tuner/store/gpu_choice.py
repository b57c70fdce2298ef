"""Which GPU's measurements answer when none is named: this machine's GPU where it has some, else the GPU
with the most successful measurements at the size, else overall (a tie: the first name). `tuner best`
(tuner.answers.best_config) and a replay (tuner.store.recording_choice) choose by this one rule. And which stored GPU
a name given by the user (`--gpu`, the Python API's `gpu=`) means: stored_gpu_name, for every command."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tuner.errors import TunerError
from tuner.store.paths import gpu_slug

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


def stored_gpu_name(stored: Iterable[str], gpu: str) -> str | None:
    """The GPU of `stored` (the store's GPU names) that `gpu` names: by its name or its folder's (`nvidia-h200`,
    as --simulate offers), in any case and punctuation (`nvidia h200`), else by whole words of one name only
    (`h200`, `H100 80GB`); None where it names none. Whole words, not any substring: `h20` or `a10` are other
    GPUs than the H200 or A100. A name whose words several stored GPUs hold is an error naming them."""
    names = sorted({str(n) for n in stored})
    if gpu in names:
        return gpu
    wanted = gpu_slug(gpu)
    same = [n for n in names if gpu_slug(n) == wanted]
    if same:
        return same[0]
    holding = [n for n in names if f"-{wanted}-" in f"-{gpu_slug(n)}-"]
    if len(holding) > 1:
        raise TunerError(f"GPU '{gpu}' names several stored GPUs ({', '.join(holding)}): give more of its name")
    return holding[0] if holding else None


def named_gpu(stored: Iterable[str], gpu: str, kept: str = "stored") -> tuple[str | None, str | None]:
    """stored_gpu_name, and a note where only some of the words of `gpu` named it (`kept`: how the GPUs are kept,
    "stored" or "recorded")."""
    name = stored_gpu_name(stored, gpu)
    if name is None or gpu_slug(name) == gpu_slug(gpu):
        return name, None
    return name, f"GPU '{gpu}' taken as {name}, the one {kept} GPU of that name"


def required_gpu(stored: Iterable[str], gpu: str, what: str) -> str:
    """The GPU of `stored` that `gpu` names (stored_gpu_name), or the error that lists those stored (`what` was
    measured there: e.g. `successful reduction`), where a command answers for that GPU only."""
    stored = list(stored)
    name = stored_gpu_name(stored, gpu)
    if name is None:
        raise unknown_gpu(gpu, stored, what)
    return name


def unknown_gpu(gpu: str, stored: Iterable[str], what: str) -> TunerError:
    """The error for a GPU that `stored_gpu_name` found none of `what` (e.g. `reduction`) stored on."""
    names = sorted({str(n) for n in stored})
    return TunerError(f"no {what} measurement is stored on GPU '{gpu}'; stored: {', '.join(names) or 'none'}")
