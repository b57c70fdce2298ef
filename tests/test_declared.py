"""Workloads declared in YAML (tuner.workloads.declared): the arguments a space declares, its reference,
and one clear line for every mistake in them. No GPU, except the tests marked gpu (references that run a
kernel once)."""

import copy
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tuner.errors import TunerError
from tuner.space import load_space
from tuner.space.array_expressions import ArrayExpression
from tuner.space.declaration import check_declaration
from tuner.workloads.declared import DeclaredWorkload

KERNEL = r"""
#ifndef T
#define T float
#endif
extern "C" __global__ void saxpy(int n, T a, const T *x, T *y) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
REFERENCE_KERNEL = r"""
#ifndef T
#define T float
#endif
extern "C" __global__ void saxpy_ref(int n, T a, const T *x, T *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
SPACE = {
    "workload": "decl",
    "kernel": {"source": "saxpy.cu", "name": "saxpy"},
    "parameters": {"block_size_x": [64, 128, 256], "unused": [1, 2]},
    "restrictions": ["block_size_x >= 64"],
    "launch": {"block": ["block_size_x"], "grid": ["ceil(n / block_size_x)"]},
    "sizes": {"small": {"n": 1000}},
    "dtypes": {"float32": {"defines": {"T": "float"}}, "float64": {"defines": {"T": "double"}}},
    "metrics": {"GB/s": "3 * n * itemsize / (time / 1e3) / 1e9"},
    "objective": {"metric": "GB/s", "direction": "maximize"},
    "arguments": [
        {"name": "n", "scalar": "n", "dtype": "int32"},
        {"name": "a", "scalar": 2.5, "dtype": "$dtype"},
        {"name": "x", "shape": ["n"], "dtype": "$dtype", "fill": {"kind": "uniform", "low": -1, "high": 1}},
        {"name": "y", "shape": ["n"], "dtype": "$dtype", "fill": {"kind": "normal"}, "output": True},
    ],
    "reference": {"expression": {"y": "a * x + y"}},
}


def write_space(folder: Path, doc: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "saxpy.cu").write_text(KERNEL)
    path = folder / "space.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def workload(tmp_path, **changes) -> DeclaredWorkload:
    doc = copy.deepcopy(SPACE)
    doc.update(changes)
    doc = {k: v for k, v in doc.items() if v is not None}  # None: leave the key out
    return DeclaredWorkload("decl", write_space(tmp_path / "decl", doc))


def declared_error(tmp_path, mutate) -> str:
    """The one line check_declaration raises for SPACE changed by `mutate`."""
    doc = copy.deepcopy(SPACE)
    mutate(doc)
    path = write_space(tmp_path / "bad", doc)
    with pytest.raises(TunerError) as e:
        check_declaration(doc, path, {"n"}, set(doc["parameters"]), list(doc["dtypes"]))
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{path}: at "), message
    return message


SIZE = {"n": 1000}


# ---- arguments ---------------------------------------------------------------------------------------------
def test_saxpy_arguments_and_expression_reference(tmp_path):
    w = workload(tmp_path)
    args = w.arguments(SIZE, "float32", np.random.default_rng(0))
    assert [type(a) for a in args[:2]] == [np.int32, np.float32] and args[0] == 1000 and args[1] == 2.5
    assert args[2].dtype == args[3].dtype == np.float32 and args[2].shape == args[3].shape == (1000,)
    answer = w.answer(args, SIZE, "float32")
    assert answer[:3] == [None, None, None]
    by_hand = (2.5 * args[2].astype(np.float64) + args[3].astype(np.float64)).astype(np.float32)
    assert answer[3].dtype == np.float32 and np.array_equal(answer[3], by_hand)
    # the inputs are left as generated: Kernel Tuner copies them to the GPU after the answer is computed
    assert not np.array_equal(args[3], answer[3])


def test_dtype_variable_follows_the_campaign(tmp_path):
    w = workload(tmp_path)
    args = w.arguments(SIZE, "float64", np.random.default_rng(0))
    assert [np.asarray(a).dtype for a in args] == [np.int32, np.float64, np.float64, np.float64]
    assert w.answer(args, SIZE, "float64")[3].dtype == np.float64


@pytest.mark.parametrize(
    "fill, check",
    [
        ({"kind": "uniform", "low": -2, "high": 3}, lambda a: -2 <= a.min() and a.max() < 3 and a.std() > 1),
        ({"kind": "uniform"}, lambda a: 0 <= a.min() and a.max() < 1),
        ({"kind": "normal", "mean": 5, "std": 2}, lambda a: abs(a.mean() - 5) < 0.05 and abs(a.std() - 2) < 0.05),
        ({"kind": "normal"}, lambda a: abs(a.mean()) < 0.05 and abs(a.std() - 1) < 0.05),
        ({"kind": "integers", "low": -3, "high": 3}, lambda a: set(np.unique(a)) == set(range(-3, 4))),
        ({"kind": "integers"}, lambda a: set(np.unique(a)) == set(range(-8, 9))),
        ({"kind": "zeros"}, lambda a: not a.any()),
        ({"kind": "arange"}, lambda a: np.array_equal(a, np.arange(a.size))),
        ({"kind": "constant", "value": 1.5}, lambda a: np.all(a == 1.5)),
    ],
)
def test_every_fill_kind(tmp_path, fill, check):
    args = copy.deepcopy(SPACE["arguments"])
    args[2]["fill"] = fill
    w = workload(tmp_path, arguments=args)
    size = {"n": 20000}
    for dtype in ("float32", "float64"):
        x = w.arguments(size, dtype, np.random.default_rng(1))[2]
        assert x.dtype == dtype and x.shape == (20000,)
        assert check(x), (fill, x[:10])


def test_integer_arrays(tmp_path):
    args = [
        {"name": "v", "shape": ["n"], "dtype": "int32", "fill": {"kind": "integers", "low": 0, "high": 100}},
        {"name": "u", "shape": [4], "dtype": "uint8", "fill": {"kind": "arange"}},
        {"name": "out", "shape": [1], "dtype": "int64", "output": True},
    ]
    w = workload(tmp_path, arguments=args, reference={"expression": {"out": "sum(v)"}})
    v, u, out = w.arguments(SIZE, "float32", np.random.default_rng(0))
    assert v.dtype == np.int32 and 0 <= v.min() and v.max() <= 100 and u.tolist() == [0, 1, 2, 3]
    assert out.dtype == np.int64 and out.tolist() == [0]
    assert w.answer([v, u, out], SIZE, "float32")[2].tolist() == [int(v.sum())]


def test_shapes_and_scalars_over_size_variables(tmp_path):
    args = [
        {"name": "rows", "scalar": "m", "dtype": "int32"},
        {"name": "cells", "scalar": "m * k + 1", "dtype": "int64"},
        {"name": "a", "shape": ["m", "k"], "dtype": "$dtype", "fill": {"kind": "arange"}},
        {"name": "b", "shape": ["k * 2", 3], "dtype": "float64", "fill": {"kind": "constant", "value": 0.5}},
        {"name": "c", "shape": ["m", 3], "dtype": "$dtype", "output": True},
    ]
    w = workload(
        tmp_path,
        sizes={"s": {"m": 5, "k": 4}},
        arguments=args,
        launch={"block": ["block_size_x"], "grid": ["m"]},
        metrics={"GB/s": "m * k / time"},
        reference={"expression": {"c": "a @ reshape(b, (k, 6))[:, :3] + rows"}},
    )
    rows, cells, a, b, c = w.arguments({"m": 5, "k": 4}, "float32", np.random.default_rng(0))
    assert (rows, cells) == (5, 21) and type(cells) is np.int64
    assert a.shape == (5, 4) and a.dtype == np.float32 and a[1, 0] == 4
    assert b.shape == (8, 3) and b.dtype == np.float64
    assert c.shape == (5, 3) and c.dtype == np.float32
    expected = np.arange(20.0).reshape(5, 4) @ np.full((4, 6), 0.5)[:, :3] + 5
    assert np.array_equal(w.answer([rows, cells, a, b, c], {"m": 5, "k": 4}, "float32")[4], expected)


def test_seed_fixes_the_data(tmp_path):
    w = workload(tmp_path)
    one, two = (w.arguments(SIZE, "float32", np.random.default_rng(s))[2] for s in (1, 2))
    assert not np.array_equal(one, two)  # the campaign's data seed decides
    w = workload(tmp_path / "seeded", seed=7)
    one, two = (w.arguments(SIZE, "float32", np.random.default_rng(s))[2] for s in (1, 2))
    assert np.array_equal(one, two)  # the space's seed decides


def test_expression_reference_is_computed_in_float64(tmp_path):
    args = [
        {"name": "x", "shape": [3], "dtype": "float32", "fill": {"kind": "zeros"}},
        {"name": "total", "shape": [1], "dtype": "float32", "output": True},
    ]
    w = workload(tmp_path, arguments=args, reference={"expression": {"total": "sum(x)"}})
    x = np.array([1e8, 1, -1e8], dtype=np.float32)
    assert x.sum() == 0  # float32 loses the 1
    assert w.answer([x, np.zeros(1, np.float32)], SIZE, "float32")[1].tolist() == [1.0]


def test_a_constant_expression_fills_the_output(tmp_path):
    w = workload(tmp_path, reference={"expression": {"y": "3"}})
    args = w.arguments(SIZE, "float32", np.random.default_rng(0))
    assert np.all(w.answer(args, SIZE, "float32")[3] == 3)


def test_no_reference_no_outputs_nothing_checked(tmp_path):
    args = copy.deepcopy(SPACE["arguments"])
    del args[3]["output"]
    w = workload(tmp_path, arguments=args, reference=None)
    assert w.answer(w.arguments(SIZE, "float32", np.random.default_rng(0)), SIZE, "float32") == [None] * 4


def test_the_space_loads_and_keeps_the_declaration(tmp_path):
    path = write_space(tmp_path / "decl", SPACE)
    space = load_space(path)
    assert (
        space.doc["arguments"][3]["output"] is True
        and space.kernel_source == (tmp_path / "decl" / "saxpy.cu").resolve()
    )


def test_registry_style_construction(tmp_path):
    """The registry makes the workload with no arguments and sets name and space_path afterwards."""
    w = DeclaredWorkload()
    w.name, w.space_path = "decl", write_space(tmp_path / "decl", SPACE)
    assert len(w.arguments(SIZE, "float32", np.random.default_rng(0))) == 4


def test_a_space_without_arguments_says_so(tmp_path):
    doc = {k: v for k, v in SPACE.items() if k not in ("arguments", "reference")}
    w = DeclaredWorkload("decl", write_space(tmp_path / "decl", doc))
    with pytest.raises(TunerError, match=r"space.yaml: at \(top level\): .*must declare 'arguments'"):
        w.arguments(SIZE, "float32", np.random.default_rng(0))


def test_runtime_errors_name_the_key(tmp_path):
    args = copy.deepcopy(SPACE["arguments"])
    args[2]["shape"] = ["n - 2000"]
    w = workload(tmp_path, arguments=args)
    with pytest.raises(TunerError, match=r"at arguments\.2\.shape\.0: 'n - 2000' is -1000 for size"):
        w.arguments(SIZE, "float32", np.random.default_rng(0))
    w = workload(tmp_path / "b", reference={"expression": {"y": "x[:10] * y"}})
    args = w.arguments(SIZE, "float32", np.random.default_rng(0))
    with pytest.raises(TunerError, match=r"at reference\.expression\.y: ValueError: operands could not be broadcast"):
        w.answer(args, SIZE, "float32")
    w = workload(tmp_path / "c", arguments=[{"name": "k", "scalar": "n * 3000000", "dtype": "int32"}], reference=None)
    with pytest.raises(TunerError, match=r"at arguments\.0\.scalar: 3000000000 is not a value of int32"):
        w.arguments(SIZE, "float32", np.random.default_rng(0))


# ---- reference expressions are not Python ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "x.__class__",
        "(lambda: 1)()",
        "open('f')",
        "x.sum()",
        "[v for v in x]",
        "sum(x, dtype=object)",
        "y if True else eval('1')",
    ],
)
def test_reference_expressions_refuse_what_is_not_arithmetic(text):
    with pytest.raises(ValueError):
        ArrayExpression(text)


