"""Writing a file whole or not at all: one helper for every write-then-rename in the tool (store parts, merged
Kernel Tuner caches, built host-code libraries, cached references), and text files written so (compressed where
their name ends in .gz: file_bytes). A leaf module: anything may import it."""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

_UMASK = os.umask(0o022)  # read once (setting it is the only way to read it), and put back at once
os.umask(_UMASK)


def write_atomically(path: Path, write: Callable[[Path], object], durable: bool = True) -> None:
    """`write(tmp)` writes the file to a temporary name of its own beside `path` (tempfile.mkstemp: concurrent
    writers never share one), which is fsync'd, renamed over `path`, and the folder fsync'd: after a crash the
    file is the old one or the new one, whole. On an exception the temporary file is removed. Not `durable`
    (a cache, made again if lost): no fsync, so a reader never meets half a file, but a crash may lose it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's file is the owner's alone; the file it replaces was not
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        _fsync_folder(path.parent)


def file_bytes(path: Path | str, text: str) -> bytes:
    """`text` as the bytes of the file `path`: gzip-compressed where its name ends in .gz (as Kernel Tuner's caches
    are shared: `cache.json.gz`), with no time in the gzip header (mtime 0): the same text, the same bytes."""
    data = text.encode()
    return gzip.compress(data, mtime=0) if str(path).endswith(".gz") else data


def write_text_atomically(path: Path | str, text: str, durable: bool = True) -> None:
    """`text` to `path` (file_bytes: compressed where it ends in .gz), whole or not at all (write_atomically)."""
    data = file_bytes(path, text)
    write_atomically(Path(path), lambda tmp: tmp.write_bytes(data), durable)


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform without folder handles (Windows): the rename is what there is
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
