"""Where workloads and results are found: the project's settings, discovery in order (built-ins, the user's
folder, installed packages), a name defined twice, and the recordings an installed package ships."""

import json
import shutil
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from tuner import locations
from tuner.errors import TunerError
from tuner.workloads import registry

ROOT = Path(__file__).resolve().parent.parent
SPACE = """workload: {name}
kernel: {{source: k.cu, name: k}}
parameters: {{block_size_x: [32, 64]}}
launch: {{block: [block_size_x], grid: ["ceil(n / block_size_x)"]}}
sizes: {{small: {{n: 1024}}}}
dtypes: {{float32: {{}}}}
metrics: {{"GB/s": "n * itemsize / (time / 1e3) / 1e9"}}
objective: {{metric: "GB/s", direction: maximize}}
"""


def make_workload(folder: Path, name: str, module: str | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "space.yaml").write_text(SPACE.format(name=name))
    (folder / "k.cu").write_text('extern "C" __global__ void k(float *x, int n) {}\n')
    if module is not None:
        (folder / "workload.py").write_text(module)
    return folder


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder as the working directory, with the discovery caches cleared around it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TUNER_WORKLOADS", raising=False)
    monkeypatch.delenv("TUNER_RESULTS", raising=False)
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()
    yield tmp_path
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()


def test_settings_come_from_the_nearest_tuner_toml_or_pyproject(project, monkeypatch):
    assert locations.project().workloads == project / "workloads" and locations.project().source is None
    (project / "pyproject.toml").write_text('[tool.tuner]\nworkloads = "kernels/tuned"\nresults = "out"\n')
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    found = locations.project()
    assert (found.workloads, found.results, found.source) == (project / "kernels/tuned", project / "out",
                                                               project / "pyproject.toml")
    monkeypatch.setenv("TUNER_WORKLOADS", str(project / "elsewhere"))
    assert locations.project().workloads == project / "elsewhere"


def test_a_broken_settings_file_is_one_line(project):
    (project / "tuner.toml").write_text("workloads = [unclosed\n")
    with pytest.raises(TunerError, match="tuner.toml: not a readable TOML file"):
        locations.project()


def test_discovery_finds_the_builtins_then_the_users_folder(project):
    make_workload(project / "workloads" / "saxpy", "saxpy")
    found = registry.discover()
    assert list(found)[: len(registry.BUILTINS)] == list(registry.BUILTINS)
    assert found["saxpy"].origin == str(project / "workloads" / "saxpy")
    w = registry.get_workload("saxpy")
    assert w.origin == found["saxpy"].origin and w.space.kernel_source == project / "workloads" / "saxpy" / "k.cu"
    assert registry.get_workload("reduction").origin == "built-in"


def test_a_workload_module_beside_the_space_is_used(project):
    module = "from tuner import Workload\n\nclass Mine(Workload):\n    run_help = 'mine'\n\nWORKLOAD = Mine()\n"
    make_workload(project / "workloads" / "mine", "mine", module)
    w = registry.get_workload("mine")
    assert type(w).__name__ == "Mine" and w.run_help == "mine" and w.name == "mine"


def test_a_module_without_a_workload_is_one_line(project):
    make_workload(project / "workloads" / "bad", "bad", "x = 1\n")
    with pytest.raises(TunerError, match=r"workload.py: must define WORKLOAD"):
        registry.get_workload("bad")
    make_workload(project / "workloads" / "worse", "worse", "import no_such_module_here\n")
    with pytest.raises(TunerError, match=r"workload.py: cannot be imported: ModuleNotFoundError"):
        registry.get_workload("worse")


def test_a_name_defined_twice_names_both_places(project):
    make_workload(project / "workloads" / "reduction", "reduction")
    with pytest.raises(TunerError, match=r"'reduction' is defined twice: built-in and .*workloads/reduction"):
        registry.get_workload("reduction")
    assert registry.discover()["reduction"].origin == "built-in"  # the other names are still usable


def test_installed_packages_register_through_entry_points(project, monkeypatch):
    package = make_workload(project / "site" / "vendor_kernels" / "scan", "scan")
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(project / "site"))
    point = EntryPoint(name="scan", value="vendor_kernels.scan", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    found = registry.discover()
    assert found["scan"].space_path == package / "space.yaml" and "vendor_kernels.scan" in found["scan"].origin
    assert registry.get_workload("scan").space.kernel_source == package / "k.cu"
    make_workload(project / "workloads" / "scan", "scan")
    with pytest.raises(TunerError, match="'scan' is defined twice: .*workloads/scan and package .*rename one"):
        registry.get_workload("scan")


def test_a_kernel_path_may_not_leave_the_workloads_folder(project):
    folder = make_workload(project / "workloads" / "escape", "escape")
    (project / "secret.cu").write_text("")
    (folder / "space.yaml").write_text(SPACE.format(name="escape").replace("source: k.cu", "source: ../../secret.cu"))
    with pytest.raises(TunerError, match=r"space.yaml: at kernel.source: '../../secret.cu' lies outside"):
        registry.get_workload("escape").space


def test_a_part_in_the_project_and_in_the_shipped_recordings_is_read_once(project, monkeypatch):
    """A user who copied shipped recordings into the project's store (or runs on a copy of the checkout's) gets
    each campaign's rows once, not once per copy; the project's own root alone on request (a gate's baselines)."""
    from tuner.store import load_evaluations, read_parts

    shipped = project / "shipped"
    shutil.copytree(locations.BUILTIN_RESULTS / "nvidia-h100-80gb-hbm3" / "reduction", shipped / "nvidia-h100-80gb-hbm3" / "reduction")
    monkeypatch.setattr(locations, "INSTALLED", True)
    monkeypatch.setattr(locations, "BUILTIN_RESULTS", shipped)
    own, parts = project / "results", "*/reduction/evaluations/*.parquet"
    n, answered = len(read_parts(parts, own)), len(load_evaluations("reduction", own))
    assert n > 0 and read_parts(parts, own, shipped=False).empty
    shutil.copytree(shipped, own)
    assert len(read_parts(parts, own)) == len(read_parts(parts, own, shipped=False)) == n
    assert len(load_evaluations("reduction", own)) == answered


def test_an_installed_package_answers_from_the_recordings_it_ships(project, monkeypatch):
    """In a wheel, the built-ins' recordings are package data: read beside the (empty) project store."""
    from tuner.answers.best_config import best
    from tuner.store import load_evaluations
    from tuner.store.recording_choice import find_recording
    from tuner.store.recordings import sources

    shipped = project / "shipped"
    shutil.copytree(locations.BUILTIN_RESULTS / "nvidia-h100-80gb-hbm3" / "reduction", shipped / "nvidia-h100-80gb-hbm3" / "reduction")
    monkeypatch.setattr(locations, "INSTALLED", True)
    monkeypatch.setattr(locations, "BUILTIN_RESULTS", shipped)
    own = project / "results"
    assert len(load_evaluations("reduction", own)) > 0
    assert best("reduction", "seed", "float32", gpu="NVIDIA H100 80GB HBM3", root=own)["fallback"] == "exact"
    assert {s.gpu_name for s in sources(own, "reduction")} == {"NVIDIA H100 80GB HBM3"}  # the shipped rows'
    assert len(json.loads(find_recording(own, "reduction", "seed", "float32").read_text())["cache"]) == 576
    monkeypatch.setattr(locations, "INSTALLED", False)  # inside the checkout --results reads that folder alone
    monkeypatch.chdir(locations.CHECKOUT_ROOT)
    assert load_evaluations("reduction", own).empty
