"""Where things are: the built-in workloads (a source checkout's top-level `spaces/`, `kernels/` and
`results/`, or the same folders carried inside an installed wheel as `tuner/_builtin/`), and the user's
project (its workloads folder and results folder, from `tuner.toml` or `[tool.tuner]` in the nearest
`pyproject.toml`, overridden by the environment)."""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = _PACKAGE.parent


def _builtin_root() -> Path:
    """A source checkout keeps the built-ins beside the package; a wheel carries them inside it."""
    if (_CHECKOUT / "spaces").is_dir() and (_CHECKOUT / "kernels").is_dir():
        return _CHECKOUT
    return _PACKAGE / "_builtin"


BUILTIN_ROOT = _builtin_root()
BUILTIN_SPACES = BUILTIN_ROOT / "spaces"
BUILTIN_KERNELS = BUILTIN_ROOT / "kernels"
INSTALLED = BUILTIN_ROOT != _CHECKOUT
# the recordings committed with the built-ins (the checkout's store, results/store; the wheel carries it as
# _builtin/results); an installed package reads them (read-only) beside the user's store
BUILTIN_RESULTS = BUILTIN_ROOT / ("results" if INSTALLED else "results/store")
# a source checkout's root (git provenance, the LocVolCalib reference data); None in an installed package
CHECKOUT_ROOT: Path | None = None if INSTALLED else _CHECKOUT


def user_cache(kind: str) -> Path:
    """The folder of this user's derived files of one kind (compiled host libraries, caches derived from the
    store's rows): $TUNER_CACHE, else $XDG_CACHE_HOME/gpu-tuner, else ~/.cache/gpu-tuner. Anything there can be
    deleted at any time; it is made again when needed."""
    root = os.environ.get("TUNER_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-tuner"
    return Path(root) / kind


def builtin_space(name: str) -> Path:
    """The space file of the built-in workload `name`."""
    return BUILTIN_SPACES / f"{name}.yaml"


@dataclass(frozen=True)
class ProjectSettings:
    """The user's project: `folder` holds the settings file (or is the working directory)."""

    folder: Path
    workloads: Path
    results: Path
    source: Path | None  # the settings file, if any


SETTING_KEYS = ("workloads", "results")  # the keys of tuner.toml and of [tool.tuner]: folders, relative to the file


def _settings_in(folder: Path) -> tuple[dict, Path] | None:
    """The settings in `folder` (tuner.toml, else pyproject.toml's [tool.tuner]) and their file, checked; None
    if it has neither."""
    tuner_toml = folder / "tuner.toml"
    if tuner_toml.is_file():
        return _checked(_read_toml(tuner_toml), tuner_toml, []), tuner_toml
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        tool = _read_toml(pyproject).get("tool", {})
        if isinstance(tool, dict) and "tuner" in tool:
            return _checked(tool["tuner"], pyproject, ["tool", "tuner"]), pyproject
    return None


def _checked(doc: object, path: Path, key_path: list[str]) -> dict:
    """`doc`, the settings table at `key_path` of `path`, once every key is known and every value is text: a
    mistyped key would otherwise be ignored, and the project's workloads silently looked for elsewhere."""
    from tuner.errors import TunerError

    where = ".".join(key_path)
    if not isinstance(doc, dict):
        raise TunerError(f"{path}: at {where}: expected a table of settings ({', '.join(SETTING_KEYS)})")
    for key, value in doc.items():
        at = ".".join([*key_path, key])
        if key not in SETTING_KEYS:
            close = difflib.get_close_matches(key, SETTING_KEYS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise TunerError(f"{path}: at {at}: unknown key '{key}' (known: {', '.join(SETTING_KEYS)}){hint}")
        if not isinstance(value, str) or not value:
            raise TunerError(f"{path}: at {at}: expected a folder (a non-empty string), got {value!r}")
    return doc


def _read_toml(path: Path) -> dict:
    from tuner.errors import TunerError

    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise TunerError(f"{path}: not a readable TOML file ({e})") from None


@lru_cache(maxsize=8)
def _project(cwd: Path) -> ProjectSettings:
    for folder in (cwd, *cwd.parents):
        found = _settings_in(folder)
        if found is not None:
            doc, source = found
            return ProjectSettings(
                folder, folder / doc.get("workloads", "workloads"), folder / doc.get("results", "results"), source
            )
    return ProjectSettings(cwd, cwd / "workloads", cwd / "results", None)


def project() -> ProjectSettings:
    """The settings of the project the working directory is in (the nearest tuner.toml or pyproject.toml with a
    [tool.tuner] table), with TUNER_WORKLOADS and TUNER_RESULTS applied."""
    found = _project(Path.cwd().resolve())
    workloads = Path(os.environ["TUNER_WORKLOADS"]) if os.environ.get("TUNER_WORKLOADS") else found.workloads
    results = Path(os.environ["TUNER_RESULTS"]) if os.environ.get("TUNER_RESULTS") else found.results
    return ProjectSettings(found.folder, workloads, results, found.source)
