"""A workload folder's layout, and the workloads a folder holds: each sub-folder with a `space.yaml` (and
optionally a `workload.py`). The registry (tuner.workloads.registry) finds workloads there; the error for a
name nothing defines (tuner.workloads.not_found) and `tuner init` (tuner.workloads.scaffold) read the same
layout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SPACE_FILE = "space.yaml"
MODULE_FILE = "workload.py"


@dataclass(frozen=True)
class Found:
    """Where one workload is defined: how to load it, and what `tuner list` shows as its origin."""

    name: str
    origin: str  # "built-in", the folder, or "package <dist> (<entry point>)"
    space_path: Path
    sources_within: Path
    module: str | None = None  # an importable module defining WORKLOAD
    module_file: Path | None = None  # its workload.py: the user's (loaded from the file), or an installed package's
    error: str | None = None  # why it cannot be loaded (an entry point that names no package): its commands say it


def folder_workloads(folder: Path) -> list[Found]:
    """The workloads in a folder: each sub-folder holding a space.yaml."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and (p / SPACE_FILE).is_file()):
        module = sub / MODULE_FILE
        found.append(Found(sub.name, str(sub), sub / SPACE_FILE, sub, module_file=module if module.is_file() else None))
    return found
