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

Every T1 feature this cannot express is one TunerError line naming the file and the key."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

from tuner.errors import TunerError

VALUE_LIMIT = 100_000  # values of one parameter: a range() beyond that is a typo, not a space
SIZE_VAR_MIN = 64  # a number this large in the file is a problem size; smaller ones stay numbers
DIMS = ("X", "Y", "Z")
T1_TYPES = {  # T1 argument type -> (numpy dtype, elements per item)
    "int8": ("int8", 1), "uint8": ("uint8", 1), "int16": ("int16", 1), "uint16": ("uint16", 1),
    "int32": ("int32", 1), "uint32": ("uint32", 1), "int64": ("int64", 1), "uint64": ("uint64", 1),
    "half": ("float16", 1), "float": ("float32", 1), "double": ("float64", 1),
    **{f"{base}{n}": (dt, n) for base, dt in (("half", "float16"), ("float", "float32"), ("double", "float64"))
       for n in (2, 4, 8, 16)},
}
CAMPAIGN_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64")  # the schema's `dtypes`


def space_from_t1(t1_path: Path, *, workload: str, kernel: Path | None = None) -> dict:
    """The space document (as `spaces/*.yaml` hold, with `arguments` and `reference`) of the T1 file
    `t1_path`, for a workload named `workload` whose kernel source is `kernel` (default: the T1 file's
    KernelFile), named in the document by its file name, as it lies in the workload's folder."""
    return _Importer(Path(t1_path), workload, kernel).document()


def kernel_file_of(t1_path: Path) -> Path:
    """The kernel source a T1 file names (KernelFile, relative to the T1 file's folder), checked to exist."""
    t1_path = Path(t1_path)
    doc = _read(t1_path)
    name = doc.get("KernelSpecification", {}).get("KernelFile")
    if not isinstance(name, str) or not name:
        raise _error(t1_path, ["KernelSpecification", "KernelFile"], "missing: the kernel's source file")
    path = t1_path.parent / name
    if not path.is_file():
        raise _error(t1_path, ["KernelSpecification", "KernelFile"],
                     f"'{name}' does not exist (looked for {path}); give the kernel with --kernel")
    return path


def parse_values(text: str) -> list:
    """A T1 parameter's `Values`: a Python literal list, or the few constructions the published files use
    (`list(range(32, 1025, 32))`, `[1, 2] + list(range(4, 9))`, `[2**i for i in range(6)]`), evaluated
    without eval: anything else is a ValueError."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    else:
        return list(value) if isinstance(value, (list, tuple)) else [value]
    try:
        tree = ast.parse(str(text).strip(), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not a Python list: {e.msg}") from None
    values = _values(tree.body)
    if len(values) > VALUE_LIMIT:
        raise ValueError(f"more than {VALUE_LIMIT} values")
    return values


def _values(node: ast.AST) -> list:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_scalar(e, {}) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _values(node.left) + _values(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id in ("list", "tuple") and len(node.args) == 1:
            return _values(node.args[0])
        if node.func.id == "range" and 1 <= len(node.args) <= 3:
            bounds = [_scalar(a, {}) for a in node.args]
            if not all(isinstance(b, int) for b in bounds):
                raise ValueError("range() takes whole numbers")
            r = range(*bounds)
            if len(r) > VALUE_LIMIT:
                raise ValueError(f"more than {VALUE_LIMIT} values")
            return list(r)
    if isinstance(node, ast.ListComp) and len(node.generators) == 1:
        gen = node.generators[0]
        if isinstance(gen.target, ast.Name) and not gen.is_async:
            out = []
            for v in _values(gen.iter):
                scope = {gen.target.id: v}
                if all(_scalar(cond, scope) for cond in gen.ifs):
                    out.append(_scalar(node.elt, scope))
            return out
    raise ValueError(f"'{ast.unparse(node)}' is not understood: give a list, range(...), list(range(...)), "
                     "'+' of those, or [expression for i in range(...)]")


def _scalar(node: ast.AST, scope: dict):
    """One value: a constant, or arithmetic over constants and the comprehension's variable, evaluated
    by the space's own expression language (no eval of arbitrary code)."""
    if isinstance(node, ast.Constant):
        return node.value
    from tuner.space.expressions import Expression

    return Expression(ast.unparse(node))(scope)


