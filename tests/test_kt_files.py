"""Kernel Tuner's own files (tuner.store.kt_files): the recordings derived from the store's rows are what
Kernel Tuner writes and a plain Kernel Tuner replay of them picks what `tuner best` picks; `tuner export --format t4 | kt-cache`; any such file
read back as a recorded space."""

import gzip
import json
import shutil
import statistics
from functools import cache

import jsonschema
import kernel_tuner
import pytest
from kernel_tuner.file_utils import output_file_schema
from kernel_tuner.util import read_cache

from tuner import locations
from tuner.answers.best_config import best
from tuner.cli import main
from tuner.errors import TunerError
from tuner.store import confirmations, load_evaluations
from tuner.store.kt_files import cache_text, read_recording, store_cache_doc, t4_results
from tuner.store.recording_choice import find_recording
from tuner.store.recordings import replay_file, sources
from tuner.workloads import all_workloads, get_workload

ROOT = locations.BUILTIN_RESULTS
H100 = "NVIDIA H100 80GB HBM3"
RECORDED = [(w.name, s) for w in all_workloads() if w.origin == "built-in" for s in sources(ROOT, w.name)]
# every complete brute force in the store
COMPLETE = [("reduction", s, d) for s in ("seed", "16M", "64M", "large") for d in ("float32", "int32")]
COMPLETE += [("gemm", "2048x2048x2048", "float32"), ("floyd-warshall-small", "5k", "int32")]
KT_HEADER = ["device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params", "objective", "cache"]


@cache
def _rows(workload):
    return load_evaluations(workload, ROOT)


def _id(recorded):
    workload, s = recorded
    return f"{s.gpu}/{workload}/{s.size}_{s.dtype}"


@pytest.mark.parametrize("recorded", RECORDED, ids=_id)
def test_recordings_are_as_kernel_tuner_writes_them(recorded):
    workload, source = recorded
    assert source.file is None  # every recording in the store comes from its rows
    path = replay_file(ROOT, workload, source)
    doc = json.loads(path.read_text())  # closed: plain JSON
    assert list(doc) == KT_HEADER and doc["device_name"] == source.gpu_name  # the GPU, also for host code
    assert isinstance(doc["problem_size"], list) and all(isinstance(v, int) for v in doc["problem_size"])
    space = get_workload(workload).space
    for key, entry in doc["cache"].items():
        assert key == ",".join(str(entry[k]) for k in doc["tune_params_keys"])
        assert {"compile_time", "verification_time", "benchmark_time", "timestamp"} <= set(entry)
        if "__error__" not in entry:
            assert entry["time"] == statistics.median(entry["times"])  # the time the store ranks by
            assert set(space.metrics) <= set(entry)
    assert replay_file(ROOT, workload, source) == path  # derived once: the same rows and space, the same file


@pytest.mark.parametrize("recorded", RECORDED, ids=_id)
def test_the_recordings_best_is_tuner_best_or_its_confirmed_near_tie(recorded):
    """By the file's own objective the best entry is `tuner best`'s config, except where a confirmation measured
    near-ties again side by side and chose another of them (`tuner best` says so): then it is one of those."""
    workload, source = recorded
    size, dtype, gpu = source.size, source.dtype, source.gpu_name
    space = get_workload(workload).space
    doc = read_cache(str(replay_file(ROOT, workload, source)), open_cache=False)
    ok = [e for e in doc["cache"].values() if "__error__" not in e]
    if not ok:
        return  # nothing ran: `tuner best` has no answer either
    pick = (max if space.maximize else min)(ok, key=lambda e: e[doc["objective"][0]])
    pick = {k: pick[k] for k in doc["tune_params_keys"]}
    answer = best(workload, size, dtype, gpu=gpu, root=ROOT, evaluations=_rows(workload))
    if pick != {k: answer["config"][k] for k in pick}:
        assert any(n.startswith("chosen among") for n in answer["notes"]), answer["notes"]
        finalists = confirmations.load(workload, ROOT)
        finalists = finalists[(finalists["gpu"] == gpu) & (finalists["dtype"] == dtype)]["config"]
        assert pick in [{k: space.complete(json.loads(c))[k] for k in pick} for c in finalists]


