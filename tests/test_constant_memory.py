"""Constant-memory arguments (`memory: constant` / `both` in a space's `arguments`): parsed and checked, built
with the kernel's parameters from the same draws, handed to the reference and to Kernel Tuner's cmem_args,
and imported from a T1 file's `MemType: Constant`. No GPU, except the tests marked gpu (a kernel that reads a
`__constant__` array, measured through the measuring process)."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.test_declared import declared_error, set_arg, write_space
from tests.test_t1 import CONVOLUTION, write_t1
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.space import load_space
from tuner.space.declaration import check_declaration
from tuner.space.document import space_schema
from tuner.workloads import declared as declared_module
from tuner.workloads.base import Workload
from tuner.workloads.declared import DeclaredWorkload
from tuner.workloads.t1 import space_from_t1

ROOT = Path(__file__).resolve().parents[1]
SIZE = {"n": 1000}

# y = c0 + c1 x + c2 x^2 + c3 x^3, the coefficients in constant memory
POLY_KERNEL = r"""
__constant__ float coeffs[4];
extern "C" __global__ void poly(int n, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = coeffs[0] + x[i] * (coeffs[1] + x[i] * (coeffs[2] + x[i] * coeffs[3]));
}
"""
BLOCKS = [32, 64, 128, 256]
POLY: dict = {
    "workload": "poly",
    "kernel": {"source": "poly.cu", "name": "poly"},
    "parameters": {"block_size_x": BLOCKS},
    "launch": {"block": ["block_size_x"], "grid": ["ceil(n / block_size_x)"]},
    "sizes": {"small": {"n": 5000}},
    "dtypes": {"float32": {}},
    "metrics": {"GB/s": "2 * n * 4 / (time / 1e3) / 1e9"},
    "objective": {"metric": "time", "direction": "minimize"},
    "verify": {"atol": 1e-4, "rtol": 1e-4},
    "arguments": [
        {"name": "n", "scalar": "n"},
        {"name": "coeffs", "shape": [4], "memory": "constant", "fill": {"kind": "uniform", "low": -1, "high": 1}},
        {"name": "x", "shape": ["n"], "fill": {"kind": "uniform", "low": -1, "high": 1}},
        {"name": "y", "shape": ["n"], "output": True},
    ],
    "reference": {"expression": {"y": "coeffs[0] + x * (coeffs[1] + x * (coeffs[2] + x * coeffs[3]))"}},
}


def poly_workload(folder: Path, **changes) -> DeclaredWorkload:
    doc = {**copy.deepcopy(POLY), **changes}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "poly.cu").write_text(POLY_KERNEL)
    (folder / "space.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return DeclaredWorkload("poly", folder / "space.yaml")


# ---- the space format ----------------------------------------------------------------------------------------
def test_a_constant_argument_is_parsed(tmp_path):
    path = poly_workload(tmp_path / "poly").space_path
    decl = check_declaration(POLY, path, {"n"}, {"block_size_x"}, ["float32"])
    coeffs, x = decl.args[1], decl.args[2]
    assert (coeffs.memory, coeffs.constant, coeffs.parameter, coeffs.output) == ("constant", True, False, False)
    assert (x.memory, x.constant, x.parameter) == ("global", False, True)  # the default
    both = {**POLY["arguments"][1], "memory": "both"}
    doc = {**POLY, "arguments": [POLY["arguments"][0], both, *POLY["arguments"][2:]]}
    arg = check_declaration(doc, path, {"n"}, {"block_size_x"}, ["float32"]).args[1]
    assert (arg.constant, arg.parameter) == (True, True)
    assert load_space(path).declaration.args[1].memory == "constant"  # through the loader


def test_the_schema_describes_memory():
    prop = space_schema()["properties"]["arguments"]["items"]["properties"]["memory"]
    assert prop["enum"] == ["global", "constant", "both"]
    assert "__constant__" in prop["description"] and "cmem_args" in prop["description"]


def test_the_loader_refuses_another_memory(tmp_path):
    doc = copy.deepcopy(POLY)
    doc["arguments"][1]["memory"] = "shared"
    with pytest.raises(TunerError, match=r"arguments\.1\.memory"):
        load_space(write_space(tmp_path / "decl", doc))


@pytest.mark.parametrize(
    "mutate, where, says",
    [
        (
            set_arg(3, memory="constant"),
            "arguments.3.output",
            "'y' is in constant memory (memory: constant), which the kernel cannot write: it cannot be an output",
        ),
        (set_arg(3, memory="both"), "arguments.3.output", "it cannot be an output"),
        (set_arg(1, memory="constant"), "arguments.1.memory", "'memory' is for arrays; 'a' is a scalar"),
        (
            lambda d: d["arguments"][2].update(memory="constant") or d["kernel"].update(lang="host"),
            "arguments.2.memory",
            "constant memory is for CUDA kernels",
        ),
    ],
)
def test_constant_argument_errors(tmp_path, mutate, where, says):
    message = declared_error(tmp_path, mutate)
    assert f": at {where}: " in message and says in message, message


# ---- the workload ----------------------------------------------------------------------------------------------
def test_the_base_workload_has_no_constant_memory():
    assert Workload().constant_arguments([], {}, "float32") == {}


def test_arguments_are_the_kernel_parameters_and_the_reference_reads_the_constants(tmp_path):
    w = poly_workload(tmp_path / "poly")
    size = {"n": 5000}
    args = w.arguments(size, "float32", np.random.default_rng(0))
    assert len(args) == 3  # n, x, y: coeffs is no kernel parameter
    constants = w.constant_arguments(args, size, "float32")
    assert list(constants) == ["coeffs"]
    c = constants["coeffs"]
    assert c.dtype == np.float32 and c.shape == (4,) and np.all(np.abs(c) <= 1) and c.any()
    answer = w.answer(args, size, "float32")
    assert len(answer) == 3 and answer[0] is None and answer[1] is None
    x = args[1].astype(np.float64)
    c64 = c.astype(np.float64)
    assert np.allclose(answer[2], c64[0] + x * (c64[1] + x * (c64[2] + x * c64[3])), rtol=1e-6)
    # the same arrays, every time they are asked for
    assert w.constant_arguments(args, size, "float32")["coeffs"] is c
    assert w.constant_arguments(list(args), size, "float32")["coeffs"] is c


def test_constants_come_from_the_same_draws(tmp_path):
    """The data seed decides the constants as it decides the other arrays; `seed` fixes them all."""
    w = poly_workload(tmp_path / "poly")
    one, two = (
        w.constant_arguments(w.arguments(SIZE, "float32", np.random.default_rng(s)), SIZE, "float32")["coeffs"]
        for s in (1, 2)
    )
    assert not np.array_equal(one, two)
    w = poly_workload(tmp_path / "seeded", seed=5)
    one, two = (
        w.constant_arguments(w.arguments(SIZE, "float32", np.random.default_rng(s)), SIZE, "float32")["coeffs"]
        for s in (1, 2)
    )
    assert np.array_equal(one, two)


def test_constants_of_other_arguments_are_refused(tmp_path):
    w = poly_workload(tmp_path / "poly")
    args = w.arguments(SIZE, "float32", np.random.default_rng(0))
    made_elsewhere = [args[0], args[1].copy(), args[2]]
    with pytest.raises(TunerError, match=r"space\.yaml: at arguments\.1: the constant-memory array 'coeffs'"):
        w.answer(made_elsewhere, SIZE, "float32")
    with pytest.raises(TunerError, match=r"at arguments: 2 values given for the kernel's 3 parameters"):
        w.constant_arguments(args[:2], SIZE, "float32")


def test_both_is_a_parameter_and_the_constant_of_its_name(tmp_path):
    doc_args = copy.deepcopy(POLY["arguments"])
    doc_args[1]["memory"] = "both"
    w = poly_workload(tmp_path / "poly", arguments=doc_args)
    args = w.arguments(SIZE, "float32", np.random.default_rng(0))
    assert len(args) == 4
    assert w.constant_arguments(args, SIZE, "float32")["coeffs"] is args[1]
    assert w.answer(args, SIZE, "float32")[3].shape == (1000,)


def test_constant_memory_holds_64_kib(tmp_path):
    doc_args = copy.deepcopy(POLY["arguments"])
    doc_args[1]["shape"] = ["n * 20"]
    w = poly_workload(tmp_path / "poly", arguments=doc_args)
    with pytest.raises(TunerError, match=r"at arguments\.1\.shape: 80000 bytes for size .* holds 64 KiB"):
        w.arguments({"n": 1000}, "float32", np.random.default_rng(0))
    assert len(w.arguments({"n": 800}, "float32", np.random.default_rng(0))) == 3  # 64000 bytes fit


def test_gpu_references_get_the_constants(tmp_path, monkeypatch):
    """A config reference runs the tuned kernel with every constant; a reference kernel gets those its source
    names (it may take the data as a parameter instead)."""
    calls = []

    def fake_run_kernel(name, source, grid, args, params, block_names, lang, options, device, constants):
        calls.append((name, constants))
        return [np.zeros_like(a) if isinstance(a, np.ndarray) else a for a in args]

    monkeypatch.setattr(declared_module, "_run_kernel", fake_run_kernel)
    w = poly_workload(tmp_path / "config", reference={"config": {"block_size_x": 64}})
    args = w.arguments(SIZE, "float32", np.random.default_rng(0))
    w.answer(args, SIZE, "float32")
    assert calls[-1][0] == "poly" and calls[-1][1]["coeffs"] is w.constant_arguments(args, SIZE, "float32")["coeffs"]

    for source, expected in (("__constant__ float coeffs[4];\n", ["coeffs"]), ("// takes them as a pointer\n", [])):
        folder = tmp_path / f"kernel{len(calls)}"
        ref = {"source": "ref.cu", "name": "poly_ref", "block": [128], "grid": ["ceil(n / 128)"]}
        w = poly_workload(folder, reference={"kernel": ref})
        (folder / "ref.cu").write_text(source + 'extern "C" __global__ void poly_ref() {}\n')
        args = w.arguments(SIZE, "float32", np.random.default_rng(0))
        w.answer(args, SIZE, "float32")
        assert calls[-1][0] == "poly_ref" and list(calls[-1][1]) == expected


def test_kernel_options_carry_the_constants(tmp_path):
    w = poly_workload(tmp_path / "poly")
    args = w.arguments(SIZE, "float32", np.random.default_rng(0))
    constants = w.constant_arguments(args, SIZE, "float32")
    options = kt.kernel_options(w.space, SIZE, "float32", args, "nvcuda", constants)
    assert options.cmem_args == constants and options.cmem_args["coeffs"] is constants["coeffs"]
    assert options.arguments is args
    assert kt.kernel_options(w.space, SIZE, "float32", args, "nvcuda").cmem_args is None
    assert kt.kernel_options(w.space, SIZE, "float32", args, "nvcuda", {}).cmem_args is None


# ---- T1 files ----------------------------------------------------------------------------------------------------
def conv_t1() -> dict:
    t1: dict = copy.deepcopy(CONVOLUTION)
    t1["KernelSpecification"]["Arguments"][2]["MemType"] = "Constant"
    return t1


def test_a_t1_constant_argument_is_imported(tmp_path):
    """Kernel Tuner (tune_kernel_T1) and BAT pass a `MemType: Constant` argument to the kernel and copy it to
    the __constant__ array of its name: `memory: both`."""
    doc = space_from_t1(write_t1(tmp_path, conv_t1()), workload="conv")
    d_filter = doc["arguments"][2]
    assert d_filter == {
        "name": "d_filter",
        "dtype": "float32",
        "shape": ["n2"],  # the file's literal 225: a size variable, as any array size of 64 or more
        "fill": {"kind": "normal"},
        "memory": "both",
    }
    assert "memory" not in doc["arguments"][0] and "memory" not in doc["arguments"][1]
    folder = tmp_path / "conv"
    folder.mkdir()
    (folder / "convolution.cu").write_text("__constant__ float d_filter[225];\n")
    (folder / "space.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    w = DeclaredWorkload("conv", folder / "space.yaml")
    size = {"problem_x": 128, "problem_y": 64, "n": 128 * 64, "n2": 225}
    args = w.arguments(size, "float32", np.random.default_rng(0))
    assert len(args) == 3 and args[1].shape == ((128 + 14) * (64 + 14),)
    assert w.constant_arguments(args, size, "float32") == {"d_filter": args[2]}


def test_a_square_problem_size_gives_two_variables(tmp_path):
    t1 = conv_t1()
    spec = t1["KernelSpecification"]
    spec["ProblemSize"] = [4096, 4096]
    spec["Arguments"][0]["Size"] = "ProblemSize[0] * ProblemSize[1]"
    spec["Arguments"].append({"Name": "width", "Type": "int32", "MemoryType": "Scalar", "FillValue": 4096})
    spec["Arguments"].append({"Name": "height", "Type": "int32", "MemoryType": "Scalar", "FillValue": 4096})
    doc = space_from_t1(write_t1(tmp_path, t1), workload="conv")
    assert doc["sizes"] == {"default": {"problem_x": 4096, "problem_y": 4096, "n": 225}}
    assert doc["launch"]["grid"] == [
        "ceil(problem_x / (block_size_x * tile_size_x))",
        "ceil(problem_y / (block_size_y * tile_size_y))",
    ]
    shapes = [a.get("shape") for a in doc["arguments"]]
    assert shapes[:2] == [["problem_x * problem_y"], ["(problem_x + 15 - 1) * (problem_y + 15 - 1)"]]
    # equal numbers read as sizes: successive scalars take the dimensions in turn
    assert [a.get("scalar") for a in doc["arguments"][3:]] == ["problem_x", "problem_y"]
    # so a size that is not square builds consistent arguments
    folder = tmp_path / "conv"
    folder.mkdir()
    (folder / "convolution.cu").write_text("\n")
    (folder / "space.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    w = DeclaredWorkload("conv", folder / "space.yaml")
    out, inp, _, width, height = w.arguments(
        {"problem_x": 256, "problem_y": 128, "n": 225}, "float32", np.random.default_rng(0)
    )
    assert out.shape == (256 * 128,) and inp.shape == (270 * 142,) and (width, height) == (256, 128)


def test_the_third_party_t1_file(tmp_path):
    """benchmarks/third_party/convolution.t1.json: Kernel Tuner's convolution with its filter in constant
    memory, checked against the kernel's default config."""
    path = ROOT / "benchmarks" / "third_party" / "convolution.t1.json"
    doc = space_from_t1(path, workload="conv")
    args = {a["name"]: a for a in doc["arguments"]}
    assert list(args) == ["output", "input", "d_filter"]
    assert args["d_filter"]["memory"] == "both" and args["d_filter"]["fill"] == {"kind": "normal"}
    assert args["d_filter"]["shape"] == [289]
    assert args["output"]["output"] is True and args["output"]["fill"] == {"kind": "zeros"}
    assert doc["sizes"] == {"default": {"problem_x": 4096, "problem_y": 4096}}
    assert doc["reference"]["config"]["block_size_x"] == 16
    assert json.loads(path.read_text())["KernelSpecification"]["Arguments"][2]["MemType"] == "Constant"


