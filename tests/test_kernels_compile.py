"""Every kernel compiles alone with nvcc for sm_90, for every stored best config and a sample of each
space, so a broken kernel fails CI on a machine without a GPU (nvcc is there)."""

import json
import random
import shutil
import subprocess

import pytest

from tuner.measure import kt
from tuner.store import config_medians, load_evaluations
from tuner.workloads import BUILTINS, get_workload

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


def nvcc_compile(space, dtype, config, tmp_path):
    """What Kernel Tuner does: the config as #defines in front of the source; the dtype's defines too."""
    src = tmp_path / "k.cu"
    src.write_text(space.source_for(dtype, config))
    cmd = [NVCC, "-arch=sm_90", "-c", "-o", str(tmp_path / "k.o"), str(src),
           *space.compiler_options, "-Werror", "all-warnings"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, f"{space.workload} {dtype} {config} does not compile:\n{out.stderr[-3000:]}"


def sample(space, k, seed=0):
    configs = [dict(zip(space.params, c)) for c in kt.searchspace(space).list]
    return random.Random(seed).sample(configs, min(k, len(configs)))


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_sample_of_space_compiles(name, tmp_path):
    space = get_workload(name).space
    for dtype in space.dtypes:
        for config in sample(space, 6):
            nvcc_compile(space, dtype, config, tmp_path)


def test_stored_best_configs_compile(tmp_path):
    df = load_evaluations()
    if df.empty:
        pytest.skip("nothing stored yet")
    ok = df[df.status == "ok"]
    bests = set()  # many sizes and GPUs share a best config: each (workload, dtype, config) is compiled once
    for (workload, dtype, _size_vars, _gpu), group in ok.groupby(["workload", "dtype", "size_vars", "gpu"]):
        space = get_workload(workload).space
        bests.add((workload, dtype, config_medians(group, space.maximize).index[0]))
    for workload, dtype, best in sorted(bests):
        nvcc_compile(get_workload(workload).space, dtype, json.loads(best), tmp_path)
