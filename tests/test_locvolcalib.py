"""LocVolCalib without a GPU: the input and output formats (SPEC §1), the original validation rule, the
numpy reference against Finpar's reference outputs, the stored references, the space and `tuner run`'s
argument errors."""

import numpy as np
import pytest

from tuner.cli import main
from tuner.errors import TunerError
from tuner.measure import kt
from tuner.workloads import get_workload
from tuner.workloads.locvolcalib import FINPAR_DATA, reference_path, reference_prices
from tuner.workloads.locvolcalib_io import (
    format_output,
    parse_input,
    parse_output,
    problem_from_size,
    read_input,
    read_output,
    validate,
)
from tuner.workloads.locvolcalib_ref import init_grid, price

# Finpar's files are read where SPEC keeps them, never copied into the project
needs_finpar = pytest.mark.skipif(not FINPAR_DATA.is_dir(), reason=f"Finpar's datasets not found at {FINPAR_DATA}")


# ---- input -----------------------------------------------------------------------------------------
@needs_finpar
def test_finpar_inputs_parse_with_their_comments():
    p = read_input(FINPAR_DATA / "Large" / "input.data")
    assert (p.variant, p.outer, p.num_x, p.num_y, p.num_t) == ("finpar", 256, 256, 256, 64)
    assert (p.s0, p.t, p.alpha, p.nu, p.beta) == (0.03, 5.0, 0.2, 0.6, 0.5)
    assert read_input(FINPAR_DATA / "Small" / "input.data").size == get_workload("locvolcalib").space.sizes["finpar-small"]


def test_course_input_has_fixed_parameters_and_any_sizes():
    p = parse_input("32   // OUTER\n47 // NUM_X\n181\n93\n")
    assert (p.variant, p.num_x, p.num_y, p.s0, p.beta) == ("course", 47, 181, 0.03, 0.5)
    assert p.size == get_workload("locvolcalib").space.sizes["course-medium"]


@pytest.mark.parametrize("text, variant, message", [
    ("1 2 3", None, "expected 9 values .* or 4"),
    ("16 32 256 90", "finpar", "a finpar input has 9 values, got 4"),
    ("16 32 256 256 0.03 5.0 0.2 0.6", "finpar", "has 9 values, got 8"),
    ("16 32.5 256 90", None, "NUM_X must be an integer, got '32.5'"),
    ("16 32 256 256 0.03 five 0.2 0.6 0.5", None, "t must be a number, got 'five'"),
    ("16 47 256 256 0.03 5.0 0.2 0.6 0.5", None, "NUM_X must be a power of two for the Finpar variant, got 47"),
    ("16 32 1024 256 0.03 5.0 0.2 0.6 0.5", None, "NUM_Y must be in 2..512 for the finpar variant"),
    ("0 32 256 90", None, "OUTER must be positive, got 0"),
    ("16 32 256 1", None, "NUM_T must be at least 2"),
    ("16 32 2000 90", None, "NUM_Y must be in 2..1024 for the course variant"),
    ("16 32 256 256 -0.03 5.0 0.2 0.6 0.5", None, "s0, t and alpha must be positive"),
    ("16 32 256 256 0.03 5.0 0.2 0.6 nan", None, "beta must be finite"),
    ("16 32 256 90", "heston", "unknown variant 'heston'"),
])
def test_malformed_inputs_say_what_is_wrong(text, variant, message):
    with pytest.raises(TunerError, match=message):
        parse_input(text, variant, where="in.data")


def test_missing_input_file(tmp_path):
    with pytest.raises(TunerError, match="cannot read .*nothing.data"):
        read_input(tmp_path / "nothing.data")


# ---- output ------------------------------------------------------------------------------------------
@needs_finpar
def test_reference_outputs_parse_in_all_their_formats():
    assert read_output(FINPAR_DATA / "Large" / "output.data").size == 256  # '%f' with ' , '
    small = read_output(FINPAR_DATA / "Small" / "output.data")  # 6 significant digits, trailing comment
    assert small.size == 16 and small[5] == 0.0251064
    assert parse_output("[\n0.03\n0.029\n]\n").tolist() == [0.03, 0.029]  # one per line, no commas


@pytest.mark.parametrize("text, message", [
    ("0.03, 0.02", "expected an array literal"),
    ("[ ]", "the array is empty"),
    ("[ 0.03, zero ]", "'zero' is not a number"),
])
def test_malformed_outputs(text, message):
    with pytest.raises(TunerError, match=message):
        parse_output(text)