# ---- on a GPU: a kernel reading __constant__ memory, measured as a campaign measures -------------------------
def measured(tmp_path, monkeypatch, **changes) -> list:
    from tuner.measure.protocol import MeasureSpec
    from tuner.measure.runner import IsolatedRunner

    workloads = tmp_path / "workloads"
    w = poly_workload(workloads / "poly", **changes)
    monkeypatch.setenv("TUNER_WORKLOADS", str(workloads))
    size = {"n": 5000}
    spec = MeasureSpec("poly", size, "float32", "nvcuda", 0, None, baseline_repeats=0)
    runner = IsolatedRunner(spec, timeout=120)
    rows: list = []
    runner.on_row = lambda row, fresh: rows.append(row)
    runner.start()
    try:
        runner.run([[b] for b in BLOCKS], kt.tuning_options(w.space, size, "float32"))
    finally:
        runner.shutdown()
    assert len(rows) == 4
    return rows


@pytest.mark.gpu
def test_constant_memory_on_the_gpu_against_an_expression(tmp_path, monkeypatch):
    rows = measured(tmp_path, monkeypatch)
    assert [r["status"] for r in rows] == ["ok"] * 4, [r.get("error", "")[:300] for r in rows]


@pytest.mark.gpu
def test_constant_memory_on_the_gpu_against_a_trusted_config(tmp_path, monkeypatch):
    rows = measured(tmp_path, monkeypatch, reference={"config": {"block_size_x": 32}})
    assert [r["status"] for r in rows] == ["ok"] * 4, [r.get("error", "")[:300] for r in rows]


@pytest.mark.gpu
def test_constant_memory_on_the_gpu_is_really_checked(tmp_path, monkeypatch):
    """The reference reads the constants: a wrong reference of them fails every config."""
    wrong = {"y": "coeffs[1] + x * (coeffs[1] + x * (coeffs[2] + x * coeffs[3]))"}
    rows = measured(tmp_path, monkeypatch, reference={"expression": wrong})
    assert [r["status"] for r in rows] == ["wrong_answer"] * 4, rows