def test_reference_expressions_allow_numpy_arithmetic():
    e = ArrayExpression("where(x > 0, sqrt(abs(x)), -x.T[::-1]) + sum(x, axis=0, keepdims=True) + x.shape[0]")
    x = np.array([4.0, -1.0])
    # where: [2, -4]; plus the sum (3) and the length (2)
    assert e({"x": x}).tolist() == [7.0, 1.0]
    assert e.names == {"x"}


# ---- every mistake: one line naming the file and the key ---------------------------------------------------
def set_arg(i, **kv):
    return lambda d: d["arguments"][i].update(kv)


@pytest.mark.parametrize(
    "mutate, where, says",
    [
        (set_arg(2, shape=["m"]), "arguments.2.shape.0", "unknown name(s) m; known: n in 'm'"),
        (set_arg(0, scalar="n + q"), "arguments.0.scalar", "unknown name(s) q"),
        (set_arg(2, shape=[-3]), "arguments.2.shape.0", "-3 is not a size"),
        (set_arg(3, name="x"), "arguments.3.name", "'x' is already the name of arguments.2"),
        (set_arg(1, shape=["n"]), "arguments.1", "exactly one of 'scalar' (a value) or 'shape'"),
        (lambda d: d["arguments"][2].pop("shape"), "arguments.2", "exactly one of 'scalar'"),
        (set_arg(0, output=True), "arguments.0.output", "'output' is for arrays"),
        (
            set_arg(2, fill={"kind": "normal", "low": 0}),
            "arguments.2.fill.low",
            "fill kind 'normal' takes mean, std, not low",
        ),
        (set_arg(2, fill={"kind": "constant"}), "arguments.2.fill", "needs 'value'"),
        (set_arg(2, fill={"kind": "uniform", "low": 2, "high": 1}), "arguments.2.fill", "low (2) is above high (1)"),
        (set_arg(2, fill={"kind": "integers", "low": 0.5}), "arguments.2.fill", "whole numbers"),
        (set_arg(2, dtype="int32"), "arguments.2.fill.kind", "'uniform' draws fractions, but the dtype is integral"),
        (
            set_arg(2, dtype="uint8", fill={"kind": "integers", "low": -1, "high": 3}),
            "arguments.2.fill",
            "do not fit uint8",
        ),
        (set_arg(0, scalar=2.5), "arguments.0.scalar", "2.5 is not a whole number"),
        (lambda d: d.update(reference=None) or d.pop("reference"), "arguments.3.output", "output 'y' has no reference"),
        (
            lambda d: d.update(reference={"expression": {"x": "y"}}),
            "reference.expression.x",
            "'x' is not an output argument; outputs: y",
        ),
        (
            lambda d: d["arguments"].append({"name": "z", "shape": ["n"], "output": True}),
            "reference.expression",
            "no expression for output 'z' (arguments.4)",
        ),
        (
            lambda d: d.update(reference={"expression": {"y": "a * w + y"}}),
            "reference.expression.y",
            "unknown name(s) w",
        ),
        (
            lambda d: d.update(reference={"expression": {"y": "__import__('os')"}}),
            "reference.expression.y",
            "only these functions",
        ),
        (
            lambda d: d["reference"].update(config={"block_size_x": 64, "unused": 1}),
            "reference",
            "exactly one of expression, config, kernel",
        ),
        (lambda d: [a.pop("output", None) for a in d["arguments"]], "reference", "no argument is an output"),
        (
            lambda d: d.update(reference={"config": {"block_size_x": 64, "unused": 1, "wpt": 2}}),
            "reference.config.wpt",
            "not a parameter",
        ),
        (
            lambda d: d.update(reference={"config": {"block_size_x": 64}}),
            "reference.config",
            "missing parameter(s) unused",
        ),
        (
            lambda d: d.update(reference={"config": {"block_size_x": 100, "unused": 1}}),
            "reference.config.block_size_x",
            "not one of its values",
        ),
        (
            lambda d: d.update(
                restrictions=["block_size_x > 64"], reference={"config": {"block_size_x": 64, "unused": 1}}
            ),
            "reference.config",
            "breaks the restriction 'block_size_x > 64'",
        ),
        (lambda d: d.pop("arguments"), "reference", "'reference' needs 'arguments'"),
        (
            lambda d: d.update(
                arguments=[{"name": "sum", "shape": ["n"], "output": True}], reference={"expression": {"sum": "1"}}
            ),
            "arguments.0.name",
            "'sum' is a function of reference expressions",
        ),
    ],
)
def test_declaration_errors(tmp_path, mutate, where, says):
    message = declared_error(tmp_path, mutate)
    assert f": at {where}: " in message and says in message, message


