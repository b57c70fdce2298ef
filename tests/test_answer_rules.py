"""Which stored rows answer `tuner best`, `tuner results` and `tuner export`, found by audits (answers.md, wheel.md,
report.md): a config's figures are the median of its measurements (an even count too); a size whose every config
failed was measured, not "never measured"; the rows of the kernel source as it is now answer where it has some,
else the older ones with a note; configs the space no longer holds are left out; a nearest size is chosen alike
whatever the order the parts were read in, and named as the space names it; a damaged store's missing size
exits 3 in `export`; recording exports say their notes on stderr; the API checks its inputs; CPU answers say
CPU. Most tests write a small store of the `tuner init` example (saxpy) into tmp_path."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import tuner
from tests.recorded import is_recorded
from tuner import locations, store
from tuner.answers.best_config import best, best_row
from tuner.answers.selection import select
from tuner.cli import main
from tuner.cli.best import measured_items
from tuner.errors import TunerError
from tuner.measure.provenance import source_hash
from tuner.store.kt_files import store_cache_doc
from tuner.workloads.scaffold import init_workload

GPU = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
SMALL = {"n": 1048576}  # the example's named size `small`


# ---- a small store of the `tuner init` example ----------------------------------------------------------------
@pytest.fixture
def saxpy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example workload in tmp_path/workloads, and an empty store as the default results folder."""
    folder = init_workload("saxpy", tmp_path / "workloads")
    monkeypatch.setenv("TUNER_WORKLOADS", str(tmp_path / "workloads"))
    monkeypatch.setenv("TUNER_RESULTS", str(tmp_path / "results"))
    (tmp_path / "results").mkdir()
    return folder


def _kernel_hash(folder: Path) -> str:
    return source_hash((folder / "saxpy.cu").read_text())


def _row(
    config: dict,
    value: float | None,
    *,
    size: dict = SMALL,
    status: str = "ok",
    kernel_hash: str | None = None,
    campaign: str = "20261201T000000Z-aaaaaa",
    when: str = "2026-12-01T00:00:00",
    gpu: str = GPU,
) -> dict:
    """One evaluation row of saxpy as a campaign stores it (value None: a failure of class `status`)."""
    ok = value is not None
    time_ms = 3 * size["n"] * 4 / (value * 1e9) * 1e3 if ok else math.nan
    name = next((k for k, v in {"small": SMALL, "large": {"n": 67108864}}.items() if v == size), None)
    return {
        "campaign_id": campaign,
        "workload": "saxpy",
        "kernel": "saxpy",
        "size": name or ",".join(f"{k}={v}" for k, v in size.items()),
        "size_vars": json.dumps(size, sort_keys=True),
        "dtype": "float32",
        "config": store.canonical_config(config),
        **{f"p_{k}": v for k, v in config.items()},
        "status": "ok" if ok else status,
        "error": "" if ok else f"{status}: it failed",
        "times": [time_ms] * 7 if ok else [],
        "time_ms": time_ms,
        "objective": "GB/s",
        "objective_value": value if ok else math.nan,
        "metrics": json.dumps({"GB/s": value} if ok else {}),
        "compile_ms": 1.0,
        "verify_ms": 1.0,
        "benchmark_ms": 1.0,
        "strategy": "brute_force",
        "seed": 1,
        "timestamp": when,
        "gpu": gpu,
        "compute_capability": "9.0",
        "driver": "580.159.04",
        "cuda": "13.3",
        "backend": "nvcuda",
        "timing": "delayed-start",
        "compiler_options": "[]",
        "kernel_hash": kernel_hash,
        "package_version": "0.1.0",
        "kernel_tuner_version": "1.5.0",
        "optuna_version": "5.0.0",
        "git_commit": "abc1234",
        "host": "vm",
    }


def _write(rows: list[dict], campaign: str = "20261201T000000Z-aaaaaa", gpu: str = GPU) -> Path:
    """A campaign's part in the default store (rows without a kernel hash: the kernel source's as it is)."""
    from tuner.store.paths import results_root

    now = _kernel_hash(locations.project().workloads / "saxpy")
    rows = [{**r, "kernel_hash": r["kernel_hash"] or now} for r in rows]
    path = store.workload_dir(results_root(), gpu, "saxpy") / "evaluations" / f"{campaign}.parquet"
    store.write_parquet(pd.DataFrame(rows), path)
    return path


A, B = {"WPT": 4, "block_size_x": 256}, {"WPT": 8, "block_size_x": 128}


