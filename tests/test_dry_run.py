"""`tuner tune NAME --dry-run` (tuner.measure.dry_run): a workload checked without a GPU, compiled as a campaign
compiles it (nvcc here, where cuda-python is not installed): what works passes, and each mistake a user makes in
a new workload is one line and exit 1."""

import json
import shutil

import pytest

from tuner.cli import main
from tuner.measure.dry_run import dry_run, unread_parameters
from tuner.workloads import get_workload
from tuner.workloads.declared import DeclaredWorkload
from tuner.workloads.scaffold import init_workload

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


@pytest.fixture
def saxpy(tmp_path, monkeypatch):
    """The example workload of `tuner init`, in a project folder of its own (the working directory)."""
    monkeypatch.chdir(tmp_path)
    folder = init_workload("my-saxpy", tmp_path / "workloads")
    return folder


@pytest.fixture
def one_build(monkeypatch):
    """One config compiled, not three, where the test is not about how many."""
    monkeypatch.setattr("tuner.measure.dry_run.COMPILED", 1)


def levels(report):
    return [f.level for f in report.findings]


def test_the_example_passes(saxpy, capsys):
    report = dry_run(DeclaredWorkload("my-saxpy", saxpy / "space.yaml"), None, None)
    assert (report.size, report.dtype, report.problems) == ("small", "float32", 0)
    assert levels(report) == ["ok"] * 5  # valid configs, three builds, the reference
    assert report.findings[0].text == "27 valid configs of 30 (2 parameters)"
    assert sum("builds (sm_" in f.text for f in report.findings) == 3
    assert main(["tune", "my-saxpy", "--dry-run", "--dtype", "float64"]) == 0
    out = capsys.readouterr().out
    assert "my-saxpy small float64: dry run, nothing measured" in out
    assert "next: tuner tune my-saxpy on a machine with a GPU" in out


