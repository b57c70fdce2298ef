"""`tuner export`, found by a user audit: a C header refuses names that would be one macro (sizes `1k` and `1K`,
parameters `tile` and `TILE`) instead of giving the wrong config; configs measured with an earlier version of the
kernel source are said on stderr and in the --json summary; --size repeated exports each size; T4 and kt-cache
files say what they were measured on (GPU, driver, size, dtype); a header's comment says the objective once.
The small stores are of the `tuner init` example (saxpy), as tests/test_answer_rules.py writes them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kernel_tuner
import pytest
from kernel_tuner.file_utils import output_file_schema
from kernel_tuner.util import read_cache

from tests.test_answer_rules import GPU, _cli, _kernel_hash, _row, _write, saxpy  # noqa: F401  (saxpy: a fixture)
from tuner import locations
from tuner.answers.export import render
from tuner.cli import main
from tuner.errors import TunerError
from tuner.store.kt_files import read_recording

ROOT = locations.BUILTIN_RESULTS
H100 = "NVIDIA H100 80GB HBM3"
A = {"WPT": 4, "block_size_x": 256}
B = {"WPT": 8, "block_size_x": 128}


def _space_with(folder: Path, params: str = "", sizes: str = "") -> None:
    """The example's space with more parameters (YAML lines under `parameters:`) and sizes (under `sizes:`)."""
    space = folder / "space.yaml"
    text = space.read_text()
    text = text.replace("  WPT: [1, 2, 4, 8, 16]\n", "  WPT: [1, 2, 4, 8, 16]\n" + params)
    text = text.replace("  large: {n: 67108864}", "  large: {n: 67108864}\n" + sizes)
    space.write_text(text)


def _named(row: dict, size: str) -> dict:
    return {**row, "size": size}


# ---- 1. names that would be one macro -------------------------------------------------------------------------
def test_a_header_refuses_sizes_and_parameters_that_would_be_one_macro(saxpy, capsys):
    """`1k` and `1K` are both TUNER_SIZE_1K (the first #if would win), `tile` and `TILE` both SAXPY_TILE (the
    last #define would): the header is refused in one line naming them; json keeps them apart."""
    _space_with(saxpy, params="  tile: [1, 2]\n  TILE: [3, 4]\n", sizes="  1k: {n: 1000}\n  1K: {n: 1024}\n")
    config = {**A, "tile": 1, "TILE": 4}
    _write([_named(_row(config, 100.0, size={"n": 1000}), "1k"), _named(_row(config, 200.0, size={"n": 1024}), "1K")])
    code, out, err = _cli(capsys, "export", "saxpy", "--format", "header")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "sizes '1K' and '1k' both become TUNER_SIZE_1K" in err
    assert "parameters 'TILE' and 'tile' both become SAXPY_TILE" in err
    assert "one at a time (--size)" in err and "--format json or yaml" in err
    # one size alone has no clash of sizes; its parameters still clash
    code, _, err = _cli(capsys, "export", "saxpy", "--format", "header", "--size", "1k")
    assert code == 2 and "SAXPY_TILE" in err and "TUNER_SIZE_1K" not in err and "--size" not in err
    code, out, _ = _cli(capsys, "export", "saxpy", "--format", "json")
    assert code == 0 and {c["size"] for c in json.loads(out)["configs"]} == {"1k", "1K"}


def test_a_header_refuses_punctuation_that_would_be_one_macro(saxpy, capsys):
    """`big-one` and `big_one` are both TUNER_SIZE_BIG_ONE; `a__b` and `a_b` both SAXPY_A_B."""
    _space_with(saxpy, params="  a__b: [1, 2]\n  a_b: [3, 4]\n", sizes="  big-one: {n: 1000}\n  big_one: {n: 1024}\n")
    config = {**A, "a__b": 1, "a_b": 4}
    _write([_named(_row(config, 100.0, size={"n": 1000}), "big-one"),
            _named(_row(config, 200.0, size={"n": 1024}), "big_one")])
    code, _, err = _cli(capsys, "export", "saxpy", "--format", "header")
    assert code == 2
    assert "sizes 'big-one' and 'big_one' both become TUNER_SIZE_BIG_ONE" in err
    assert "parameters 'a__b' and 'a_b' both become SAXPY_A_B" in err