def test_a_host_function_needs_an_expression_reference(tmp_path):
    def host(d):
        d["kernel"]["lang"] = "host"
        d.pop("launch")
        d["reference"] = {"config": {"block_size_x": 64, "unused": 1}}

    assert ": at reference.config: a 'host' function's reference must be an 'expression'" in declared_error(
        tmp_path, host
    )


def test_the_schema_documents_the_expression_language():
    """Docs are generated from the schema: it names exactly the functions, keywords and attributes allowed."""
    import json
    from importlib import resources

    from tuner.space.array_expressions import ARRAY_ATTRIBUTES, ARRAY_FUNCTIONS, ARRAY_KEYWORDS

    schema = json.loads(resources.files("tuner.space").joinpath("space.schema.json").read_text())
    text = schema["properties"]["reference"]["properties"]["expression"]["description"]
    assert f"Functions: {', '.join(sorted(ARRAY_FUNCTIONS))};" in text
    assert f"keywords: {', '.join(sorted(ARRAY_KEYWORDS, key=['axis', 'axes', 'keepdims', 'k'].index))};" in text
    assert all(f".{a}" in text for a in ARRAY_ATTRIBUTES)
    fill = schema["properties"]["arguments"]["items"]["properties"]["fill"]
    from tuner.space.declaration import FILL_KINDS

    assert fill["properties"]["kind"]["enum"] == list(FILL_KINDS)


