"""Finding workloads, in this order: the built-ins; the user's workloads folder (`./workloads`, or what the
project's settings name: tuner.locations.project); packages installed with an entry point in the group
`gpu_tuner.workloads`. A name defined twice is an error that names both places, for the commands that use
that name.

A workload is a folder holding `space.yaml`, the kernel source(s) it names, and optionally `workload.py`
defining `WORKLOAD` (an instance of a tuner.workloads.Workload subclass) for what YAML cannot say. Without
it, the space declares its arguments and reference (tuner.workloads.declared). Its name is the folder's (an
installed package's: its entry point's), and the space's `workload:` key must say the same."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import re
import reprlib
import sys
from collections.abc import Callable
from functools import cache, lru_cache, partial
from importlib.metadata import entry_points
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from tuner import locations
from tuner.errors import TunerError, one_line
from tuner.space.document import declared_workload
from tuner.workloads.base import Workload
from tuner.workloads.folders import MODULE_FILE, SPACE_FILE, Found, folder_workloads

ENTRY_POINT_GROUP = "gpu_tuner.workloads"

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


def _builtins() -> list[Found]:
    return [
        Found(name, "built-in", locations.builtin_space(name), locations.BUILTIN_ROOT, module=module)
        for name, module in BUILTINS.items()
    ]


def _installed() -> list[Found]:
    """Entry points name an importable package laid out as a user's workload folder (space.yaml, kernels,
    optionally workload.py): `name = "pkg.subpackage"`. Finding the package imports its parents (their
    `__init__.py`): what they print goes to stderr, and one that cannot be imported, or names no package, is
    that workload's error (said by the commands that use it, and by `tuner list`), not every command's."""
    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        package = ep.value.split(":")[0]
        dist = getattr(ep, "dist", None)
        origin = f"package {dist.name if dist else '?'} ({ep.value})"
        named = f"entry point '{ep.name}' of group {ENTRY_POINT_GROUP} names '{ep.value}'"
        try:
            spec = _user_code(named, partial(importlib.util.find_spec, package))
        except TunerError as e:
            found.append(Found(ep.name, origin, Path(), Path(), error=str(e)))
            continue
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        if not folders:
            error = f"{named}, which is not an importable package (a folder with space.yaml)"
            found.append(Found(ep.name, origin, Path(), Path(), error=error))
            continue
        folder = Path(folders[0])
        module_file = folder / MODULE_FILE
        has_module = module_file.is_file()
        found.append(
            Found(
                ep.name,
                origin,
                folder / SPACE_FILE,
                folder,
                module=f"{package}.workload" if has_module else None,
                module_file=module_file if has_module else None,
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
    workload: object
    if found.module is not None:  # a built-in's, or an installed package's workload.py
        module_name = found.module
        where: object = found.module_file or module_name
        module = _user_code(where, partial(importlib.import_module, module_name))
    elif found.module_file is not None:
        where = found.module_file
        module = _user_code(where, partial(_import_file, found.name, found.module_file))
    else:
        from tuner.workloads.declared import DeclaredWorkload

        workload = DeclaredWorkload()
        where = None
    if where is not None:
        workload = _user_code(where, partial(getattr, module, "WORKLOAD", None))  # a module __getattr__ runs
        if not isinstance(workload, Workload):
            hint = ""
            if isinstance(workload, type) and issubclass(workload, Workload):
                hint = f" (WORKLOAD is the class {workload.__name__}: write WORKLOAD = {workload.__name__}())"
            raise TunerError(f"{where}: must define WORKLOAD, an instance of a tuner.Workload subclass{hint}")
        _check_hooks(workload, where)
    assert isinstance(workload, Workload)
    workload.name = found.name
    workload.space_path, workload.sources_within, workload.origin = found.space_path, found.sources_within, found.origin
    return workload


def _import_file(name: str, path: Path) -> Any:
    """The user's workload.py, imported as the module `tuner_user_workload_<name>` (left out of sys.modules if
    it cannot be imported, as `import` does)."""
    module_name = "tuner_user_workload_" + re.sub(r"\W", "_", name)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has a spec and a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


T = TypeVar("T")


def _user_code(where: object, load: Callable[[], T]) -> T:
    """`load()`, which runs a user's module (importing it): what it prints goes to stderr (stdout is the
    tuner's: `tuner list --json`, say), and whatever it raises, sys.exit() included, is one line naming
    `where` (a file, or an entry point). Ctrl-C stays Ctrl-C."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return load()
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001  (a user's module: whatever it raises is said in one line)
        raise TunerError(f"{where}: cannot be imported: {one_line(e)}{_line_in(e, where)}") from None


def _line_in(e: BaseException, where: object) -> str:
    """Where the exception was raised: " (line N)", the last line of the file `where` it went through; else
    " (FILE, line N)", the innermost line of a file (not Python's import machinery) it went through."""
    machinery = ("<", str(Path(importlib.__file__).parent), __file__)  # frozen modules, importlib, this file
    lines = [(tb.tb_frame.f_code.co_filename, tb.tb_lineno) for tb in _traceback(e)]
    lines = [(file, line) for file, line in lines if not file.startswith(machinery)]
    here = [line for file, line in lines if file == str(where)]
    if here:
        return f" (line {here[-1]})"
    return f" ({lines[-1][0]}, line {lines[-1][1]})" if lines else ""


def _traceback(e: BaseException) -> list[TracebackType]:
    tb, out = e.__traceback__, []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


@cache
def _hooks() -> dict[str, inspect.Signature]:
    """The hooks a workload may override, by name, with the signatures the tuner calls them by: the public
    methods of tuner.Workload."""
    return {
        name: inspect.signature(f)
        for name, f in vars(Workload).items()
        if inspect.isfunction(f) and not name.startswith("_")
    }


def _check_hooks(workload: Workload, where: object) -> None:
    """Every hook the workload overrides can be called as the tuner calls it (its positional arguments, as
    tuner.Workload declares them): else one line naming `where`, each such hook, and the signature expected.
    A method tuner.Workload does not have is the workload's own business."""
    wrong = []
    for name, expected in _hooks().items():
        if inspect.getattr_static(workload, name) is vars(Workload)[name]:
            continue  # not overridden
        want = f"{name}{_shown(expected)}"
        try:
            hook = getattr(workload, name)
        except Exception as e:  # noqa: BLE001  (a property that raises, say)
            wrong.append(f"{type(workload).__name__}.{name} cannot be read ({one_line(e)}): the hook is {want}")
            continue
        if not callable(hook):
            shown = reprlib.repr(hook)
            wrong.append(f"{type(workload).__name__}.{name} is {shown}, not a method: the hook is {want}")
            continue
        try:
            signature = inspect.signature(hook)
        except (TypeError, ValueError):  # a callable whose signature Python cannot say: left to run
            continue
        positional = [p for p in list(expected.parameters.values())[1:] if p.kind in _POSITIONAL]
        try:
            signature.bind(*positional)
        except TypeError:
            wrong.append(f"{_defined(workload, name, hook, where)} cannot be called as the hook {want}")
    if wrong:
        raise TunerError(f"{where}: {'; '.join(wrong)}")


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _shown(signature: inspect.Signature) -> str:
    """A signature without its annotations: `(self, size, dtype)`."""
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def _defined(workload: Workload, name: str, hook: Callable, where: object) -> str:
    """The hook as the user wrote it: `W.parse_size(self) (line 4)`; `(helpers.py, line 4)` from another file."""
    function = getattr(hook, "__func__", hook)
    try:
        shown = f"{getattr(function, '__qualname__', name)}{_shown(inspect.signature(function))}"
    except (TypeError, ValueError):
        shown = f"{type(workload).__name__}.{name}"
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return shown
    if code.co_filename == str(where):
        return f"{shown} (line {code.co_firstlineno})"
    return f"{shown} ({code.co_filename}, line {code.co_firstlineno})"


@cache
def _get(name: str, workloads_folder: Path, stamp: int | None) -> Workload:
    table, twice = _discover(workloads_folder, stamp)
    if name in twice:
        raise TunerError(twice[name])
    if name not in table:
        from tuner.workloads.not_found import unknown_workload  # the error's path only

        raise TunerError(unknown_workload(name, table, workloads_folder))
    if table[name].error is not None:
        raise TunerError(table[name].error)
    _check_declared_name(table[name])
    return _instantiate(table[name])


def _check_declared_name(found: Found) -> None:
    """The space's `workload:` key must be the workload's name (its folder's, or its entry point's): the name
    every command and the store go by. A space that cannot be read is left for the loader to report."""
    declared = declared_workload(found.space_path)  # its document parsed once, kept for the space's loading
    if declared is not None and declared != found.name:
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
