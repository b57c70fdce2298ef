"""`tuner init`: a new workload folder (space.yaml and its kernel) in the user's workloads folder, from a
worked example (saxpy), from the user's own kernel file, or from a T1 input file (Kernel Tuner / BAT).

The folder is written beside its final place under a temporary name and renamed when complete, so a
failure leaves nothing half-written; nothing is written outside the workloads folder."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import yaml

from tuner.errors import TunerError
from tuner.space.includes import quoted_includes
from tuner.workloads.folders import MODULE_FILE, SPACE_FILE
from tuner.workloads.registry import taken
from tuner.workloads.signature import C_TYPES, argument_label, global_functions, ifndef_tunables, parameters_of


def init_workload(
    name: str,
    workloads_dir: Path,
    *,
    kernel: Path | None = None,
    t1: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Create `workloads_dir/name/` and return it: the saxpy example (neither `kernel` nor `t1`), a skeleton
    around the user's `kernel`, or the import of a T1 file (with its kernel, or with `kernel` instead). A name
    a workload already has (a built-in's, an installed package's, a folder's in `workloads_dir`) is refused
    before anything is written. The local files the kernel #includes with quotes come along (local_includes);
    `log` (default: standard error) is told which, and which could not be copied."""
    pattern = _workload_pattern()
    if not re.fullmatch(pattern, name):
        raise TunerError(
            f"'{name}' is not a valid workload name (expected lowercase letters, digits, '-' and '_', "
            f"starting with a letter: {pattern})"
        )
    workloads_dir = Path(workloads_dir)
    target = workloads_dir / name
    if target.exists():
        raise TunerError(f"{target}: already exists; choose another name, or remove it first")
    where = taken(name, workloads_dir)
    if where is not None:  # a second definition would make every use of the name an error
        raise TunerError(
            f"'{name}' is already the name of a workload ({where}); choose another name, "
            f"e.g. `tuner init {_free_name(name, workloads_dir)}`"
        )
    kernel = Path(kernel) if kernel is not None else None
    if kernel is not None and not kernel.is_file():
        raise TunerError(f"{kernel}: no such kernel file")

    files: dict[str, str | bytes]  # file name -> content
    if t1 is not None:
        from tuner.workloads.t1 import kernel_file_of, space_from_t1

        doc = space_from_t1(Path(t1), workload=name, kernel=kernel)
        source = kernel if kernel is not None else kernel_file_of(Path(t1))
        files = {SPACE_FILE: _t1_yaml(doc, Path(t1)), source.name: source.read_bytes()}
    elif kernel is not None:
        source = kernel
        files = {SPACE_FILE: _skeleton_yaml(name, kernel), kernel.name: kernel.read_bytes()}
    else:
        source = None
        files = {SPACE_FILE: _example("space.yaml").replace("{name}", name), f"{name}.cu": _example("saxpy.cu")}
    if len(files) < 2:
        raise TunerError(f"the kernel file may not be named {SPACE_FILE}: rename it")
    said: list[str] = []
    if source is not None:
        includes, said = local_includes(source)
        files.update((label, content) for label, content in includes.items() if label not in files)

    _write_folder(workloads_dir, name, files)
    for line in said:
        (log or _to_stderr)(line)
    return target


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def local_includes(kernel: Path) -> tuple[dict[str, bytes], list[str]]:
    """The files `kernel` #includes with quotes (recursively, as its build finds them: quoted_includes) that lie
    in its folder or below: their paths relative to that folder ('/'-separated) and contents, to copy beside
    the kernel in the workload's folder, where the build finds them alike; and the lines that say what was
    copied and, as warnings, what was not: an include outside the kernel's folder (the workload's folder must
    hold all of its sources), one not found, one named as a file of the workload itself."""
    files: dict[str, bytes] = {}
    said: list[str] = []
    root = Path(os.path.abspath(kernel)).parent
    reserved = {SPACE_FILE, MODULE_FILE, kernel.name}
    for include in quoted_includes(kernel):
        by = Path(os.path.relpath(include.by, root)).as_posix()
        quoted = f'{by} includes "{include.name}"'
        if include.path is None:
            said.append(
                f"warning: {quoted}, found neither beside it nor in {root}: not copied (the compiler will say "
                "if it cannot find it)"
            )
        elif include.label == ".." or include.label.startswith("../") or os.path.isabs(include.label):
            said.append(
                f"warning: {quoted}, which is {include.path}, outside the kernel's folder {root}: not copied; "
                "the workload's folder must hold every file of the kernel: copy it in and change the #include"
            )
        elif include.label in reserved:
            said.append(f"warning: {quoted}, named as a file of the workload itself: not copied; rename it")
        else:
            try:
                files[include.label] = include.path.read_bytes()
            except OSError as e:
                said.append(f"warning: {quoted}: cannot be read ({e.strerror or e}): not copied")
    if files:
        said.insert(0, f"copied {', '.join(files)}: the local files {kernel.name} #includes")
    return files, said


