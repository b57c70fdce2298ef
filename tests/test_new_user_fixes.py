"""What a new user meets tuning their own kernel from a plain install (the audit of the wheel): `tuner init` into a
folder it cannot write, kernels declared with attributes, an unknown workload that says where it was looked for,
a dry run with cuda-python but no NVRTC library, `tuner baseline` without a GPU, YAML errors that point at the
mistake, a wheel without git-ignored files, and `tuner --version`."""

import errno
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

import tuner
from tuner import locations
from tuner.cli import main
from tuner.errors import TunerError
from tuner.measure import dry_run as dry_run_module
from tuner.measure.dry_run import dry_run
from tuner.measure.protocol import Fatal, MeasureSpec
from tuner.measure.runner import IsolatedRunner
from tuner.space import load_space
from tuner.workloads import registry
from tuner.workloads.declared import DeclaredWorkload
from tuner.workloads.scaffold import init_workload
from tuner.workloads.signature import global_functions

ROOT = Path(__file__).resolve().parent.parent
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder as the working directory, with the discovery caches cleared around it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TUNER_WORKLOADS", raising=False)
    monkeypatch.delenv("TUNER_RESULTS", raising=False)
    caches = (locations._project, registry._discover, registry._get)
    for cached in caches:
        cached.cache_clear()
    yield tmp_path
    for cached in caches:
        cached.cache_clear()


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err.strip()


# ---- 3: `tuner init` into a folder it cannot write --------------------------------------------------------
# The tests run as root on CI, where a read-only mode bit does not stop a write: the failure is made where the
# file system would report it (EROFS from the read-only bind mount of the audit).
def _raise(code: int):
    raise OSError(code, os.strerror(code))


def read_only(*args, **kwargs):
    _raise(errno.EROFS)


def test_init_into_a_read_only_workloads_folder_is_one_line(project, monkeypatch, capsys):
    (project / "workloads").mkdir()
    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    assert main(["init", "foo"]) == 2
    assert one_error_line(capsys) == f"error: {project / 'workloads'}: cannot create foo (Read-only file system)"
    assert os.listdir(project / "workloads") == []


def test_init_where_the_workloads_folder_cannot_be_made_is_one_line(project, monkeypatch, capsys):
    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main(["init", "foo"]) == 2
    assert "cannot create foo (Read-only file system)" in one_error_line(capsys)
    assert not (project / "workloads").exists()


@pytest.mark.parametrize("failing", ["write_bytes", "rename"])
def test_init_that_fails_half_way_leaves_nothing(project, monkeypatch, capsys, failing):
    """A file that cannot be written (a full disk) or the folder not renamed into place (no permission):
    one line, and neither the workload's folder nor the temporary one is left."""
    if failing == "write_bytes":
        monkeypatch.setattr(Path, "write_bytes", lambda *a: _raise(errno.ENOSPC))
    else:
        monkeypatch.setattr(os, "rename", lambda *a: _raise(errno.EACCES))
    assert main(["init", "foo"]) == 2
    assert re.fullmatch(
        r"error: .*workloads: cannot create foo \((No space left on device|Permission denied)\)", one_error_line(capsys)
    )
    assert os.listdir(project / "workloads") == []


# ---- 4: kernels declared with attributes -------------------------------------------------------------------
ATTRIBUTED = r"""
extern "C" __global__ void __maxnreg__(64) saxpy(int n, float a, const float *x, float *y) {}
__global__ void __cluster_dims__(2, 1, 1) clustered(float *x) {}
__global__ __launch_bounds__(256, 2) void bounded(int n) {}
__global__ void __noinline__ bare(int n) {}
__global__ void __attribute__((noinline)) gnu(int n) {}
template <typename T> __global__ void __launch_bounds__(BLOCK) __maxnreg__(32) both(T *d, unsigned int c) {}
__global__ void
split_line (int n) {}
"""


def test_kernel_attributes_are_not_names():
    assert global_functions(ATTRIBUTED) == [
        ("saxpy", "int n, float a, const float *x, float *y"),
        ("clustered", "float *x"),
        ("bounded", "int n"),
        ("bare", "int n"),
        ("gnu", "int n"),
        ("both", "T *d, unsigned int c"),
        ("split_line", "int n"),
    ]


