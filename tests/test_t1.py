"""Importing T1 input files (BAT / Kernel Tuner) as spaces: tuner.workloads.t1. The T1 files here are
written for these tests after the published T1 schema (Kernel Tuner's schema/T1/1.0.0/input-schema.json)
and the way BAT's benchmark files use it."""

import copy
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from tuner.errors import TunerError
from tuner.space.declaration import check_declaration
from tuner.space.document import space_schema
from tuner.workloads.t1 import parse_values, space_from_t1, translate_condition

KERNEL = 'extern "C" __global__ void triad(const double *A, const double *B, double *C, double s, int count) {}\n'

# BAT's TRIAD, in its words: a Budget object (the schema says a list) and a FormatVersion string are left alone
TRIAD = {
    "General": {"BenchmarkName": "TRIAD", "FormatVersion": "1", "TimeUnit": "Microseconds"},
    "Budget": {"Type": "ConfigurationCount", "BudgetValue": 10},
    "Search": {"Name": "random_sample"},
    "ConfigurationSpace": {
        "TuningParameters": [
            {"Name": "BLOCK_SIZE", "Type": "int", "Values": "list(range(32, 1024+1, 32))", "Default": 128},
            {"Name": "LOOP_UNROLL", "Type": "int", "Values": "list(range(1,16))", "Default": 1},
            {"Name": "WORK_PER_THREAD", "Type": "int", "Values": "[2**i for i in range(0, 5)]", "Default": 1},
        ],
        "Conditions": [
            {
                "Expression": "LOOP_UNROLL <= WORK_PER_THREAD && !(BLOCK_SIZE > 512 || WORK_PER_THREAD == 16)",
                "Parameters": ["LOOP_UNROLL", "WORK_PER_THREAD", "BLOCK_SIZE"],
            },
        ],
    },
    "BenchmarkConfig": {"PRECISION": 64, "iterations": 1000},
    "KernelSpecification": {
        "Language": "CUDA",
        "CompilerOptions": ["-std=c++17"],
        "KernelName": "triad",
        "KernelFile": "triad_kernel.cu",
        "SharedMemory": 0,
        "GlobalSize": {"X": "(4096 // BLOCK_SIZE // WORK_PER_THREAD) + 1"},
        "LocalSize": {"X": "BLOCK_SIZE"},
        "Arguments": [
            {
                "Name": "A",
                "Type": "double",
                "Size": 4096,
                "FillType": "Generator",
                "DataSource": "i",
                "AccessType": "ReadOnly",
                "MemoryType": "Vector",
            },
            {
                "Name": "B",
                "Type": "double",
                "Size": 4096,
                "FillType": "Random",
                "FillValue": 1.0,
                "AccessType": "ReadOnly",
                "MemoryType": "Vector",
            },
            {
                "Name": "C",
                "Type": "double",
                "Size": 4096,
                "FillType": "Constant",
                "FillValue": 0.0,
                "AccessType": "ReadWrite",
                "MemoryType": "Vector",
                "Output": 1,
            },
            {"Name": "s", "Type": "double", "MemoryType": "Scalar", "AccessType": "ReadOnly", "FillValue": 1.75},
            {"Name": "count", "Type": "int32", "MemoryType": "Scalar", "AccessType": "ReadOnly", "FillValue": 4096},
        ],
    },
}

