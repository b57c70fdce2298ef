"""`tuner best` with its fallbacks, `tuner results`, `tuner export` in all formats, and the CLI, on a store filled by
campaigns of the GPU-free stand-in worker."""

import json
import shutil
import subprocess

import pytest
import yaml

from tests.fake_worker import fake_worker_main, synthetic_time_ms
from tuner import locations
from tuner.answers.best_config import best, best_per_gpu_and_size, run_config
from tuner.answers.selection import current_kernel_hash, select
from tuner.answers.tables import by_parameters, config_table
from tuner.campaign.local import run_campaign
from tuner.campaign.request import CampaignRequest
from tuner.cli import main
from tuner.errors import TunerError
from tuner.store import load_evaluations
from tuner.workloads import get_workload

GPU = "Fake GPU 9000"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    """200 configs of seed, the stand-in's misbehaving ones among them (a wrong answer, a hang killed at the 1-s
    timeout, a crash: each restarts the measuring process, the hang after waiting out the timeout), and the first 2
    of 16M, both fine: enough for the answers at 16M (nearest size, export, header), whose best then differs from
    seed's (the stand-in's landscape is the same at every size). The 16M campaign had 200 configs and its own four
    failures too: two thirds of this fixture's time, which no test read."""
    root = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUNER_RESULTS", str(root))
        for size, evals in (("seed", 200), ("16M", 2)):
            run_campaign(CampaignRequest(workload="reduction", size=size, dtype="float32", strategy="brute_force",
                                         max_evals=evals, timeout=1.0, quiet=True, measure_target=fake_worker_main))
        rows = load_evaluations("reduction")
        at_16m = rows[rows["size"] == "16M"]
        assert len(at_16m) == 2 and (at_16m.status == "ok").all()
    return root


@pytest.fixture
def filled(store_dir, monkeypatch):
    monkeypatch.setenv("TUNER_RESULTS", str(store_dir))
    return store_dir


def test_best_exact(filled):
    a = best("reduction", "seed", "float32", gpu=GPU)
    assert a["fallback"] == "exact" and a["notes"] == []
    assert a["gpu"] == GPU and a["size_vars"] == {"n": 4194304}
    stored = load_evaluations("reduction")
    stored = stored[(stored.status == "ok") & (stored["size"] == "seed")]
    fastest = min((json.loads(c) for c in stored.config), key=synthetic_time_ms)
    assert a["config"] == fastest
    assert a["metrics"]["GB/s"] == pytest.approx(a["value"])
    assert a["baselines"]["copy"]["ratio"]["GB/s"] == pytest.approx(a["value"] / a["baselines"]["copy"]["metrics"]["GB/s"])
    assert a["provenance"]["campaign_id"] and a["provenance"]["kernel_hash"]


def test_a_config_measured_several_times_answers_with_its_median_measurement(tmp_path):
    """Its value ranks it; the time, metrics (and ratios) reported beside the value come from the same
    measurement, not from the latest one."""
    import pandas as pd

    from tuner.answers.best_config import best_row

    a, b = json.dumps({"x": 1}), json.dumps({"x": 2})
    rows = pd.DataFrame([{"workload": "reduction", "gpu": GPU, "size_vars": "{}", "dtype": "float32", "config": c,
                          "objective_value": v, "time_ms": 100 / v, "metrics": json.dumps({"GB/s": v}), "timestamp": t}
                         for c, v, t in ((a, 10.0, "1"), (a, 30.0, "2"), (a, 20.0, "3"), (a, 5.0, "4"), (a, 25.0, "5"),
                                         (b, 18.0, "1"))])
    row = best_row(rows, maximize=True, root=tmp_path)
    assert row["config"] == a and row["objective_value"] == 20.0 and row["measurements"] == 5
    assert row["time_ms"] == 5.0 and json.loads(row["metrics"]) == {"GB/s": 20.0}


def test_a_damaged_part_is_named_and_left_out_not_the_end_of_every_query(filled, tmp_path, monkeypatch):
    import shutil as sh

    copy = tmp_path / "results"
    sh.copytree(filled, copy)
    part = next(copy.glob("*/reduction/evaluations/*.parquet"))
    part.write_bytes(part.read_bytes()[:100])  # copied in half
    monkeypatch.setenv("TUNER_RESULTS", str(copy))
    with pytest.warns(UserWarning, match=f"{part.name}: not a readable Parquet file"):
        rows = load_evaluations("reduction")
    assert len(rows) > 0  # the other campaign's part still answers