def _cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- 1. the median of an even count ---------------------------------------------------------------------------
def test_an_even_count_of_measurements_answers_with_their_median():
    """Two measurements, 10 and 30: the value is 20 (what the ranking and `tuner results` use), the time and
    metrics go with it (the mean of the two middle ones'), and the provenance is one of the measurements'."""
    a = store.canonical_config({"x": 1})
    rows = pd.DataFrame(
        [
            {
                "workload": "reduction",
                "gpu": GPU,
                "size_vars": "{}",
                "dtype": "float32",
                "config": a,
                "objective_value": v,
                "time_ms": 100 / v,
                "metrics": json.dumps({"GB/s": v}),
                "timestamp": t,
                "campaign_id": c,
            }
            for v, t, c in ((10.0, "1", "first"), (30.0, "2", "second"))
        ]
    )
    row = best_row(rows, maximize=True, root=Path("/nonexistent"), confirmations=pd.DataFrame())
    assert row["objective_value"] == 20.0 and row["measurements"] == 2
    assert row["time_ms"] == pytest.approx((10 + 100 / 30) / 2) and json.loads(row["metrics"]) == {"GB/s": 20.0}
    assert row["campaign_id"] == "second"  # the later of the two equally near the median


@pytest.mark.skipif(not is_recorded(H200, "gemm", "1024x512x1024", "float32"), reason="no recorded GEMM on the H200")
def test_best_and_results_agree_on_the_committed_store():
    """GEMM 1024x512x1024 on the H200: its best config was measured twice (27892 and 28197 GFLOP/s)."""
    from tuner.answers.tables import config_table

    root = locations.BUILTIN_RESULTS
    answer = best("gemm", "1024x512x1024", "float32", gpu=H200, root=root)
    table = config_table(select("gemm", "1024x512x1024", "float32", gpu=H200, root=root))
    chosen = table[table["chosen"]].iloc[0]
    assert answer["measurements"] == chosen["measurements"] == 2
    assert answer["value"] == pytest.approx(chosen["GFLOP/s"], rel=1e-12)
    assert answer["time_ms"] == pytest.approx(chosen["time_ms"], rel=1e-12)
    assert answer["metrics"]["GFLOP/s"] == pytest.approx(answer["value"], rel=1e-12)


# ---- 2. a size whose every config failed ----------------------------------------------------------------------
def test_a_size_whose_every_config_failed_was_measured(saxpy, capsys):
    _write([_row(A, 1000.0), _row(B, 900.0), _row(A, None, size={"n": 1000}, status="timeout")])
    with pytest.raises(
        TunerError,
        match=r"saxpy n=1000 float32 on .* was measured, but every config failed "
        r"\(1 config\(s\): timeout 1\)",
    ) as e:
        best("saxpy", "n=1000")
    assert "never measured" not in str(e.value)
    sel = select("saxpy", "n=1000")
    assert "nearest-size" not in sel.fallback and list(sel.rows["status"]) == ["timeout"]
    assert any("every config failed" in n for n in sel.notes)

    code, out, _ = _cli(capsys, "results", "saxpy", "--size", "n=1000")
    assert code == 0 and "timeout" in out and "never measured" not in out
    code, _, err = _cli(capsys, "best", "saxpy", "--size", "n=1000")
    assert code == 2 and "every config failed" in err
    code, _, err = _cli(capsys, "export", "saxpy", "--size", "n=1000")
    assert code == 2 and "every config failed (timeout 1)" in err and "never measured" not in err

    # its recording: one entry, the failure (it used to raise a TypeError on pandas' string dtype)
    doc = store_cache_doc("saxpy", "n=1000", "float32", GPU)
    assert len(doc["cache"]) == 1 and all("__error__" in e for e in doc["cache"].values())
    code, out, _ = _cli(capsys, "export", "saxpy", "--size", "n=1000", "--format", "kt-cache")
    assert code == 0 and "__error__" in out


# ---- 3, 7. the API's inputs -----------------------------------------------------------------------------------
def test_the_api_checks_its_results_folder_and_its_size():
    with pytest.raises(TunerError, match="no such folder"):
        tuner.best("reduction", results="/nonexistent/typo")
    with pytest.raises(TunerError, match="size=4194304: give it as text"):
        tuner.best("reduction", size=4194304)  # type: ignore[arg-type]
    with pytest.raises(TunerError, match="size=4194304: give it as text"):
        tuner.results("reduction", size=4194304)  # type: ignore[arg-type]


