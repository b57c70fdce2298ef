"""A launch the driver refuses (more threads or registers than a block may have) is a `launch` failure, not a
wrong answer nor a time: Kernel Tuner 1.5's nvcuda backend once let it pass unseen (tuner/measure/cubin_backend.py,
check_driver_calls). Found on Kernel Tuner's convolution example, whose 210 configs needing more than 64K
registers a block were recorded as wrong answers on the H200."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tuner.measure.cubin_backend import check_driver_calls, tuple_aware


def test_a_driver_answer_in_a_tuple_is_checked():
    seen = []
    checked = tuple_aware(seen.append)
    checked(("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",))  # what `err = driver.cuLaunchKernel(...)` holds
    checked("CUDA_SUCCESS")  # a bare result, as `err, x = driver.cuX(...)` leaves it
    assert seen == ["CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "CUDA_SUCCESS"]
    assert tuple_aware(checked) is checked  # installed once, however many measuring processes start


def test_the_backends_check_is_replaced_once(monkeypatch):
    from kernel_tuner.backends import nvcuda

    original = nvcuda.cuda_error_check
    monkeypatch.setattr(nvcuda, "cuda_error_check", original)  # restored after the test
    check_driver_calls()
    patched = nvcuda.cuda_error_check
    check_driver_calls()
    assert patched is not original and nvcuda.cuda_error_check is patched


KERNEL = r"""
extern "C" __global__ void __launch_bounds__(64) scale(int n, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
SPACE = {
    "workload": "bounded",
    "kernel": {"source": "scale.cu", "name": "scale"},
    "parameters": {"block_size_x": [32, 64, 128, 256]},
    "launch": {"block": ["block_size_x"], "grid": ["ceil(n / block_size_x)"]},
    "sizes": {"small": {"n": 100000}},
    "dtypes": {"float32": {}},
    "arguments": [
        {"name": "n", "scalar": "n", "dtype": "int32"},
        {"name": "x", "shape": ["n"], "dtype": "float32", "fill": {"kind": "normal"}},
        {"name": "y", "shape": ["n"], "dtype": "float32", "fill": {"kind": "zeros"}, "output": True},
    ],
    "reference": {"expression": {"y": "2 * x"}},
}


@pytest.mark.gpu
def test_a_refused_launch_is_a_launch_failure(tmp_path):
    folder = tmp_path / "workloads" / "bounded"
    folder.mkdir(parents=True)
    (folder / "scale.cu").write_text(KERNEL)
    (folder / "space.yaml").write_text(yaml.safe_dump(SPACE, sort_keys=False))
    env = {**os.environ, "TUNER_WORKLOADS": str(tmp_path / "workloads"), "TUNER_RESULTS": str(tmp_path / "results")}
    out = subprocess.run(
        [sys.executable, "-m", "tuner", "tune", "bounded", "--strategy", "brute_force", "--quiet", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = pd.concat(pd.read_parquet(p) for p in (tmp_path / "results").rglob("evaluations/*.parquet"))
    status = {json.loads(c)["block_size_x"]: s for c, s in zip(rows.config, rows.status)}
    assert status == {32: "ok", 64: "ok", 128: "launch", 256: "launch"}, rows[["config", "status", "error"]]
