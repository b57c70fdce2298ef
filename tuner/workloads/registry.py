"""Finding workloads, in this order: the built-ins; the user's workloads folder (`./workloads`, or what the
project's settings name: tuner.locations.project); packages installed with an entry point in the group
`gpu_tuner.workloads`. A name defined twice is an error that names both places, for the commands that use
that name.

A workload is a folder holding `space.yaml`, the kernel source(s) it names, and optionally `workload.py`
defining `WORKLOAD` (an instance of a tuner.workloads.Workload subclass) for what YAML cannot say. Without
it, the space declares its arguments and reference (tuner.workloads.declared). Its name is the folder's (an
installed package's: its entry point's), and the space's `workload:` key must say the same."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.metadata import entry_points
from pathlib import Path

import yaml

from tuner import locations
from tuner.errors import TunerError
from tuner.workloads.base import Workload

ENTRY_POINT_GROUP = "gpu_tuner.workloads"
SPACE_FILE = "space.yaml"
MODULE_FILE = "workload.py"

# the built-ins: space spaces/<name>.yaml, kernels under kernels/, Python module here
BUILTINS = {
    "reduction": "tuner.workloads.reduction",
    "spmv": "tuner.workloads.spmv",
    "gemm": "tuner.workloads.gemm",
    "floyd-warshall": "tuner.workloads.floyd_warshall",
    "floyd-warshall-small": "tuner.workloads.floyd_warshall_small",  # a reduced space to brute-force
    "locvolcalib": "tuner.workloads.locvolcalib",
    "floyd-warshall-cpu": "tuner.workloads.floyd_warshall_cpu",  # CPU code (g++, OpenMP, SIMD)
    "gemm-cpu": "tuner.workloads.gemm_cpu",
}


@dataclass(frozen=True)
class Found:
    """Where one workload is defined: how to load it, and what `tuner list` shows as its origin."""

    name: str
    origin: str  # "built-in", the folder, or "package <dist> (<entry point>)"
    space_path: Path
    sources_within: Path
    module: str | None = None  # an importable module defining WORKLOAD
    module_file: Path | None = None  # a workload.py in the user's folder


def _builtins() -> list[Found]:
    return [
        Found(name, "built-in", locations.builtin_space(name), locations.BUILTIN_ROOT, module=module)
        for name, module in BUILTINS.items()
    ]


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


def _installed() -> list[Found]:
    """Entry points name an importable package laid out as a user's workload folder (space.yaml, kernels,
    optionally workload.py): `name = "pkg.subpackage"`."""
    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        package = ep.value.split(":")[0]
        spec = importlib.util.find_spec(package)
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        if not folders:
            raise TunerError(
                f"entry point '{ep.name}' of group {ENTRY_POINT_GROUP} names '{ep.value}', which is not "
                "an importable package (a folder with space.yaml)"
            )
        folder = Path(folders[0])
        dist = getattr(ep, "dist", None)
        module = f"{package}.workload" if (folder / MODULE_FILE).is_file() else None
        found.append(
            Found(
                ep.name,
                f"package {dist.name if dist else '?'} ({ep.value})",
                folder / SPACE_FILE,
                folder,
                module=module,
            )
        )
    return found


@lru_cache(maxsize=8)
def _discover(workloads_folder: Path, stamp: int | None = None) -> tuple[dict[str, Found], dict[str, str]]:
    """Every workload by name (a name defined twice: where it was found first), and the names defined twice
    with the error that says where. `stamp`: the folder's modification time, so a workload added meanwhile
    (`tuner init` from a notebook) is found."""
    table: dict[str, Found] = {}
    twice: dict[str, list[str]] = {}
    for f in [*_builtins(), *folder_workloads(workloads_folder), *_installed()]:
        if f.name in table:
            twice.setdefault(f.name, [table[f.name].origin]).append(f.origin)
        else:
            table[f.name] = f
    return table, {name: _defined_twice(name, origins) for name, origins in twice.items()}


def _defined_twice(name: str, origins: list[str]) -> str:
    """The error of a name defined in each of `origins`, said by the commands that use that name only (a
    built-in added by an upgrade, say, leaves the user's other workloads usable)."""
    if origins[0] == "built-in":
        fix = f"a built-in's name is reserved: rename {' and '.join(origins[1:])}"
    else:
        fix = "rename one of them"
    return f"workload '{name}' is defined twice: {' and '.join(origins)}; {fix}"


def taken(name: str, workloads_folder: Path) -> str | None:
    """Where the workload `name` is already defined (its origin, as `tuner list` shows it) for a project whose
    workloads folder is `workloads_folder`; None if the name is free. Installed packages are known by their
    entry points, without importing them."""
    if name in BUILTINS:
        return "built-in"
    folder = Path(workloads_folder) / name
    if folder.exists():
        return str(folder)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            dist = getattr(ep, "dist", None)
            return f"package {dist.name if dist else '?'} ({ep.value})"
    return None


def _folder_stamp(folder: Path) -> int | None:
    try:
        return folder.stat().st_mtime_ns
    except OSError:
        return None


def discover() -> dict[str, Found]:
    """Every workload this project sees, by name, in discovery order. A name defined twice is listed once
    (where it was found first); get_workload() of it is the error that names both places."""
    folder = locations.project().workloads.resolve()
    return _discover(folder, _folder_stamp(folder))[0]


def _instantiate(found: Found) -> Workload:
    if found.module is not None:
        workload = importlib.import_module(found.module).WORKLOAD
    elif found.module_file is not None:
        module_name = f"tuner_user_workload_{found.name.replace('-', '_')}"
        spec = importlib.util.spec_from_file_location(module_name, found.module_file)
        assert spec is not None and spec.loader is not None  # a .py file always has a spec and a loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pickling look the module up by name
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001  (a user's module: whatever it raises is said in one line)
            raise TunerError(f"{found.module_file}: cannot be imported: {type(e).__name__}: {e}") from None
        workload = getattr(module, "WORKLOAD", None)
        if not isinstance(workload, Workload):
            raise TunerError(f"{found.module_file}: must define WORKLOAD, an instance of a tuner.Workload subclass")
    else:
        from tuner.workloads.declared import DeclaredWorkload

        workload = DeclaredWorkload()
    workload.name = found.name
    workload.space_path, workload.sources_within, workload.origin = found.space_path, found.sources_within, found.origin
    return workload


@cache
def _get(name: str, workloads_folder: Path, stamp: int | None) -> Workload:
    table, twice = _discover(workloads_folder, stamp)
    if name in twice:
        raise TunerError(twice[name])
    if name not in table:
        raise TunerError(f"unknown workload '{name}'; known: {', '.join(sorted(table))}")
    _check_declared_name(table[name])
    return _instantiate(table[name])


def _check_declared_name(found: Found) -> None:
    """The space's `workload:` key must be the workload's name (its folder's, or its entry point's): the name
    every command and the store go by. A space that cannot be read is left for the loader to report."""
    try:
        doc = yaml.safe_load(found.space_path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return
    declared = doc.get("workload") if isinstance(doc, dict) else None
    if isinstance(declared, str) and declared != found.name:
        if found.origin.startswith("package "):
            named, fix = "the name of its entry point", "or rename the entry point"
        else:
            named, fix = "the name of its folder", "or rename the folder"
        raise TunerError(
            f"{found.space_path}: at workload: '{declared}' is not the workload's name '{found.name}' "
            f"({named}); write `workload: {found.name}`, {fix}"
        )


def get_workload(name: str) -> Workload:
    folder = locations.project().workloads.resolve()
    return _get(name, folder, _folder_stamp(folder))


def all_workloads() -> list[Workload]:
    """Every workload, by name; the first that cannot be loaded (a name defined twice, a broken module) is
    the error."""
    return [get_workload(n) for n in sorted(discover())]