def test_init_kernel_reads_a_kernel_with_maxnreg(tmp_path):
    kernel = tmp_path / "mine.cu"
    kernel.write_text(ATTRIBUTED)
    folder = init_workload("mine", tmp_path / "workloads", kernel=kernel)
    space = load_space(folder / "space.yaml")
    assert space.kernel_name == "saxpy"
    assert [a["name"] for a in space.doc["arguments"]] == ["n", "a", "x", "y"]


@needs_nvcc
@pytest.mark.parametrize("attribute", ["__maxnreg__(64)", "__cluster_dims__(2, 1, 1)"])
def test_the_dry_run_finds_a_kernel_with_an_attribute(project, monkeypatch, attribute):
    monkeypatch.setattr("tuner.measure.dry_run.COMPILED", 1)
    folder = init_workload("my-saxpy", project / "workloads")
    kernel = folder / "my-saxpy.cu"
    kernel.write_text(kernel.read_text().replace("__global__ void saxpy(", f"__global__ void {attribute} saxpy(", 1))
    report = dry_run(DeclaredWorkload("my-saxpy", folder / "space.yaml"), None, None)
    assert report.problems == 0, report.findings


# ---- 6: an unknown workload says where it was looked for --------------------------------------------------
def test_unknown_workload_from_inside_its_folder(project, monkeypatch, capsys):
    folder = init_workload("saxpy", project / "workloads")
    monkeypatch.chdir(folder)
    assert main(["tune", "saxpy", "--dry-run"]) == 2
    err = one_error_line(capsys)
    assert err.startswith("error: unknown workload 'saxpy'; known: ")
    assert f"looked for your workloads in {folder / 'workloads'} (no tuner.toml or [tool.tuner] in {folder}" in err
    assert ": no such folder" in err
    assert (
        f"the working directory {folder} is a workload's folder: run tuner from the project's folder (cd ../..)" in err
    )


def test_unknown_workload_names_a_space_yml_and_a_folder_without_a_space_file(project, capsys):
    folder = init_workload("saxpy", project / "workloads")
    (folder / "space.yaml").rename(folder / "space.yml")
    (project / "workloads" / "empty").mkdir()
    (project / "tuner.toml").write_text("")
    assert main(["tune", "saxpy", "--dry-run"]) == 2
    err = one_error_line(capsys)
    assert f"looked for your workloads in {project / 'workloads'} (the project of {project / 'tuner.toml'})" in err
    assert err.endswith("; workloads/saxpy has space.yml, not space.yaml: rename it; workloads/empty has no space.yaml")


def test_unknown_workload_run_from_the_workloads_folder(project, monkeypatch, capsys):
    init_workload("saxpy", project / "workloads")
    monkeypatch.chdir(project / "workloads")
    with pytest.raises(
        TunerError, match="holds workload folders: run tuner from the folder above it, or give `--workloads .`"
    ):
        registry.get_workload("saxpy")


def test_unknown_workload_where_there_is_no_workloads_folder(project):
    with pytest.raises(TunerError) as e:
        registry.get_workload("nothing-here")
    assert str(e.value).endswith(
        ": no such folder; run tuner from your project's folder, or name its workloads folder with --workloads DIR "
        'or in a tuner.toml (workloads = "DIR")'
    )


# ---- 7: a dry run with cuda-python but without NVRTC's library ----------------------------------------------
class DynamicLibNotFoundError(RuntimeError):
    """As cuda.pathfinder (cuda-python 12.9 and later) names it; its own module is private and not installed here."""


LOADER_ERRORS = [
    DynamicLibNotFoundError(
        'Failure finding "libnvrtc.so.13 or libnvrtc.so.12": No such file: libnvrtc.so.13 or libnvrtc.so.12, '
        "No such file: libnvrtc.so.13 or libnvrtc.so.12\n"
    ),
    RuntimeError("Failed to dlopen libnvrtc.so.12"),  # older cuda-bindings
]


