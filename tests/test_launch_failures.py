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
from tuner.measure.protocol import LaunchRefused


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
    "metrics": {"GB/s": "8 * n / (time / 1e3) / 1e9"},
    "objective": {"metric": "time", "direction": "minimize"},
}


def _bounded_workload(root):
    folder = root / "workloads" / "bounded"
    folder.mkdir(parents=True)
    (folder / "scale.cu").write_text(KERNEL)
    (folder / "space.yaml").write_text(yaml.safe_dump(SPACE, sort_keys=False))
    return folder


def test_the_bounded_workload_is_complete(tmp_path):
    """The GPU test's workload, checked here so that a mistake in it shows without a GPU."""
    import numpy as np

    from tuner.workloads.declared import DeclaredWorkload

    workload = DeclaredWorkload("bounded", _bounded_workload(tmp_path) / "space.yaml")
    size = {"n": 1000}
    args = workload.arguments(size, "float32", np.random.default_rng(0))
    answer = workload.answer(args, size, "float32")
    assert np.array_equal(answer[2], 2 * args[1])


@pytest.mark.gpu
def test_a_refused_launch_is_a_launch_failure(tmp_path):
    _bounded_workload(tmp_path)
    env = {**os.environ, "TUNER_WORKLOADS": str(tmp_path / "workloads"), "TUNER_RESULTS": str(tmp_path / "results")}
    out = subprocess.run(
        [sys.executable, "-m", "tuner", "tune", "bounded", "--strategy", "brute_force", "--quiet", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = pd.concat(pd.read_parquet(p) for p in (tmp_path / "results").rglob("evaluations/*.parquet"))
    status = {json.loads(c)["block_size_x"]: s for c, s in zip(rows.config, rows.status)}
    assert status == {32: "ok", 64: "ok", 128: "launch", 256: "launch"}, rows[["config", "status", "error"]]
    refused = rows[rows.status == "launch"].error
    assert refused.str.contains("the kernel allows at most 64").all(), refused.tolist()


@pytest.mark.parametrize(
    ("error", "stage", "status"),
    [
        (LaunchRefused("launch refused: 128 threads a block, the kernel allows at most 64"), "verify", "launch"),
        (RuntimeError("CUDA Driver error: CUDA_ERROR_ILLEGAL_ADDRESS"), "verify", "runtime"),
    ],
)
def test_a_refusal_for_the_block_size_is_a_launch_failure_and_other_errors_stay_runtime(error, stage, status):
    """The backend raises LaunchRefused for a block beyond the kernel's __launch_bounds__ (the driver's
    CUDA_ERROR_INVALID_VALUE, which Kernel Tuner would pass on as any other error); the GPU test above sees it."""
    from types import SimpleNamespace

    from tuner.measure.evaluate import evaluate

    class Runner:
        dev = SimpleNamespace()

        def run(self, configs, tuning_options):
            self.dev._tuner_stage = stage
            raise error

    row = evaluate(Runner(), {}, ["block_size_x"], [128])
    assert row["status"] == status and str(error) in row["error"]


def test_a_launch_kernel_tuner_skipped_keeps_the_drivers_reason():
    """Kernel Tuner turns a launch refused for too many registers into a bare RuntimeFailedConfig; the row says
    why, from what the backend kept (tuner/measure/cubin_backend.py), and a later failure starts without it."""
    from types import SimpleNamespace

    from kernel_tuner import util

    from tuner.measure.evaluate import evaluate

    reason = "CUDA Driver error: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: 1024 threads a block, the kernel allows at most 512"

    class Runner:
        dev = SimpleNamespace(dev=SimpleNamespace(launch_refused="left from the last config"))

        def __init__(self, refusal):
            self.refusal = refusal

        def run(self, configs, tuning_options):
            if self.refusal:
                self.dev.dev.launch_refused = self.refusal
            return [{"block_size_x": configs[0][0], "__error__": util.RuntimeFailedConfig()}]

    row = evaluate(Runner(reason), {}, ["block_size_x"], [1024])
    assert row["status"] == "launch" and row["error"] == f"RuntimeFailedConfig: {reason}"
    row = evaluate(Runner(None), {}, ["block_size_x"], [1024])
    assert row["status"] == "launch" and "left from" not in row["error"]