# Kernel Tuner's reading: ProblemSize with grid divisors, an array size over ProblemSize and a parameter
CONVOLUTION = {
    "ConfigurationSpace": {
        "TuningParameters": [
            {"Name": "filter_width", "Type": "int", "Values": "[15]", "Default": 15},
            {"Name": "block_size_x", "Type": "int", "Values": "[16, 32, 64, 128]", "Default": 32},
            {"Name": "block_size_y", "Type": "int", "Values": "[1, 2, 4, 8]", "Default": 8},
            {"Name": "tile_size_x", "Type": "int", "Values": "[1, 2, 4]", "Default": 1},
            {"Name": "tile_size_y", "Type": "int", "Values": "[1, 2, 4]", "Default": 1},
        ],
        "Conditions": [
            {"Expression": "(block_size_x * block_size_y) >= 64", "Parameters": ["block_size_x", "block_size_y"]},
            {
                "Expression": "(block_size_x * block_size_y) <= MAX_THREADS",
                "Parameters": ["block_size_x", "block_size_y"],
            },
        ],
    },
    "BenchmarkConfig": {"MAX_THREADS": 1024},
    "KernelSpecification": {
        "Language": "CUDA",
        "KernelName": "convolution_kernel",
        "KernelFile": "kernels/convolution.cu",
        "GlobalSizeType": "CUDA",
        "LocalSize": {"X": "block_size_x", "Y": "block_size_y", "Z": "1"},
        "GlobalSize": {"X": "(4096 // block_size_x) // tile_size_x", "Y": "(2048 // block_size_y) // tile_size_y"},
        "GridDivX": ["block_size_x", "tile_size_x"],
        "GridDivY": ["block_size_y", "tile_size_y"],
        "ProblemSize": [4096, 2048],
        "Arguments": [
            {
                "Name": "output_image",
                "Type": "float",
                "MemoryType": "Vector",
                "AccessType": "WriteOnly",
                "FillType": "Constant",
                "Size": 8388608,
                "FillValue": 0.0,
            },
            {
                "Name": "input_image",
                "Type": "float",
                "MemoryType": "Vector",
                "AccessType": "ReadOnly",
                "FillType": "Random",
                "Size": "(ProblemSize[0]+max(filter_width)-1) * (ProblemSize[1]+max(filter_width)-1)",
            },
            {
                "Name": "d_filter",
                "Type": "float",
                "MemoryType": "Vector",
                "AccessType": "ReadOnly",
                "FillType": "Random",
                "Size": 225,
                "RandomSeed": 11,
            },
        ],
    },
}

# BAT's reading of an OpenCL-style global size (threads), over a BenchmarkConfig entry
HOTSPOT = {
    "ConfigurationSpace": {
        "TuningParameters": [
            {"Name": "BLOCK_SIZE_X", "Type": "int", "Values": "[1, 2, 4, 8, 16] + list(range(32, 1024+1, 32))"},
            {"Name": "BLOCK_SIZE_Y", "Type": "int", "Values": "[2**i for i in range(0, 6)]"},
        ],
        "Conditions": [
            {"Expression": "BLOCK_SIZE_X*BLOCK_SIZE_Y >= 64", "Parameters": ["BLOCK_SIZE_X", "BLOCK_SIZE_Y"]}
        ],
    },
    "BenchmarkConfig": {"dataSize": 4096, "iterations": 10},
    "KernelSpecification": {
        "Language": "CUDA",
        "KernelName": "calculate_temp",
        "KernelFile": "hotspot.cu",
        "GlobalSizeType": "OpenCL",
        "LocalSize": {"X": "BLOCK_SIZE_X", "Y": "BLOCK_SIZE_Y", "Z": "1"},
        "GlobalSize": {"X": "dataSize", "Y": "dataSize", "Z": "1"},
        "Arguments": [
            {
                "Name": "power",
                "Type": "float",
                "Size": 16777216,
                "MemoryType": "Vector",
                "AccessType": "ReadOnly",
                "FillType": "Random",
            },
            {
                "Name": "temp",
                "Type": "float2",
                "Size": 16777216,
                "MemoryType": "Vector",
                "AccessType": "WriteOnly",
                "FillType": "Constant",
                "FillValue": 0.0,
            },
            {"Name": "grid_cols", "Type": "int32", "MemoryType": "Scalar", "FillValue": 4096},
            {"Name": "flags", "Type": "uint8", "Size": 32, "MemoryType": "Vector", "FillType": "Random"},
        ],
    },
}


