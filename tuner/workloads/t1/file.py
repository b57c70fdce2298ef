"""A T1 file read: its JSON, the parts this import reads validated against the published T1 schema, and
every mistake one line naming the file and the key (a SpaceError, as a space file's are)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

from tuner.errors import TunerError
from tuner.space import SpaceError


class T1File:
    """The T1 file at `path`: `doc` (its JSON) and `spec` (its KernelSpecification)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.doc = _read(self.path)
        _validate(self.doc, self.path)
        self.spec = self.doc["KernelSpecification"]

    def fail(self, key_path: list, message: str) -> NoReturn:
        raise SpaceError(self.path, key_path, message)


def kernel_file_of(t1_path: Path) -> Path:
    """The kernel source a T1 file names (KernelFile, relative to the T1 file's folder), checked to exist."""
    t1_path = Path(t1_path)
    doc = _read(t1_path)
    name = doc.get("KernelSpecification", {}).get("KernelFile")
    if not isinstance(name, str) or not name:
        raise SpaceError(t1_path, ["KernelSpecification", "KernelFile"], "missing: the kernel's source file")
    path = t1_path.parent / name
    if not path.is_file():
        raise SpaceError(
            t1_path,
            ["KernelSpecification", "KernelFile"],
            f"'{name}' does not exist (looked for {path}); give the kernel with --kernel",
        )
    return path


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise TunerError(f"{path}: no such T1 file") from None
    except UnicodeDecodeError:
        raise TunerError(f"{path}: not a T1 file (not text)") from None
    except json.JSONDecodeError as e:
        raise TunerError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    if not isinstance(doc, dict):
        raise SpaceError(path, [], "a T1 file is a JSON object with ConfigurationSpace and KernelSpecification")
    return doc


def _validate(doc: dict, path: Path) -> None:
    """The parts this import reads, against the published T1 schema (Kernel Tuner's copy). The rest of the
    file (General, Budget, Search, BenchmarkConfig) is not checked: published BAT files stray from the
    schema there (a Budget object for a list, a FormatVersion string)."""
    import jsonschema
    from kernel_tuner.file_utils import input_file_schema

    _, schema = input_file_schema()
    part = {k: doc[k] for k in ("ConfigurationSpace", "KernelSpecification") if k in doc}
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(part))
    if errors:
        e = jsonschema.exceptions.best_match(errors)
        try:
            from tuner.space.document import explain_schema_error

            message = explain_schema_error(e)
        except ImportError:  # the loader's wording moved: the schema's own message will do
            message = e.message
        raise SpaceError(path, list(e.absolute_path), message)
