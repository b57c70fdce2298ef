"""The T1 importer: a T1 file's parameters, conditions, arguments and launch geometry as a space document
(see the package's face, tuner.workloads.t1, for the readings it follows)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NoReturn

from tuner.workloads.signature import argument_label
from tuner.workloads.t1.file import T1File
from tuner.workloads.t1.reference import check_document, reference_of
from tuner.workloads.t1.sizes import SIZE_VAR_MIN, SizeVariables
from tuner.workloads.t1.values import group, parse_values, translate_condition

DIMS = ("X", "Y", "Z")
T1_TYPES = {  # T1 argument type -> (numpy dtype, elements per item)
    "int8": ("int8", 1),
    "uint8": ("uint8", 1),
    "int16": ("int16", 1),
    "uint16": ("uint16", 1),
    "int32": ("int32", 1),
    "uint32": ("uint32", 1),
    "int64": ("int64", 1),
    "uint64": ("uint64", 1),
    "half": ("float16", 1),
    "float": ("float32", 1),
    "double": ("float64", 1),
    **{
        f"{base}{n}": (dt, n)
        for base, dt in (("half", "float16"), ("float", "float32"), ("double", "float64"))
        for n in (2, 4, 8, 16)
    },
}
CAMPAIGN_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64")  # the schema's `dtypes`


def space_from_t1(t1_path: Path, *, workload: str, kernel: Path | None = None) -> dict:
    """The space document (as `spaces/*.yaml` hold, with `arguments` and `reference`) of the T1 file
    `t1_path`, for a workload named `workload` whose kernel source is `kernel` (default: the T1 file's
    KernelFile), named in the document by its file name, as it lies in the workload's folder."""
    return _Importer(Path(t1_path), workload, kernel).document()