def test_a_header_refuses_gpus_and_dtypes_that_would_be_one_macro(saxpy, capsys):
    _write([_row(A, 1000.0, gpu="Fake GPU-9000")], gpu="Fake GPU-9000")
    _write([_row(B, 900.0, gpu="Fake GPU 9000")], campaign="20261202T000000Z-bbbbbb", gpu="Fake GPU 9000")
    code, _, err = _cli(capsys, "export", "saxpy", "--format", "header")
    assert code == 2 and "GPUs 'Fake GPU 9000' and 'Fake GPU-9000' both become TUNER_GPU_FAKE_GPU_9000" in err
    assert "(--gpu)" in err
    # the space's schema lists the dtypes, in lower case; an answer of another spelling is refused alike
    answer = {"gpu": GPU, "size": "small", "objective": "GB/s", "value": 1.0, "time_ms": 1.0, "config": A}
    with pytest.raises(TunerError, match="dtypes 'FLOAT32' and 'float32' both become TUNER_DTYPE_FLOAT32"):
        render("saxpy", [{**answer, "dtype": "float32"}, {**answer, "dtype": "FLOAT32"}], "header")


# ---- 2. configs measured with an earlier version of the kernel source ----------------------------------------
def test_an_export_says_how_many_configs_an_earlier_kernel_source_measured(saxpy, capsys, tmp_path):
    """`large` was measured before the kernel was edited, `small` after: the export says 1 of 2 on stderr, in
    the header's opening comment and in the --json summary (each config's kernel_source and notes, as `tuner
    best --json` has them)."""
    old = _kernel_hash(saxpy)
    _write([_row(A, 500.0, size={"n": 67108864}, kernel_hash=old)])
    kernel = saxpy / "saxpy.cu"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    _write([_row(B, 1000.0)], campaign="20261202T000000Z-bbbbbb")
    said = (f"1 of 2 configs were measured with an earlier version of the kernel source ({GPU} large float32): "
            f"tune again to refresh them")
    header = tmp_path / "saxpy.h"
    code, out, err = _cli(capsys, "export", "saxpy", "--format", "header", "-o", str(header))
    assert code == 0 and out.startswith("wrote 2 configuration(s)") and f"note: {said}" in err
    assert f" * Note: {said}." in header.read_text()
    code, out, err = _cli(capsys, "export", "saxpy", "--format", "header", "--json", "-o", str(header))
    summary = json.loads(out)
    assert code == 0 and summary["notes"] == [said]
    by_size = {a["size"]: a for a in summary["answers"]}
    assert by_size["large"]["kernel_source"]["current"] is False
    assert by_size["large"]["kernel_source"]["measured_with"] == [old]
    assert any("earlier version of the kernel source" in n for n in by_size["large"]["notes"])
    assert by_size["small"]["kernel_source"]["current"] is True and by_size["small"]["notes"] == []
    # all of the current source's: nothing to say
    code, out, err = _cli(capsys, "export", "saxpy", "--size", "small", "-o", str(tmp_path / "s.json"))
    assert code == 0 and "note" not in err


# ---- 3. --size repeated -------------------------------------------------------------------------------------
def test_several_sizes_are_exported_each(saxpy, capsys, tmp_path):
    _write([_row(A, 1000.0), _row(B, 500.0, size={"n": 67108864}), _row(A, 800.0, size={"n": 4096})])
    code, out, _ = _cli(capsys, "export", "saxpy", "--size", "small", "--size", "large")
    assert code == 0 and [c["size"] for c in json.loads(out)["configs"]] == ["small", "large"]
    # a size named twice, or by its name and its variables, is exported once
    code, out, _ = _cli(capsys, "export", "saxpy", "--size", "small", "--size", "n=1048576", "--size", "small")
    assert code == 0 and [c["size"] for c in json.loads(out)["configs"]] == ["small"]
    code, out, _ = _cli(capsys, "export", "saxpy", "--format", "header", "--size", "small", "--size", "n=4096")
    assert code == 0 and "TUNER_SIZE_SMALL" in out and "TUNER_SIZE_N_4096" in out and "TUNER_SIZE_LARGE" not in out
    # a size never measured among them fails the export, as one does alone
    code, _, err = _cli(capsys, "export", "saxpy", "--size", "small", "--size", "n=5")
    assert code == 2 and "never measured" in err
    # Kernel Tuner's files hold one recorded size: several are refused, not one of them taken
    code, out, err = _cli(capsys, "export", "saxpy", "--format", "kt-cache", "--size", "small", "--size", "large")
    assert code == 2 and out == "" and "writes one recorded size, and 2 were given (small, large)" in err


# ---- 4. what T4 and kt-cache files were measured on ------------------------------------------------------------
def test_a_t4_export_says_what_it_was_measured_on_and_stays_valid(tmp_path):
    out = tmp_path / "r.t4.json"
    assert main(["export", "reduction", "--format", "t4", "--size", "16M", "--dtype", "int32", "--gpu", H100,
                 "-o", str(out)]) == 0
    t4 = json.loads(out.read_text())
    for target in ("results", "metadata"):  # the results file, and its metadata as T4's metadata schema says it
        jsonschema.validate(t4, output_file_schema(target)[1])
    meta = t4["metadata"]
    assert meta["timeunit"] == "milliseconds" and meta["device"] == H100
    assert (meta["workload"], meta["size"], meta["dtype"], meta["problem_size"]) == ("reduction", "16M", "int32",
                                                                                      [16777216])
    assert meta["hardware"]["hardware_description"] == [{"product": H100}]
    query = meta["environment"]["device_query"]
    assert query["gpu"] == H100 and query["driver"] and query["cuda"] and query["compute_capability"]
    assert any(r.startswith("kernel_tuner==") for r in meta["environment"]["requirements"])
    rec = read_recording(out)  # and `compare-strategies --recording` reads it, its GPU too
    assert rec.device == H100 and len(rec.configs) == len(t4["results"])


