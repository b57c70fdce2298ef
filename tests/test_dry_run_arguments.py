"""The dry run checks a space's declared `arguments` against the kernel's signature (tuner.workloads.signature):
a wrong count, order or kind, and a scalar's or an array's element type, one problem line each; argument names
that are Python keywords are refused on loading; a grid that is not a whole number of blocks `cannot launch`."""

import shutil

import pytest

from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest, resolve
from tuner.cli import main
from tuner.errors import TunerError
from tuner.measure.dry_run import argument_mismatches, dry_run
from tuner.space import load_space
from tuner.workloads.declared import DeclaredWorkload
from tuner.workloads.scaffold import init_workload
from tuner.workloads.signature import kernel_parameters

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
# the example's arguments, as `tuner init` writes them (saxpy(int n, T a, const T *x, T *y))
N = "  - {name: n, scalar: n, dtype: int32}\n"
A = "  - {name: a, scalar: 2.5, dtype: $dtype}\n"
X = "  - {name: x, shape: [n], dtype: $dtype, fill: {kind: uniform, low: -1, high: 1}}\n"


@pytest.fixture
def saxpy(tmp_path, monkeypatch):
    """The example workload of `tuner init`, in a project folder of its own (the working directory)."""
    monkeypatch.chdir(tmp_path)
    return init_workload("my-saxpy", tmp_path / "workloads")


def edit(folder, *pairs):
    """The workload's space with each (old, new) replaced (each old present)."""
    path = folder / "space.yaml"
    text = path.read_text()
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


def mismatches(path, dtype="float32"):
    return argument_mismatches(load_space(path), dtype)


def test_arguments_that_match_report_nothing(saxpy):
    path = saxpy / "space.yaml"
    assert mismatches(path, "float32") == mismatches(path, "float64") == []
    params = kernel_parameters((saxpy / "my-saxpy.cu").read_text(), "saxpy")
    assert [(p.name, p.ctype, p.pointer) for p in params] == [
        ("n", "int", False),
        ("a", "T", False),
        ("x", "T", True),
        ("y", "T", True),
    ]


def test_an_argument_missing(saxpy):
    path = edit(saxpy, (A, ""), ("a * x + y", "2 * x + y"))
    assert mismatches(path) == [
        "arguments: 3 given, saxpy takes 4 (int n, T a, const T *__restrict__ x, T *__restrict__ y)"
    ]


def test_two_arguments_swapped(saxpy):
    path = edit(saxpy, (A + X, X + A))
    assert mismatches(path) == [
        "arguments.1: 'x' is an array but the kernel's parameter 'a' is a scalar (T a)",
        "arguments.2: 'a' is a scalar but the kernel's parameter 'x' is a pointer (const T *__restrict__ x)",
    ]


def test_a_scalar_of_the_wrong_type(saxpy):
    path = edit(saxpy, (N, N.replace("int32", "float32")))
    assert mismatches(path) == ["arguments.0: 'n' is float32 but the kernel's parameter 'n' is int"]
    # signedness is not compared: a size given as uint32 or int64 to an int, size_t or unsigned kernel is right
    edit(saxpy, (N.replace("int32", "float32"), N.replace("int32", "uint32")))
    assert mismatches(path) == []


def test_a_macro_typed_pointer_is_read_through_the_dtypes_defines(saxpy):
    path = edit(saxpy, (X, X.replace("$dtype", "float64")))
    assert mismatches(path, "float64") == []  # T is double for float64
    assert mismatches(path, "float32") == [
        "arguments.2: 'x' is float64 but the kernel's parameter 'x' is float (T, as dtype float32 defines it)"
    ]
    edit(
        saxpy,
        (X.replace("$dtype", "float64"), X),
        ("float64: {defines: {T: double}}", "float64: {defines: {T: float}}"),
    )
    assert mismatches(path, "float64") == [
        f"arguments.{i}: '{name}' is float64 ($dtype) but the kernel's parameter '{name}' is float "
        "(T, as dtype float64 defines it)"
        for i, name in enumerate("axy", 1)
    ]


def test_unknown_types_and_constant_memory_are_not_mismatches(saxpy):
    """A struct, a vector type, a typedef: not checked. An array in constant memory is not a parameter."""
    (saxpy / "my-saxpy.cu").write_text(
        "struct P { int n; };\ntypedef float real;\n__constant__ float c[4];\n"
        'extern "C" __global__ void saxpy(P n, real a, const float4 *x, T *y) {}\n'
    )
    coeffs = "  - {name: c, shape: [4], memory: constant, dtype: float32}\n"
    path = edit(saxpy, (N, coeffs + N.replace("scalar: n", "shape: [1]")))
    assert mismatches(path) == []