def _write_folder(workloads_dir: Path, name: str, files: dict[str, str | bytes]) -> None:
    """`workloads_dir/name/` holding `files`, written under a temporary name beside it and renamed when complete.
    A folder that cannot be written (read-only, full, not a folder) is one line naming it, and leaves nothing."""
    try:
        workloads_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".partial", dir=workloads_dir))
    except OSError as e:
        raise _cannot_create(workloads_dir, name, e) from None
    try:
        for file, content in files.items():  # a file's name may be a path below the folder: an #included header
            if "/" in file:
                (tmp / file).parent.mkdir(parents=True, exist_ok=True)
            (tmp / file).write_bytes(content.encode() if isinstance(content, str) else content)
        os.rename(tmp, workloads_dir / name)  # fails, rather than merging, if the folder appeared meanwhile
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _cannot_create(workloads_dir, name, e) from None
    except BaseException:  # Ctrl-C, a bug: nothing left behind either
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _cannot_create(workloads_dir: Path, name: str, e: OSError) -> TunerError:
    """One line, as other write failures are said: `…/workloads: cannot create foo (Read-only file system)`."""
    return TunerError(f"{workloads_dir}: cannot create {name} ({e.strerror or e})")


def _free_name(name: str, workloads_dir: Path) -> str:
    """A name like `name` that no workload has: my-NAME, else my-NAME-2, ..."""
    candidates = (f"my-{name}" + (f"-{i}" if i > 1 else "") for i in itertools.count(1))
    return next(c for c in candidates if taken(c, workloads_dir) is None)


def _workload_pattern() -> str:
    schema = json.loads(resources.files("tuner.space").joinpath("space.schema.json").read_text())
    return schema["properties"]["workload"]["pattern"]


# ---- the example: tuner/workloads/example/ (space.yaml says `{name}` where the workload's name goes) ---------
def _example(file: str) -> str:
    return resources.files("tuner.workloads").joinpath("example", file).read_text()


# ---- a skeleton around the user's kernel (read by tuner.workloads.signature) --------------------------------
def _parameters(text: str) -> list[tuple[str, str | None, bool]] | None:
    """(name, numpy dtype or None where unknown, is a pointer) per kernel parameter, as signature reads them;
    None if unreadable. A name that is a Python keyword is relabelled (argument_label)."""
    params = parameters_of(text)
    if params is None:
        return None
    names = {p.name for p in params}
    out = []
    for p in params:
        label = argument_label(p.name, names)
        names.add(label)
        out.append((label, C_TYPES.get(p.ctype), p.pointer))
    return out