def test_load_space_checks_the_declaration(tmp_path):
    """The loader runs check_declaration after the schema (passes once tuner.space.loader calls it)."""
    doc = copy.deepcopy(SPACE)
    doc["arguments"][2]["shape"] = ["m"]
    with pytest.raises(TunerError, match=r"space\.yaml: at arguments\.2\.shape\.0: unknown name\(s\) m; known: n"):
        load_space(write_space(tmp_path / "bad", doc))


def ref_kernel(source, **kv):
    return {"source": source, "name": "saxpy_ref", "block": [256], "grid": ["ceil(n / 256)"], **kv}


@pytest.mark.parametrize("source", ["../outside.cu", "sub/../../outside.cu", "/etc/hostname"])
def test_a_reference_kernel_may_not_leave_the_folder(tmp_path, source):
    (tmp_path / "outside.cu").write_text(REFERENCE_KERNEL)
    message = declared_error(tmp_path, lambda d: d.update(reference={"kernel": ref_kernel(source)}))
    assert ": at reference.kernel.source: " in message and "lies outside the workload's folder" in message


def test_reference_kernel_checks(tmp_path):
    message = declared_error(tmp_path, lambda d: d.update(reference={"kernel": ref_kernel("missing.cu")}))
    assert ": at reference.kernel.source: 'missing.cu' does not exist" in message
    message = declared_error(tmp_path, lambda d: d.update(reference={"kernel": ref_kernel("saxpy.cu", grid=["n / k"])}))
    assert ": at reference.kernel.grid.0: unknown name(s) k" in message
    message = declared_error(tmp_path, lambda d: d.update(reference={"kernel": ref_kernel("saxpy.cu", block=[64, 32])}))
    assert ": at reference.kernel.block: 64 x 32 threads" in message
    # inside the folder, absolute or relative, is fine
    doc = copy.deepcopy(SPACE)
    path = write_space(tmp_path / "ok", doc)
    (tmp_path / "ok" / "ref").mkdir()
    (tmp_path / "ok" / "ref" / "r.cu").write_text(REFERENCE_KERNEL)
    for source in ("ref/r.cu", "./ref/../ref/r.cu", str(tmp_path / "ok" / "ref" / "r.cu")):
        doc["reference"] = {"kernel": ref_kernel(source)}
        check_declaration(doc, path, {"n"}, set(doc["parameters"]), list(doc["dtypes"]))