def test_a_wrong_kernel_name_and_an_unread_parameter(saxpy, one_build, capsys):
    space = saxpy / "space.yaml"
    text = space.read_text().replace("  name: saxpy", "  name: saxpi").replace("\nparameters:\n", "\nparameters:\n  UNROLL: [1, 2]\n")
    space.write_text(text)
    assert main(["tune", "my-saxpy", "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert "problem: my-saxpy.cu has no __global__ function saxpi (the space's kernel.name); it has saxpy" in out
    assert "warning: parameter UNROLL is not read by the kernel source" in out
    assert "1 problem(s): a campaign would fail on them" in out


def test_a_compile_error_quotes_the_compiler(saxpy, capsys):
    """Once: the three configs built fail alike, a mistake of the source's, named by the kernel file's own line
    (the #defines put in front of it do not shift the line numbers)."""
    kernel = saxpy / "my-saxpy.cu"
    lines = kernel.read_text().splitlines()
    wrong = next(i for i, line in enumerate(lines, 1) if "+ threadIdx.x;" in line)
    kernel.write_text(kernel.read_text().replace("+ threadIdx.x;", "+ threadIdx.x + no_such_name;", 1))
    assert main(["tune", "my-saxpy", "--dry-run", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    problems = [f["text"] for f in doc["findings"] if f["level"] == "problem"]
    assert len(problems) == 1 and "does not build (and 2 more configs alike): " in problems[0]
    assert all("does not build" in p and 'identifier "no_such_name" is undefined' in p for p in problems)
    assert f"my-saxpy.cu({wrong}): error" in problems[0]


def test_a_kernel_found_only_by_compiling(saxpy, one_build):
    """Where the source's __global__ functions cannot be read (a macro makes them), the cubin built is searched."""
    kernel = saxpy / "my-saxpy.cu"
    text = kernel.read_text().replace("__global__ void saxpy(", "KERNEL(saxpy)(", 1)
    kernel.write_text('#define KERNEL(name) extern "C" __global__ void name\n' + text.replace('extern "C" KERNEL', "KERNEL"))
    workload = DeclaredWorkload("my-saxpy", saxpy / "space.yaml")
    assert dry_run(workload, None, None).problems == 0
    space = saxpy / "space.yaml"
    space.write_text(space.read_text().replace("  name: saxpy", "  name: saxpy2"))
    report = dry_run(DeclaredWorkload("my-saxpy", space), None, None)
    assert report.problems == 1
    assert all("no kernel named saxpy2 in what the source builds" in f.text for f in report.findings if f.level == "problem")


def test_a_reference_that_raises_is_a_problem(saxpy, one_build):
    class Broken(DeclaredWorkload):
        def answer(self, args, size, dtype):
            raise ValueError("shapes do not match")

    report = dry_run(Broken("my-saxpy", saxpy / "space.yaml"), "n=1000", "float32")
    assert report.findings[-1].level == "problem"
    assert report.findings[-1].text == "the reference answer could not be computed: ValueError: shapes do not match"


def test_dry_run_is_not_a_replay(saxpy, capsys):
    assert main(["tune", "my-saxpy", "--dry-run", "--simulate"]) == 2
    assert "--dry-run measures nothing: leave out --simulate and --workers" in capsys.readouterr().err


def test_the_built_in_spaces_read_every_parameter():
    from tuner.workloads import BUILTINS

    assert {name: unread_parameters(get_workload(name).space) for name in BUILTINS} == {n: [] for n in BUILTINS}


def test_cpu_code_builds_with_its_own_compiler(one_build, capsys):
    assert main(["tune", "floyd-warshall-cpu", "--dry-run", "--size", "n=256"]) == 0
    out = capsys.readouterr().out
    assert out.count("builds (g++)") == 1 and "next: tuner tune floyd-warshall-cpu\n" in out


def test_a_reference_run_on_the_gpu_is_not_checked_without_one(saxpy, one_build):
    space = saxpy / "space.yaml"
    space.write_text(space.read_text().replace('  expression: {y: "a * x + y"}', "  config: {block_size_x: 256, WPT: 1}"))
    report = dry_run(DeclaredWorkload("my-saxpy", space), "n=1000", "float32", gpu_here=False)
    assert report.problems == 0
    assert [(f.level, f.text) for f in report.findings[-2:]] == [
        ("ok", "4 arguments made"),
        ("warning", "the reference answer runs the space's reference config on a GPU: not checked here"),
    ]


def test_an_answer_of_the_wrong_length_is_a_problem(saxpy, one_build):
    class Short(DeclaredWorkload):
        def answer(self, args, size, dtype):
            return [None]

    report = dry_run(Short("my-saxpy", saxpy / "space.yaml"), "n=1000", "float32")
    assert report.findings[-1].level == "problem"
    assert report.findings[-1].text.startswith("the answer has 1 entries for 4 arguments")


def test_a_kernel_that_includes_a_header_beside_it_builds(saxpy, one_build):
    """Kernel Tuner builds from a copy of the text: the kernel's folder goes on the include path (build_flags)."""
    (saxpy / "scale.h").write_text("#define SCALE_BY(x) (x)\n")
    kernel = saxpy / "my-saxpy.cu"
    kernel.write_text('#include "scale.h"\n' + kernel.read_text().replace("+ threadIdx.x;", "+ SCALE_BY(threadIdx.x);", 1))
    workload = DeclaredWorkload("my-saxpy", saxpy / "space.yaml")
    assert workload.space.build_flags[-1] == f"-I{saxpy.resolve()}"
    assert workload.space.build_flags[:-1] == workload.space.compiler_options  # provenance keeps the options
    report = dry_run(workload, None, None)
    assert report.problems == 0, report.findings


# ---- on a GPU: what the dry run checked, measured -------------------------------------------------------------
@pytest.mark.gpu
def test_a_workload_with_a_local_header_and_a_restriction_kernel_tuner_cannot_parse_tunes(saxpy):
    """The two things a dry run now lets through, live: a kernel that #includes a file beside it (the kernel's
    folder on NVRTC's include path) and a restriction Kernel Tuner's parser would refuse (`ceil`: given to it
    as a constraint our checker evaluates). Every config measured is verified; the dry run compiles for this
    GPU's architecture."""
    import os
    import subprocess
    import sys

    (saxpy / "scale.h").write_text("#define SCALE_BY(x) (x)\n")
    kernel = saxpy / "my-saxpy.cu"
    kernel.write_text('#include "scale.h"\n' + kernel.read_text().replace("+ threadIdx.x;", "+ SCALE_BY(threadIdx.x);", 1))
    space = saxpy / "space.yaml"
    space.write_text(space.read_text().replace("\nrestrictions:\n", '\nrestrictions:\n  - "ceil(block_size_x / 64) * WPT <= 32"\n', 1))
    env = {**os.environ, "TUNER_WORKLOADS": str(saxpy.parent), "TUNER_RESULTS": str(saxpy.parent.parent / "results")}
    run = lambda *args: subprocess.run([sys.executable, "-m", "tuner", *args], cwd=saxpy.parent.parent, env=env,  # noqa: E731
                                       capture_output=True, text=True, timeout=600)
    dry = run("tune", "my-saxpy", "--dry-run")
    assert dry.returncode == 0 and "no GPU here" not in dry.stdout, dry.stdout + dry.stderr
    out = run("tune", "my-saxpy", "--budget", "8", "--quiet", "--json")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert result["evaluated"] == 8 and not result["failures"] and result["best"]
    best = result["best"]["config"]
    assert -(-best["block_size_x"] // 64) * best["WPT"] <= 32
