"""Importing a T1 input file: the JSON tuning-problem format of the BAT benchmark suite, which Kernel Tuner
reads too (`tune_kernel_T1`; its schema ships with Kernel Tuner as schema/T1/1.0.0/input-schema.json).

A T1 file gives the tuning parameters (`Values`, a Python list as text) and their `Conditions`, the
kernel's file, name and compiler options, its launch geometry, and its arguments with their sizes and
fills. `space_from_t1` turns it into a space document of ours, with the `arguments` and `reference` of a
declared workload (tuner.workloads.declared), so that it tunes with no Python.

Launch geometry, in the order the tools that read T1 follow:
- `ProblemSize` with `GridDivX/Y/Z` (Kernel Tuner's reading): grid = ceil(ProblemSize / product of divisors),
  a missing divisor list being the block size of that dimension;
- else `GlobalSize` (BAT's reading): the grid in blocks when `GlobalSizeType` is "CUDA" (BAT's default),
  in threads when it is "OpenCL", so divided by the block size.

An argument with `"MemType": "Constant"` is, as Kernel Tuner and BAT read it, both a kernel argument and
the data of the kernel's `__constant__` array of that name: `memory: both`. Each ProblemSize dimension is a
size variable of its own (problem_x, problem_y, problem_z), equal values included.

Every T1 feature this cannot express is one TunerError line naming the file and the key.

The package: file (reading and validating the file), values (Values, Conditions, constant folding), sizes
(the file's numbers as size variables, its expressions in ours), reference (ReferenceArguments, else a
trusted config; the check of the document made), importer (the document)."""

from tuner.workloads.t1.file import kernel_file_of
from tuner.workloads.t1.importer import space_from_t1
from tuner.workloads.t1.values import parse_values, translate_condition

__all__ = ["kernel_file_of", "parse_values", "space_from_t1", "translate_condition"]