def write_t1(folder: Path, doc: dict, name: str = "bench.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(doc, indent=2))
    return path


def imported(tmp_path, doc, workload="bench") -> dict:
    return space_from_t1(write_t1(tmp_path, doc), workload=workload)


def assert_valid_space(doc: dict, path: Path) -> None:
    """A document the loader accepts: our schema, then the declaration checks."""
    jsonschema.validate(doc, space_schema())
    size_vars = set(next(iter(doc["sizes"].values())))
    check_declaration(doc, path, size_vars, set(doc["parameters"]), list(doc["dtypes"]))


# ---- values and conditions -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, values",
    [
        ("[16, 32, 64, 128]", [16, 32, 64, 128]),
        ("[0.5, 1.0]", [0.5, 1.0]),
        ("['a', 'b']", ["a", "b"]),
        ("[True, False]", [True, False]),
        ("7", [7]),
        ("list(range(32, 1024+1, 32))", list(range(32, 1025, 32))),
        ("range(1, 4)", [1, 2, 3]),
        ("[1, 2, 4, 8, 16] + list(range(32, 96+1, 32))", [1, 2, 4, 8, 16, 32, 64, 96]),
        ("[2**i for i in range(0, 6)]", [1, 2, 4, 8, 16, 32]),
        ("[i for i in range(1, 11) if i % 3 == 0]", [3, 6, 9]),
        ("[1] + [2*i for i in range(1,4)]", [1, 2, 4, 6]),
    ],
)
def test_parse_values(text, values):
    assert parse_values(text) == values


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd').read()",
        "[x.__class__ for x in range(3)]",
        "list(range(10**9))",
        "sorted([3, 1])",
        "[lambda: 1]",
    ],
)
def test_parse_values_refuses_code(text):
    with pytest.raises((ValueError, TypeError)):
        parse_values(text)


def test_translate_condition():
    assert translate_condition("a <= b && !(c > 1 || d != 2)") == "a <= b and not (c > 1 or d != 2)"
    assert translate_condition("x == true") == "x == True"


# ---- whole files -----------------------------------------------------------------------------------------
def test_triad(tmp_path):
    doc = imported(tmp_path, TRIAD, "triad")
    assert doc["workload"] == "triad"
    assert doc["kernel"] == {"source": "triad_kernel.cu", "name": "triad", "compiler_options": ["-std=c++17"]}
    assert doc["parameters"] == {
        "BLOCK_SIZE": list(range(32, 1025, 32)),
        "LOOP_UNROLL": list(range(1, 16)),
        "WORK_PER_THREAD": [1, 2, 4, 8, 16],
    }
    assert doc["restrictions"] == ["LOOP_UNROLL <= WORK_PER_THREAD and not (BLOCK_SIZE > 512 or WORK_PER_THREAD == 16)"]
    # GlobalSize without a GlobalSizeType is in blocks (BAT's default); 4096 is the arrays' size, n
    assert doc["launch"] == {"block": ["BLOCK_SIZE"], "grid": ["n // BLOCK_SIZE // WORK_PER_THREAD + 1"]}
    assert doc["sizes"] == {"default": {"n": 4096}}
    assert doc["dtypes"] == {"float64": {}}
    assert doc["objective"] == {"metric": "time", "direction": "minimize"}
    assert doc["metrics"] == {"GB/s": "(n * 8 + n * 8 + n * 8) / (time / 1e3) / 1e9"}
    assert doc["arguments"] == [
        {"name": "A", "dtype": "float64", "shape": ["n"], "fill": {"kind": "arange"}},
        {"name": "B", "dtype": "float64", "shape": ["n"], "fill": {"kind": "normal"}},
        {"name": "C", "dtype": "float64", "shape": ["n"], "fill": {"kind": "zeros"}, "output": True},
        {"name": "s", "scalar": 1.75, "dtype": "float64"},
        {"name": "count", "scalar": "n", "dtype": "int32"},
    ]
    # no reference in the file: the author's Default config, trusted, and said so
    assert doc["reference"] == {"config": {"BLOCK_SIZE": 128, "LOOP_UNROLL": 1, "WORK_PER_THREAD": 1}}
    assert "trusted, not checked" in doc["description"] and "4096 as n" in doc["description"]
    assert_valid_space(doc, tmp_path / "space.yaml")


