"""The cold `auto` runs behind issue 26's figures (results/records/common/nvidia-h100-80gb-hbm3/strategies/
uncapped40/, made on the device machine with `cold_strategy_report.py --save-traces`, seeds 30..69) replay bit for
bit from their seeds with the code and libraries installed here: a change to the sampler that shifts its random
draws, or a release of numpy or scikit-learn that draws otherwise, fails here rather than leaving the recorded
scores unreproducible by the command that made them."""

import gzip
import json
from pathlib import Path

import pytest

from tests.recorded import is_recorded
from tuner.answers.compare import load_recording, strategy_trace

TRACES = Path(__file__).parents[1] / "results/records/common/nvidia-h100-80gb-hbm3/strategies/uncapped40/rest.json.gz"
SPACES = [  # (label in the traces file, workload, size, dtype, GPU: the store's folder of it)
    ("floyd-warshall-small 5k int32", "floyd-warshall-small", "5k", "int32", "nvidia-h100-80gb-hbm3"),
    ("reduction 64M int32", "reduction", "64M", "int32", "nvidia-h100-80gb-hbm3"),
    ("locvolcalib finpar-small float32", "locvolcalib", "finpar-small", "float32", "nvidia-h200"),
]


@pytest.fixture(scope="module")
def recorded() -> dict:
    with gzip.open(TRACES, "rt") as f:
        doc = json.load(f)
    return {"first_seed": doc["seeds"][0], "spaces": {s["label"]: s for s in doc["spaces"]}}


@pytest.mark.parametrize(("label", "workload", "size", "dtype", "gpu"), SPACES, ids=[s[0] for s in SPACES])
def test_a_recorded_cold_run_replays_bit_for_bit(recorded, label, workload, size, dtype, gpu):
    if not is_recorded(gpu, workload, size, dtype):
        pytest.skip(f"no complete recording of {label} on {gpu}")
    space = recorded["spaces"][label]
    rec = load_recording(workload, size, dtype, gpu=gpu)
    trace = strategy_trace(rec, "auto", recorded["first_seed"], space["budget"])
    assert trace == space["traces"]["auto"][0]