def test_a_recording_is_derived_again_when_its_rows_change(tmp_path, monkeypatch):
    """The derived cache is keyed by the rows it was made from: a part added to the store makes a new one."""
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "store"
    shutil.copytree(ROOT / "nvidia-h100-80gb-hbm3" / "floyd-warshall-small", root / "nvidia-h100-80gb-hbm3" / "floyd-warshall-small")
    (source,) = sources(root, "floyd-warshall-small")
    first = replay_file(root, "floyd-warshall-small", source)
    assert first.is_relative_to(tmp_path / "cache") and replay_file(root, "floyd-warshall-small", source) == first
    parts = sorted((root / "nvidia-h100-80gb-hbm3" / "floyd-warshall-small" / "evaluations").glob("*.parquet"))
    shutil.copyfile(parts[0], parts[0].with_name("copy.parquet"))
    again = replay_file(root, "floyd-warshall-small", source)
    assert again != first and again.is_file()


@pytest.mark.parametrize("workload, size, dtype", COMPLETE)
def test_a_plain_kernel_tuner_replay_picks_what_tuner_best_picks(tmp_path, workload, size, dtype):
    """kernel_tuner.tune_kernel in simulation mode, brute force over a committed complete cache, with nothing of
    this package (its restriction: the configs the file holds): its best is `tuner best`'s (except where a
    confirmation chose among near-ties: reduction 2^22 float32, checked above)."""
    path = find_recording(ROOT, workload, size, dtype, H100)
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    head = json.loads(path.read_text())
    space = get_workload(workload).space
    objective = head["objective"][0]

    def recorded(p):
        return ",".join(str(p[k]) for k in head["tune_params_keys"]) in head["cache"]

    # each parameter's values that some recorded config holds: the same configs pass `recorded`, but Kernel Tuner
    # tests it on the product of these (GEMM's whole product is 212 million configs, 50 s of this test)
    held = {k: [v for v in values if any(e[k] == v for e in head["cache"].values())]
            for k, values in head["tune_params"].items()}
    results, _ = kernel_tuner.tune_kernel(
        head["kernel_name"], "__global__ void k() {}", head["problem_size"], [], held,
        restrictions=[recorded], cache=str(copy), simulation_mode=True, strategy="brute_force",
        objective=objective, objective_higher_is_better=space.maximize, quiet=True, lang="CUDA",
    )
    assert len(results) == len(head["cache"])
    ok = [r for r in results if "__error__" not in r]
    top = (max if space.maximize else min)(ok, key=lambda r: r[objective])
    pick = {k: top[k] for k in head["tune_params_keys"]}
    answer = best(workload, size, dtype, gpu=H100, root=ROOT, evaluations=_rows(workload))
    if not any(n.startswith("chosen among") for n in answer["notes"]):
        assert pick == {k: answer["config"][k] for k in pick}


def _with_failures(doc, n=5):
    """`doc` with its first n configs failed (as Kernel Tuner records them) and a parameter that never varies."""
    doc = json.loads(json.dumps(doc))
    doc["tune_params_keys"].append("fixed")
    doc["tune_params"]["fixed"] = [7]
    cache = {}
    for i, (key, entry) in enumerate(doc["cache"].items()):
        entry["fixed"] = 7
        if i < n:
            for k in ("time", "times", *get_workload("reduction").space.metrics):
                entry.pop(k, None)
            entry["__error__"] = "CompilationFailedConfig" if i % 2 else "RuntimeFailedConfig"
        cache[key + ",7"] = entry
    doc["cache"] = cache
    return doc


def test_t4_export_validates_against_kernel_tuners_schema(tmp_path):
    out = tmp_path / "r.t4.json"
    assert main(["export", "reduction", "--format", "t4", "--size", "64M", "--dtype", "float32", "-o", str(out)]) == 0
    t4 = json.loads(out.read_text())
    _, schema = output_file_schema("results")
    jsonschema.validate(t4, schema)
    assert len(t4["results"]) == 576 and {r["invalidity"] for r in t4["results"]} == {"correct"}
    failing = t4_results(_with_failures(store_cache_doc("reduction", "64M", "float32", H100, ROOT)))
    jsonschema.validate(failing, schema)
    assert [r["invalidity"] for r in failing["results"][:3]] == ["runtime", "compile", "runtime"]


