"""Process start-up: Kernel Tuner must not pull in torch (seconds of every worker's and parent's start), the
command line's parser imports none of the heavy libraries (`tuner --help` 1.5 s -> 0.2 s on the build machine),
the store's light names (results_root, the paths) come without pandas and pyarrow (`import tuner.store` 0.66 s
-> 0.06 s), and loading the spmv workload (every `tuner list`) without scipy.sparse."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_kernel_tuner_is_imported_without_torch_and_torch_stays_importable(tmp_path):
    # a stand-in torch that records each import of it
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "import os\nopen(os.environ['TORCH_MARK'], 'a').write('imported\\n')\nclass Tensor: pass\n"
    )
    mark = tmp_path / "mark"
    code = textwrap.dedent("""
        import os, sys
        import tuner.campaign.distributed, tuner.campaign.local, tuner.cli  # everything a parent and a worker import
        import kernel_tuner.searchspace
        assert not os.path.exists(os.environ["TORCH_MARK"]), "torch was imported at start-up"
        assert kernel_tuner.searchspace.torch_available is False
        import torch  # what needs it (Optuna's GP sampler) still gets it
        assert os.path.exists(os.environ["TORCH_MARK"])
        print("ok")
    """)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "TORCH_MARK": str(mark), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_the_parser_is_built_without_the_heavy_libraries():
    """`tuner --help` and every command's parsing: the commands import what they use when they run, and the
    parser's choices and defaults (strategies, samplers, backends, export formats) come from leaf modules."""
    code = textwrap.dedent("""
        import sys
        from tuner.cli import build_parser
        help_text = build_parser(run_programs=False).format_help()
        heavy = sorted(m for m in ("numpy", "pandas", "pyarrow", "optuna", "kernel_tuner", "scipy", "sklearn",
                                   "matplotlib", "jsonschema") if m in sys.modules)
        print(heavy)
    """)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}  # torch not on this path: nothing to hide
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _imported(code: str) -> str:
    """What `code`, run in a fresh interpreter, prints."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_stores_light_names_are_imported_without_pandas_and_its_heavy_names_as_before():
    printed = _imported("""
        import sys
        import tuner.store
        from tuner.store import cache_path, read_roots, results_root, safe_name, workload_dir, write_atomically
        print(sorted(m for m in ("pandas", "pyarrow") if m in sys.modules))
        from tuner.store import Degraded, PartWriter, load_evaluations  # the heavy names, imported on their use
        import tuner.store.parts, tuner.store.rows, tuner.store.schema
        assert load_evaluations is tuner.store.rows.load_evaluations and PartWriter is tuner.store.parts.PartWriter
        assert Degraded is tuner.store.schema.Degraded
        print(sorted(m for m in ("pandas", "pyarrow") if m in sys.modules))
    """)
    assert printed.splitlines() == ["[]", "['pandas', 'pyarrow']"]


def test_every_name_of_the_store_is_importable_and_an_unknown_one_is_not():
    import tuner.store
    from tuner import atomic
    from tuner.store import parts, paths, rows, schema

    defined_in = (parts, paths, rows, schema, atomic)
    for name in tuner.store.__all__:
        assert any(getattr(m, name, None) is getattr(tuner.store, name) for m in defined_in), name
    assert set(tuner.store.__all__) <= set(dir(tuner.store))
    with pytest.raises(AttributeError, match="no attribute 'load_everything'"):
        tuner.store.load_everything  # noqa: B018
    with pytest.raises(ImportError):
        from tuner.store import load_everything  # noqa: F401


def test_the_spmv_workload_is_loaded_without_scipy_sparse():
    printed = _imported("""
        import sys
        from tuner.workloads import spmv, spmv_matrices
        print("scipy.sparse" in sys.modules)
        size = spmv_matrices.size_for("uniform", 64, 4, 1, None)
        assert spmv.WORKLOAD.matrix(size).nnz == size["nnz"]  # what needs scipy.sparse imports it
        print("scipy.sparse" in sys.modules)
    """)
    assert printed.splitlines() == ["False", "True"]


def test_the_parsers_leaf_names_are_those_the_stages_use():
    from tuner.answers import compare
    from tuner.cli import build_parser
    from tuner.measure import backends, kt
    from tuner.search import names, strategies

    assert kt.BACKENDS is backends.BACKENDS
    assert strategies.DEFAULT_STRATEGY in strategies.strategy_names()
    assert set(names.COMPARED_STRATEGIES) <= {*strategies.strategy_names(), compare.WARM, compare.COLD}
    assert build_parser(run_programs=False).parse_args(["tune", "reduction"]).strategy == names.DEFAULT_STRATEGY


def test_nvidia_smi_is_asked_about_the_gpu_that_cuda_calls_device_n(monkeypatch):
    """The GPU's name files every row: nvidia-smi must name the GPU that `--device N` measures. CUDA is put
    in nvidia-smi's (PCI) order, and CUDA_VISIBLE_DEVICES' list says which host GPU is CUDA's device N."""
    import os

    from tuner.measure.provenance import smi_id

    assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # set by importing tuner, unless the user set it
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert smi_id(1) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert (smi_id(0), smi_id(1)) == ("2", "3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-6aab29af-d56f-d753-8eac-fdc281ca3a5e")
    assert smi_id(0) == "GPU-6aab29af-d56f-d753-8eac-fdc281ca3a5e"
