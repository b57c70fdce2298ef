"""`tuner init` (tuner.workloads.scaffold.init_workload): the saxpy example, a skeleton around a user's
kernel, a T1 import; refusals that write nothing. The example's kernel is compiled with nvcc as CI compiles
every built-in kernel (tests/test_kernels_compile.py)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tuner.errors import TunerError
from tuner.space import load_space
from tuner.workloads.declared import DeclaredWorkload, first_valid_config
from tuner.workloads.scaffold import init_workload
from tuner.workloads.signature import global_functions

NVCC = shutil.which("nvcc")

USER_KERNEL = r"""
// a user's file: two kernels, the first is the one to tune
#define TILE 4
__global__ void __launch_bounds__(256) scale(float *out, const float *__restrict__ in, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = factor * in[i];
}
/* __global__ void commented_out(int x) {} */
template <typename T>
__global__ void helper(T *data, unsigned int count) {}
"""


def declared(folder: Path) -> DeclaredWorkload:
    return DeclaredWorkload(folder.name, folder / "space.yaml")


# ---- the example -------------------------------------------------------------------------------------------
def test_example_workload(tmp_path):
    folder = init_workload("my-saxpy", tmp_path / "workloads")
    assert folder == tmp_path / "workloads" / "my-saxpy"
    assert sorted(p.name for p in folder.iterdir()) == ["my-saxpy.cu", "space.yaml"]
    assert sorted(os.listdir(tmp_path / "workloads")) == ["my-saxpy"]  # no temporary folder left
    space = load_space(folder / "space.yaml")
    assert space.workload == "my-saxpy" and space.kernel_name == "saxpy"
    assert space.kernel_source == (folder / "my-saxpy.cu").resolve()  # named relative to the space file
    assert space.sizes == {"small": {"n": 1048576}, "large": {"n": 67108864}} and space.default_size == "small"
    assert space.objective == "GB/s" and space.maximize and list(space.dtypes) == ["float32", "float64"]
    assert space.params["block_size_x"] == [32, 64, 128, 256, 512, 1024] and space.restrictions
    assert not space.is_valid({"block_size_x": 1024, "WPT": 16}) and space.is_valid({"block_size_x": 256, "WPT": 16})
    assert "#" in (folder / "space.yaml").read_text()  # commented, to learn from

    w = declared(folder)
    size = {"n": 5000}
    args = w.arguments(size, "float32", np.random.default_rng(0))
    n, a, x, y = args
    assert n == 5000 and a == np.float32(2.5) and x.shape == y.shape == (5000,) and x.dtype == np.float32
    expected = (2.5 * x.astype(np.float64) + y).astype(np.float32)
    assert np.array_equal(w.answer(args, size, "float32")[3], expected)


def test_example_space_searches(tmp_path):
    from tuner.measure import kt

    space = load_space(init_workload("ex", tmp_path) / "space.yaml")
    configs = kt.searchspace(space).list
    assert len(configs) == sum(1 for b in (32, 64, 128, 256, 512, 1024) for w in (1, 2, 4, 8, 16) if b * w <= 4096)
    assert space.grid_dims({"block_size_x": 256, "WPT": 4}, {"n": 1048576}) == [1024, 1, 1]


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_example_kernel_compiles_for_sm90(tmp_path):
    """As Kernel Tuner compiles it: the config's #defines, then the dtype's, in front of the source."""
    space = load_space(init_workload("ex", tmp_path / "w") / "space.yaml")
    first = first_valid_config(space.params, space.restrictions)
    last = {"block_size_x": 256, "WPT": 16}
    for dtype, config in (("float32", first), ("float64", last)):
        src = tmp_path / f"k_{dtype}.cu"
        src.write_text(space.source_for(dtype, config))
        cmd = [
            NVCC,
            "-arch=sm_90",
            "-c",
            "-o",
            str(tmp_path / "k.o"),
            str(src),
            *space.compiler_options,
            "-Werror",
            "all-warnings",
        ]
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0, f"{dtype} {config}:\n{out.stderr[-3000:]}"


def test_the_registry_finds_it(tmp_path, monkeypatch):
    """A folder in the project's workloads folder is a workload by its folder's name, with no Python."""
    from tuner.workloads import get_workload

    init_workload("found-me", tmp_path / "workloads")
    monkeypatch.setenv("TUNER_WORKLOADS", str(tmp_path / "workloads"))
    w = get_workload("found-me")
    assert isinstance(w, DeclaredWorkload) and w.space.workload == "found-me"
    assert len(w.arguments({"n": 64}, "float64", np.random.default_rng(0))) == 4


# ---- a user's kernel ---------------------------------------------------------------------------------------
def test_kernel_skeleton(tmp_path):
    kernel = tmp_path / "src" / "scale.cu"
    kernel.parent.mkdir()
    kernel.write_text(USER_KERNEL)
    folder = init_workload("scale", tmp_path / "workloads", kernel=kernel)
    assert sorted(p.name for p in folder.iterdir()) == ["scale.cu", "space.yaml"]
    assert (folder / "scale.cu").read_text() == USER_KERNEL
    text = (folder / "space.yaml").read_text()
    assert "TODO" in text and "also has helper" in text and "commented_out" not in text
    space = load_space(folder / "space.yaml")  # loads as it is
    assert space.kernel_name == "scale" and space.params == {"block_size_x": [32, 64, 128, 256, 512, 1024]}
    assert [a["name"] for a in space.doc["arguments"]] == ["out", "in_", "factor", "n"]
    out, inp, factor, n = declared(folder).arguments({"n": 100}, "float32", np.random.default_rng(0))
    assert out.shape == inp.shape == (100,) and out.dtype == np.float32 and factor == 1.0 and n == 100


def test_global_functions():
    assert [name for name, _ in global_functions(USER_KERNEL)] == ["scale", "helper"]
    assert global_functions('extern "C" __global__ void k(int n) {}') == [("k", "int n")]


def test_a_file_without_kernels_is_refused(tmp_path):
    kernel = tmp_path / "host.cu"
    kernel.write_text("int main() { return 0; }\n")
    with pytest.raises(TunerError, match=r"host\.cu: no __global__ function found"):
        init_workload("host", tmp_path / "w", kernel=kernel)
    assert not (tmp_path / "w" / "host").exists()


# ---- a T1 file ---------------------------------------------------------------------------------------------
def t1_files(tmp_path) -> Path:
    """A T1 file beside a kernels folder; the kernel is named relative to the T1 file."""
    bench = tmp_path / "bench"
    (bench / "kernels").mkdir(parents=True)
    (bench / "kernels" / "vadd.cu").write_text(
        'extern "C" __global__ void vadd(float *c, const float *a, const float *b, int n) {\n'
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}\n"
    )
    doc = {
        "ConfigurationSpace": {
            "TuningParameters": [{"Name": "block_size_x", "Type": "int", "Values": "[64, 128, 256]"}]
        },
        "KernelSpecification": {
            "Language": "CUDA",
            "KernelName": "vadd",
            "KernelFile": "kernels/vadd.cu",
            "GlobalSizeType": "OpenCL",
            "LocalSize": {"X": "block_size_x"},
            "GlobalSize": {"X": "100000"},
            "Arguments": [
                {
                    "Name": "c",
                    "Type": "float",
                    "Size": 100000,
                    "MemoryType": "Vector",
                    "AccessType": "WriteOnly",
                    "FillType": "Constant",
                    "FillValue": 0,
                },
                {"Name": "a", "Type": "float", "Size": 100000, "MemoryType": "Vector", "FillType": "Random"},
                {"Name": "b", "Type": "float", "Size": 100000, "MemoryType": "Vector", "FillType": "Random"},
                {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": 100000},
            ],
        },
    }
    path = bench / "vadd.json"
    path.write_text(json.dumps(doc))
    return path


def test_from_t1(tmp_path, monkeypatch):
    t1 = t1_files(tmp_path)
    monkeypatch.chdir(tmp_path)  # the kernel is found beside the T1 file, not in the working directory
    folder = init_workload("vadd", tmp_path / "workloads", t1=t1)
    assert sorted(p.name for p in folder.iterdir()) == ["space.yaml", "vadd.cu"]
    space = load_space(folder / "space.yaml")
    assert space.kernel_name == "vadd" and space.doc["reference"] == {"config": {"block_size_x": 64}}
    assert space.grid_dims({"block_size_x": 128}, space.sizes["default"]) == [782, 1, 1]
    c, a, b, n = declared(folder).arguments(space.sizes["default"], "float32", np.random.default_rng(0))
    assert c.shape == (100000,) and n == 100000


def test_from_t1_with_another_kernel(tmp_path):
    t1 = t1_files(tmp_path)
    mine = tmp_path / "mine.cu"
    mine.write_text((tmp_path / "bench" / "kernels" / "vadd.cu").read_text())
    folder = init_workload("vadd2", tmp_path / "workloads", t1=t1, kernel=mine)
    assert sorted(p.name for p in folder.iterdir()) == ["mine.cu", "space.yaml"]
    assert load_space(folder / "space.yaml").kernel_source.name == "mine.cu"


def test_from_t1_without_its_kernel(tmp_path):
    t1 = t1_files(tmp_path)
    (tmp_path / "bench" / "kernels" / "vadd.cu").unlink()
    with pytest.raises(
        TunerError,
        match=r"vadd\.json: at KernelSpecification\.KernelFile: 'kernels/vadd\.cu' does not "
        r"exist .*give the kernel with --kernel",
    ):
        init_workload("vadd", tmp_path / "workloads", t1=t1)
    assert not (tmp_path / "workloads" / "vadd").exists()


# ---- refusals -----------------------------------------------------------------------------------------------
def test_an_existing_folder_is_refused(tmp_path):
    (tmp_path / "w" / "taken").mkdir(parents=True)
    (tmp_path / "w" / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(TunerError) as e:
        init_workload("taken", tmp_path / "w")
    assert str(e.value) == f"{tmp_path / 'w' / 'taken'}: already exists; choose another name, or remove it first"
    assert os.listdir(tmp_path / "w" / "taken") == ["notes.txt"] and os.listdir(tmp_path / "w") == ["taken"]


@pytest.mark.parametrize("name", ["../escape", "Upper", "a/b", "9lives", "", "white space"])
def test_a_bad_name_is_refused(tmp_path, name):
    with pytest.raises(TunerError, match="not a valid workload name"):
        init_workload(name, tmp_path / "w")
    assert not (tmp_path / "w").exists() and not (tmp_path / "escape").exists()


def test_nothing_is_half_written(tmp_path, monkeypatch):
    """A failure while writing is one line, and leaves neither the folder nor the temporary one."""
    real = Path.write_bytes
    calls = []

    def failing(self, data):
        calls.append(self)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing)
    with pytest.raises(TunerError, match=r"w: cannot create full \(No space left on device\)"):
        init_workload("full", tmp_path / "w")
    assert len(calls) == 2 and os.listdir(tmp_path / "w") == []


def test_a_missing_kernel_file_is_refused(tmp_path):
    with pytest.raises(TunerError, match=r"nope\.cu: no such kernel file"):
        init_workload("x", tmp_path / "w", kernel=tmp_path / "nope.cu")


# ---- on a GPU: tuned as it is ---------------------------------------------------------------------------------
@pytest.mark.gpu
def test_example_tunes_without_edits(tmp_path):
    """`tuner tune <name>` on the example, as written by `tuner init`: every config measured is checked."""
    init_workload("ex-tune", tmp_path / "workloads")
    env = {**os.environ, "TUNER_WORKLOADS": str(tmp_path / "workloads"), "TUNER_RESULTS": str(tmp_path / "results")}
    out = subprocess.run(
        [sys.executable, "-m", "tuner", "tune", "ex-tune", "--budget", "6", "--quiet", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ex-tune" in out.stdout