def _values_around(default: int) -> tuple[list[int], str]:
    """A tunable's values in the skeleton and the comment that says what they are: its default and the powers of
    two beside it where the default is one (1 -> [1, 2], 4 -> [2, 4, 8]), [0, 1] for a 0 (a switch), else the
    default alone, to fill in."""
    if default == 0:
        return [0, 1], "# TODO: its values (the kernel's default: 0)"
    if default > 0 and default & (default - 1) == 0:
        return [
            v for v in (default // 2, default, default * 2) if v >= 1
        ], f"# TODO: its values (the kernel's default: {default})"
    return [default], "# TODO: its values (only the kernel's default so far)"


def _skeleton_yaml(name: str, kernel: Path) -> str:
    """A space that loads as it is: the first kernel of the file, a block size parameter, one size `n`,
    and the arguments read from the kernel's signature; TODO comments say what to fill in."""
    try:
        source = kernel.read_text()
    except UnicodeDecodeError:
        raise TunerError(f"{kernel}: not a text file") from None
    kernels = global_functions(source)
    if not kernels:
        raise TunerError(f"{kernel}: no __global__ function found: is it a CUDA kernel file?")
    kernel_name, signature = kernels[0]
    others = f"  # TODO: the file also has {', '.join(k for k, _ in kernels[1:])}" if len(kernels) > 1 else ""
    params = _parameters(signature)
    macros = ifndef_tunables(source)
    tunables = []
    for macro, default in macros.items():
        values, comment = _values_around(default)
        tunables.append(f"  {macro}: [{', '.join(map(str, values))}]   {comment}")
    lines = [
        f"# The workload '{name}', made by `tuner init --kernel {kernel.name}`: fill in the TODOs, then",
        f"# `tuner tune {name}`. `tuner init` (with no kernel) writes a complete, commented example to copy from.",
        f"workload: {name}",
        "description: TODO what the kernel computes",
        "kernel:",
        f"  source: {kernel.name}",
        f"  name: {kernel_name}{others}",
        "# TODO: the kernel's tunable #defines, each with its values",
        "parameters:",
        "  block_size_x: [32, 64, 128, 256, 512, 1024]",
        *tunables,
        f'# TODO: configs that must not be compiled, e.g. "block_size_x * {next(iter(macros), "WPT")} <= 4096"',
        "restrictions: []",
        "launch:",
        "  block: [block_size_x]",
        '  grid: ["ceil(n / block_size_x)"]   # TODO: blocks per grid, over the parameters and the size variables',
        "# TODO: the problem sizes (every size sets the same variables)",
        "sizes:",
        "  default: {n: 1048576}",
        "dtypes:",
        "  float32: {}   # TODO: with `defines: {T: float}` if the kernel's element type is a #define",
        "metrics:",
        '  GB/s: "n * itemsize / (time / 1e3) / 1e9"   # TODO: the bytes the kernel reads and writes',
        "objective: {metric: time, direction: minimize}",
    ]
    if params:
        lines += [
            "# The kernel's arguments, read from its signature. TODO: check shapes and fills; mark the results",
            "# `output: true` and add a `reference` (see the example of `tuner init`) so that every config is checked.",
            "arguments:",
        ]
        for arg, dtype, pointer in params:
            todo = "" if dtype else "   # TODO: the element type (unknown C type)"
            dt = dtype or "$dtype"
            if pointer:
                lines.append(f"  - {{name: {arg}, shape: [n], dtype: {dt}, fill: {{kind: {_fill_for(dt)}}}}}{todo}")
            elif dt.startswith(("int", "uint")):
                lines.append(f"  - {{name: {arg}, scalar: n, dtype: {dt}}}   # TODO: its value")
            else:
                lines.append(f"  - {{name: {arg}, scalar: 1.0, dtype: {dt}}}   # TODO: its value{todo}")
    else:
        lines += [
            "# TODO: the kernel's arguments (its signature could not be read); see the example of `tuner init`",
            "# arguments:",
            "#   - {name: n, scalar: n, dtype: int32}",
            "#   - {name: x, shape: [n], dtype: float32, fill: {kind: uniform}}",
        ]
    return "\n".join(lines) + "\n"


def _fill_for(dtype: str) -> str:
    return "uniform" if dtype in ("float16", "float32", "float64", "$dtype") else "integers"


# ---- a T1 import ---------------------------------------------------------------------------------------
class _Block(dict):
    """A mapping always written in block style (the top level)."""


class _FlowLists(yaml.SafeDumper):
    """Block style for the top level and large mappings, flow style for lists of plain values and for
    small mappings of plain values: the layout of the built-in spaces."""


def _represent_list(dumper: _FlowLists, data: list) -> yaml.nodes.SequenceNode:
    flat = all(not isinstance(x, (dict, list)) for x in data)
    flat = flat and (len(str(data)) < 100 or not any(isinstance(x, str) for x in data))  # long expressions: a line each
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat)


def _represent_dict(dumper: _FlowLists, data: dict) -> yaml.nodes.MappingNode:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=len(str(data)) < 100)


def _represent_str(dumper: _FlowLists, data: str) -> yaml.nodes.ScalarNode:
    style = ">" if len(data) > 80 and "\n" not in data else None  # a long description, folded
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_FlowLists.add_representer(list, _represent_list)
_FlowLists.add_representer(dict, _represent_dict)
_FlowLists.add_representer(str, _represent_str)
_FlowLists.add_representer(
    _Block, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=False)
)


def _t1_yaml(doc: dict, t1: Path) -> str:
    head = (
        f"# The workload '{doc['workload']}', imported by `tuner init --from-t1 {t1.name}`.\n"
        f"# Read the description (what was inferred), then `tuner tune {doc['workload']}`.\n"
    )
    parts = []
    for key, value in doc.items():  # one top-level key at a time: a blank line between them
        value = _Block(value) if isinstance(value, dict) and key not in ("objective", "metrics") else value
        parts.append(yaml.dump(_Block({key: value}), Dumper=_FlowLists, sort_keys=False, width=110, allow_unicode=True))
    return head + "\n".join(parts)
