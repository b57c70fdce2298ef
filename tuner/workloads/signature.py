"""A CUDA kernel's source read: its `__global__` functions and their parameters, the labels its arguments get
in a space (argument_label), its `#ifndef` tunables (what `tuner init --kernel` writes a skeleton from), and a
space's declared `arguments` checked against the parameters:
how many, array (a pointer) or scalar, and the element type where the C type says it (a builtin type, or a
macro that a dtype's `defines` sets). Unknown types (structs, vector types, typedefs, template parameters)
are never a mismatch: the check says only what it is sure of.

Why not Kernel Tuner's own check (util.check_argument_list, run as a kernel is launched): it checks arrays already
made, warns with its first mismatch only, and cannot read a macro type (it reports `T a` against a float64
whatever T is defined as); this one reads the space's declaration before any array is made, says each mismatch
with its key path, and reads T through the dtype's defines.

The dry run (tuner.measure.dry_run) reports each mismatch as a problem, and a live campaign refuses to start
on the first (tuner.campaign.request.resolve). Loading does not: the declaration
check is a check of the space document alone (the T1 importer runs it before the kernel is in place, and
tests declare arguments beside a stand-in kernel), and a load error would replace the dry run's report."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner.space.declaration import DTYPE_VAR, Argument
from tuner.space.includes import quoted_includes

# C types of kernel parameters, as numpy dtypes
C_TYPES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "__half": "float16",
    "int": "int32",
    "signed int": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "long long": "int64",
    "long long int": "int64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
    "size_t": "uint64",
    "short": "int16",
    "unsigned short": "uint16",
    "char": "int8",
    "signed char": "int8",
    "unsigned char": "uint8",
    "int8_t": "int8",
    "int16_t": "int16",
    "int32_t": "int32",
    "int64_t": "int64",
    "uint8_t": "uint8",
    "uint16_t": "uint16",
    "uint32_t": "uint32",
    "uint64_t": "uint64",
}
# an attribute with arguments: `__launch_bounds__(256, 2)`, `__maxnreg__(64)`, `__cluster_dims__(2, 1, 1)`,
# `__attribute__((noinline))` (one level of nested parentheses); never the kernel's name, which may look alike
_ATTRIBUTE = r"__\w+__\s*\((?:[^()]|\([^()]*\))*\)"
# the words between __global__ and the name: `void`, `static`, `__noinline__`, attributes
_TOKEN = rf"(?:{_ATTRIBUTE}\s*|[A-Za-z_][\w:]*\s+)"
_KERNEL = re.compile(rf"__global__\s+{_TOKEN}*?(?!{_ATTRIBUTE})([A-Za-z_]\w*)\s*\(([^)]*)\)")


def without_comments(source: str) -> str:
    """C source with its /* */ and // comments blanked (a declaration in a comment is none)."""
    return re.sub(r"//[^\n]*", " ", re.sub(r"/\*.*?\*/", " ", source, flags=re.S))


def global_functions(source: str) -> list[tuple[str, str]]:
    """The `__global__` functions of a CUDA source: (name, parameter list text), in order."""
    return [(m.group(1), m.group(2)) for m in _KERNEL.finditer(without_comments(source))]


# C types beyond C_TYPES (which `tuner init --kernel` writes dtypes from), known to the argument check
_MORE_TYPES = {
    "bool": "bool",
    "long": "int64",  # 64-bit Linux, where CUDA runs
    "long int": "int64",
    "unsigned long": "uint64",
    "unsigned long int": "uint64",
    "signed": "int32",
    "short int": "int16",
    "unsigned short int": "uint16",
    "ptrdiff_t": "int64",
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "__grid_constant__"}


@dataclass(frozen=True)
class Parameter:
    name: str
    ctype: str  # the type without qualifiers and pointer marks: 'T', 'unsigned int'
    pointer: bool  # a pointer or an array (`*`, `[]`, `&`): the kernel takes an array argument
    text: str  # as declared, spaces collapsed: 'const T *__restrict__ x'


def source_with_includes(path: Path) -> str:
    """The source and the local files it #includes (as its build finds them: quoted_includes), comments dropped."""
    files = [path, *(i.path for i in quoted_includes(path) if i.path is not None)]
    text = "\n".join(f.read_text(errors="replace") for f in files if f.is_file())
    return without_comments(text)


def argument_label(name: str, taken: set[str]) -> str:
    """The name of a kernel argument as a space labels it: reference expressions read arguments by these names,
    so a Python keyword (`in`, `from`, `lambda`) gains a `_` (`in_`), and more while another argument has that
    name (`taken`). The kernel takes its arguments by position: the labels are ours. Soft keywords (`match`,
    `type`) are names in expressions: kept."""
    if not keyword.iskeyword(name):
        return name
    label = name + "_"
    while label in taken:
        label += "_"
    return label


def kernel_parameters(source: str, kernel: str) -> list[Parameter] | None:
    """The parameters of the `__global__` function `kernel` in `source`; None where it is not found, is found
    with different parameter lists (overloads), or a list cannot be read."""
    lists = {parameters_of(text) for name, text in global_functions(source) if name == kernel}
    only = next(iter(lists)) if len(lists) == 1 else None
    return list(only) if only is not None else None


