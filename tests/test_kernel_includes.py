"""A kernel's local headers (`#include "common.cuh"`): `tuner init` copies them into the workload's folder (and
says so, and what it could not copy), the kernel hash covers them (a built-in's, without any, is what it was),
and a kernel that includes one builds (a dry run with nvcc)."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tuner.measure.provenance import kernel_hash
from tuner.space import load_space
from tuner.space.includes import quoted_includes
from tuner.space.model import Space
from tuner.workloads import discover, get_workload
from tuner.workloads.declared import DeclaredWorkload
from tuner.workloads.scaffold import init_workload

KERNEL = r"""#include "common.cuh"
#include "inc/ops.cuh"
#include <cuda_fp16.h>
extern "C" __global__ void dbl(float *out, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = twice(OFFSET + x[i]);
}
"""


def old_hash(text: str) -> str:
    """The kernel hash as it was before includes were hashed: the main source's text alone."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.fixture
def src(tmp_path) -> Path:
    """A kernel beside its headers: one beside it, one in a subfolder that includes another beside itself and,
    through `..`, the first one again."""
    folder = tmp_path / "src"
    (folder / "inc").mkdir(parents=True)
    (folder / "common.cuh").write_text("#pragma once\n#define OFFSET 0.0f\n")
    (folder / "inc" / "ops.cuh").write_text('#pragma once\n#include "../common.cuh"\n#include "twice.cuh"\n')
    (folder / "inc" / "twice.cuh").write_text(
        "#pragma once\n__device__ inline float twice(float v) { return 2 * v; }\n"
    )
    (folder / "k.cu").write_text(KERNEL)
    (folder / "unrelated.cuh").write_text("// not included: not copied\n")
    return folder / "k.cu"