# ---- 4. load_store spells configs as results() does -----------------------------------------------------------
def test_load_store_spells_configs_as_results_does(saxpy):
    """A row recorded before the space gained a parameter with a default reads with it, in load_store too."""
    space_file = saxpy / "space.yaml"
    text = space_file.read_text()
    _write([_row(A, 1000.0)])
    space_file.write_text(
        text.replace("  WPT: [1, 2, 4, 8, 16]", "  WPT: [1, 2, 4, 8, 16]\n  UNROLL: [1, 2]")
        + "\ndefaults: {UNROLL: 1}\n"
    )
    (saxpy.parent / "touch").mkdir()  # a new stamp of the workloads folder: the space is read again
    expected = store.canonical_config({**A, "UNROLL": 1})
    assert list(tuner.results("saxpy")["config"]) == [expected]
    every = tuner.load_store()
    assert list(every.loc[every["workload"] == "saxpy", "config"]) == [expected]


# ---- 5. export --size on a damaged store ----------------------------------------------------------------------
def test_export_of_a_size_only_a_damaged_part_holds_exits_3(saxpy, capsys):
    _write([_row(A, 1000.0)])
    part = _write([_row(A, 500.0, size={"n": 67108864})], campaign="20261202T000000Z-bbbbbb")
    part.write_bytes(part.read_bytes()[:100])  # copied in half
    code, _, err = _cli(capsys, "export", "saxpy", "--size", "large")
    assert code == 3 and "could not be read in full" in err and "never measured" not in err
    code, _, err = _cli(capsys, "export", "saxpy", "--size", "large", "--allow-degraded")
    assert code == 2 and "could not be read in full" in err
    code, _, err = _cli(capsys, "export", "saxpy", "--size", "large", "--format", "kt-cache")
    assert code == 3 and "could not be read in full" in err


# ---- 6. recording exports to stdout say their notes on stderr ------------------------------------------------
def test_a_recording_exported_to_stdout_says_its_notes_on_stderr(saxpy, capsys):
    _write([_row(A, 1000.0), _row(B, 900.0)])
    code, out, err = _cli(capsys, "export", "saxpy", "--format", "kt-cache", "--gpu", "h100")
    assert code == 0 and json.loads(out)["device_name"] == GPU
    assert "note: GPU 'h100' taken as NVIDIA H100 80GB HBM3" in err


# ---- 8. the kernel source as it is now ------------------------------------------------------------------------
def test_answers_come_from_the_current_kernel_source_else_say_it_changed(saxpy, capsys):
    """Tuned (A best), then the kernel edited: the answer is still A, saying the rows are of an earlier source;
    tuned again (B best now, A at half its old speed): B, from the new source's rows alone."""
    old = _kernel_hash(saxpy)
    _write([_row(A, 1200.0, kernel_hash=old), _row(B, 1000.0, kernel_hash=old)])
    kernel = saxpy / "saxpy.cu"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    new = _kernel_hash(saxpy)

    stale = best("saxpy")
    assert stale["config"] == A and stale["kernel_source"] == {"hash": new, "current": False, "measured_with": [old]}
    assert any("earlier version of the kernel source" in n for n in stale["notes"])
    code, out, _ = _cli(capsys, "export", "saxpy", "--format", "header")
    assert code == 0 and "measured with an earlier version of the kernel source" in out

    _write(
        [_row(A, 600.0, kernel_hash=new, when="2026-12-02"), _row(B, 1000.0, kernel_hash=new, when="2026-12-02")],
        campaign="20261202T000000Z-bbbbbb",
    )
    now = best("saxpy")
    assert now["config"] == B and now["measurements"] == 1 and now["kernel_source"]["current"] is True
    assert not any("kernel source" in n for n in now["notes"])
    assert set(select("saxpy").rows["kernel_hash"]) == {new}  # `tuner results` shows the new source's rows
    code, out, _ = _cli(capsys, "best", "saxpy", "--json")
    assert code == 0 and json.loads(out)["config"] == B
    code, out, _ = _cli(capsys, "export", "saxpy", "--format", "header")
    assert "#define SAXPY_WPT 8" in out and "earlier version" not in out