class _Importer:
    def __init__(self, path: Path, workload: str, kernel: Path | None):
        self.path, self.workload, self.kernel = path, workload, kernel
        self.t1 = T1File(path)
        self.doc, self.spec = self.t1.doc, self.t1.spec
        self.vars = SizeVariables(self.t1)
        self.notes: list[str] = []  # what was inferred, for the description
        self.labels: dict[str, str] = {}  # an argument's name in the file -> in the space, where they differ

    def fail(self, key_path: list, message: str) -> NoReturn:
        self.t1.fail(key_path, message)

    # ---- the document ------------------------------------------------------------------------------
    def document(self) -> dict:
        spec = self.spec
        if spec["Language"] != "CUDA":
            self.fail(["KernelSpecification", "Language"], f"only CUDA kernels can be imported, not {spec['Language']}")
        if spec.get("SharedMemory") not in (None, 0, "0"):
            self.fail(
                ["KernelSpecification", "SharedMemory"],
                "dynamic shared memory is not supported: the kernel must declare its __shared__ arrays with a size",
            )
        params = self.parameters()
        restrictions = self.restrictions(params)
        self.vars.problem_size()
        self.vars.named_sizes(params)
        arguments, outputs, bytes_moved, dtypes_seen = self.arguments(params)
        block = self.block(params)
        grid = self.grid(params, block)
        dtype = next((d for d in dtypes_seen if d in CAMPAIGN_DTYPES), None)
        if dtype is None:
            unsigned = next((d for d in dtypes_seen if d.startswith("uint")), "")
            dtype = unsigned[1:] if unsigned[1:] in CAMPAIGN_DTYPES else "float32"
        if not self.vars.sizes:
            self.vars.sizes["n"] = 1
            self.notes.append(
                "The file has no problem size (no array of 64 elements or more): the size variable n is a placeholder."
            )
        # the file's ReferenceArguments name outputs as the file does; the document, as its arguments do
        named = [next((k for k, v in self.labels.items() if v == o), o) for o in outputs]
        by_file = bool(self.spec.get("ReferenceArguments"))
        reference, verify = reference_of(self.t1, named if by_file else outputs, params, restrictions, self.notes)
        if "expression" in reference:
            reference["expression"] = {self.labels.get(k, k): v for k, v in reference["expression"].items()}
        kernel_name = self.kernel.name if self.kernel is not None else Path(spec["KernelFile"]).name
        doc: dict = {
            "workload": self.workload,
            "description": "",
            "kernel": {"source": kernel_name, "name": spec["KernelName"]},
            "parameters": params,
        }
        if spec.get("CompilerOptions"):
            doc["kernel"]["compiler_options"] = list(spec["CompilerOptions"])
        if restrictions:
            doc["restrictions"] = restrictions
        doc["launch"] = {"block": block, "grid": grid}
        doc["sizes"] = {"default": dict(self.vars.sizes)}
        doc["dtypes"] = {dtype: {}}
        total = " + ".join(bytes_moved) if bytes_moved else "0"
        doc["metrics"] = {"GB/s": f"({total}) / (time / 1e3) / 1e9"}
        doc["objective"] = {"metric": "time", "direction": "minimize"}
        doc["arguments"] = arguments
        seeds = {a["RandomSeed"] for a in spec.get("Arguments", []) if isinstance(a.get("RandomSeed"), int)}
        if len(seeds) == 1:
            doc["seed"] = seeds.pop()
        elif seeds:
            self.fail(
                ["KernelSpecification", "Arguments"],
                "arguments with different RandomSeed values: one seed for all is supported",
            )
        if reference:
            doc["reference"] = reference
        if verify:
            doc["verify"] = verify
        name = (self.doc.get("General") or {}).get("BenchmarkName") or spec.get("BenchmarkName") or spec["KernelName"]
        if self.vars.linked:
            self.notes.append(
                "Numbers in the file equal to a problem size were read as that size variable ("
                + ", ".join(f"{v} as {k}" for k, v in self.vars.linked.items())
                + "): check them."
            )
        dims = [d for d in self.vars.problem or [] if isinstance(d, str)]
        if dims:
            self.notes.append(
                f"Each ProblemSize dimension is a size variable ({', '.join(dims)}); the grid and the array "
                "sizes given over ProblemSize follow them."
            )
        others = [k for k in self.vars.sizes if k not in dims]
        if len(self.vars.sizes) > 1 and others:
            self.notes.append(
                f"The size variables ({', '.join(self.vars.sizes)}) are the file's numbers, independent "
                "of each other: a size of your own must set them consistently."
            )
        constant = [a["name"] for a in arguments if a.get("memory") == "both"]
        if constant:
            self.notes.append(
                f"{', '.join(constant)}: passed to the kernel and copied to its __constant__ array of that "
                "name (memory: both), as Kernel Tuner reads MemType Constant."
            )
        self.notes.append("GB/s counts every array read or written once.")
        doc["description"] = f"{name}, imported from the T1 file {self.path.name}. " + " ".join(self.notes)
        check_document(self.t1, doc, set(self.vars.sizes))
        return doc

    # ---- configuration space -----------------------------------------------------------------------
    def parameters(self) -> dict:
        params = {}
        for i, p in enumerate(self.doc["ConfigurationSpace"]["TuningParameters"]):
            at = ["ConfigurationSpace", "TuningParameters", i]
            name = p["Name"]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                self.fail([*at, "Name"], f"'{name}' is not a C identifier, so it cannot be a #define")
            if name in params:
                self.fail([*at, "Name"], f"'{name}' is defined twice")
            try:
                values = parse_values(p["Values"])
            except (ValueError, TypeError, ZeroDivisionError, OverflowError) as e:
                self.fail([*at, "Values"], f"cannot read '{p['Values']}': {e}")
            kind = p["Type"]
            fits = {
                "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
                "uint": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                "bool": lambda v: isinstance(v, bool) or v in (0, 1),
                "string": lambda v: isinstance(v, str),
            }[kind]
            bad = [v for v in values if not fits(v)]
            if bad or not values:
                self.fail([*at, "Values"], f"expected {kind} values, got {bad[0]!r}" if bad else "no values")
            if kind == "bool":  # a space's values are never booleans: #define FLAG True would not compile
                values = [int(v) for v in values]
            params[name] = list(dict.fromkeys(values))  # our spaces list each value once
        return params

    def restrictions(self, params: dict) -> list:
        out = []
        for j, c in enumerate(self.doc["ConfigurationSpace"].get("Conditions") or []):
            at = ["ConfigurationSpace", "Conditions", j, "Expression"]
            text = translate_condition(c["Expression"])
            out.append(self.vars.expression(text, set(params), at, "cannot be translated to a restriction"))
        return out

    # ---- arguments ---------------------------------------------------------------------------------
    def arguments(self, params: dict) -> tuple[list, list, list, list]:
        args, outputs, moved, dtypes = [], [], [], []
        spec_args = self.spec.get("Arguments") or []
        if not spec_args:
            self.fail(["KernelSpecification", "Arguments"], "missing: the kernel's arguments")
        marked = any("Output" in a for a in spec_args)  # BAT marks outputs; else the access type says
        names = set()
        scalar_vars: set[str] = set()  # the size variables scalars were read as
        for i, a in enumerate(spec_args):
            at = ["KernelSpecification", "Arguments", i]
            name = a.get("Name") or f"arg{i}"
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in names:
                self.fail([*at, "Name"], f"'{name}' is not a unique C identifier")
            names.add(name)
            if argument_label(name, set()) != name:  # a Python keyword (`in`): reference expressions read labels
                self.labels[name] = argument_label(name, {a.get("Name") or "" for a in spec_args} | names)
                name = self.labels[name]
                names.add(name)
            if a["Type"] not in T1_TYPES:
                self.fail([*at, "Type"], f"type '{a['Type']}' is not supported (numbers and their vectors are)")
            dtype, lanes = T1_TYPES[a["Type"]]
            if a.get("MemoryType") == "Symbol":
                self.fail([*at, "MemoryType"], "symbols are not supported: pass the data as an array")
            constant = a.get("MemType") == "Constant"  # Kernel Tuner and BAT read no other value
            if constant and a["MemoryType"] != "Vector":
                self.fail([*at, "MemType"], "constant memory is supported for arrays (MemoryType Vector) only")
            if a["MemoryType"] == "Local":
                self.fail([*at, "MemoryType"], "local (shared) memory arguments are not supported")
            if a["MemoryType"] == "Scalar":
                if lanes > 1:
                    self.fail([*at, "Type"], f"a scalar of vector type '{a['Type']}' is not supported")
                if not isinstance(a.get("FillValue"), (int, float)):
                    self.fail([*at, "FillValue"], "a scalar needs its value in FillValue")
                value = a["FillValue"]
                scalar: int | float | str = value
                if dtype.startswith(("int", "uint")):
                    if not float(value).is_integer():
                        self.fail([*at, "FillValue"], f"{value} is not a whole number, but the type is {a['Type']}")
                    scalar = int(value)
                    if scalar >= SIZE_VAR_MIN and scalar in self.vars.sizes.values():
                        # equal sizes (a square ProblemSize): successive scalars take them in turn
                        equal = [k for k, v in self.vars.sizes.items() if v == scalar]
                        var = next((k for k in equal if k not in scalar_vars), equal[0])
                        scalar_vars.add(var)
                        self.vars.linked[var] = scalar
                        scalar = var  # a number equal to a problem size is that size (n = number of elements)
                args.append({"name": name, "scalar": scalar, "dtype": dtype})
                continue
            if "Size" not in a:
                self.fail([*at, "Size"], "an array needs its Size (elements)")
            size = self.vars.size_expression(a["Size"], [*at, "Size"], params)
            shape = size if lanes == 1 else (size * lanes if isinstance(size, int) else f"{group(size)} * {lanes}")
            entry = {"name": name, "dtype": dtype, "shape": [shape], "fill": self.fill(a, at, dtype)}
            output = bool(a.get("Output")) if marked else a.get("AccessType") in ("WriteOnly", "ReadWrite")
            if constant:
                if output:
                    self.fail([*at, "MemType"], "constant memory cannot be an output: the kernel cannot write it")
                # Kernel Tuner and BAT pass it as a kernel argument too, and copy it to the __constant__
                # array of its name: the same data to both
                entry["memory"] = "both"
            if output:
                entry["output"] = True
                outputs.append(name)
            args.append(entry)
            dtypes.append(dtype)
            if isinstance(shape, int):
                item = str(shape * _itemsize(dtype))
            else:
                item = f"{shape} * {_itemsize(dtype)}" if shape.isidentifier() else f"({shape}) * {_itemsize(dtype)}"
            moved.append(item)
        outputs_first = [a["dtype"] for a in args if a.get("output")] + dtypes
        return args, outputs, moved, outputs_first

    def fill(self, a: dict, at: list, dtype: str) -> dict:
        kind = a.get("FillType")
        integral = dtype.startswith(("int", "uint"))
        if kind is None:
            self.fail([*at, "FillType"], "an array needs a FillType")
        if kind == "Constant":
            value = a.get("FillValue", 0)
            if not isinstance(value, (int, float)):
                self.fail([*at, "FillValue"], f"expected a number, got {value!r}")
            if integral and not float(value).is_integer():
                self.fail([*at, "FillValue"], f"{value} is not a whole number, but the type is {a['Type']}")
            return {"kind": "zeros"} if value == 0 else {"kind": "constant", "value": int(value) if integral else value}
        if kind == "Random":
            # Kernel Tuner and BAT draw standard normal values (FillValue is not read), cast to the type
            if integral:  # small integers, as our `integers` fill makes them (a cast normal would be mostly 0)
                return {"kind": "integers", "low": 0 if dtype.startswith("uint") else -8, "high": 8}
            return {"kind": "normal"}
        if kind == "Generator":
            source = str(a.get("DataSource", "")).strip()
            if source == "i":
                return {"kind": "arange"}
            try:
                value = float(source)
            except ValueError:
                self.fail(
                    [*at, "DataSource"], f"generator '{source}' is not supported: 'i' (0, 1, 2, ...) or a number are"
                )
            return {"kind": "constant", "value": int(value) if value.is_integer() else value}
        self.fail(
            [*at, "FillType"],
            f"fill type '{kind}' is not supported: the data lives outside the T1 file "
            "(Constant, Random and the 'i' Generator are)",
        )

    # ---- launch ------------------------------------------------------------------------------------
    def block(self, params: dict) -> list:
        """LocalSize as block parameter names: a parameter as it is; a number becomes a parameter of one
        value (block_size_y: [1]), and trailing 1s are left out."""
        local = self.spec["LocalSize"]
        dims = [(d, str(local[d]).strip()) for d in DIMS if d in local]
        while len(dims) > 1 and dims[-1][1] == "1":
            dims.pop()
        names = []
        for d, value in dims:
            at = ["KernelSpecification", "LocalSize", d]
            if value in params:
                names.append(value)
            elif value.isdigit() and int(value) >= 1:
                name = f"block_size_{d.lower()}"
                if name in params and params[name] != [int(value)]:
                    self.fail(at, f"{value}: a fixed block size needs the parameter name {name}, which is taken")
                params[name] = [int(value)]
                names.append(name)
            else:
                self.fail(
                    at,
                    f"'{value}' is neither a tuning parameter nor a number: each block dimension must be one parameter",
                )
        return names

    def grid(self, params: dict, block: list) -> list:
        spec = self.spec
        known = set(params) | set(self.vars.sizes)
        if self.vars.problem is not None:
            grid = []
            for i, d in enumerate(self.vars.problem):
                key = f"GridDiv{DIMS[i]}"
                divisors = spec[key] if key in spec else ([block[i]] if i < len(block) else [])
                if not isinstance(divisors, list):
                    self.fail(["KernelSpecification", key], "expected a list of parameter names or expressions")
                parts = [
                    self.vars.expression(str(x), set(params), ["KernelSpecification", key, j], "is not a divisor")
                    for j, x in enumerate(divisors)
                ]
                grid.append(f"ceil({d} / ({' * '.join(parts)}))" if parts else str(d))
            self.notes.append("Grid: ProblemSize divided by GridDivX/Y/Z, as Kernel Tuner reads it.")
        else:
            kind = spec.get("GlobalSizeType", "CUDA")
            if kind not in ("CUDA", "OpenCL"):
                self.fail(["KernelSpecification", "GlobalSizeType"], f"'{kind}' is not supported (CUDA, OpenCL are)")
            global_size = spec["GlobalSize"]
            dims = [d for d in DIMS if d in global_size]
            while len(dims) > 1 and str(global_size[dims[-1]]).strip() == "1":
                dims.pop()
            grid = []
            for i, d in enumerate(dims):
                text = self.vars.expression(
                    str(global_size[d]),
                    known,
                    ["KernelSpecification", "GlobalSize", d],
                    "is not a launch size",
                    link_sizes=True,
                )
                if kind == "OpenCL":
                    threads = block[i] if i < len(block) else "1"
                    text = f"ceil({group(text)} / {threads})"
                grid.append(text)
            self.notes.append(
                "Grid: GlobalSize in "
                + (
                    "blocks (GlobalSizeType CUDA)."
                    if kind == "CUDA"
                    else "threads (GlobalSizeType OpenCL), divided by the block size."
                )
            )
        return grid


def _itemsize(dtype: str) -> int:
    return {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "int32": 4, "uint32": 4, "float32": 4}.get(
        dtype, 8
    )
