"""What every command's start pays for, kept small without changing what it does: a space file parsed once
(by libyaml's parser where PyYAML has it, as strictly as by PyYAML's own, with the same errors in words), and
an expression's globals built once, every call still evaluated in a namespace of its own. The timings are
in docs/store.md; tests/test_imports.py keeps the heavy libraries out of the light imports."""

from pathlib import Path

import pytest
import yaml

from tuner import locations
from tuner.errors import TunerError
from tuner.space import document
from tuner.space.array_expressions import ArrayExpression
from tuner.space.expressions import Expression
from tuner.workloads import base, registry

from tests.test_registry import SPACE  # a minimal space document, {name} to fill


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project with the workload `saxpy` in its workloads folder, the discovery caches cleared around it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TUNER_WORKLOADS", raising=False)
    folder = tmp_path / "workloads" / "saxpy"
    folder.mkdir(parents=True)
    (folder / "space.yaml").write_text(SPACE.format(name="saxpy"))
    (folder / "k.cu").write_text('extern "C" __global__ void k(float *x, int n) {}\n')
    caches = (locations._project, registry._discover, registry._get, base._load_space)
    for cached in caches:
        cached.cache_clear()
    yield folder
    for cached in caches:
        cached.cache_clear()


def _counting_parses(monkeypatch) -> list[str]:
    parsed: list[str] = []
    parse = document.parse_yaml

    def counted(text: str) -> object:
        parsed.append(text)
        return parse(text)

    monkeypatch.setattr(document, "parse_yaml", counted)
    return parsed


def test_a_workloads_space_file_is_parsed_once_as_its_name_is_checked_and_its_space_loaded(project, monkeypatch):
    parsed = _counting_parses(monkeypatch)
    workload = registry.get_workload("saxpy")  # checks the space's `workload:` key
    assert workload.space.configurations == 2 and workload.space.workload == "saxpy"
    assert len(parsed) == 1


def test_a_space_whose_workload_key_is_not_its_name_is_refused_as_before(project):
    (project / "space.yaml").write_text(SPACE.format(name="daxpy"))
    with pytest.raises(TunerError, match="at workload: 'daxpy' is not the workload's name 'saxpy'"):
        registry.get_workload("saxpy")


def test_a_document_parsed_ahead_is_handed_over_once_and_an_edited_file_is_parsed_again(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE.format(name="saxpy"))
    assert document.declared_workload(space) == "saxpy"
    first, second = document.read_document(space), document.read_document(space)
    assert first == second and first is not second  # no two readers share one document
    assert document.declared_workload(space) == "saxpy"
    space.write_text(SPACE.format(name="daxpy"))
    assert document.read_document(space)["workload"] == "daxpy"


def test_a_file_that_cannot_be_parsed_declares_no_workload(tmp_path):
    space = tmp_path / "space.yaml"
    assert document.declared_workload(space) is None  # missing: read_document says so
    space.write_text("workload: [saxpy\n")
    assert document.declared_workload(space) is None
    space.write_text("workload: saxpy\nworkload: daxpy\n")  # the loader's error names the key given twice
    assert document.declared_workload(space) is None


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
def test_libyamls_parser_reads_the_spaces_as_strictly_as_pyyamls():
    assert issubclass(document._StrictFastLoader, yaml.CSafeLoader)
    with pytest.raises(yaml.constructor.ConstructorError, match="the key 'b' is given twice"):
        yaml.load("a: 1\nb: {c: 2}\nb: 3\n", Loader=document._StrictFastLoader)
    with pytest.raises(yaml.constructor.ConstructorError, match="the key 'c' is given twice"):
        yaml.load("a: [{c: 1, c: 2}]\n", Loader=document._StrictFastLoader)
    for space in sorted((Path(__file__).resolve().parents[1] / "spaces").glob("*.yaml")):
        text = space.read_text()
        assert yaml.load(text, Loader=document._StrictFastLoader) == yaml.load(text, Loader=document._StrictLoader)


def test_a_yaml_error_is_said_in_pyyamls_words(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("workload: saxpy\nparameters: {x: [1, 2}\n")
    with pytest.raises(TunerError, match=r"not valid YAML \(line 2, column 17\): the list opened with '\[' here"):
        document.read_document(space)
    space.write_text("workload: saxpy\nworkload: daxpy\n")
    with pytest.raises(TunerError, match=r"\(line 2, column 1\): the key 'workload' is given twice in one mapping"):
        document.read_document(space)


def test_each_evaluation_has_a_namespace_of_its_own():
    e = Expression("max(a, b) if a > 0 else b")
    assert e({"a": 1, "b": 2}) == 2
    shadowed = Expression("max")  # a variable may be named like a function: for that call only
    assert shadowed({"max": 7}) == 7 and shadowed({}) is max
    with pytest.raises(NameError):
        Expression("a")({})  # no variable of an earlier call is left behind
    with pytest.raises(NameError):
        Expression("open")({})  # nor any builtin
    assert ArrayExpression("sum(x)")({"x": [1, 2]}) == 3 and Expression("abs(x)")({"x": -1}) == 1
