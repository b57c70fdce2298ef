import os
import shutil
import subprocess
from pathlib import Path

import pytest


def pytest_configure(config):
    # What the tests derive (recordings from the store's rows, host libraries) goes to one folder of the checkout,
    # shared by the test processes and kept between runs, not to the user's cache. A test may point it elsewhere.
    os.environ.setdefault("TUNER_CACHE", str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "gpu-tuner"))


def _has_gpu() -> bool:
    try:
        from cuda.bindings import runtime

        err, count = runtime.cudaGetDeviceCount()
        return int(err) == 0 and count > 0
    except Exception:
        pass
    if shutil.which("nvidia-smi"):
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    return False


SHARED_FIXTURES = {"tests.test_distributed", "tests.test_query_export"}  # module-scoped fixtures


@pytest.hookimpl(tryfirst=True)  # the groups must be marked before pytest-xdist reads them (its own hook)
def pytest_collection_modifyitems(config, items):
    # The test command runs the tests on every core (pytest-xdist, --dist loadgroup), each test where a process
    # is free, but the tests that use the GPU all in one process, so that no two of them time kernels on the GPU
    # at once, and a file with module fixtures in one process, so that they are made once.
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("gpu"))
        elif item.module.__name__ in SHARED_FIXTURES:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def results(tmp_path, monkeypatch):
    """An empty results directory used by the store for the duration of a test."""
    root = tmp_path / "results"
    root.mkdir()
    monkeypatch.setenv("TUNER_RESULTS", str(root))
    return root