def test_kt_cache_export_is_the_stores_cache(tmp_path, capsys):
    assert main(["export", "floyd-warshall-small", "--format", "kt-cache", "--gpu", H100]) == 0
    text = capsys.readouterr().out
    recorded = find_recording(ROOT, "floyd-warshall-small", "5k", "int32", H100).read_text()
    # the recording's header and entries, line for line; the header says also what it is of and was measured on
    exported = json.loads(text)
    assert {k: v for k, v in exported.items() if k not in ("workload", "size", "dtype", "environment")} == json.loads(
        recorded
    )
    assert (exported["workload"], exported["size"], exported["dtype"]) == ("floyd-warshall-small", "5k", "int32")
    assert text.endswith(recorded[recorded.index('"cache": {') :] + "\n")
    assert main(["export", "reduction", "--format", "t4", "--size", "n=1000"]) == 2  # never recorded
    assert "export a recorded size" in capsys.readouterr().err


def test_any_kernel_tuner_file_reads_as_a_recorded_space(tmp_path):
    doc = _with_failures(store_cache_doc("reduction", "16M", "int32", H100, ROOT))
    plain, packed, t4 = tmp_path / "c.json", tmp_path / "c.json.gz", tmp_path / "c.t4.json"
    plain.write_text(cache_text(doc))
    packed.write_bytes(gzip.compress(cache_text(doc).encode()))
    t4.write_text(json.dumps(t4_results(doc)))
    recs = [read_recording(p) for p in (plain, packed, t4)]
    assert recs[0].configs == recs[1].configs == recs[2].configs
    assert recs[0].tune_params == recs[1].tune_params and recs[2].tune_params["fixed"] == [7]
    assert recs[0].objective == "GB/s" and recs[0].maximize and recs[0].device == H100
    assert sum(v is None for v in recs[0].configs.values()) == 5 and len(recs[0].values) == 571
    # left open by an interrupted run (Kernel Tuner's appending layout), it reads the same
    plain.write_text(cache_text(doc)[: -len("}\n}")] + ",")
    assert read_recording(plain).configs == recs[0].configs
    assert read_recording(plain, "time").maximize is False


@pytest.mark.parametrize("text, said", [("{", "invalid JSON"), ("[1]", "not a Kernel Tuner cache"),
                                        ('{"a": 1}', "neither a Kernel Tuner cache")])
def test_a_file_that_is_no_recording_is_one_line(tmp_path, text, said):
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(TunerError, match=said):
        read_recording(path)
    with pytest.raises(TunerError, match="give --direction"):
        doc = store_cache_doc("reduction", "16M", "int32", H100, ROOT)
        path.write_text(cache_text(doc))
        read_recording(path, "variant")


def test_a_recording_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("TUNER_CACHE", str(blocked))
    (source,) = [s for s in sources(ROOT, "floyd-warshall-small") if s.size == "5k"]
    with pytest.raises(TunerError, match=r"cannot write the recording of floyd-warshall-small 5k int32 .*TUNER_CACHE"):
        replay_file(ROOT, "floyd-warshall-small", source)


def test_configs_outside_the_spaces_parameters_are_left_out_of_the_file():
    """Rows recorded under a wider space (here: one row's block size, which reduction's space does not list)
    are no configs of the header's tune_params: the file leaves them out and says which."""
    rows = _rows("reduction")
    rows = rows[(rows["size"] == "16M") & (rows["dtype"] == "int32") & (rows["gpu"] == H100)].copy()
    wide = json.loads(rows["config"].iloc[0])
    wide["block_size_x"] = 12345
    rows.iloc[0, rows.columns.get_loc("config")] = json.dumps(wide)
    outside: list[str] = []
    doc = store_cache_doc("reduction", "16M", "int32", H100, rows=rows, outside=outside)
    assert [json.loads(c)["block_size_x"] for c in outside] == [12345]
    assert len(doc["cache"]) == rows["config"].nunique() - 1
    assert all(e[k] in doc["tune_params"][k] for e in doc["cache"].values() for k in doc["tune_params_keys"])