@pytest.mark.parametrize("error", LOADER_ERRORS, ids=["pathfinder", "dlopen"])
def test_nvrtc_that_cannot_be_loaded_is_recognised(error):
    assert dry_run_module.nvrtc_unloadable(error)


def test_a_compile_error_is_not_a_missing_nvrtc():
    assert not dry_run_module.nvrtc_unloadable(
        RuntimeError("NVRTC error: NVRTC_ERROR_COMPILATION\nCUDAProgram(12): error: x")
    )


@needs_nvcc
@pytest.mark.parametrize("error", LOADER_ERRORS, ids=["pathfinder", "dlopen"])
def test_the_dry_run_falls_back_to_nvcc_where_nvrtc_cannot_be_loaded(project, monkeypatch, error):
    calls = []

    def unloadable(job):
        calls.append(job)
        raise error

    monkeypatch.setattr("tuner.measure.compile_pool.nvrtc_cubin", unloadable)
    folder = init_workload("my-saxpy", project / "workloads")
    report = dry_run(DeclaredWorkload("my-saxpy", folder / "space.yaml"), None, None)
    assert report.problems == 0, report.findings
    assert sum("builds (sm_" in f.text for f in report.findings) == 3
    warnings = [f.text for f in report.findings if f.level == "warning"]
    assert len(warnings) == 1 and "libnvrtc" in warnings[0] and "built with nvcc instead" in warnings[0]
    assert len(calls) == 1  # NVRTC is tried once, not for every config


# ---- 8: `tuner baseline` without a GPU says it as `tuner tune` does ---------------------------------------------
NO_DRIVER = "no CUDA driver on this machine (libcuda.so.1 not found)"


def cannot_start_main(conn, spec):
    """A measuring process that cannot start, as the real one fails without cuda-python."""
    conn.send(Fatal("ImportError: cuda-python not installed, install using 'pip install cuda-python'"))


def test_a_measuring_process_that_cannot_start_says_what_the_machine_lacks(monkeypatch):
    monkeypatch.setattr("tuner.measure.machine.gpu_missing", lambda backend: NO_DRIVER)
    runner = IsolatedRunner(
        MeasureSpec("reduction", {"n": 1024}, "float32", "nvcuda", 0, None), timeout=30, target=cannot_start_main
    )
    with pytest.raises(TunerError) as e:
        runner.start()
    assert str(e.value) == f"cannot measure here: {NO_DRIVER}"


def test_baseline_and_tune_say_the_same(project, monkeypatch, capsys):
    """In a new project, whose store is empty: both answer from the recordings shipped with the built-ins."""
    monkeypatch.setattr("tuner.measure.machine.gpu_missing", lambda backend: NO_DRIVER)
    monkeypatch.setattr("tuner.answers.baseline.measure_target", cannot_start_main)
    assert main(["tune", "reduction", "--budget", "1"]) == 2
    tune = one_error_line(capsys)
    assert main(["baseline", "reduction"]) == 2
    baseline = one_error_line(capsys)
    assert baseline == f"error: cannot measure here: {NO_DRIVER}" and tune.startswith(baseline + ";")


def test_a_machine_with_a_gpu_keeps_the_process_own_error(monkeypatch):
    monkeypatch.setattr("tuner.measure.machine.gpu_missing", lambda backend: None)
    runner = IsolatedRunner(MeasureSpec("reduction", {"n": 1024}, "float32", "nvcuda", 0, None), timeout=30)
    assert runner._cannot_start("ValueError: bad size") == "cannot run on this machine: ValueError: bad size"


def test_cpu_code_is_not_said_to_lack_a_gpu(monkeypatch):
    monkeypatch.setattr("tuner.measure.machine.gpu_missing", lambda backend: NO_DRIVER)
    runner = IsolatedRunner(MeasureSpec("gemm-cpu", {}, "float32", "nvcuda", 0, None), timeout=30)
    assert runner._cannot_start("OSError: g++ missing") == "cannot run on this machine: OSError: g++ missing"


# ---- 10: space-file errors that point at the mistake --------------------------------------------------------
def saxpy_space(tmp_path: Path) -> Path:
    return init_workload("sx", tmp_path / "workloads") / "space.yaml"


