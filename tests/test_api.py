"""The Python API (tuner.api, faced by `import tuner`): the same answers as the CLI, as dicts and DataFrames."""

import json

import pytest

import tuner
from tuner.answers.best_config import best
from tuner.locations import BUILTIN_RESULTS
from tuner.store import load_evaluations

H100 = "NVIDIA H100 80GB HBM3"


def test_the_public_names_are_the_api():
    assert set(tuner.__all__) == {"TunerError", "Workload", "best", "load_store", "results", "tune"}
    assert tuner.TunerError.__name__ == "TunerError" and tuner.Workload.__name__ == "Workload"
    with pytest.raises(AttributeError):
        tuner.no_such_name  # noqa: B018


def test_best_answers_as_the_cli_does():
    answer = tuner.best("reduction", "seed", "float32", gpu=H100, results=BUILTIN_RESULTS)
    assert answer == best("reduction", "seed", "float32", gpu=H100, root=BUILTIN_RESULTS)
    json.dumps(answer, default=str)  # a plain document


@pytest.mark.filterwarnings("ignore:.*older protocol")  # the reduction's first brute forces were timed plain
def test_results_narrows_the_stored_rows():
    every = tuner.results("reduction", results=BUILTIN_RESULTS)
    assert len(every) == len(load_evaluations("reduction", BUILTIN_RESULTS))
    seed = tuner.results("reduction", size="seed", dtype="float32", gpu=H100, results=BUILTIN_RESULTS)
    assert 0 < len(seed) < len(every)
    assert set(seed["size"]) == {"seed"} and set(seed["dtype"]) == {"float32"} and set(seed["gpu"]) == {H100}
    # a size given by its variables is the same size
    n = json.loads(seed["size_vars"].iloc[0])["n"]
    assert len(tuner.results("reduction", size=f"n={n}", dtype="float32", gpu=H100, results=BUILTIN_RESULTS)) == len(seed)


def test_load_store_holds_every_workload():
    store = tuner.load_store(BUILTIN_RESULTS)
    assert {"reduction", "gemm", "spmv", "floyd-warshall", "locvolcalib"} <= set(store["workload"])


def test_tune_replays_a_recording_without_a_gpu(tmp_path):
    out = tuner.tune("reduction", size="seed", dtype="float32", simulate=True, budget=12, results=BUILTIN_RESULTS,
                     seed=3, warm_start=False)
    assert out["simulated"] and out["evaluated"] == 12 and out["best"]["config"]
    with pytest.raises(tuner.TunerError, match="budget 'soon'"):
        tuner.tune("reduction", budget="soon")


@pytest.mark.parametrize(
    "given",
    [{"size": 1000}, {"gpu": 5}, {"size": ["n=5"]}, {"strategy": 3}, {"seed": "x"}, {"device": "x"},
     {"patience": True}, {"timeout": "1"}],
)
def test_tune_refuses_an_option_of_the_wrong_type_with_one_line(given):
    """As best() and results() do, and as the command line's parser does: not an AttributeError from inside."""
    name = next(iter(given))
    with pytest.raises(tuner.TunerError, match=rf"^{name}=.*: give (it as text|a whole number|a number) \(an? \w+ is not one\)"):
        tuner.tune("reduction", simulate=True, budget=3, **given)


def test_dir_offers_the_api_names_imported_on_first_use():
    assert {"tune", "best", "results", "load_store", "Workload", "TunerError"} <= set(dir(tuner))
