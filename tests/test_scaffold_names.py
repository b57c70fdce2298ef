"""What `tuner init` reads from a kernel: argument names that are Python keywords become labels reference
expressions can use (`in` -> `in_`; the kernel takes its arguments by position), from the signature and from a
T1 file; and the kernel's `#ifndef X / #define X <number>` tunables become parameters of the skeleton."""

import json

import numpy as np
import yaml

from tuner.space import load_space
from tuner.workloads.declared import DeclaredWorkload
from tuner.workloads.scaffold import init_workload
from tuner.workloads.signature import argument_label, ifndef_tunables

KEYWORDS = r"""
extern "C" __global__ void copy(float *out, const float *__restrict__ in, const float *from, int match, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + from[i] + match;
}
"""

TUNABLES = r"""
#ifndef T
#define T float
#endif
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef ITEMS
#define ITEMS 1  // items per thread
#endif
#ifndef TILE
#  define TILE (16)
#endif
#ifndef USE_SHARED
#define USE_SHARED 0
#endif
#ifndef RADIUS
#define RADIUS 3
#endif
#define FIXED 4
/*
#ifndef COMMENTED
#define COMMENTED 8
#endif
*/
#ifndef SCALE
#define SCALE 1.5f
#endif
extern "C" __global__ void stencil(T *out, const T *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < ITEMS * TILE / TILE; k++) if (i < n) out[i] = x[i] * RADIUS * SCALE + USE_SHARED + FIXED;
}
"""


def test_argument_label():
    assert argument_label("in", set()) == "in_"
    assert argument_label("from", {"from", "from_"}) == "from__"
    assert argument_label("lambda", set()) == "lambda_" and argument_label("None", set()) == "None_"
    assert argument_label("match", set()) == "match" and argument_label("type", set()) == "type"  # soft keywords
    assert argument_label("x", {"x"}) == "x"


def test_keyword_argument_names_are_relabelled(tmp_path):
    kernel = tmp_path / "copy.cu"
    kernel.write_text(KEYWORDS)
    folder = init_workload("copy", tmp_path / "workloads", kernel=kernel)
    doc = yaml.safe_load((folder / "space.yaml").read_text())
    assert [a["name"] for a in doc["arguments"]] == ["out", "in_", "from_", "match", "n"]
    assert (folder / "copy.cu").read_text() == KEYWORDS  # the kernel is copied as it is

    # a reference expression can now read them
    text = (folder / "space.yaml").read_text()
    text = text.replace(
        "{name: out, shape: [n], dtype: float32, fill: {kind: uniform}}",
        "{name: out, shape: [n], dtype: float32, output: true}",
    )
    text = text.replace("{name: match, scalar: n, dtype: int32}", "{name: match, scalar: 3, dtype: int32}")
    (folder / "space.yaml").write_text(text + 'reference:\n  expression: {out: "in_ + from_ + match"}\n')  # fmt: skip
    w = DeclaredWorkload("copy", folder / "space.yaml")
    args = w.arguments({"n": 64}, "float32", np.random.default_rng(0))
    out, in_, from_, match, n = args
    expected = (in_.astype(np.float64) + from_ + 3).astype(np.float32)
    assert np.array_equal(w.answer(args, {"n": 64}, "float32")[0], expected)


def test_a_label_another_argument_has_is_not_taken(tmp_path):
    kernel = tmp_path / "k.cu"
    kernel.write_text('extern "C" __global__ void k(float *in, float *in_, int n) {}\n')
    folder = init_workload("k", tmp_path / "workloads", kernel=kernel)
    assert [a["name"] for a in load_space(folder / "space.yaml").doc["arguments"]] == ["in__", "in_", "n"]


def t1_doc(reference: bool) -> dict:
    doc = {
        "ConfigurationSpace": {"TuningParameters": [{"Name": "block_size_x", "Type": "int", "Values": "[64, 128]"}]},
        "KernelSpecification": {
            "Language": "CUDA",
            "KernelName": "copy",
            "KernelFile": "copy.cu",
            "GlobalSizeType": "CUDA",
            "LocalSize": {"X": "block_size_x"},
            "GlobalSize": {"X": "(4096 + block_size_x - 1) // block_size_x"},
            "Arguments": [
                {"Name": "in", "Type": "float", "Size": 4096, "MemoryType": "Vector", "AccessType": "ReadWrite",
                 "FillType": "Constant", "FillValue": 0},
                {"Name": "from", "Type": "float", "Size": 4096, "MemoryType": "Vector", "FillType": "Random"},
                {"Name": "from_", "Type": "float", "Size": 4096, "MemoryType": "Vector", "FillType": "Random"},
                {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": 4096},
            ],
        },
    }  # fmt: skip
    if reference:
        doc["KernelSpecification"]["ReferenceArguments"] = [
            {"Name": "in_ref", "TargetName": "in", "FillType": "Constant", "FillValue": 2.0}
        ]
    return doc


def test_t1_keyword_argument_names_are_relabelled(tmp_path):
    (tmp_path / "copy.cu").write_text(
        'extern "C" __global__ void copy(float *in, const float *from, const float *from_, int n) {}\n'
    )
    for reference in (True, False):
        path = tmp_path / "bench.json"
        path.write_text(json.dumps(t1_doc(reference)))
        name = f"copy-{int(reference)}"
        folder = init_workload(name, tmp_path / "workloads", t1=path)
        space = load_space(folder / "space.yaml")
        assert [a["name"] for a in space.doc["arguments"]] == ["in_", "from__", "from_", "n"]
        assert [a["name"] for a in space.doc["arguments"] if a.get("output")] == ["in_"]
        if reference:  # the file's TargetName `in` is the argument labelled in_
            assert space.doc["reference"] == {"expression": {"in_": "2.0"}}
        else:
            assert "outputs (in_) are checked" in space.doc["description"]


def test_ifndef_tunables():
    assert ifndef_tunables(TUNABLES) == {"ITEMS": 1, "TILE": 16, "USE_SHARED": 0, "RADIUS": 3}


def test_ifndef_tunables_become_parameters(tmp_path):
    kernel = tmp_path / "stencil.cu"
    kernel.write_text(TUNABLES)
    folder = init_workload("stencil", tmp_path / "workloads", kernel=kernel)
    text = (folder / "space.yaml").read_text()
    space = load_space(folder / "space.yaml")  # loads as it is
    assert space.params == {
        "block_size_x": [32, 64, 128, 256, 512, 1024],
        "ITEMS": [1, 2],  # a power of two: it and its neighbours
        "TILE": [8, 16, 32],
        "USE_SHARED": [0, 1],  # 0: a switch
        "RADIUS": [3],  # anything else: the default alone, to fill in
    }
    assert "  RADIUS: [3]   # TODO: its values (only the kernel's default so far)\n" in text
    assert "  TILE: [8, 16, 32]   # TODO: its values (the kernel's default: 16)\n" in text
    assert 'e.g. "block_size_x * ITEMS <= 4096"' in text
    assert space.configurations == 6 * 2 * 3 * 2 * 1


def test_a_kernel_without_tunables_keeps_the_block_size_alone(tmp_path):
    kernel = tmp_path / "copy.cu"
    kernel.write_text(KEYWORDS)
    folder = init_workload("copy", tmp_path / "workloads", kernel=kernel)
    assert load_space(folder / "space.yaml").params == {"block_size_x": [32, 64, 128, 256, 512, 1024]}