def files_of(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


# ---- tuner init ----------------------------------------------------------------------------------------------
def test_init_copies_the_local_headers_keeping_their_places(tmp_path, src):
    said: list[str] = []
    folder = init_workload("dbl", tmp_path / "workloads", kernel=src, log=said.append)
    assert files_of(folder) == ["common.cuh", "inc/ops.cuh", "inc/twice.cuh", "k.cu", "space.yaml"]
    for name in ("common.cuh", "inc/ops.cuh", "inc/twice.cuh"):
        assert (folder / name).read_bytes() == (src.parent / name).read_bytes()
    assert said == ["copied common.cuh, inc/ops.cuh, inc/twice.cuh: the local files k.cu #includes"]
    assert sorted(os.listdir(tmp_path / "workloads")) == ["dbl"]  # no temporary folder left
    # the workload's hash is the source's: the same files, at the same places
    assert kernel_hash(load_space(folder / "space.yaml")) == kernel_hash(KernelOnly(src))


def test_init_refuses_a_header_outside_the_kernels_folder_and_says_so(tmp_path, src, capsys):
    (tmp_path / "shared.h").write_text("#define SHARED 1\n")
    src.write_text('#include "../shared.h"\n#include "missing.h"\n' + KERNEL)
    folder = init_workload("dbl", tmp_path / "workloads", kernel=src)  # said on standard error
    assert files_of(folder) == ["common.cuh", "inc/ops.cuh", "inc/twice.cuh", "k.cu", "space.yaml"]
    assert not (tmp_path / "workloads" / "shared.h").exists()  # nothing written outside the workload's folder
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "copied common.cuh, inc/ops.cuh, inc/twice.cuh: the local files k.cu #includes"
    assert lines[1].startswith('warning: k.cu includes "../shared.h", which is ')
    assert f"outside the kernel's folder {src.parent}: not copied" in lines[1]
    assert lines[2].startswith('warning: k.cu includes "missing.h", found neither beside it nor in ')
    assert len(lines) == 3


def test_init_without_local_includes_copies_the_kernel_alone_and_says_nothing(tmp_path, capsys):
    kernel = tmp_path / "plain.cu"
    kernel.write_text('#include <cstdio>\nextern "C" __global__ void k(float *x) {}\n')
    folder = init_workload("plain", tmp_path / "workloads", kernel=kernel)
    assert files_of(folder) == ["plain.cu", "space.yaml"]
    assert capsys.readouterr().err == ""


def test_init_from_t1_copies_its_kernels_headers(tmp_path, src):
    t1 = {
        "ConfigurationSpace": {"TuningParameters": [{"Name": "block_size_x", "Type": "int", "Values": "[64, 128]"}]},
        "KernelSpecification": {
            "Language": "CUDA",
            "KernelName": "dbl",
            "KernelFile": "src/k.cu",
            "GlobalSizeType": "CUDA",
            "LocalSize": {"X": "block_size_x"},
            "GlobalSize": {"X": "(4096 + block_size_x - 1) // block_size_x"},
            "Arguments": [
                {"Name": "out", "Type": "float", "Size": 4096, "MemoryType": "Vector", "AccessType": "WriteOnly",
                 "FillType": "Constant", "FillValue": 0},
                {"Name": "x", "Type": "float", "Size": 4096, "MemoryType": "Vector", "FillType": "Random"},
                {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": 4096},
            ],
        },
    }  # fmt: skip
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(t1))
    said: list[str] = []
    folder = init_workload("dbl-t1", tmp_path / "workloads", t1=path, log=said.append)
    assert files_of(folder) == ["common.cuh", "inc/ops.cuh", "inc/twice.cuh", "k.cu", "space.yaml"]
    assert said == ["copied common.cuh, inc/ops.cuh, inc/twice.cuh: the local files k.cu #includes"]


# ---- the kernel hash -----------------------------------------------------------------------------------------
class KernelOnly:
    """What kernel_hash reads of a space (its kernel's text and local includes, as Space reads them)."""

    def __init__(self, kernel: Path):
        self.kernel_source = kernel

    source_text = Space.source_text
    included_sources = Space.included_sources


def test_the_hash_covers_the_headers_recursively(src):
    space = KernelOnly(src)
    before = kernel_hash(space)
    assert before != old_hash(KERNEL) and kernel_hash(space) == before  # the headers count; deterministic
    assert [label for label, _ in space.included_sources] == ["common.cuh", "inc/ops.cuh", "inc/twice.cuh"]
    nested = src.parent / "inc" / "twice.cuh"
    nested.write_text(nested.read_text().replace("2 * v", "v + v"))  # a header included by a header
    after = kernel_hash(space)
    assert after != before
    (src.parent / "common.cuh").write_text("#pragma once\n#define OFFSET 1.0f\n")
    assert kernel_hash(space) not in (before, after)
    (src.parent / "unrelated.cuh").write_text("// edited\n")  # not included: no change
    assert kernel_hash(space) == kernel_hash(KernelOnly(src))


def test_a_host_library_built_with_a_header_is_built_again_once_the_header_changes(src):
    from tuner.measure.hostcode import _headers

    space = KernelOnly(src)
    before = _headers(space)  # part of the cached library's key
    assert [h.split(":")[0] for h in before] == ["common.cuh", "inc/ops.cuh", "inc/twice.cuh"]
    (src.parent / "common.cuh").write_text("#pragma once\n#define OFFSET 2.0f\n")
    assert _headers(space) != before
    assert _headers(get_workload("locvolcalib").space) == []  # no header: the key as before


def test_a_source_without_local_includes_hashes_as_before(tmp_path):
    kernel = tmp_path / "k.cu"
    text = '#include <cuda_fp16.h>\n// #include "commented.h" is no include\nextern "C" __global__ void k() {}\n'
    kernel.write_text(text)
    assert kernel_hash(KernelOnly(kernel)) == old_hash(text)
    kernel.write_text('#include "not_there.h"\n' + text)  # not found: left to the compiler, the text alone
    assert kernel_hash(KernelOnly(kernel)) == old_hash('#include "not_there.h"\n' + text)


def test_every_built_in_kernel_hashes_as_before():
    """The committed store's rows carry these hashes: a built-in whose hash moved would make them all stale."""
    checked = 0
    for name in sorted(discover()):
        space = get_workload(name).space
        assert space.included_sources == [], name
        assert kernel_hash(space) == old_hash(space.kernel_source.read_text()), name
        checked += 1
    assert checked >= 5
    assert kernel_hash(get_workload("reduction").space) == "2747a176f1d5d32c"  # as results/store records it


def test_hashing_never_fails(tmp_path):
    """Include cycles, a header that is no text, a name that is no file name: hashed, not raised."""
    kernel = tmp_path / "k.cu"
    (tmp_path / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "b.h").write_text('#include "a.h"\n#include "k.cu"\n')
    (tmp_path / "bin.h").write_bytes(b'\xff\xfe\x00\n#include "\x00"\n')
    (tmp_path / "dir.h").mkdir()  # a folder, not a header
    kernel.write_text(f'#include "a.h"\n#include "bin.h"\n#include "dir.h"\n#include "{"x" * 5000}.h"\n')
    labels = [label for label, _ in KernelOnly(kernel).included_sources]
    assert labels == ["a.h", "b.h", "bin.h"]
    assert len(kernel_hash(KernelOnly(kernel))) == 16
    missing = [i.name for i in quoted_includes(kernel) if i.path is None]
    assert missing == ["\x00", "dir.h", f"{'x' * 5000}.h"]


def test_a_nested_include_is_found_where_the_build_finds_it(tmp_path):
    """Beside the header that includes it first, else in the kernel's folder (on the include path)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "k.cu").write_text('#include "sub/a.h"\n')
    (tmp_path / "sub" / "a.h").write_text('#include "b.h"\n#include "c.h"\n')
    (tmp_path / "sub" / "b.h").write_text("// beside a.h\n")
    (tmp_path / "b.h").write_text("// in the kernel's folder: shadowed by sub/b.h\n")
    (tmp_path / "c.h").write_text("// only in the kernel's folder\n")
    found = [(i.label, i.by.name) for i in quoted_includes(tmp_path / "k.cu")]
    assert found == [("sub/a.h", "k.cu"), ("sub/b.h", "a.h"), ("c.h", "a.h")]


# ---- it builds -------------------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_dry_run_builds_a_kernel_with_local_includes(tmp_path, src, monkeypatch):
    """`tuner init --kernel`, then `tuner tune --dry-run`: the headers copied are found by the build (the
    kernel's folder on the include path), a nested one beside the header that includes it."""
    from tuner.measure.dry_run import dry_run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tuner.measure.dry_run.COMPILED", 1)
    folder = init_workload("dbl", tmp_path / "workloads", kernel=src, log=lambda line: None)
    report = dry_run(DeclaredWorkload("dbl", folder / "space.yaml"), None, None)
    assert report.problems == 0, report.findings
    assert any("builds (sm_" in f.text for f in report.findings)
    # and without the headers, the compiler says what is missing: what init now copies
    (folder / "inc" / "twice.cuh").unlink()
    report = dry_run(DeclaredWorkload("dbl", folder / "space.yaml"), None, None)
    assert report.problems == 1 and "twice.cuh" in " ".join(f.text for f in report.findings)