def test_a_bool_parameter_becomes_0_and_1(tmp_path):
    """A space's values are never booleans (`#define FLAG True` would not compile): a T1 bool is 0 and 1, its
    Default too."""
    doc = copy.deepcopy(TRIAD)
    doc["ConfigurationSpace"]["TuningParameters"].append({"Name": "FAST", "Type": "bool", "Values": "[True, False]",
                                                          "Default": True})
    space = imported(tmp_path, doc, "triad")
    assert space["parameters"]["FAST"] == [1, 0] and space["reference"]["config"]["FAST"] == 1
    assert not isinstance(space["reference"]["config"]["FAST"], bool)
    assert_valid_space(space, tmp_path / "space.yaml")


def test_kernel_tuner_problem_size_and_grid_divisors(tmp_path):
    doc = imported(tmp_path, CONVOLUTION)
    assert doc["launch"] == {
        "block": ["block_size_x", "block_size_y"],
        "grid": ["ceil(problem_x / (block_size_x * tile_size_x))", "ceil(problem_y / (block_size_y * tile_size_y))"],
    }
    assert doc["sizes"] == {"default": {"problem_x": 4096, "problem_y": 2048, "n": 8388608, "n2": 225}}
    # a parameter in a Size stands for its values (Kernel Tuner's reading): max(filter_width) is 15
    assert doc["arguments"][1]["shape"] == ["(problem_x + 15 - 1) * (problem_y + 15 - 1)"]
    assert doc["arguments"][0]["output"] is True  # WriteOnly, as no argument says Output
    assert doc["restrictions"] == ["(block_size_x * block_size_y) >= 64", "block_size_x * block_size_y <= 1024"]
    assert doc["seed"] == 11
    assert doc["kernel"]["source"] == "convolution.cu"  # the file lies in the workload's folder
    assert doc["reference"] == {
        "config": {"filter_width": 15, "block_size_x": 32, "block_size_y": 8, "tile_size_x": 1, "tile_size_y": 1}
    }
    assert_valid_space(doc, tmp_path / "space.yaml")


def test_opencl_global_size_is_in_threads(tmp_path):
    doc = imported(tmp_path, HOTSPOT)
    assert doc["launch"]["grid"] == ["ceil(dataSize / BLOCK_SIZE_X)", "ceil(dataSize / BLOCK_SIZE_Y)"]
    assert doc["sizes"] == {"default": {"dataSize": 4096, "n": 16777216}}
    args = {a["name"]: a for a in doc["arguments"]}
    assert args["temp"]["shape"] == ["n * 2"] and args["temp"]["dtype"] == "float32"  # float2: 2 floats each
    assert args["grid_cols"]["scalar"] == "dataSize"
    assert args["flags"] == {
        "name": "flags",
        "dtype": "uint8",
        "shape": [32],  # small arrays keep their size
        "fill": {"kind": "integers", "low": 0, "high": 8},
    }
    # no Default values: the first valid config is the trusted one
    assert doc["reference"] == {"config": {"BLOCK_SIZE_X": 2, "BLOCK_SIZE_Y": 32}}
    assert "the first valid config" in doc["description"]


def test_reference_arguments_give_an_expression(tmp_path):
    t1 = copy.deepcopy(TRIAD)
    t1["KernelSpecification"]["ReferenceArguments"] = [
        {
            "Name": "C_ref",
            "TargetName": "C",
            "FillType": "Constant",
            "FillValue": 0.0,
            "ValidationMethod": "AbsoluteDifference",
            "ValidationThreshold": 0.001,
        }
    ]
    doc = imported(tmp_path, t1)
    assert doc["reference"] == {"expression": {"C": "0.0"}}
    assert doc["verify"] == {"atol": 0.001, "rtol": 0.0}
    assert_valid_space(doc, tmp_path / "space.yaml")


