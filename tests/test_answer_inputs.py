"""What the answers do with what a user types: `tuner export --size/--gpu` for every format, a GPU named by a
word of its name or by none of the store's, an answer on a machine without a GPU, the Python API's `results`
on bad input, and `tuner results --top N --all`. On the committed store (H100 and H200 recordings)."""

import json

import pytest
import yaml

import tuner
import tuner.answers.selection as selection
from tuner.answers.best_config import best
from tuner.cli import main
from tuner.errors import TunerError
from tuner.locations import BUILTIN_RESULTS
from tuner.store.gpu_choice import stored_gpu_name

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def _cli(capsys, *argv):
    capsys.readouterr()
    code = main(["--results", str(BUILTIN_RESULTS), *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_export_writes_only_the_gpu_and_size_asked_for(capsys, tmp_path, fmt):
    out = tmp_path / f"x.{fmt}"
    load = json.loads if fmt == "json" else yaml.safe_load
    code, said, _ = _cli(capsys, "export", "reduction", "--format", fmt, "--gpu", "nvidia-h200", "-o", str(out))
    configs = load(out.read_text())["configs"]
    assert code == 0 and {c["gpu"] for c in configs} == {H200} and f"wrote {len(configs)} " in said
    code, _, _ = _cli(capsys, "export", "reduction", "--format", fmt, "--size", "large", "--gpu", H100, "-o", str(out))
    configs = load(out.read_text())["configs"]
    assert code == 0 and {(c["gpu"], c["size"]) for c in configs} == {(H100, "large")}
    assert {c["dtype"] for c in configs} == {"float32", "int32"}


def test_export_header_holds_only_the_size_asked_for(capsys, tmp_path):
    out = tmp_path / "x.h"
    code, said, _ = _cli(capsys, "export", "reduction", "--format", "header", "--size", "large", "-o", str(out))
    text = out.read_text()
    assert code == 0 and "wrote 2 configuration(s)" in said  # the H100's float32 and int32; the H200 has no large
    assert text.count("defined(TUNER_SIZE_LARGE)") == 2 and "TUNER_SIZE_SEED" not in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "nonsense"], f"no successful reduction measurement is stored on GPU 'nonsense'; stored: {H100}, {H200}"),
        (["--size", "large", "--gpu", "h200"], "reduction large was never measured on NVIDIA H200; measured sizes: n=33554432"),
        (["--size", "n=5"], "reduction n=5 was never measured; measured sizes: 16M, 64M, large"),
        (["--gpu", "nonsense", "--format", "t4"], "stored on GPU 'nonsense'; stored: "),
    ],
)
def test_export_of_a_gpu_or_size_not_stored_is_one_clear_error(capsys, tmp_path, args, message):
    code, _, err = _cli(capsys, "export", "reduction", *args, "-o", str(tmp_path / "x"))
    assert code == 2 and message in err and "Traceback" not in err and not (tmp_path / "x").exists()


def test_a_stored_gpu_is_named_by_its_name_its_folder_or_whole_words_of_it():
    stored = [H100, H200, H100]
    assert stored_gpu_name(stored, H200) == stored_gpu_name(stored, "nvidia-h200") == H200
    assert stored_gpu_name(stored, "nvidia h200") == stored_gpu_name(stored, "H200") == H200
    assert stored_gpu_name(stored, "h100") == stored_gpu_name(stored, "80GB HBM3") == H100
    assert stored_gpu_name(stored, "h20") is None and stored_gpu_name(stored, "nonsense") is None  # H20: another GPU
    with pytest.raises(TunerError, match="names several stored GPUs"):
        stored_gpu_name(stored, "nvidia")


def test_best_for_a_gpu_the_store_does_not_know_names_the_stored_ones(capsys):
    a = best("reduction", "large", gpu="nonsense", root=BUILTIN_RESULTS)
    assert a["fallback"] == "other-gpu" and a["gpu"] == H100
    assert a["notes"][0] == f"nothing measured on nonsense; answering from {H100} (also stored: {H200}; choose with --gpu)"
    short = best("reduction", "n=8388608", gpu="h200", root=BUILTIN_RESULTS)
    assert short["gpu"] == H200 and short["fallback"] == "exact" and "GPU 'h200' taken as NVIDIA H200" in short["notes"][0]
    for name in (H200, "nvidia-h200"):
        full = best("reduction", "n=8388608", gpu=name, root=BUILTIN_RESULTS)
        assert full["fallback"] == "exact" and full["gpu"] == H200 and full["config"] == short["config"]
    code, _, err = _cli(capsys, "best", "reduction", "--gpu", "nvidia")
    assert code == 2 and f"names several stored GPUs ({H100}, {H200})" in err


def test_with_no_gpu_here_the_answer_is_not_called_exact(monkeypatch, capsys):
    monkeypatch.setattr(selection, "local_device_name", lambda space: None)
    code, out, _ = _cli(capsys, "best", "reduction", "--size", "large", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["fallback"] == "other-gpu" and doc["gpu"] == H100
    assert doc["notes"] == [f"no GPU found here; answering from {H100} (also stored: {H200}; choose with --gpu)"]
    monkeypatch.setattr(selection, "local_device_name", lambda space: H100)  # this machine's GPU: exact
    assert best("reduction", "large", root=BUILTIN_RESULTS)["fallback"] == "exact"


def test_api_results_refuses_bad_input_and_takes_a_gpu_as_best_does():
    with pytest.raises(TunerError, match="unknown workload 'reducton'"):
        tuner.results("reducton", results=BUILTIN_RESULTS)
    with pytest.raises(TunerError, match="reduction has no dtype 'float16'; it has float32, int32"):
        tuner.results("reduction", dtype="float16", results=BUILTIN_RESULTS)
    with pytest.raises(TunerError, match=f"no reduction measurement is stored on GPU 'nonsense'; stored: {H100}, {H200}"):
        tuner.results("reduction", gpu="nonsense", results=BUILTIN_RESULTS)
    by_name = tuner.results("reduction", gpu=H200, results=BUILTIN_RESULTS)
    assert len(by_name) > 0 and set(by_name["gpu"]) == {H200}
    for other in ("nvidia-h200", "h200"):
        assert len(tuner.results("reduction", gpu=other, results=BUILTIN_RESULTS)) == len(by_name)


def test_results_top_and_all_are_one_or_the_other(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["results", "reduction", "--top", "3", "--all"])
    assert exit_.value.code == 2 and "argument --all: not allowed with argument --top" in capsys.readouterr().err