def test_an_unclosed_list_is_said_where_it_opens(tmp_path):
    space = saxpy_space(tmp_path)
    text = space.read_text().replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1, 2, 4, 8, 16")
    space.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.startswith("  WPT:"))
    with pytest.raises(TunerError) as e:
        load_space(space)
    message = str(e.value)
    assert message.startswith(
        f"{space}: not valid YAML (line {line}, column 8): the list opened with '[' here is not closed"
    )
    assert "'?'" not in message and "but got a key at line" in message


def test_a_misindented_line_names_no_yaml_token(tmp_path):
    space = saxpy_space(tmp_path)
    space.write_text(space.read_text().replace("  WPT: [1, 2, 4, 8, 16]", " WPT: [1, 2, 4, 8, 16]"))
    with pytest.raises(TunerError, match=r"not valid YAML \(line \d+, column 2\): this line is indented unlike") as e:
        load_space(space)
    assert "<" not in str(e.value)


def test_a_mistyped_kernel_key_is_named_with_the_right_one(tmp_path):
    space = saxpy_space(tmp_path)
    space.write_text(space.read_text().replace("  source: sx.cu", "  src: sx.cu"))
    with pytest.raises(TunerError, match=r"at kernel: unknown key 'src' \(known: .*\); did you mean 'source'\?"):
        load_space(space)


def test_a_missing_kernel_key_is_still_said_as_missing(tmp_path):
    space = saxpy_space(tmp_path)
    space.write_text(space.read_text().replace("  source: sx.cu", ""))
    with pytest.raises(TunerError, match=r"at kernel: missing key 'source'"):
        load_space(space)


# ---- 11: the wheel carries no git-ignored files ---------------------------------------------------------------
def test_the_wheel_leaves_out_simulated_campaigns_and_caches(tmp_path):
    """Built from a copy of the checkout without .gitignore (as from the sdist): the exclusions of pyproject.toml
    alone keep a developer's simulated campaigns and Kernel Tuner caches out; the recordings, spaces, kernels and
    reference data stay in."""
    src = tmp_path / "src"
    for part in ("tuner", "spaces", "kernels", "data/locvolcalib/reference"):
        shutil.copytree(ROOT / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    store = src / "results" / "store"
    planted = {
        "nvidia-h200/reduction/evaluations/reduction-part.parquet": True,
        "simulated/nvidia-h200/spmv/evaluations/spmv-partial.parquet": False,
        "nvidia-h200/reduction/reduction-large.cache.json": False,
    }
    for path in planted:
        (store / path).parent.mkdir(parents=True, exist_ok=True)
        (store / path).write_bytes(b"x")
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0 and "hatchling" in out.stderr:
        pytest.skip(f"the build backend cannot be installed here: {out.stderr[-300:]}")
    assert out.returncode == 0, out.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path, shipped in planted.items():
        assert (f"tuner/_builtin/results/{path}" in names) == shipped, path
    assert {
        "tuner/__init__.py",
        "tuner/space/space.schema.json",
        "tuner/_builtin/spaces/reduction.yaml",
        "tuner/_builtin/data/locvolcalib/reference/finpar-small.txt",
    } <= names
    assert any(n.startswith("tuner/_builtin/kernels/") for n in names)
    assert wheel.name == f"gpu_tuner-{tuner.__version__}-py3-none-any.whl"


# ---- 12: --version, and a tour that finishes ---------------------------------------------------------------------
def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"tuner {tuner.__version__}\n"


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_the_tour_compares_strategies_in_a_few_repeats(doc):
    lines = [s for s in (ROOT / doc).read_text().splitlines() if s.startswith("tuner compare-strategies reduction")]
    assert lines and all("--repeats 5" in s for s in lines)


def test_a_misspelt_workload_name_suggests_the_nearest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["best", "gemn"]) == 2
    err = capsys.readouterr().err
    assert "unknown workload 'gemn'; known: " in err and "; did you mean 'gemm'; " in err
    assert main(["best", "saxpy"]) == 2
    assert "did you mean" not in capsys.readouterr().err  # nothing near: no guess