def test_integer_dtype_variable_rules(tmp_path):
    """`$dtype` takes every dtype of the space: a fill that makes fractions is refused if one is integral."""
    doc = copy.deepcopy(SPACE)
    doc["dtypes"] = {"float32": {}, "int32": {}}
    path = write_space(tmp_path / "d", doc)
    with pytest.raises(
        TunerError,
        match=r"at arguments\.1\.scalar: 2\.5 is not a whole number, but the dtype is "
        r"integral \('\$dtype' is int32 in this space\)",
    ):
        check_declaration(doc, path, {"n"}, set(doc["parameters"]), list(doc["dtypes"]))
    doc["arguments"][1]["scalar"] = 2
    with pytest.raises(
        TunerError,
        match=r"at arguments\.2\.fill\.kind: 'uniform' draws fractions, but the dtype is "
        r"integral \('\$dtype' is int32 in this space\): use 'integers'",
    ):
        check_declaration(doc, path, {"n"}, set(doc["parameters"]), list(doc["dtypes"]))
    doc["arguments"][2]["fill"] = doc["arguments"][3]["fill"] = {"kind": "integers"}
    check_declaration(doc, path, {"n"}, set(doc["parameters"]), list(doc["dtypes"]))


def test_the_workload_checks_its_declaration_itself(tmp_path):
    """Whether or not the loader calls check_declaration, a workload never builds from a bad declaration."""
    args = copy.deepcopy(SPACE["arguments"])
    args[2]["shape"] = ["m"]
    w = workload(tmp_path, arguments=args)
    with pytest.raises(TunerError, match=r"space\.yaml: at arguments\.2\.shape\.0: unknown name\(s\) m; known: n"):
        w.arguments(SIZE, "float32", np.random.default_rng(0))


