import shutil
import subprocess

import pytest


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


def pytest_collection_modifyitems(config, items):
    # The test command runs the tests on every core (pytest-xdist, --dist loadgroup): each file's tests go to
    # one process together (their module fixtures are made once), and the tests that use the GPU all to one
    # process, so that no two of them time kernels on the GPU at once.
    for item in items:
        group = "gpu" if "gpu" in item.keywords else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
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