@pytest.mark.parametrize("variant", ["finpar", "course"])
def test_written_output_reads_back_to_print_precision(variant):
    values = np.array([0.0300001234, 0.0251064321, 0.000562])
    back = parse_output(format_output(values, variant))
    assert np.max(np.abs(back - values)) < 1e-6


# ---- validation rule ---------------------------------------------------------------------------------------
def test_validation_rule_is_absolute_1e5_and_rejects_nan_and_inf():
    ref = np.array([0.03, 0.02, 0.01])
    assert validate(ref + 9e-6, ref)[0]
    ok, why = validate(ref + np.array([0, 1.1e-5, 0]), ref)
    assert not ok and why.startswith("entry 1")
    assert not validate(np.array([0.03, np.nan, 0.01]), ref)[0]
    assert not validate(np.array([0.03, 0.02, np.inf]), ref)[0]
    with pytest.raises(TunerError, match="the reference has 3 values, the result 2"):
        validate(ref[:2], ref)


# ---- the numpy reference -------------------------------------------------------------------------------------
def test_grid_constants_of_spec():
    p = problem_from_size(get_workload("locvolcalib").space.sizes["course-large"])
    timeline, x, y, ind_x, ind_y = init_grid(p)
    assert (ind_x, ind_y) == (28, 128) and x[ind_x] == 0.03 and y[ind_y] == pytest.approx(np.log(0.2))
    assert x[0] == pytest.approx(6.516e-4, rel=1e-3) and 1 / (timeline[1] - timeline[0]) == pytest.approx(25.4)


@needs_finpar
@pytest.mark.parametrize("dataset, max_abs", [
    ("Medium", 1e-7),            # SPEC §7: 5.0e-8, the rounding of 6 significant digits
    ("Small_legacy_N32", 2e-7),  # the 128 values Finpar Small's output was cut from
    ("Small", 2e-6),             # the stale N=32 reference against the true N=256 run: 1.13e-6
])
def test_numpy_reference_reproduces_finpar_outputs(dataset, max_abs):
    got = price(read_input(FINPAR_DATA / dataset / "input.data"))
    ref = read_output(FINPAR_DATA / dataset / "output.data")
    ok, _ = validate(got, ref)
    assert ok and np.max(np.abs(got - ref)) < max_abs


@needs_finpar
def test_stored_finpar_large_reference_validates():
    """Finpar Large takes minutes in numpy: its stored float64 prices (benchmarks/locvolcalib/references.py) are
    checked by the original rule; its output.data was made in float32 (SPEC §4), hence 4.1e-6."""
    got = reference_prices(get_workload("locvolcalib").space.sizes["finpar-large"])
    ref = read_output(FINPAR_DATA / "Large" / "output.data")
    assert validate(got, ref)[0] and 3e-6 < np.max(np.abs(got - ref)) < 5e-6


@pytest.mark.parametrize("size_name", ["course-small", "finpar-small-n32"])
def test_stored_references_are_what_the_reference_computes(size_name):
    size = get_workload("locvolcalib").space.sizes[size_name]
    stored = np.loadtxt(reference_path(size_name))
    # equal up to rounding: numpy releases may order the float64 sums differently (2.4 moved them by 1e-15)
    np.testing.assert_allclose(stored, price(problem_from_size(size)), rtol=1e-12, atol=0)


def test_every_named_size_has_a_stored_reference():
    space = get_workload("locvolcalib").space
    missing = [n for n in space.sizes if not reference_path(n).is_file()]
    assert not missing
    for name, size in space.sizes.items():
        assert np.loadtxt(reference_path(name)).size == size["outer"]


def test_float32_reference_stays_inside_the_float32_tolerance():
    p = problem_from_size(get_workload("locvolcalib").space.sizes["course-small"])
    assert np.max(np.abs(price(p, np.float32) - price(p))) < 5e-6


