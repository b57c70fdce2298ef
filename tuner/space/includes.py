"""A kernel's local headers: the files its source #includes with quotes, found as its build finds them. One
resolver for the three that need them: the kernel hash covers them (tuner.measure.provenance.kernel_hash),
`tuner init --kernel` copies them (tuner.workloads.scaffold), the dry run reads the kernel's declarations in
them (tuner.workloads.signature)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# `#include "file"` at the start of a line (a comment that holds one counts too: hashing a file more is harmless)
QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)


@dataclass(frozen=True)
class Include:
    """One quoted #include of a kernel source or of a file it includes."""

    name: str  # as written between the quotes
    by: Path  # the file that includes it
    path: Path | None  # the file it names, as found (normalized); None where it is not found
    label: str  # `path` relative to the kernel's folder ('/'-separated; `..` where it lies outside); else `name`


def quoted_includes(source: Path) -> list[Include]:
    """The quoted #includes of a kernel `source`, and of the files they name, recursively, in the order the
    preprocessor meets them (depth first); each file found once, each name not found once per including file.
    A name is looked for beside the file that includes it, then in the kernel's folder: where a build finds it
    (the kernel's folder is on the include path, Space.build_flags). Angle-bracket includes are the system's,
    not read. Never raises: an unreadable file includes nothing."""
    source = Path(os.path.abspath(source))
    root = source.parent
    seen = {os.path.realpath(source)}
    missing: set[tuple[Path, str]] = set()
    out: list[Include] = []
    stack = [(source, iter(_quoted_names(source)))]
    while stack:
        file, names = stack[-1]
        name = next(names, None)
        if name is None:
            stack.pop()
            continue
        found = next((p for p in (file.parent / name, root / name) if _is_file(p)), None)
        if found is None:
            if (file, name) not in missing:
                missing.add((file, name))
                out.append(Include(name, file, None, name))
            continue
        found = Path(os.path.normpath(found))
        key = os.path.realpath(found)
        if key in seen:
            continue
        seen.add(key)
        out.append(Include(name, file, found, Path(os.path.relpath(found, root)).as_posix()))
        stack.append((found, iter(_quoted_names(found))))
    return out


def _quoted_names(file: Path) -> list[str]:
    try:
        text = file.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return []
    return QUOTED_INCLUDE.findall(text)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte, no permission
        return False
