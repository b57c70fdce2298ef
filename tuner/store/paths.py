"""Where the store keeps things: results/<gpu>/<workload>/ (evaluations/, baselines/, confirmations/ parts,
and Kernel Tuner's cache of each size and dtype beside them), and the results folder a user names, checked."""

from __future__ import annotations

import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

from tuner import locations
from tuner.errors import TunerError


def results_root() -> Path:
    """The results folder of the user's project (tuner.locations.project): where campaigns write."""
    return locations.project().results


def checked_results_folder(folder: str | Path | None, named: str, *, may_create: bool = False) -> Path | None:
    """The results folder the user named (`named`: as what, `--results` or `results`); None where none is (the
    project's). TunerError where it is not a folder that can be read: a typo must not read as an empty store,
    nor a campaign store its rows somewhere unintended. `may_create`: for a campaign, which creates it."""
    if not folder:
        return None
    path = Path(folder)
    if not path.exists():
        if may_create:
            return path
        raise TunerError(f"{named} {folder}: no such folder (a campaign, `tuner tune`, creates it)")
    if not path.is_dir():
        raise TunerError(f"{named} {folder}: not a folder")
    try:
        with os.scandir(path):
            pass
    except OSError as e:
        raise TunerError(f"{named} {folder}: cannot be read ({e.strerror or e})") from None
    return path


def read_roots(root: Path) -> list[Path]:
    """The folders a query reads: the project's store, and the recordings the built-in workloads ship with
    (read-only; a campaign never writes there): a wheel's package data, or a source checkout's committed store
    where an editable install runs in another project. Inside the checkout its store is the project's own, and
    `--results` elsewhere there reads that folder alone."""
    roots = [Path(root)]
    shipped = locations.BUILTIN_RESULTS
    elsewhere = locations.INSTALLED or locations.project().folder != locations.CHECKOUT_ROOT
    if elsewhere and shipped.is_dir() and shipped.resolve() != Path(root).resolve():
        roots.append(shipped)
    return roots


def new_campaign_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def workload_dir(root: Path, gpu: str, workload: str) -> Path:
    return Path(root) / gpu_slug(gpu) / workload


def cache_path(root: Path, gpu: str, workload: str, size_name: str, dtype: str) -> Path:
    return workload_dir(root, gpu, workload) / f"{safe_name(size_name)}_{dtype}.cache.json"


def gpu_slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-gpu"
