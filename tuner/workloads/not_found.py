"""The error of a workload name that nothing defines, in one line that helps: the names known, the nearest where
the name looks misspelt, where the user's workloads were looked for and why there, and the likely mistakes seen
on the way (tuner run from inside a workload's folder, a folder without space.yaml, a space.yml)."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Collection
from pathlib import Path

from tuner import locations
from tuner.workloads.folders import SPACE_FILE, folder_workloads


def unknown_workload(name: str, known: Collection[str], folder: Path) -> str:
    """The error of a name no workload has: the names known, the nearest of them where the name looks misspelt,
    where the user's workloads were looked for and why there, and the likely mistakes seen on the way (a folder
    without space.yaml, a space.yml, tuner run from inside a workload's folder)."""
    close = [f"did you mean '{match}'" for match in difflib.get_close_matches(name, known, n=1)]  # misspelt
    return "; ".join(
        [
            f"unknown workload '{name}'; known: {', '.join(sorted(known))}",
            *close,
            _looked_in(folder),
            *_mistakes(name, folder),
        ]
    )


def _looked_in(folder: Path) -> str:
    """Where the user's workloads were looked for, and what chose that folder."""
    settings = locations.project()
    if os.environ.get("TUNER_WORKLOADS"):
        why = "given by --workloads or $TUNER_WORKLOADS"
    elif settings.source is not None:
        why = f"the project of {settings.source}"
    else:
        why = f"no tuner.toml or [tool.tuner] in {settings.folder} or above: the working directory is the project"
    return f"looked for your workloads in {folder} ({why})" + ("" if folder.is_dir() else ": no such folder")


# what a user may have named the space file instead: space.yml, Space.yaml, space.yaml.txt
_LIKE_SPACE_FILE = re.compile(r"space\.ya?ml(\.\w+)?", re.IGNORECASE)
_SHOWN_FOLDERS = 3  # folders without a space file named in the error; the rest are counted


def _mistakes(name: str, folder: Path) -> list[str]:
    """The likely reasons a workload was not found, in words: where tuner was run from, and the folders in
    `folder` that discovery skipped (no space.yaml), the one named `name` first."""
    return [*_run_from(folder), *_skipped_folders(name, folder)]


def _run_from(folder: Path) -> list[str]:
    """A working directory that is a workload's folder, or the workloads folder itself; or, where `folder` does
    not exist, how to name the project's."""
    cwd = Path.cwd()
    if _space_file_in(cwd) is not None:
        up = " (cd ../..)" if cwd.parent.name == folder.name else ""
        return [f"the working directory {cwd} is a workload's folder: run tuner from the project's folder{up}"]
    if folder_workloads(cwd) and cwd.resolve() != folder.resolve():
        return [
            f"the working directory {cwd} holds workload folders: run tuner from the folder above it, "
            "or give `--workloads .`"
        ]
    if not folder.is_dir():
        return [
            "run tuner from your project's folder, or name its workloads folder with --workloads DIR "
            'or in a tuner.toml (workloads = "DIR")'
        ]
    return []


def _skipped_folders(name: str, folder: Path) -> list[str]:
    """The folders of `folder` without a space.yaml (the one named `name` first): each with the file it has
    instead (space.yml), or said to have none."""
    try:
        subs = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))]
    except OSError:  # no such folder (said already), or unreadable
        return []
    skipped = sorted((p for p in subs if not (p / SPACE_FILE).is_file()), key=lambda p: (p.name != name, p.name))
    said = []
    for sub in skipped[:_SHOWN_FOLDERS]:
        like = _space_file_in(sub)
        has = f"has {like.name}, not {SPACE_FILE}: rename it" if like is not None else f"has no {SPACE_FILE}"
        said.append(f"{_relative(sub)} {has}")
    if len(skipped) > _SHOWN_FOLDERS:
        said.append(f"{len(skipped) - _SHOWN_FOLDERS} more folders there have no {SPACE_FILE}")
    return said


def _space_file_in(folder: Path) -> Path | None:
    """The space file of `folder`, or the file a user may have meant as one (space.yml), if any."""
    if (folder / SPACE_FILE).is_file():
        return folder / SPACE_FILE
    try:
        return next((p for p in sorted(folder.iterdir()) if p.is_file() and _LIKE_SPACE_FILE.fullmatch(p.name)), None)
    except OSError:
        return None


def _relative(path: Path) -> str:
    """A path relative to the working directory when it is inside it (workloads/saxpy), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