# ---- 9. configs the space no longer holds ---------------------------------------------------------------------
def test_a_config_the_space_no_longer_holds_is_not_an_answer(saxpy, capsys):
    _write([_row(A, 1200.0), _row({"WPT": 2, "block_size_x": 128}, 1000.0)])
    space_file = saxpy / "space.yaml"
    space_file.write_text(space_file.read_text().replace('"block_size_x * WPT <= 4096"', '"block_size_x * WPT <= 512"'))
    answer = best("saxpy")
    assert answer["config"] == {"WPT": 2, "block_size_x": 128}
    assert any("the best stored config, WPT=4, block_size_x=256, lies outside the space" in n for n in answer["notes"])
    code, out, _ = _cli(capsys, "export", "saxpy", "--format", "header")
    assert code == 0 and "#define SAXPY_WPT 2" in out and "SAXPY_WPT 4" not in out


def test_a_parameter_value_removed_leaves_its_configs_out(saxpy):
    _write([_row(A, 1200.0), _row(B, 1000.0)])
    space_file = saxpy / "space.yaml"
    space_file.write_text(space_file.read_text().replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1, 2, 8, 16]"))
    assert best("saxpy")["config"] == B


# ---- 7, 10, 11: nearest sizes, their names, the wording -------------------------------------------------------
def test_a_nearest_size_tie_is_the_smaller_whatever_the_order_read(saxpy):
    """2^24 lies as far from 2^23 as from 2^25 (in log terms): the smaller answers, though its part is read last."""
    _write([_row(A, 1000.0, size={"n": 2**25})], campaign="20261201T000000Z-aaaaaa")
    _write([_row(B, 900.0, size={"n": 2**23})], campaign="20261202T000000Z-bbbbbb")
    answer = best("saxpy", f"n={2**24}", gpu=GPU)
    assert answer["fallback"] == "nearest-size" and answer["size_vars"] == {"n": 2**23}


def test_a_nearest_size_is_named_as_the_space_names_it(saxpy):
    _write([_row(A, 1000.0)])
    answer = best("saxpy", "n=1000", gpu=GPU)
    assert answer["notes"] == [
        "size n=1000 was never measured on NVIDIA H100 80GB HBM3; nearest measured: small (n=1048576)"
    ]


@pytest.mark.skipif(
    not is_recorded("Intel(R) Xeon(R) Processor", "floyd-warshall-cpu", "5k", "int32"),
    reason="no recorded CPU Floyd-Warshall",
)
def test_a_cpu_answer_says_cpu_and_leaves_empty_fields_out(capsys):
    answer = best("floyd-warshall-cpu", gpu="Some Other CPU", root=locations.BUILTIN_RESULTS)
    assert "the one CPU with int32 stored" in answer["notes"][0] and "GPU with" not in answer["notes"][0]
    assert measured_items(answer["provenance"])[0] == "with host-g++,"
    code, out, _ = _cli(capsys, "--results", str(locations.BUILTIN_RESULTS), "best", "floyd-warshall-cpu")
    assert code == 0 and "driver ," not in out and "CUDA ," not in out


def test_measured_items_leave_empty_fields_out():
    gpu = {"backend": "nvcuda", "driver": "580", "cuda": "13.3", "git_commit": "abc", "campaign_id": "c1"}
    assert measured_items(gpu) == ["with nvcuda", "on driver 580,", "CUDA 13.3,", "commit abc,", "campaign c1"]
    cpu = {**gpu, "driver": "", "cuda": ""}
    assert measured_items(cpu) == ["with nvcuda,", "commit abc,", "campaign c1"]


def test_the_nothing_stored_hint_repeats_workloads_and_results(saxpy, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    folder = str(saxpy.parent.resolve())
    code, _, err = _cli(capsys, "--workloads", folder, "--results", str(empty), "best", "saxpy")
    assert code == 2 and f"`tuner --workloads {folder} --results {empty} tune saxpy`" in err


def test_a_recording_of_a_space_whose_every_config_failed_is_its_failures(saxpy):
    """Kernel Tuner's cache of it: every entry a failure (pandas' string dtype made the empty median map a string
    column, and the distance to it a TypeError)."""
    rows = pd.DataFrame(
        [_row(A, None, status="compile", kernel_hash="h"), _row(B, None, status="timeout", kernel_hash="h")]
    )
    doc = store_cache_doc("saxpy", "small", "float32", GPU, rows=rows)
    errors = sorted(e["__error__"] for e in doc["cache"].values())
    assert errors == ["CompilationFailedConfig", "RuntimeFailedConfig"]  # a timeout: Kernel Tuner has no class of it
