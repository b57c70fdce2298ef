"""How a space file's mistakes are said: SpaceError, one line naming the file and the key path; and
kernel_path, the one rule for a file a space names (relative to the space file, inside the workload's
folder). The loader and the declaration check (tuner.space.declaration) both raise through these."""

from __future__ import annotations

from pathlib import Path

from tuner.errors import TunerError


class SpaceError(TunerError):
    def __init__(self, path: str | Path, key_path: list, message: str) -> None:
        where = ".".join(str(k) for k in key_path) or "(top level)"
        super().__init__(f"{path}: at {where}: {message}")


def kernel_path(space_path: Path, name: str, key_path: list, within: Path | None = None) -> Path:
    """A file a space names (a kernel source, a reference kernel; relative to the space file, or absolute),
    checked to exist and to lie inside `within` (default: the space file's folder; symbolic links are
    followed), so a workload, which may be shared, cannot make the tuner read files outside its folder."""
    folder = Path(space_path).resolve().parent
    source = (folder / name).resolve()
    allowed = Path(within).resolve() if within is not None else folder
    if not source.is_relative_to(allowed):
        raise SpaceError(space_path, key_path, f"'{name}' lies outside the workload's folder {allowed}")
    if not source.is_file():
        raise SpaceError(space_path, key_path, f"'{name}' does not exist (looked for {source})")
    return source
