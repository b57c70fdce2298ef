"""On the GPU: LocVolCalib pipelines through the same isolated Kernel Tuner worker as a campaign (C backend,
nvcc), verified against the numpy reference, and `tuner run` on a Finpar dataset validated by the original
rule. Skipped where no CUDA GPU is found."""

import json

import pytest

from tests.gpu_checks import failed_configs
from tuner.cli import main
from tuner.workloads import get_workload
from tuner.workloads.locvolcalib import FINPAR_DATA

pytestmark = pytest.mark.gpu

OLD = [
    # naive; Thomas both ways with shared coefficients, fused; cyclic reduction both ways, nothing shared;
    # Thomas x / CR y, unfused explicit step; partitioned Thomas both ways; partitioned x / Thomas y
    {"STRUCTURE": 0, "SHARE_COEF": 0, "FUSE_EXPLICIT": 0, "SOLVER_X": 0, "SOLVER_Y": 0, "TILE_X": 8, "TILE_Y": 8, "BLOCK": 256},
    {"STRUCTURE": 1, "SHARE_COEF": 1, "FUSE_EXPLICIT": 1, "SOLVER_X": 0, "SOLVER_Y": 0, "TILE_X": 32, "TILE_Y": 32, "BLOCK": 256},
    {"STRUCTURE": 1, "SHARE_COEF": 0, "FUSE_EXPLICIT": 1, "SOLVER_X": 1, "SOLVER_Y": 1, "TILE_X": 8, "TILE_Y": 8, "BLOCK": 128},
    {"STRUCTURE": 1, "SHARE_COEF": 1, "FUSE_EXPLICIT": 0, "SOLVER_X": 0, "SOLVER_Y": 1, "TILE_X": 16, "TILE_Y": 8, "BLOCK": 128},
    {"STRUCTURE": 1, "SHARE_COEF": 1, "FUSE_EXPLICIT": 1, "SOLVER_X": 2, "SOLVER_Y": 2, "TILE_X": 16, "TILE_Y": 8, "BLOCK": 128},
    {"STRUCTURE": 1, "SHARE_COEF": 0, "FUSE_EXPLICIT": 1, "SOLVER_X": 2, "SOLVER_Y": 0, "TILE_X": 8, "TILE_Y": 16, "BLOCK": 256},
]
WARP = {"STRUCTURE": 2, "SHARE_COEF": 1, "FUSE_EXPLICIT": 1, "SOLVER_X": 0, "SOLVER_Y": 0, "BLOCK": 256}
CONFIGS = [{**c, "KPB": 1, "STEPS": 1} for c in OLD] + [
    # a warp per system (47 and 181 rows: 2 and 6 rows per lane, partial tiles); STEPS = 32 leaves a partial last
    # batch (T - 1 = 92 steps)
    {**WARP, "TILE_X": 8, "TILE_Y": 8, "KPB": 1, "STEPS": 1},
    {**WARP, "TILE_X": 4, "TILE_Y": 16, "KPB": 4, "STEPS": 32},
    {**WARP, "TILE_X": 16, "TILE_Y": 4, "KPB": 8, "STEPS": 32},
    # the rewritten x-kernels (S = U + R, no x-stencil), each form, with and without a larger register budget
    {**WARP, "TILE_X": 4, "TILE_Y": 16, "KPB": 4, "STEPS": 32, "XFORM": 3, "XREGS": 168},
    {**WARP, "TILE_X": 8, "TILE_Y": 4, "KPB": 8, "STEPS": 32, "XFORM": 1, "XREGS": 255},
    {**WARP, "TILE_X": 16, "TILE_Y": 8, "KPB": 2, "STEPS": 128, "XFORM": 2, "XREGS": 0},
    {**WARP, "TILE_X": 4, "TILE_Y": 8, "KPB": 8, "STEPS": 32, "XFORM": 4, "XREGS": 0},
    {**WARP, "TILE_X": 4, "TILE_Y": 4, "KPB": 8, "STEPS": 32, "XFORM": 0, "XREGS": 168},
]
CONFIGS = [get_workload("locvolcalib").space.complete(c) for c in CONFIGS]  # XFORM, XREGS: 0 where not given


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_configs_match_numpy_through_kernel_tuner(dtype):
    """course-medium: 47 x 181, neither a power of two, so every partial tile and CR level is exercised."""
    space = get_workload("locvolcalib").space
    size = space.sizes["course-medium"]
    bad = failed_configs("locvolcalib", size, dtype, [[c[k] for k in space.params] for c in CONFIGS],
                         timeout=120)
    assert not bad, bad


def test_warp_structure_with_partial_groups_and_its_row_limit():
    """K = 13 leaves a partial group of KPB outer indices, T - 1 = 8 a partial batch of STEPS; systems of more
    than 256 rows are refused by the warp structure (a runtime failure, not a wrong answer)."""
    w = get_workload("locvolcalib")
    space = w.space
    warp = [{**WARP, "TILE_X": 8, "TILE_Y": 4, "KPB": kpb, "STEPS": 32, "XFORM": xf, "XREGS": 0}
            for kpb in (4, 8) for xf in (0, 4)]
    bad = failed_configs("locvolcalib", w.parse_size("course:13x40x70x9"), "float64",
                         [[c[k] for k in space.params] for c in warp], timeout=120)
    assert not bad, bad
    bad = failed_configs("locvolcalib", w.parse_size("course:2x300x16x3"), "float64",
                         [[warp[0][k] for k in space.params]], timeout=120)
    assert len(bad) == 1 and bad[0][0] != "ok", bad


@pytest.mark.skipif(not FINPAR_DATA.is_dir(), reason=f"Finpar's datasets not found at {FINPAR_DATA} (TUNER_FINPAR_DATA)")
def test_tuner_run_validates_finpar_medium(capsys):
    config = [f"{k}={v}" for k, v in CONFIGS[1].items()]
    rc = main(["run", "locvolcalib", str(FINPAR_DATA / "Medium" / "input.data"), "--reference",
               str(FINPAR_DATA / "Medium" / "output.data"), "--config", *config])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.startswith("1 // VALID")
    assert out.count(",") == 127  # 128 prices


def test_tuner_run_float32_course_input(tmp_path, capsys):
    src = tmp_path / "input.data"
    src.write_text("16 32 256 90\n")
    out_file = tmp_path / "prices.data"
    rc = main(["run", "locvolcalib", str(src), "--precision", "float32", "-o", str(out_file),
               "--config", *[f"{k}={v}" for k, v in CONFIGS[-1].items()]])
    assert rc == 0
    from tuner.workloads.locvolcalib_io import parse_input, parse_output
    from tuner.workloads.locvolcalib_ref import price
    got = parse_output(out_file.read_text())
    want = price(parse_input(src.read_text()))
    assert abs(got - want).max() < 1e-5, json.dumps(list(got))