def parameters_of(text: str) -> tuple[Parameter, ...] | None:
    """A parameter list's parameters (hashable: overloads are compared); None where one cannot be read."""
    parts = _split(" ".join(text.split()))
    out = []
    for part in parts:
        part = part.split("=")[0].strip()  # a default argument
        if part in ("", "void") and len(parts) == 1:
            return ()
        m = re.fullmatch(r"(.*?)([A-Za-z_]\w*)\s*(\[[^\]]*\])?", part)
        if m is None or not m.group(1).strip() or "..." in part:
            return None
        declared = m.group(1)
        words = [w for w in re.sub(r"[*&]", " ", declared).split() if w not in _QUALIFIERS]
        pointer = "*" in declared or "&" in declared or m.group(3) is not None
        out.append(Parameter(m.group(2), " ".join(words), pointer, part))
    return tuple(out)


def _split(text: str) -> list[str]:
    """A parameter list split at its top-level commas (not those of `Pair<int, float>`)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [p.strip() for p in [*parts, text[start:]]]


def mismatches(
    args: list[Argument], params: list[Parameter], kernel: str, dtype: str, defines: dict
) -> list[tuple[list, str]]:
    """(key path, message) for each declared argument that does not fit the kernel's parameters: a wrong count
    (then nothing else), a scalar for a pointer, an array for a scalar of a builtin type, or an element type
    other than the C type's, for the campaign's `dtype` and its `defines`. `args`: every declared argument, in
    order (those in constant memory only, which are no parameters, are left out here)."""
    passed = [(i, a) for i, a in enumerate(args) if a.parameter]
    if len(passed) != len(params):
        constant = len(args) - len(passed)
        besides = f" (besides {constant} in constant memory)" if constant else ""
        signature = ", ".join(p.text for p in params)
        return [(["arguments"], f"{len(passed)} given{besides}, {kernel} takes {len(params)} ({signature})")]
    found = []
    for (i, a), p in zip(passed, params, strict=True):
        c_type, via = _resolve(p.ctype, defines)
        known = C_TYPES.get(c_type) or _MORE_TYPES.get(c_type)  # its numpy dtype; None: not a builtin type
        theirs = f"the kernel's parameter '{p.name}'"
        if a.scalar is not None and p.pointer:
            found.append((["arguments", i], f"'{a.name}' is a scalar but {theirs} is a pointer ({p.text})"))
        elif a.scalar is None and not p.pointer and known is not None:
            found.append((["arguments", i], f"'{a.name}' is an array but {theirs} is a scalar ({p.text})"))
        elif known is not None:
            given = dtype if a.dtype == DTYPE_VAR else a.dtype
            if not _same_type(given, known):
                whose = f" ({DTYPE_VAR})" if a.dtype == DTYPE_VAR else ""
                how = f" ({p.ctype}, as dtype {dtype} defines it)" if via else ""
                found.append((["arguments", i], f"'{a.name}' is {given}{whose} but {theirs} is {c_type}{how}"))
    return found


def _resolve(ctype: str, defines: dict) -> tuple[str, bool]:
    """The C type a macro of the dtype's `defines` stands for (a few levels deep), and whether one did."""
    via = False
    for _ in range(4):
        if ctype not in defines:
            break
        words = [w for w in str(defines[ctype]).split() if w not in _QUALIFIERS]
        ctype, via = " ".join(words), True
    return ctype, via


def _same_type(given: str, c_dtype: str) -> bool:
    """Whether a numpy dtype fits a C type's: the same kind (integer, floating point, bool) and size. Signedness
    is not compared: the same bits are passed, and a size declared int32 for an `unsigned int n` (or int64 for
    a `size_t n`) is common and right."""
    a, b = np.dtype(given), np.dtype(c_dtype)
    kind = {"u": "i"}
    return (kind.get(a.kind, a.kind), a.itemsize) == (kind.get(b.kind, b.kind), b.itemsize)


# `#ifndef NAME` / `#define NAME <whole number>` (comments dropped): a value the kernel lets a build set, as Kernel
# Tuner's #defines in front of the source do, and its default
_TUNABLE = re.compile(
    r"^[ \t]*#[ \t]*ifndef[ \t]+([A-Za-z_]\w*)[ \t]*\n[ \t]*#[ \t]*define[ \t]+\1[ \t]+\(?[ \t]*(-?\d+)[uUlL]*[ \t]*\)?[ \t]*$",
    re.M,
)
# what Kernel Tuner defines itself (the block and grid), never a parameter of the skeleton
_NOT_TUNABLE = re.compile(r"(block|grid)_size_[xyz]")


def ifndef_tunables(source: str) -> dict[str, int]:
    """The kernel's `#ifndef X / #define X <number>` macros (but Kernel Tuner's own block_size_x, ...) and their
    defaults, in order: the parameters a skeleton offers. A type set by a dtype's defines (`#define T float`)
    has no number, so it is none of them."""
    out: dict[str, int] = {}
    for m in _TUNABLE.finditer(without_comments(source)):
        if not _NOT_TUNABLE.fullmatch(m.group(1)):
            out.setdefault(m.group(1), int(m.group(2)))
    return out