# ---- references run on the GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_config_reference_runs_the_trusted_config(tmp_path):
    w = workload(tmp_path, reference={"config": {"block_size_x": 128, "unused": 1}})
    size = {"n": 100_000}
    args = w.arguments(size, "float32", np.random.default_rng(0))
    answer = w.answer(args, size, "float32")
    assert answer[:3] == [None, None, None]
    assert np.allclose(answer[3], 2.5 * args[2] + args[3], rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_kernel_reference_runs_the_reference_kernel(tmp_path):
    w = workload(tmp_path, reference={"kernel": ref_kernel("ref.cu")})
    (tmp_path / "decl" / "ref.cu").write_text(REFERENCE_KERNEL)
    size = {"n": 100_000}
    for dtype in ("float32", "float64"):
        args = w.arguments(size, dtype, np.random.default_rng(0))
        answer = w.answer(args, size, dtype)
        assert answer[3].dtype == dtype
        assert np.allclose(answer[3], 2.5 * args[2] + args[3], rtol=1e-5, atol=1e-5)


def test_copying_a_workload_folder_keeps_it_working(tmp_path):
    """Kernel and reference paths are relative to the space file: the folder can move."""
    path = write_space(tmp_path / "a", SPACE)
    shutil.move(tmp_path / "a", tmp_path / "b")
    w = DeclaredWorkload("decl", tmp_path / "b" / path.name)
    assert w.space.kernel_source == (tmp_path / "b" / "saxpy.cu").resolve()