def test_no_declared_arguments_or_no_kernel_found_is_not_checked(saxpy):
    """A Python module makes the arguments where the space declares none; a kernel made by a macro is not read
    (the dry run says it is not found, or finds it in what it builds)."""
    space = load_space(saxpy / "space.yaml")
    space.declaration = None
    assert argument_mismatches(space, "float32") == []
    (saxpy / "my-saxpy.cu").write_text('#define K(name) extern "C" __global__ void name\nK(saxpy)(int n) {}\n')
    assert mismatches(saxpy / "space.yaml") == []


@needs_nvcc
def test_the_dry_run_says_it_as_a_problem(saxpy, monkeypatch, capsys):
    monkeypatch.setattr("tuner.measure.dry_run.COMPILED", 1)
    edit(saxpy, (N, N.replace("int32", "float32")))
    assert main(["tune", "my-saxpy", "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert "problem: arguments.0: 'n' is float32 but the kernel's parameter 'n' is int\n" in out
    assert "1 problem(s)" in out and "builds (sm_" in out


def test_a_live_campaign_refuses_arguments_the_kernel_does_not_take(saxpy, capsys):
    """Before any GPU work (here, before "cannot measure here"): one line, the first mismatch and how many more,
    nothing measured or stored. A replay launches nothing, so it is not refused; arguments that fit pass."""
    assert resolve(CampaignRequest(workload="my-saxpy")).space.workload == "my-saxpy"  # the example fits
    path = edit(saxpy, (A + X, X + A))
    with pytest.raises(TunerError) as e:
        run_campaign(CampaignRequest(workload="my-saxpy", results=saxpy.parent.parent / "results"))
    assert str(e.value) == (
        f"{path}: the arguments do not fit saxpy: arguments.1: 'x' is an array but the kernel's parameter 'a' is "
        "a scalar (T a) (and 1 more: `tuner tune my-saxpy --dry-run` lists them)"
    )
    assert not (saxpy.parent.parent / "results").exists()
    assert main(["tune", "my-saxpy", "--budget", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the arguments do not fit saxpy: arguments.1: 'x' is an array" in err
    resolve(CampaignRequest(workload="my-saxpy", simulate=True))  # a replay: not refused


@pytest.mark.parametrize("name", ["in", "lambda", "None"])
def test_a_python_keyword_is_not_a_name(saxpy, name):
    path = edit(saxpy, ("{name: x,", f"{{name: {name},"), ("a * x + y", f"a * {name} + y"))
    with pytest.raises(TunerError) as e:
        load_space(path)
    assert str(e.value) == (
        f"{path}: at arguments.2.name: '{name}' is a Python keyword, which the reference's expressions cannot "
        f"read: rename it ({name}_; the names are labels, the kernel takes its arguments by position)"
    )


def test_the_names_known_to_a_reference_are_no_keywords(saxpy):
    path = edit(
        saxpy,
        ("small: {n: 1048576}", "small: {n: 1048576, in: 2}"),
        ("large: {n: 67108864}", "large: {n: 67108864, in: 2}"),
    )
    edit(saxpy, ("a * x + y", "a * z + y"))
    with pytest.raises(TunerError, match=r"unknown name\(s\) z; known: a, n, x, y in 'a \* z \+ y'"):
        load_space(path)


def test_a_grid_of_a_fraction_of_blocks_cannot_launch(saxpy):
    """Not a build failure: the configs' grid at the size, one line for those alike."""
    path = edit(saxpy, ('grid: ["ceil(n / (block_size_x * WPT))"]', 'grid: ["n / (block_size_x * WPT)"]'))
    report = dry_run(DeclaredWorkload("my-saxpy", path), "n=1000", None)
    problems = [f.text for f in report.findings if f.level == "problem"]
    assert len(problems) == 1 and "does not build" not in problems[0]
    assert " cannot launch (and 2 more configs alike): " in problems[0]
    assert "at launch.grid.0: 'n / (block_size_x * WPT)' for " in problems[0]
    assert problems[0].endswith("not a whole number of blocks (use ceil() or //)")