def test_best_nearest_size_and_other_gpu(filled):
    a = best("reduction", "64M", "float32", gpu=GPU)
    assert a["fallback"] == "nearest-size" and a["size_vars"] == {"n": 16777216}
    assert "never measured" in a["notes"][0]
    b = best("reduction", "seed", "float32", gpu="NVIDIA B200")
    assert b["fallback"] == "other-gpu" and b["gpu"] == GPU
    assert "nothing measured on NVIDIA B200" in b["notes"][0]


def test_best_errors(filled):
    with pytest.raises(TunerError, match="no successful reduction int32"):
        best("reduction", "seed", "int32", gpu=GPU)


def test_best_with_empty_store(results):
    with pytest.raises(TunerError, match="nothing stored for reduction"):
        best("reduction", "seed", "float32")


def test_cli_best_json(filled, capsys):
    assert main(["best", "reduction", "--size", "seed", "--gpu", GPU, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fallback"] == "exact" and doc["config"]["variant"] == 7
    assert set(doc) >= {"config", "metrics", "baselines", "provenance", "fallback"}


def test_cli_errors_are_one_line_no_traceback(results, capsys):
    assert main(["best", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "unknown workload 'nosuch'" in err and "Traceback" not in err
    assert main(["tune", "reduction", "--size", "n=0"]) == 2
    assert "impossible size" in capsys.readouterr().err
    assert main(["tune", "reduction", "--strategy", "nosuch"]) == 2
    assert "unknown strategy" in capsys.readouterr().err
    for argv, message in [(["tune", "reduction", "--budget", "nans"], "budget 'nans': give a duration from 0.001s"),
                          (["tune", "reduction", "--budget", "1e-9s"], "budget '1e-9s': give a duration from 0.001s"),
                          (["tune", "reduction", "--patience", "-3", "--simulate"], "--patience -3"),
                          (["tune", "reduction", "--timeout", "0"], "--timeout 0"),
                          (["tune", "gemm", "--workers", "2", "--devices", "0,x"], "--devices '0,x'"),
                          (["results", "reduction", "--top", "0"], "--top 0"),
                          (["tune", "reduction", "--simulate", "--storage", "sqlite:////nonexistent/x.db"],
                           "cannot open storage 'sqlite:////nonexistent/x.db'"),
                          (["tune", "reduction", "--simulate", "--storage", "mysql://x"],  # the driver MySQL needs
                           "pip install pymysql, and give the URL as mysql+pymysql://"),
                          (["tune", "reduction", "--simulate", "--storage", "mysql://x"],  # markup-like text kept
                           "pip install 'gpu-tuner[distributed]'")]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)


def test_cli_list_json(capsys):
    assert main(["list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    red = next(d for d in doc if d["workload"] == "reduction")
    assert red["configurations"] == 576 and "large" in red["sizes"]


def test_list_counts_each_recording_as_its_replay_holds_it_without_deriving_it(capsys, monkeypatch):
    """`tuner list` counts a recording's configs from the store's rows (tuner.store.coverage) and names the file a
    replay derives, deriving none and building no Kernel Tuner searchspace: the counts are those of the replay's
    own searchspace over the file derived afterwards (recorded_searchspace), for a dtype with restrictions of its
    own and rows recorded before the space gained defaulted parameters (GEMM int32), superseded timings
    (reduction) and host code (LocVolCalib, Floyd-Warshall small) alike."""
    from tuner.cli.common import shown_path
    from tuner.measure import kt
    from tuner.measure.replay import recording_searchspace
    from tuner.store import kt_files, results_root
    from tuner.store.recordings import replay_file, sources

    def never(*args, **kwargs):
        raise AssertionError("derived a recording or built a searchspace")

    picked = {"gemm": {"int32"}, "reduction": None, "locvolcalib": None, "floyd-warshall-small": None}
    listed = {}
    with monkeypatch.context() as m:
        m.setattr(kt_files, "store_cache_doc", never)
        m.setattr(kt, "searchspace", never)
        for workload, dtypes in picked.items():
            assert main(["list", workload, "--json"]) == 0
            listed[workload] = [r for r in json.loads(capsys.readouterr().out)["recordings"]
                                if dtypes is None or r["dtype"] in dtypes]
    root = results_root()
    for workload, recorded in listed.items():
        space = get_workload(workload).space
        by_key = {(s.gpu, s.size, s.dtype): s for s in sources(root, workload)}
        assert recorded
        for r in recorded:
            path = replay_file(root, workload, by_key[(r["gpu"], r["size"], r["dtype"])])
            assert r["path"] == shown_path(path), r  # the file a replay derives, named before it is
            held, size = recording_searchspace(space, path, r["dtype"]).size, kt.searchspace(space, r["dtype"]).size
            assert (r["recorded_configs"], r["space_configs"], r["complete"]) == (held, size, held == size), r


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_export_data_formats(filled, tmp_path, fmt):
    out = tmp_path / f"cfg.{fmt}"
    assert main(["export", "reduction", "--format", fmt, "-o", str(out)]) == 0
    doc = (json.loads if fmt == "json" else yaml.safe_load)(out.read_text())
    assert doc["workload"] == "reduction" and len(doc["configs"]) == 2
    assert {c["size"] for c in doc["configs"]} == {"seed", "16M"}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a C compiler")
def test_export_header_compiles_and_selects_per_gpu_and_size(filled, tmp_path):
    header = tmp_path / "reduce_config.h"
    assert main(["export", "reduction", "--format", "header", "-o", str(header)]) == 0
    probe = tmp_path / "probe.c"
    probe.write_text('#include <stdio.h>\n#include "reduce_config.h"\n'
                     'int main(void){\n#ifdef TUNER_REDUCTION_FOUND\nprintf("%d %d\\n", REDUCTION_VARIANT, REDUCTION_BLOCK_SIZE_X);\n'
                     '#else\nprintf("none\\n");\n#endif\nreturn 0;}\n')
    expected = best("reduction", "16M", "float32", gpu=GPU)["config"]
    for defines, want in ([["-DTUNER_GPU_FAKE_GPU_9000", "-DTUNER_SIZE_16M", "-DTUNER_DTYPE_FLOAT32"],
                           f"{expected['variant']} {expected['block_size_x']}"],
                          [["-DTUNER_GPU_OTHER", "-DTUNER_SIZE_16M", "-DTUNER_DTYPE_FLOAT32"], "none"]):
        exe = tmp_path / "probe"
        subprocess.run(["gcc", *defines, "-I", str(tmp_path), str(probe), "-o", str(exe)], check=True)
        assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.strip() == want
    # the header lists the choices, and TUNER_REQUIRE_CONFIG makes a choice it lacks a compile error
    assert " *   FAKE_GPU_9000 16M FLOAT32\n" in header.read_text()
    wrong = subprocess.run(["gcc", "-DTUNER_REQUIRE_CONFIG", "-DTUNER_GPU_OTHER", "-I", str(tmp_path), str(probe),
                            "-o", str(tmp_path / "never")], capture_output=True, text=True)
    assert wrong.returncode != 0 and "no tuned configuration of reduction" in wrong.stderr


def test_run_config_takes_the_best_or_checks_the_given_one(filled):
    from tuner.workloads import get_workload

    w = get_workload("reduction")
    notes = []
    chosen = run_config(w.name, {"n": 4194304}, "float32", gpu=GPU, log=notes.append)
    assert chosen == best("reduction", "seed", "float32", gpu=GPU)["config"] and notes == []
    assert run_config(w.name, {"n": 5000000}, "float32", gpu=GPU, log=notes.append) and "nearest" in notes[0]
    given = dict(chosen)
    assert run_config(w.name, {"n": 8}, "float32", given) == given
    with pytest.raises(TunerError, match="missing finish"):
        run_config(w.name, {"n": 8}, "float32", {k: v for k, v in given.items() if k != "finish"})
    with pytest.raises(TunerError, match="outside the space: block_size_x=48"):
        run_config(w.name, {"n": 8}, "float32", {**given, "block_size_x": 48})
    with pytest.raises(TunerError, match="breaks a restriction"):
        run_config(w.name, {"n": 8}, "float32", {**given, "variant": 1, "items_per_thread": 4})


def test_a_given_config_may_leave_out_the_parameters_that_have_a_default():
    from tuner.measure import kt
    from tuner.workloads import get_workload

    w = get_workload("spmv")  # vec and full_occupancy came later, with defaults
    assert set(w.space.defaults) == {"vec", "full_occupancy"}
    full = next(c for c in (dict(zip(w.space.params, v)) for v in kt.searchspace(w.space).list)
                if all(c[k] == d for k, d in w.space.defaults.items()))
    short = {k: v for k, v in full.items() if k not in w.space.defaults}
    assert run_config(w.name, {"n": 8}, "float32", short) == full
    other = {**full, "vec": next(v for v in w.space.params["vec"] if v != w.space.defaults["vec"])}
    if w.space.is_valid(other):  # a value given explicitly wins over the default
        assert run_config(w.name, {"n": 8}, "float32", other) == other


def test_results_table_ranks_every_config_and_lists_failures_last(filled):
    sel = select("reduction", "seed", "float32", gpu=GPU)
    table = config_table(sel)
    assert len(table) == sel.rows["config"].nunique() == len(table.drop_duplicates(sel.workload.space.params))
    ok, failed = table[table.status == "ok"], table[table.status != "ok"]
    assert table.index[table.status != "ok"].min() > table.index[table.status == "ok"].max()  # failures last
    assert ok["GB/s"].is_monotonic_decreasing  # maximised: best first
    answer = best("reduction", "seed", "float32", gpu=GPU)["config"]
    assert table.chosen.sum() == 1 and dict(table[table.chosen].iloc[0][list(sel.workload.space.params)]) == answer
    # the stand-in worker's misbehaving configs, each with its failure class from the isolation
    wrong = failed[(failed.variant == 1) & (failed.block_size_x == 64)]
    assert len(wrong) and set(wrong.status) == {"wrong_answer"} and wrong.error.str.contains("verification").all()
    assert {"timeout", "wrong_answer"} <= set(failed.status)
    assert failed["GB/s"].isna().all() and (failed.measurements == 0).all()


def test_results_by_one_and_by_two_parameters(filled):
    sel = select("reduction", "seed", "float32", gpu=GPU)
    table = config_table(sel)
    ok = table[table.status == "ok"]
    per_variant = by_parameters(table, ["variant"], "GB/s", True).set_index("variant")
    for variant, group in table.groupby("variant"):
        assert per_variant.loc[variant, "configs"] == len(group)
        assert per_variant.loc[variant, "failed"] == (group.status != "ok").sum()
        assert per_variant.loc[variant, "best GB/s"] == ok[ok.variant == variant]["GB/s"].max()
    assert per_variant.loc[1, "failed"] > 0
    grid = by_parameters(table, ["variant", "block_size_x"], "GB/s", True)
    for v, b in {(ok.variant.iloc[0], ok.block_size_x.iloc[0]), (ok.variant.iloc[-1], ok.block_size_x.iloc[-1])}:
        assert grid.loc[v, b] == ok[(ok.variant == v) & (ok.block_size_x == b)]["GB/s"].max()
    assert grid.isna().to_numpy().sum() == len(grid.index) * len(grid.columns) - len(ok.groupby(["variant", "block_size_x"]))
    with pytest.raises(TunerError, match="--by takes one or two"):
        by_parameters(table, ["variant", "nope"], "GB/s", True)


def test_cli_results(filled, capsys, tmp_path):
    assert main(["results", "reduction", "--size", "seed", "--gpu", GPU, "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "best 3 of 200" in out and "failed: wrong_answer 2, timeout 1, runtime 1" in out
    assert "error" not in out.split("best 3 of")[1]  # no failure among the rows shown: no error column
    assert main(["results", "reduction", "--size", "seed", "--gpu", GPU, "--by", "variant", "--json",
                 "--csv", str(tmp_path / "t.csv")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["variant"] for d in doc] == list(range(1, 8)) and doc[0]["failed"] > 0
    assert len((tmp_path / "t.csv").read_text().splitlines()) == 1 + 7
    assert main(["results", "reduction", "--size", "seed", "--gpu", GPU, "--by", "nope"]) == 2
    assert "--by takes one or two" in capsys.readouterr().err
    # JSON: every row unless --top; what the answer is drawn from said on stderr, stdout stays JSON
    assert main(["results", "reduction", "--size", "n=5000000", "--gpu", GPU, "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 200 and "note: size n=5000000 was never measured" in err
    assert main(["results", "reduction", "--size", "seed", "--gpu", GPU, "--json", "--top", "2"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_results_of_a_time_objective_on_the_recorded_floyd_warshall_campaigns(capsys):
    """On the H100 rows committed under results/: time is the objective, so time_ms is its one column; the rows
    are those measured with the kernel source as it is now, and the configs measured only before are said."""
    assert main(["results", "floyd-warshall", "--size", "11k", "--gpu", "NVIDIA H100 80GB HBM3", "--all", "--json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    stored = load_evaluations("floyd-warshall")
    stored = stored[(stored["size"] == "11k") & (stored["gpu"] == "NVIDIA H100 80GB HBM3")]
    current = stored["kernel_hash"] == current_kernel_hash(get_workload("floyd-warshall").space)
    earlier = set(stored.loc[~current, "config"]) - set(stored.loc[current, "config"])
    stored = stored[current]
    assert len(doc) == stored["config"].nunique() and "time" not in doc[0]
    assert earlier and f"{len(earlier)} config(s) measured only with an earlier version of the kernel source" in out.err
    times = [d["time_ms"] for d in doc]
    assert times == sorted(times) and times[0] == pytest.approx(stored.groupby("config")["time_ms"].median().min())


def test_results_mark_the_confirmations_choice_among_recorded_near_ties():
    """On the H100's 2^22 float32 campaign (committed): near-ties were measured again after it, and the row
    marked chosen is `tuner best`'s answer, whichever row the medians put first."""
    h100 = "NVIDIA H100 80GB HBM3"
    table = config_table(select("reduction", "seed", "float32", gpu=h100))
    params = list(get_workload("reduction").space.params)
    assert table.chosen.sum() == 1
    assert dict(table[table.chosen].iloc[0][params]) == best("reduction", "seed", "float32", gpu=h100)["config"]


def test_a_gpu_named_by_its_folder_and_the_real_store_given_by_root(monkeypatch, tmp_path):
    """`--gpu nvidia-h200` (the folder name that --simulate offers) is the stored NVIDIA H200; `--results DIR`
    reads confirmations from DIR too (the 2^22 float32 answer is a confirmation's choice among near-ties)."""
    a = best("floyd-warshall", "5k", "int32", gpu="nvidia-h200")
    assert a["gpu"] == "NVIDIA H200" and a["fallback"] == "exact"
    expected = {(x["gpu"], x["size"], x["dtype"]): x["config"] for x in best_per_gpu_and_size("reduction")}
    monkeypatch.setenv("TUNER_RESULTS", str(tmp_path))  # the default store is empty now
    project_results = locations.BUILTIN_RESULTS  # the committed store (results/store/ in the checkout)
    given = {(x["gpu"], x["size"], x["dtype"]): x["config"] for x in best_per_gpu_and_size("reduction", root=project_results)}
    assert given == expected


def test_export_of_a_dtype_never_measured_or_to_a_missing_folder_is_an_error(filled, tmp_path, capsys):
    with pytest.raises(TunerError, match="no successful reduction measurement is stored for dtype int32"):
        best_per_gpu_and_size("reduction", "int32")
    assert main(["export", "reduction", "-o", str(tmp_path / "no" / "x.h")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_a_size_has_one_name_however_its_variables_are_ordered():
    space = get_workload("gemm").space
    assert space.resolve_size("k=100,m=1024,n=512")[0] == space.resolve_size("m=1024,n=512,k=100")[0] == "m=1024,n=512,k=100"


def test_the_gpu_chosen_is_the_one_with_most_measurements_at_the_size_a_tie_by_name():
    """With no GPU named and none here: the most measurements at the size decide, else overall; a tie goes to the
    first name, whatever order the store's files were read in."""
    import pandas as pd

    from tuner.store.gpu_choice import choose_gpu

    at = json.dumps({"n": 1}, sort_keys=True)
    other = json.dumps({"n": 2}, sort_keys=True)
    rows = pd.DataFrame({"gpu": ["B", "A", "B", "A", "A"], "size_vars": [at, at, at, at, other]})
    assert choose_gpu(rows, None) == ("A", False)  # 3 rows against 2
    assert choose_gpu(rows, None, {"n": 1}) == ("A", False)  # 2 against 2 at the size: by name
    assert choose_gpu(rows.iloc[::-1], None, {"n": 1}) == ("A", False)
    assert choose_gpu(rows, "B", {"n": 2}) == ("B", True)  # this machine's GPU, where it has some
    assert choose_gpu(rows[rows.gpu == "B"], None, {"n": 2}) == ("B", False)  # none at the size: overall
