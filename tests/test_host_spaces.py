"""'host' spaces: a host function that runs a whole pipeline (Kernel Tuner's host-code tuning). Their
schema rules, how Kernel Tuner is configured for them, and the library `tuner run` builds (nvcc, no GPU)."""

import ctypes
import shutil

import pytest
import yaml

from tuner.errors import TunerError
from tuner.measure import kt
from tuner.measure.hostcode import build
from tuner.space import load_space

PIPELINE = r"""
#include <cuda_runtime.h>
extern "C" float pipeline(int *out, int n) {
    // no GPU call: the test machine has none; a real pipeline times its kernels with CUDA events
    for (int i = 0; i < n; ++i) out[i] = i * SCALE;
    return 1.5f * SCALE;
}
"""

SPACE = {
    "workload": "toy",
    "kernel": {"source": "PLACEHOLDER", "name": "pipeline", "lang": "host", "compiler_options": ["-std=c++17"]},
    "parameters": {"SCALE": [1, 2, 3]},
    "sizes": {"small": {"n": 8}},
    "dtypes": {"int32": {}},
    "metrics": {"per_ms": "n / time"},
    "objective": {"metric": "time", "direction": "minimize"},
}


@pytest.fixture
def host_space(tmp_path, monkeypatch):
    src = tmp_path / "pipeline.cu"
    src.write_text(PIPELINE)
    doc = yaml.safe_load(yaml.safe_dump(SPACE))
    doc["kernel"]["source"] = str(src)  # absolute: the project root in front of it is ignored
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    return path, doc


def test_host_space_loads_without_launch(host_space):
    space = load_space(host_space[0])
    assert space.lang == "host" and space.block_names == [] and space.grid_dims({"SCALE": 1}, {"n": 8}) == [1, 1, 1]
    assert kt.effective_backend(space, "nvcuda") == "host-nvcc"
    options = kt.kernel_options(space, {"n": 8}, "int32", [], "nvcuda")
    assert options.lang == "C" and options.block_size_names == ["block_size_x", "block_size_y", "block_size_z"]
    assert kt.device_options(space, "int32", 0).compiler == "nvcc"


def test_launch_rules(host_space, tmp_path):
    path, doc = host_space
    doc["launch"] = {"block": ["SCALE"], "grid": [1]}
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(TunerError, match="at launch: a 'host' kernel launches its own kernels"):
        load_space(path)
    del doc["launch"]
    doc["kernel"]["lang"] = "cuda"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(TunerError, match="missing key 'launch'"):
        load_space(path)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_build_runs_the_config(host_space):
    import numpy as np

    space = load_space(host_space[0])
    out = np.zeros(8, dtype=np.int32)
    fn = build(space, {"SCALE": 3}, "int32")
    assert fn(out.ctypes, ctypes.c_int(8)) == pytest.approx(4.5)
    assert out.tolist() == [3 * i for i in range(8)]
    assert build(space, {"SCALE": 3}, "int32") is not None  # served from the cache the second time


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_build_error_names_the_config(host_space, tmp_path):
    space = load_space(host_space[0])
    space.kernel_source.write_text(PIPELINE + "this is not C++;\n")
    with pytest.raises(TunerError, match=r"nvcc could not build toy with \{'SCALE': 2\}"):
        build(space, {"SCALE": 2}, "int32")


def test_exact_verification_compares_integers_exactly():
    import numpy as np

    verify = kt.verify_function(0.0)
    big = np.arange(10, dtype=np.int32) + 2**30
    assert verify([big], [big.copy()], atol=0.0)
    off = big.copy()
    off[3] += 1  # float32 allclose would not see this; an exact check must
    assert not verify([big], [off], atol=0.0)
    assert verify([None, big], [off, big], atol=0.0)  # None: that argument is not checked
    assert not verify([np.array([1.0])], [np.array([np.nan])], atol=0.1)