def test_no_outputs_no_reference(tmp_path):
    t1 = copy.deepcopy(TRIAD)
    del t1["KernelSpecification"]["Arguments"][2]["Output"]
    t1["KernelSpecification"]["Arguments"][2]["AccessType"] = "ReadOnly"
    doc = imported(tmp_path, t1)
    assert "reference" not in doc and "not checked" in doc["description"]
    assert not any(a.get("output") for a in doc["arguments"])


def test_fixed_block_dimensions_become_parameters(tmp_path):
    t1 = copy.deepcopy(TRIAD)
    t1["KernelSpecification"]["LocalSize"] = {"X": "BLOCK_SIZE", "Y": "4", "Z": "1"}
    doc = imported(tmp_path, t1)
    assert doc["launch"]["block"] == ["BLOCK_SIZE", "block_size_y"] and doc["parameters"]["block_size_y"] == [4]


def test_imported_space_builds_its_arguments(tmp_path):
    """The document as a workload: the declared arguments have the T1 file's sizes and types."""
    import yaml

    from tuner.workloads.declared import DeclaredWorkload

    doc = imported(tmp_path / "t1", TRIAD, "triad")
    folder = tmp_path / "triad"
    folder.mkdir()
    (folder / "triad_kernel.cu").write_text(KERNEL)
    (folder / "space.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    w = DeclaredWorkload("triad", folder / "space.yaml")
    a, b, c, s, count = w.arguments({"n": 4096}, "float64", np.random.default_rng(0))
    assert a.tolist() == list(range(4096)) and b.dtype == np.float64 and not c.any()
    assert s == np.float64(1.75) and count == np.int32(4096)


# ---- what cannot be imported: one line naming the file and the key ----------------------------------------
def mutated(**paths):
    def apply(doc):
        for path, value in paths.items():
            *keys, last = path.split(".")
            node = doc
            for k in keys:
                node = node[int(k)] if k.isdigit() else node[k]
            if value is None:
                del node[int(last) if last.isdigit() else last]
            else:
                node[int(last) if last.isdigit() else last] = value

    return apply


@pytest.mark.parametrize(
    "mutate, where, says",
    [
        (mutated(KernelSpecification=None), "(top level)", "missing key 'KernelSpecification'"),
        (mutated(**{"KernelSpecification.Language": "OpenCL"}), "KernelSpecification.Language", "only CUDA kernels"),
        (mutated(**{"KernelSpecification.Language": "Fortran"}), "KernelSpecification.Language", "expected one of"),
        (
            mutated(**{"KernelSpecification.Arguments.0.MemoryType": "Heap"}),
            "KernelSpecification.Arguments.0.MemoryType",
            "expected one of Scalar, Vector, Local, Symbol",
        ),
        (
            mutated(**{"ConfigurationSpace.TuningParameters.0.Values": "[32, 64"}),
            "ConfigurationSpace.TuningParameters.0.Values",
            "cannot read '[32, 64'",
        ),
        (
            mutated(**{"ConfigurationSpace.TuningParameters.0.Values": "__import__('os').getcwd()"}),
            "ConfigurationSpace.TuningParameters.0.Values",
            "is not understood",
        ),
        (
            mutated(**{"ConfigurationSpace.TuningParameters.0.Values": "[32, 64.5]"}),
            "ConfigurationSpace.TuningParameters.0.Values",
            "expected int values, got 64.5",
        ),
        (
            mutated(**{"ConfigurationSpace.Conditions.0.Expression": "WORK_PER_THREAD > 1 ? LOOP_UNROLL > 1 : true"}),
            "ConfigurationSpace.Conditions.0.Expression",
            "cannot be translated to a restriction: invalid syntax",
        ),
        (
            mutated(**{"ConfigurationSpace.Conditions.0.Expression": "len(str(BLOCK_SIZE)) < 4"}),
            "ConfigurationSpace.Conditions.0.Expression",
            "cannot be translated to a restriction: only these functions",
        ),
        (
            mutated(**{"ConfigurationSpace.Conditions.0.Expression": "BLOCK_SIZE <= LIMIT"}),
            "ConfigurationSpace.Conditions.0.Expression",
            "unknown name(s) LIMIT",
        ),
        (
            mutated(**{"KernelSpecification.Arguments.0.FillType": "BinaryRaw"}),
            "KernelSpecification.Arguments.0.FillType",
            "fill type 'BinaryRaw' is not supported",
        ),
        (
            mutated(**{"KernelSpecification.Arguments.0.DataSource": "sin(i)"}),
            "KernelSpecification.Arguments.0.DataSource",
            "generator 'sin(i)' is not supported",
        ),
        (
            mutated(**{"KernelSpecification.Arguments.3.MemType": "Constant"}),
            "KernelSpecification.Arguments.3.MemType",
            "constant memory is supported for arrays",
        ),
        (
            mutated(**{"KernelSpecification.Arguments.2.MemType": "Constant"}),
            "KernelSpecification.Arguments.2.MemType",
            "constant memory cannot be an output",
        ),
        (
            mutated(**{"KernelSpecification.Arguments.0.MemoryType": "Symbol"}),
            "KernelSpecification.Arguments.0.MemoryType",
            "symbols are not supported",
        ),
        (
            mutated(**{"KernelSpecification.Arguments.0.Type": "custom"}),
            "KernelSpecification.Arguments.0.Type",
            "type 'custom' is not supported",
        ),
        (
            mutated(**{"KernelSpecification.Arguments.3.FillValue": None}),
            "KernelSpecification.Arguments.3.FillValue",
            "a scalar needs its value",
        ),
        (
            mutated(**{"KernelSpecification.LocalSize": {"X": "BLOCK_SIZE * 2"}}),
            "KernelSpecification.LocalSize.X",
            "neither a tuning parameter nor a number",
        ),
        (
            mutated(**{"KernelSpecification.GlobalSize": {"X": "n_items / BLOCK_SIZE"}}),
            "KernelSpecification.GlobalSize.X",
            "unknown name(s) n_items",
        ),
        (
            mutated(**{"KernelSpecification.GlobalSizeType": "Vulkan"}),
            "KernelSpecification.GlobalSizeType",
            "'Vulkan' is not supported",
        ),
        (
            mutated(**{"KernelSpecification.SharedMemory": 4096}),
            "KernelSpecification.SharedMemory",
            "dynamic shared memory",
        ),
        (
            mutated(**{"KernelSpecification.ProblemSize": ["4096 * 2"]}),
            "KernelSpecification.ProblemSize.0",
            "expressions are not supported",
        ),
        (
            mutated(**{"ConfigurationSpace.Conditions.0.Expression": "BLOCK_SIZE > 2048"}),
            "ConfigurationSpace",
            "no configuration meets every condition",
        ),
    ],
)
def test_import_errors(tmp_path, mutate, where, says):
    doc = copy.deepcopy(TRIAD)
    mutate(doc)
    path = write_t1(tmp_path, doc)
    with pytest.raises(TunerError) as e:
        space_from_t1(path, workload="bench")
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{path}: at {where}: ") and says in message, message


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"General": ', "not valid JSON (line 1, column 13)"),
        ("[1, 2]", "a T1 file is a JSON object"),
        ("\udcff", "not a T1 file"),
    ],
)
def test_malformed_files(tmp_path, text, says):
    path = tmp_path / "bad.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(TunerError) as e:
        space_from_t1(path, workload="bench")
    assert str(e.value).startswith(str(path)) and says in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(TunerError, match="no such T1 file"):
        space_from_t1(tmp_path / "missing.json", workload="bench")