def translate_condition(text: str) -> str:
    """A T1 condition in our expression language: C's &&, || and ! become and, or, not."""
    text = str(text).replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    text = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", text))
    return re.sub(r"\s+", " ", text).strip()


def _error(path: Path, key_path: list, message: str) -> TunerError:
    from tuner.space import SpaceError

    return SpaceError(path, key_path, message)


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
        raise _error(path, [], "a T1 file is a JSON object with ConfigurationSpace and KernelSpecification")
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
            from tuner.space.loader import _explain
        except ImportError:  # the loader's wording moved: the schema's own message will do
            def _explain(err):
                return err.message
        raise _error(path, list(e.absolute_path), _explain(e))


class _Importer:
    def __init__(self, path: Path, workload: str, kernel: Path | None):
        self.path, self.workload, self.kernel = path, workload, kernel
        self.doc = _read(path)
        _validate(self.doc, path)
        self.spec = self.doc["KernelSpecification"]
        self.notes: list[str] = []  # what was inferred, for the description
        # BenchmarkConfig: BAT's constants, in scope where it evaluates launch sizes
        self.constants = {k: v for k, v in (self.doc.get("BenchmarkConfig") or {}).items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool) and k.isidentifier()}
        self.sizes: dict[str, int] = {}  # size variable -> its value in the file
        self.problem: list | None = None  # ProblemSize per dimension: a size variable or a small number
        self.linked: dict[str, str] = {}  # "4096 as n" notes

    def fail(self, key_path: list, message: str):
        raise _error(self.path, key_path, message)

    # ---- the document ------------------------------------------------------------------------------
    def document(self) -> dict:
        spec = self.spec
        if spec["Language"] != "CUDA":
            self.fail(["KernelSpecification", "Language"], f"only CUDA kernels can be imported, not {spec['Language']}")
        if spec.get("SharedMemory") not in (None, 0, "0"):
            self.fail(["KernelSpecification", "SharedMemory"], "dynamic shared memory is not supported: the kernel "
                      "must declare its __shared__ arrays with a size")
        params = self.parameters()
        restrictions = self.restrictions(params)
        self.problem_size()
        self.named_sizes(params)
        arguments, outputs, bytes_moved, dtypes_seen = self.arguments(params)
        block = self.block(params)
        grid = self.grid(params, block)
        dtype = next((d for d in dtypes_seen if d in CAMPAIGN_DTYPES), None)
        if dtype is None:
            unsigned = next((d for d in dtypes_seen if d.startswith("uint")), "")
            dtype = unsigned[1:] if unsigned[1:] in CAMPAIGN_DTYPES else "float32"
        if not self.sizes:
            self.sizes["n"] = 1
            self.notes.append("The file has no problem size (no array of 64 elements or more): the size "
                              "variable n is a placeholder.")
        reference, verify = self.reference(arguments, outputs, params, restrictions)
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
        doc["sizes"] = {"default": dict(self.sizes)}
        doc["dtypes"] = {dtype: {}}
        total = " + ".join(bytes_moved) if bytes_moved else "0"
        doc["metrics"] = {"GB/s": f"({total}) / (time / 1e3) / 1e9"}
        doc["objective"] = {"metric": "time", "direction": "minimize"}
        doc["arguments"] = arguments
        seeds = {a["RandomSeed"] for a in spec.get("Arguments", []) if isinstance(a.get("RandomSeed"), int)}
        if len(seeds) == 1:
            doc["seed"] = seeds.pop()
        elif seeds:
            self.fail(["KernelSpecification", "Arguments"], "arguments with different RandomSeed values: one seed "
                      "for all is supported")
        if reference:
            doc["reference"] = reference
        if verify:
            doc["verify"] = verify
        name = (self.doc.get("General") or {}).get("BenchmarkName") or spec.get("BenchmarkName") or spec["KernelName"]
        if self.linked:
            self.notes.append("Numbers in the file equal to a problem size were read as that size variable ("
                              + ", ".join(f"{v} as {k}" for k, v in self.linked.items()) + "): check them.")
        if len(self.sizes) > 1:
            self.notes.append(f"The size variables ({', '.join(self.sizes)}) are the file's numbers, independent "
                              "of each other: a size of your own must set them consistently.")
        self.notes.append("GB/s counts every array read or written once.")
        doc["description"] = f"{name}, imported from the T1 file {self.path.name}. " + " ".join(self.notes)
        self.self_check(doc)
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
            fits = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
                    "uint": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                    "bool": lambda v: isinstance(v, bool) or v in (0, 1),
                    "string": lambda v: isinstance(v, str)}[kind]
            bad = [v for v in values if not fits(v)]
            if bad or not values:
                self.fail([*at, "Values"], f"expected {kind} values, got {bad[0]!r}" if bad else "no values")
            params[name] = list(dict.fromkeys(values))  # our spaces list each value once
        return params

    def restrictions(self, params: dict) -> list:
        out = []
        for j, c in enumerate(self.doc["ConfigurationSpace"].get("Conditions") or []):
            at = ["ConfigurationSpace", "Conditions", j, "Expression"]
            text = translate_condition(c["Expression"])
            out.append(self.expression(text, set(params), at, "cannot be translated to a restriction"))
        return out

    def expression(self, text: str, known: set, at: list, what: str, link_sizes: bool = False) -> str:
        """`text` in our expression language, over `known` names: BenchmarkConfig constants put in as
        numbers, and (with link_sizes) numbers equal to a problem size replaced by its size variable."""
        from tuner.space.expressions import Expression

        try:
            tree = ast.parse(text, mode="eval")
            Expression(text)  # our syntax whitelist, before any rewriting
        except (SyntaxError, ValueError) as e:
            msg = e.msg if isinstance(e, SyntaxError) else str(e)
            self.fail(at, f"'{text}' {what}: {msg}")
        changed = False
        sizes_by_value = {v: k for k, v in self.sizes.items() if v >= SIZE_VAR_MIN}
        for node in ast.walk(tree):
            for field, child in ast.iter_fields(node):
                for k, sub in enumerate(child if isinstance(child, list) else [child]):
                    new = None
                    if (isinstance(sub, ast.Name) and sub.id not in known and sub.id not in self.sizes
                            and sub.id in self.constants):
                        new = ast.Constant(self.constants[sub.id])
                    elif (link_sizes and isinstance(sub, ast.Constant) and type(sub.value) is int
                          and sub.value in sizes_by_value):
                        new = ast.Name(sizes_by_value[sub.value], ast.Load())
                        self.linked[sizes_by_value[sub.value]] = sub.value
                    if new is not None:
                        changed = True
                        if isinstance(child, list):
                            child[k] = new
                        else:
                            setattr(node, field, new)
        result = ast.unparse(tree) if changed else text
        try:
            Expression(result).check_names(known)
        except ValueError as e:
            self.fail(at, f"'{text}' {what}: {e}")
        return result

    # ---- sizes, arguments --------------------------------------------------------------------------
    def size_var(self, value: int, preferred: str | None = None) -> str | int:
        """The size variable for a number of the file (one per distinct value); a small number stays a number."""
        if value < SIZE_VAR_MIN:
            return value
        for k, v in self.sizes.items():
            if v == value:
                return k
        taken = set(self.sizes) | {p["Name"] for p in self.doc["ConfigurationSpace"]["TuningParameters"]}
        taken |= {a.get("Name") for a in self.spec.get("Arguments", [])}
        candidates = [preferred] if preferred else []
        candidates += ["n"] + [f"n{i}" for i in range(2, 100)]
        name = next(c for c in candidates if c not in taken)
        self.sizes[name] = value
        return name

    def named_sizes(self, params: dict) -> None:
        """BenchmarkConfig entries that launch sizes or array sizes read (BAT's `dataSize`, say) are size
        variables under their own names, when large enough to be a size rather than a limit."""
        texts = [str(v) for v in self.spec["GlobalSize"].values()]
        texts += [a["Size"] for a in self.spec.get("Arguments") or [] if isinstance(a.get("Size"), str)]
        for text in texts:
            try:
                names = {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
            except SyntaxError:
                continue  # said where the text is read
            for name in sorted(names):
                value = self.constants.get(name)
                if (name not in params and name not in self.sizes and type(value) is int
                        and value >= SIZE_VAR_MIN):
                    self.sizes[name] = value

    def problem_size(self) -> None:
        """Kernel Tuner's ProblemSize: one size variable per dimension (problem_x, ...)."""
        if "ProblemSize" not in self.spec:
            return
        ps = self.spec["ProblemSize"]
        dims = ps if isinstance(ps, list) else [ps]
        if not 1 <= len(dims) <= 3:
            self.fail(["KernelSpecification", "ProblemSize"], "expected 1 to 3 dimensions")
        self.problem = []
        for i, d in enumerate(dims):
            if type(d) is not int or d < 1:
                self.fail(["KernelSpecification", "ProblemSize", *([i] if isinstance(ps, list) else [])],
                          f"expected a whole number >= 1, got {d!r} (expressions are not supported)")
            self.problem.append(str(self.size_var(d, f"problem_{'xyz'[i]}")) if d >= SIZE_VAR_MIN else d)

    def size_expression(self, size, at: list, params: dict) -> str | int:
        """An argument's Size: a number (a size variable if large), or an expression over ProblemSize and
        the parameters (as Kernel Tuner reads it: a parameter stands for its list of values), folded to
        numbers and size variables."""
        if type(size) is int:
            if size < 0:
                self.fail(at, f"{size} is not a size")
            return self.size_var(size)
        try:
            tree = ast.parse(str(size), mode="eval")
        except SyntaxError as e:
            self.fail(at, f"'{size}' is not an expression: {e.msg}")

        class Rewrite(ast.NodeTransformer):
            def visit_Subscript(s, node):
                if (isinstance(node.value, ast.Name) and node.value.id == "ProblemSize"
                        and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int)):
                    return self.problem_dim(node.slice.value, at)
                return s.generic_visit(node)

            def visit_Name(s, node):
                if node.id == "ProblemSize":
                    return self.problem_dim(0, at)
                if node.id in self.sizes:
                    return node
                if node.id in params:
                    return ast.List([ast.Constant(v) for v in params[node.id]], ast.Load())
                if node.id in self.constants:
                    return ast.Constant(self.constants[node.id])
                return node

        tree = ast.fix_missing_locations(Rewrite().visit(tree))
        text = ast.unparse(_fold(tree))
        return self.expression(text, set(self.sizes), at, "is not a size over ProblemSize")

    def problem_dim(self, i: int, at: list) -> ast.AST:
        if self.problem is None or i >= len(self.problem):
            self.fail(at, f"ProblemSize[{i}] is not given (KernelSpecification.ProblemSize)")
        d = self.problem[i]
        return ast.Name(d, ast.Load()) if isinstance(d, str) else ast.Constant(d)

    def arguments(self, params: dict) -> tuple[list, list, list, list]:
        args, outputs, moved, dtypes = [], [], [], []
        spec_args = self.spec.get("Arguments") or []
        if not spec_args:
            self.fail(["KernelSpecification", "Arguments"], "missing: the kernel's arguments")
        marked = any("Output" in a for a in spec_args)  # BAT marks outputs; else the access type says
        names = set()
        for i, a in enumerate(spec_args):
            at = ["KernelSpecification", "Arguments", i]
            name = a.get("Name") or f"arg{i}"
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in names:
                self.fail([*at, "Name"], f"'{name}' is not a unique C identifier")
            names.add(name)
            if a["Type"] not in T1_TYPES:
                self.fail([*at, "Type"], f"type '{a['Type']}' is not supported (numbers and their vectors are)")
            dtype, lanes = T1_TYPES[a["Type"]]
            if a.get("MemType") == "Constant" or a.get("MemoryType") == "Symbol":
                self.fail([*at, "MemType" if "MemType" in a else "MemoryType"],
                          "constant memory and symbols are not supported: pass the data as an array")
            if a["MemoryType"] == "Local":
                self.fail([*at, "MemoryType"], "local (shared) memory arguments are not supported")
            if a["MemoryType"] == "Scalar":
                if lanes > 1:
                    self.fail([*at, "Type"], f"a scalar of vector type '{a['Type']}' is not supported")
                if not isinstance(a.get("FillValue"), (int, float)):
                    self.fail([*at, "FillValue"], "a scalar needs its value in FillValue")
                value = a["FillValue"]
                if dtype.startswith(("int", "uint")):
                    if not float(value).is_integer():
                        self.fail([*at, "FillValue"], f"{value} is not a whole number, but the type is {a['Type']}")
                    value = int(value)
                    if value >= SIZE_VAR_MIN and value in self.sizes.values():
                        var = next(k for k, v in self.sizes.items() if v == value)
                        self.linked[var] = value
                        value = var
                args.append({"name": name, "scalar": value, "dtype": dtype})
                continue
            if "Size" not in a:
                self.fail([*at, "Size"], "an array needs its Size (elements)")
            size = self.size_expression(a["Size"], [*at, "Size"], params)
            shape = size if lanes == 1 else (size * lanes if isinstance(size, int) else f"{_group(size)} * {lanes}")
            entry = {"name": name, "dtype": dtype, "shape": [shape], "fill": self.fill(a, at, dtype)}
            output = bool(a.get("Output")) if marked else a.get("AccessType") in ("WriteOnly", "ReadWrite")
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
                self.fail([*at, "DataSource"], f"generator '{source}' is not supported: 'i' (0, 1, 2, ...) or a "
                          "number are")
            return {"kind": "constant", "value": int(value) if value.is_integer() else value}
        self.fail([*at, "FillType"], f"fill type '{kind}' is not supported: the data lives outside the T1 file "
                  "(Constant, Random and the 'i' Generator are)")

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
                self.fail(at, f"'{value}' is neither a tuning parameter nor a number: each block dimension must be one "
                          "parameter")
        return names

    def grid(self, params: dict, block: list) -> list:
        spec = self.spec
        known = set(params) | set(self.sizes)
        if self.problem is not None:
            grid = []
            for i, d in enumerate(self.problem):
                key = f"GridDiv{DIMS[i]}"
                divisors = spec[key] if key in spec else ([block[i]] if i < len(block) else [])
                if not isinstance(divisors, list):
                    self.fail(["KernelSpecification", key], "expected a list of parameter names or expressions")
                parts = [self.expression(str(x), set(params), ["KernelSpecification", key, j], "is not a divisor")
                         for j, x in enumerate(divisors)]
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
                text = self.expression(str(global_size[d]), known, ["KernelSpecification", "GlobalSize", d],
                                       "is not a launch size", link_sizes=True)
                if kind == "OpenCL":
                    threads = block[i] if i < len(block) else "1"
                    text = f"ceil({_group(text)} / {threads})"
                grid.append(text)
            self.notes.append("Grid: GlobalSize in " + ("blocks (GlobalSizeType CUDA)." if kind == "CUDA" else
                              "threads (GlobalSizeType OpenCL), divided by the block size."))
        return grid

    # ---- reference ---------------------------------------------------------------------------------
    def reference(self, arguments: list, outputs: list, params: dict, restrictions: list) -> tuple[dict, dict]:
        refs = self.spec.get("ReferenceArguments") or []
        if refs:
            expressions, verify = {}, {}
            for j, r in enumerate(refs):
                at = ["KernelSpecification", "ReferenceArguments", j]
                if r["TargetName"] not in outputs:
                    self.fail([*at, "TargetName"], f"'{r['TargetName']}' is not an output argument; outputs: "
                              f"{', '.join(outputs) or 'none'}")
                if r["FillType"] != "Constant" or not isinstance(r.get("FillValue"), (int, float)):
                    self.fail([*at, "FillType"], "only a Constant reference (with a FillValue) is supported")
                expressions[r["TargetName"]] = str(r["FillValue"])
                if "ValidationThreshold" in r:
                    relative = r.get("ValidationMethod") == "SideBySideRelativeComparison"
                    key, other = ("rtol", "atol") if relative else ("atol", "rtol")
                    verify[key] = max(verify.get(key, 0), float(r["ValidationThreshold"]))
                    verify.setdefault(other, 0.0)
            missing = [o for o in outputs if o not in expressions]
            if missing:
                self.fail(["KernelSpecification", "ReferenceArguments"], f"no reference for output(s) {', '.join(missing)}")
            return {"expression": expressions}, verify
        if not outputs:
            self.notes.append("No argument is an output, so results are not checked.")
            return {}, {}
        from tuner.space.expressions import Expression
        from tuner.workloads.declared import first_valid_config

        defaults = {p["Name"]: p.get("Default") for p in self.doc["ConfigurationSpace"]["TuningParameters"]}
        config = None
        if all(defaults.get(k) in v for k, v in params.items()):
            candidate = {k: defaults[k] for k in params}
            if all(bool(Expression(r)(candidate)) for r in restrictions):
                config, which = candidate, "the file's Default values"
        if config is None:
            config, which = first_valid_config(params, restrictions), "the first valid config"
        if config is None:
            self.fail(["ConfigurationSpace"], "no configuration meets every condition")
        self.notes.append(f"The file gives no reference: outputs ({', '.join(outputs)}) are checked against the "
                          f"kernel's own output with {which}, run once on the GPU. That config is trusted, not checked: "
                          "replace it with reference.expression or reference.kernel where you can.")
        return {"config": config}, {}

    def self_check(self, doc: dict) -> None:
        """The document is a valid space (our schema, the declaration checks): a failure here is a T1 file
        this import reads wrongly, said as such rather than left for the loader."""
        import jsonschema

        from tuner.space.loader import _schema
        from tuner.workloads.declared import check_declaration

        errors = list(jsonschema.Draft202012Validator(_schema()).iter_errors(doc))
        if errors:
            e = jsonschema.exceptions.best_match(errors)
            where = ".".join(map(str, e.absolute_path))
            self.fail([], f"cannot be imported: the space it makes is invalid at {where}: {e.message}")
        try:
            check_declaration(doc, self.path, set(self.sizes), set(doc["parameters"]), list(doc["dtypes"]))
        except TunerError as e:
            self.fail([], f"cannot be imported: the space it makes is invalid ({e})")


def _fold(tree: ast.AST) -> ast.AST:
    """Sub-expressions without free names evaluated to numbers (`max([15]) - 1` -> 14)."""
    from tuner.space.expressions import Expression

    class Fold(ast.NodeTransformer):
        def generic_visit(s, node):
            node = super().generic_visit(node)
            called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
            free = [n for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in called]
            if isinstance(node, ast.expr) and not isinstance(node, (ast.Constant, ast.Name, ast.List, ast.Tuple)) \
                    and not free:
                try:
                    value = Expression(ast.unparse(node))({})
                except Exception:  # noqa: BLE001  (left as it is; the expression check says what is wrong)
                    return node
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    if isinstance(value, float) and value.is_integer():
                        value = int(value)
                    return ast.Constant(value)
            return node

    return Fold().visit(tree)


def _group(text: str) -> str:
    """`text` as an operand: parenthesized unless it is a name or a number."""
    return text if re.fullmatch(r"[\w.]+", text) else f"({text})"


def _itemsize(dtype: str) -> int:
    return {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "int32": 4, "uint32": 4, "float32": 4}.get(dtype, 8)