def test_kt_cache_exports_of_two_dtypes_say_which(tmp_path):
    """The int32 and float32 caches of one size differ in their header's dtype; Kernel Tuner and our reader
    read both as before."""
    files = {}
    for dtype in ("int32", "float32"):
        files[dtype] = tmp_path / f"{dtype}.json"
        assert main(["export", "reduction", "--format", "kt-cache", "--size", "16M", "--dtype", dtype,
                     "--gpu", H100, "-o", str(files[dtype])]) == 0
    heads = {d: json.loads(p.read_text()) for d, p in files.items()}
    assert heads["int32"]["dtype"] == "int32" and heads["float32"]["dtype"] == "float32"
    assert heads["int32"]["size"] == "16M" and heads["int32"]["workload"] == "reduction"
    assert heads["int32"]["environment"]["device_query"]["gpu"] == H100
    assert list(heads["int32"])[-1] == "cache"  # where Kernel Tuner appends to it
    for d, path in files.items():
        assert read_cache(str(path), open_cache=False)["cache"].keys() == heads[d]["cache"].keys()
        assert read_recording(path).device == H100


def test_kernel_tuner_replays_an_exported_cache(tmp_path):
    """kernel_tuner.tune_kernel in simulation mode over the exported file, header keys of ours and all."""
    path = tmp_path / "fw.json"
    assert main(["export", "floyd-warshall-small", "--format", "kt-cache", "--gpu", H100, "-o", str(path)]) == 0
    head = json.loads(path.read_text())
    assert head["dtype"] == "int32"
    copy = tmp_path / "copy.json"
    shutil.copyfile(path, copy)

    def recorded(p):
        return ",".join(str(p[k]) for k in head["tune_params_keys"]) in head["cache"]

    held = {k: [v for v in values if any(e[k] == v for e in head["cache"].values())]
            for k, values in head["tune_params"].items()}
    results, _ = kernel_tuner.tune_kernel(
        head["kernel_name"], "__global__ void k() {}", head["problem_size"], [], held,
        restrictions=[recorded], cache=str(copy), simulation_mode=True, strategy="brute_force",
        objective=head["objective"][0], quiet=True, lang="CUDA",
    )
    assert len(results) == len(head["cache"])


# ---- 5. the header's comment says the objective once ---------------------------------------------------------
def test_a_headers_comment_says_the_objective_once_readably(saxpy, capsys):
    answer = {"gpu": GPU, "size": "5k", "dtype": "int32", "config": {"BLOCK": 64}, "objective": "time",
              "value": 21.4302, "time_ms": 21.4302}
    text = render("fw", [answer], "header")
    assert f"/* {GPU}, 5k int32: time 21.43 ms; commit ?" in text and "21.4302" not in text
    _write([_row(A, 1000.0)])
    code, out, _ = _cli(capsys, "export", "saxpy", "--format", "header")
    assert code == 0 and f"/* {GPU}, small float32: GB/s 1000, time 0.01258 ms; commit abc1234" in out


def test_a_name_holding_a_comments_end_does_not_end_the_headers_comment(saxpy, capsys, tmp_path):
    """A size named `a*/b` (the schema allows it) is written into the header's comments: it must not close them
    early and leave the rest of the line to the compiler."""
    _space_with(saxpy, sizes="  'a*/b': {n: 1000}\n")
    _write([_named(_row(A, 100.0, size={"n": 1000}), "a*/b")])
    code, out, _ = _cli(capsys, "export", "saxpy", "--format", "header")
    assert code == 0 and "a*/b" not in out and "a* /b" in out
    header = tmp_path / "saxpy.h"
    header.write_text(out)
    program = tmp_path / "use.c"
    program.write_text('#define TUNER_REQUIRE_CONFIG\n#define TUNER_GPU_NVIDIA_H100_80GB_HBM3\n#define TUNER_SIZE_A_B\n'
                       '#define TUNER_DTYPE_FLOAT32\n#include "saxpy.h"\nint main(void) { return SAXPY_WPT; }\n')
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    done = subprocess.run([compiler, "-std=c99", "-Werror", "-c", str(program), "-o", str(tmp_path / "use.o")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
