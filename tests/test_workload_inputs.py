"""What a user writes that names workloads: a `tuner init` name a workload already has, the project's settings
(tuner.toml, [tool.tuner]) with a key the tool does not know, and a space whose `workload:` key is not its
folder's name. Each is refused in one line, before anything is written; a name defined twice anyway fails
only the commands that use it."""

import json
from importlib.metadata import EntryPoint

import pytest

from tests.test_registry import SPACE, make_workload
from tuner import locations
from tuner.cli import main
from tuner.errors import TunerError
from tuner.workloads import registry
from tuner.workloads.scaffold import init_workload


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder as the working directory, with the discovery caches cleared around it."""
    monkeypatch.chdir(tmp_path)
    for var in ("TUNER_WORKLOADS", "TUNER_RESULTS"):
        monkeypatch.delenv(var, raising=False)
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()
    yield tmp_path
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# ---- `tuner init` of a name a workload already has ---------------------------------------------------------
@pytest.mark.parametrize("name", sorted(registry.BUILTINS))
def test_init_refuses_a_builtin_name_and_writes_nothing(project, capsys, name):
    assert main(["init", name]) == 2
    err = one_line_error(capsys)
    assert f"'{name}' is already the name of a workload (built-in)" in err and f"tuner init my-{name}" in err
    assert not (project / "workloads").exists()
    assert registry.get_workload(name).origin == "built-in"  # the project still works


def test_init_suggests_a_name_that_is_free(project):
    make_workload(project / "workloads" / "my-gemm", "my-gemm")
    with pytest.raises(TunerError, match=r"choose another name, e\.g\. `tuner init my-gemm-2`"):
        init_workload("gemm", project / "workloads")
    assert sorted(p.name for p in (project / "workloads").iterdir()) == ["my-gemm"]


def test_init_refuses_an_installed_packages_name(project, monkeypatch):
    point = EntryPoint(name="scan", value="vendor_kernels.scan", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    with pytest.raises(TunerError, match=r"'scan' is already the name of a workload \(package .*vendor_kernels\.scan"):
        init_workload("scan", project / "workloads")
    assert not (project / "workloads").exists()


def test_a_name_defined_twice_fails_only_the_commands_that_use_it(project, capsys):
    """A folder made by hand (or a built-in added by an upgrade) that repeats a built-in's name."""
    make_workload(project / "workloads" / "reduction", "reduction")
    make_workload(project / "workloads" / "saxpy", "saxpy")
    assert main(["list", "saxpy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["origin"] == str(project / "workloads" / "saxpy")
    assert main(["list", "reduction"]) == 2
    err = capsys.readouterr().err
    assert "'reduction' is defined twice: built-in and " in err and f"rename {project / 'workloads' / 'reduction'}" in err


# ---- the project's settings ---------------------------------------------------------------------------------
def test_a_mistyped_key_in_tuner_toml_is_an_error(project, capsys):
    make_workload(project / "x" / "saxpy", "saxpy")
    (project / "tuner.toml").write_text('workload = "x"\n')
    assert main(["list", "saxpy"]) == 2
    err = one_line_error(capsys)
    assert (
        f"{project / 'tuner.toml'}: at workload: unknown key 'workload' (known: workloads, results); "
        "did you mean 'workloads'?" in err
    )


def test_only_the_tool_tuner_table_of_pyproject_is_checked(project):
    (project / "pyproject.toml").write_text('[project]\nname = "mine"\n[tool.other]\nworkload = 1\n[tool.tuner]\nworkloads = "w"\n')
    assert locations.project().workloads == project / "w"
    locations._project.cache_clear()
    (project / "pyproject.toml").write_text('[project]\nname = "mine"\n[tool.tuner]\nworkloads = "w"\nresult = "r"\n')
    with pytest.raises(TunerError, match=r"pyproject.toml: at tool.tuner.result: unknown key 'result' \(known: workloads, results\)"):
        locations.project()


@pytest.mark.parametrize(
    "text, message",
    [
        ("workloads = 3\n", "at workloads: expected a folder (a non-empty string), got 3"),
        ('[tool.tuner]\nworkloads = "w"\n', "at tool: unknown key 'tool' (known: workloads, results)"),
    ],
)
def test_settings_of_the_wrong_shape_are_one_line(project, text, message):
    (project / "tuner.toml").write_text(text)
    with pytest.raises(TunerError) as e:
        locations.project()
    assert str(e.value) == f"{project / 'tuner.toml'}: {message}"


def test_tool_tuner_that_is_not_a_table_is_one_line(project):
    (project / "pyproject.toml").write_text('[tool]\ntuner = "w"\n')
    with pytest.raises(TunerError, match=r"pyproject.toml: at tool.tuner: expected a table of settings"):
        locations.project()


# ---- a space's `workload:` key ------------------------------------------------------------------------------
def test_a_workload_key_that_is_not_the_folders_name_is_an_error(project, capsys):
    folder = make_workload(project / "workloads" / "saxpy2", "saxpy")  # a copy of saxpy's folder, say
    with pytest.raises(TunerError) as e:
        registry.get_workload("saxpy2")
    assert str(e.value) == (
        f"{folder / 'space.yaml'}: at workload: 'saxpy' is not the workload's name 'saxpy2' (the name of its "
        "folder); write `workload: saxpy2`, or rename the folder"
    )
    assert main(["list", "saxpy2"]) == 2 and "at workload: 'saxpy' is not" in capsys.readouterr().err
    (folder / "space.yaml").write_text(SPACE.format(name="saxpy2"))
    registry._get.cache_clear()
    assert registry.get_workload("saxpy2").space.workload == "saxpy2"


def test_a_workload_key_that_is_not_the_entry_points_name_is_an_error(project, monkeypatch):
    # a package of its own name: test_registry's is imported already, from another folder
    package = make_workload(project / "site" / "misnamed_kernels" / "scan", "prefix-scan")
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(project / "site"))
    point = EntryPoint(name="scan", value="misnamed_kernels.scan", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    with pytest.raises(TunerError, match=r"at workload: 'prefix-scan' is not the workload's name 'scan' \(the name "
                                         r"of its entry point\); write `workload: scan`, or rename the entry point"):
        registry.get_workload("scan")