# ---- space and tuner run ---------------------------------------------------------------------------------------
def test_space_has_one_naive_point_and_a_few_hundred_configs():
    space = get_workload("locvolcalib").space
    configs = [dict(zip(space.params, c)) for c in kt.searchspace(space).list]
    assert 100 < len(configs) <= 800
    naive = [c for c in configs if c["STRUCTURE"] == 0]
    assert len(naive) == 1 and naive[0]["BLOCK"] == 256
    assert sum(c["STRUCTURE"] == 1 for c in configs) == 150  # the earlier optimised pipelines are all still points
    warp = [c for c in configs if c["STRUCTURE"] == 2]
    assert {c["KPB"] for c in warp} == {1, 2, 4, 8} and {c["STEPS"] for c in warp} == {1, 32, 128}
    assert all(c["KPB"] == 1 and c["STEPS"] == 1 for c in configs if c["STRUCTURE"] != 2)
    assert {c["XFORM"] for c in warp} == {0, 1, 2, 3, 4} and {c["XREGS"] for c in warp} == {0, 168, 255}
    assert all(c["XFORM"] == 0 and c["XREGS"] == 0 for c in configs if c["STRUCTURE"] != 2)
    # the warp configs recorded before XFORM and XREGS existed are still points, with their defaults
    assert sum(c["XFORM"] == 0 and c["XREGS"] == 0 for c in warp) == 108
    assert space.complete({"STRUCTURE": 2, "KPB": 8}) == {"STRUCTURE": 2, "KPB": 8, "XFORM": 0, "XREGS": 0}
    assert space.lang == "host" and space.objective == "time" and not space.maximize


def test_tolerances_per_dtype():
    w = get_workload("locvolcalib")
    size = w.space.sizes["course-small"]
    assert w.tolerances(size, "float64") == (1e-12, 1e-9)
    assert w.tolerances(size, "float32") == (5e-6, 0.0)


def test_size_notation():
    space = get_workload("locvolcalib").space
    w = get_workload("locvolcalib")
    assert space.resolve_size("course:32x47x181x93", w.parse_size)[0] == "course-medium"
    assert space.resolve_size("finpar:8x16x16x10", w.parse_size)[1]["variant"] == 1


MEDIUM = str(FINPAR_DATA / "Medium" / "input.data")


@needs_finpar
@pytest.mark.parametrize("argv, message", [
    (["nothing.data"], "cannot read nothing.data"),
    ([MEDIUM, "--precision", "float32", "--dtype", "float64"], "--precision float32 and --dtype float64 disagree"),
    ([MEDIUM, "--reference", str(FINPAR_DATA / "Small" / "output.data")], "has 16 values, .* prices 128 options"),
    ([MEDIUM, "--config", "STRUCTURE=1"], r"--config must set the parameters of locvolcalib .*: missing"),
    ([MEDIUM, "--config", "STRUCTURE=1", "SHARE_COEF=0", "FUSE_EXPLICIT=0", "SOLVER_X=0", "SOLVER_Y=0", "TILE_X=16",
      "TILE_Y=16", "BLOCK=128", "KPB=1", "STEPS=1", "XFORM=0", "XREGS=0"], "breaks a restriction"),
    ([MEDIUM, "--config", "STRUCTURE=1", "SHARE_COEF=1", "FUSE_EXPLICIT=1", "SOLVER_X=0", "SOLVER_Y=0", "TILE_X=64",
      "TILE_Y=16", "BLOCK=128", "KPB=1", "STEPS=1", "XFORM=0", "XREGS=0"], r"TILE_X=64 \(allowed \[4, 8, 16, 32\]\)"),
    ([MEDIUM, "--config", "STRUCTURE=1", "SHARE_COEF=1", "FUSE_EXPLICIT=1", "SOLVER_X=1", "SOLVER_Y=1", "TILE_X=8",
      "TILE_Y=8", "BLOCK=128", "KPB=4", "STEPS=1", "XFORM=0", "XREGS=0"], "breaks a restriction"),
    ([MEDIUM, "--config", "STRUCTURE=2", "SHARE_COEF=1", "FUSE_EXPLICIT=1", "SOLVER_X=0", "SOLVER_Y=0", "TILE_X=16",
      "TILE_Y=4", "BLOCK=256", "KPB=8", "STEPS=32", "XFORM=3", "XREGS=168"], "breaks a restriction"),
])
def test_tuner_run_argument_errors(argv, message, capsys):
    assert main(["run", "locvolcalib", *argv]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert __import__("re").search(message, err), err


def test_tuner_run_without_a_stored_config_says_so(results, capsys, tmp_path):
    course = tmp_path / "course.data"
    course.write_text("16 32 256 64\n")  # the course format: K M N T, every other parameter fixed
    assert main(["run", "locvolcalib", str(course), "--variant", "course"]) == 2
    assert "locvolcalib" in capsys.readouterr().err
