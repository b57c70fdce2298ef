"""A user's workload.py (or an installed package's) that is wrong in itself: hooks whose signatures differ from
tuner.Workload's, a module that calls sys.exit() or prints when imported. Each is one line naming the file,
said by the commands that use that workload (and by `tuner list`, which lists the others as usual); stdout
stays the tuner's."""

import itertools
import json
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from rich.console import Console

import tuner
import tuner.cli.listing
from tuner import locations
from tuner.cli import main
from tuner.errors import TunerError
from tuner.workloads import registry

from tests.test_registry import SPACE  # a minimal space document, {name} to fill

WRONG_HOOKS = """from tuner.workloads.declared import DeclaredWorkload


class W(DeclaredWorkload):
    def tolerances(self, size):
        return 1e-3, 0

    def parse_size(self):
        return None


WORKLOAD = W()
"""

_packages = itertools.count()
ALL_BUILTINS = dict(registry.BUILTINS)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder (a tuner.toml marks it), the working directory, with nothing cached from others;
    the modules the test imported (installed packages, workload.py files) are forgotten afterwards."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "tuner.toml").write_text("")
    monkeypatch.chdir(folder)
    for var in ("TUNER_WORKLOADS", "TUNER_RESULTS"):
        monkeypatch.delenv(var, raising=False)
    # one built-in is enough to see that the others are listed (`tuner list` of all of them takes seconds)
    monkeypatch.setattr(registry, "BUILTINS", {"reduction": registry.BUILTINS["reduction"]})
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()
    before = set(sys.modules)
    yield folder.resolve()
    for name in set(sys.modules) - before:
        if name.startswith(("tuner_user_workload_", "plugin_pkg_")):
            del sys.modules[name]
    for cached in (locations._project, registry._discover, registry._get):
        cached.cache_clear()


def user_workload(project: Path, name: str, module: str | None) -> Path:
    """workloads/<name>/ with a space, a kernel and (unless None) `module` as its workload.py."""
    folder = project / "workloads" / name
    folder.mkdir(parents=True)
    (folder / "space.yaml").write_text(SPACE.format(name=name))
    (folder / "k.cu").write_text('extern "C" __global__ void k(float *x, int n) {}\n')
    if module is not None:
        (folder / "workload.py").write_text(module)
    return folder


def installed(project: Path, monkeypatch, name: str, module: str | None = None, init: str = "") -> Path:
    """A package `plugin_pkg_<n>.<name>` laid out as a workload folder, registered by an entry point `name`;
    `init` is the top package's __init__.py (run when the package is found). Its folder."""
    top = f"plugin_pkg_{next(_packages)}"
    site = project / "site"
    package = site / top / name
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text(init)
    (package / "__init__.py").write_text("")
    (package / "space.yaml").write_text(SPACE.format(name=name))
    (package / "k.cu").write_text('extern "C" __global__ void k(float *x, int n) {}\n')
    if module is not None:
        (package / "workload.py").write_text(module)
    monkeypatch.syspath_prepend(str(site))
    points = [EntryPoint(name=name, value=f"{top}.{name}", group=registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "entry_points", lambda group: points if group == registry.ENTRY_POINT_GROUP else [])
    return package


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def listed(capsys) -> tuple[dict, str]:
    """`tuner list --json`, which must exit 2 (something is broken) and print JSON alone: by workload, and
    what went to stderr."""
    assert main(["list", "--json"]) == 2
    captured = capsys.readouterr()
    return {d["workload"]: d for d in json.loads(captured.out)}, captured.err


# ---- hooks whose signatures differ from tuner.Workload's ----------------------------------------------------
def test_hooks_with_the_wrong_signature_are_refused_when_the_workload_is_loaded(project):
    folder = user_workload(project, "saxpy", WRONG_HOOKS)
    with pytest.raises(TunerError) as e:
        registry.get_workload("saxpy")
    assert str(e.value) == (
        f"{folder / 'workload.py'}: W.parse_size(self) (line 8) cannot be called as the hook "
        "parse_size(self, text); W.tolerances(self, size) (line 5) cannot be called as the hook "
        "tolerances(self, size, dtype)"
    )


@pytest.mark.parametrize(
    "argv",
    [["best", "saxpy", "--size", "n=100"], ["tune", "saxpy", "--dry-run", "--size", "n=100"], ["list", "saxpy"]],
)
def test_commands_say_the_wrong_hook_in_one_line(project, capsys, argv):
    user_workload(project, "saxpy", WRONG_HOOKS)
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert "workload.py: W.parse_size(self) (line 8) cannot be called as the hook parse_size(self, text)" in err
    assert "tolerances(self, size, dtype)" in err


def test_the_api_says_the_wrong_hook_as_a_tuner_error(project):
    user_workload(project, "saxpy", WRONG_HOOKS)
    with pytest.raises(TunerError, match=r"workload.py: W.parse_size\(self\) .* parse_size\(self, text\)"):
        tuner.best("saxpy", size="n=100")


def test_list_marks_a_workload_with_wrong_hooks_broken_and_lists_the_others(project, capsys):
    user_workload(project, "saxpy", WRONG_HOOKS)
    user_workload(project, "fine", None)
    docs, err = listed(capsys)
    assert "parse_size(self, text)" in docs["saxpy"]["error"] and "error" not in docs["fine"]
    assert "error" not in docs["reduction"]
    assert "parse_size(self, text)" in err


@pytest.mark.parametrize(
    "hooks",
    [
        "    def parse_size(self, text, strict=False):\n        return None\n",  # an extra optional parameter
        "    def parse_size(self, *args):\n        return None\n",
        "    def parse_size(self, notation):\n        return None\n",  # another name: passed by position
        "    @staticmethod\n    def parse_size(text):\n        return None\n",
        "    @classmethod\n    def parse_size(cls, text):\n        return None\n",
        "    def tolerances(self, size, dtype, /):\n        return 1e-3, 0\n",
        "    def helper(self):\n        return 1\n",  # not a hook: its own business
        "    def baselines(self, args, size, dtype, repeats, **more):\n        return {}\n",
    ],
)
def test_hooks_that_can_be_called_as_the_tuner_calls_them_are_accepted(project, hooks):
    module = f"from tuner.workloads.declared import DeclaredWorkload\n\n\nclass W(DeclaredWorkload):\n{hooks}\n\nWORKLOAD = W()\n"
    user_workload(project, "saxpy", module)
    assert type(registry.get_workload("saxpy")).__name__ == "W"


@pytest.mark.parametrize(
    "body, said",
    [
        (
            "    tolerances = (1e-3, 0)\n",
            "W.tolerances is (0.001, 0), not a method: the hook is tolerances(self, size, dtype)",
        ),
        (
            "    def answer(self, args, size, dtype, extra):\n        return []\n",
            "W.answer(self, args, size, dtype, extra) (line 5) cannot be called as the hook answer(self, args, size, dtype)",
        ),
        (
            "    def arguments(self, *, size, dtype, rng):\n        return []\n",
            "W.arguments(self, *, size, dtype, rng) (line 5) cannot be called as the hook arguments(self, size, dtype, rng)",
        ),
        (
            "    def run(self, args):\n        return 0\n",
            "W.run(self, args) (line 5) cannot be called as the hook run(self, args, config_for)",
        ),
    ],
)
def test_other_wrong_hooks_are_refused(project, body, said):
    module = f"from tuner import Workload\n\n\nclass W(Workload):\n{body}\n\nWORKLOAD = W()\n"
    folder = user_workload(project, "saxpy", module)
    with pytest.raises(TunerError) as e:
        registry.get_workload("saxpy")
    assert str(e.value) == f"{folder / 'workload.py'}: {said}"


def test_a_hook_from_a_helper_module_names_that_file(project, monkeypatch):
    folder = user_workload(project, "saxpy", "from helpers_for_saxpy import W\n\nWORKLOAD = W()\n")
    (folder / "helpers_for_saxpy.py").write_text(
        "from tuner import Workload\n\n\nclass W(Workload):\n    def parse_size(self):\n        return None\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "helpers_for_saxpy", raising=False)
    with pytest.raises(TunerError) as e:
        registry.get_workload("saxpy")
    assert str(e.value) == (
        f"{folder / 'workload.py'}: W.parse_size(self) ({folder / 'helpers_for_saxpy.py'}, line 5) cannot be "
        "called as the hook parse_size(self, text)"
    )
    monkeypatch.delitem(sys.modules, "helpers_for_saxpy", raising=False)


def test_a_workload_class_in_place_of_an_instance_says_so(project):
    module = "from tuner import Workload\n\n\nclass W(Workload):\n    pass\n\n\nWORKLOAD = W\n"
    user_workload(project, "saxpy", module)
    with pytest.raises(
        TunerError, match=r"workload.py: must define WORKLOAD, .*\(WORKLOAD is the class W: write WORKLOAD = W\(\)\)"
    ):
        registry.get_workload("saxpy")


@pytest.mark.parametrize("name", sorted(registry.BUILTINS))
def test_the_builtins_hooks_have_the_signatures_of_tuner_workload(project, monkeypatch, name):
    monkeypatch.setattr(registry, "BUILTINS", ALL_BUILTINS)
    assert registry.get_workload(name).origin == "built-in"  # its hooks are checked as a user's are


# ---- a workload.py that exits or prints when imported -------------------------------------------------------
@pytest.mark.parametrize(
    "module, said",
    [
        ('import sys\n\nsys.exit("bye from workload.py")\n', "it calls sys.exit('bye from workload.py') (line 3)"),
        ("import sys\nsys.exit()\n", "it calls sys.exit() (line 2)"),
        ("raise SystemExit(3)\n", "it calls sys.exit(3) (line 1)"),
        ("class Stop(BaseException):\n    pass\n\n\nraise Stop('no')\n", "Stop: no (line 5)"),
        ("raise ValueError('two\\nlines')\n", "ValueError: two lines (line 1)"),
    ],
)
def test_a_module_that_exits_is_one_line_and_the_others_are_listed(project, capsys, monkeypatch, module, said):
    folder = user_workload(project, "saxpy", module)
    user_workload(project, "fine", None)
    with pytest.raises(TunerError) as e:
        registry.get_workload("saxpy")
    assert str(e.value) == f"{folder / 'workload.py'}: cannot be imported: {said}"
    assert "tuner_user_workload_saxpy" not in sys.modules  # as `import` leaves a module that failed

    docs, err = listed(capsys)
    assert docs["saxpy"]["error"] == f"workload 'saxpy': {folder / 'workload.py'}: cannot be imported: {said}"
    assert "error" not in docs["fine"] and "error" not in docs["reduction"]
    assert "cannot be imported" in err

    monkeypatch.setattr(tuner.cli.listing, "console", Console(width=250))  # the table whole
    assert main(["list"]) == 2  # the table: the others, and this one marked broken
    captured = capsys.readouterr()
    assert "broken" in captured.out and "fine" in captured.out and "reduction" in captured.out
    assert main(["best", "saxpy", "--size", "n=100"]) == 2
    assert f"cannot be imported: {said}" in one_line_error(capsys)


def test_ctrl_c_while_importing_a_workload_stays_ctrl_c(project):
    user_workload(project, "saxpy", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        registry.get_workload("saxpy")


def test_what_a_workload_prints_when_imported_goes_to_stderr(project, capsys):
    module = 'print("hello")\nfrom tuner.workloads.declared import DeclaredWorkload\n\nWORKLOAD = DeclaredWorkload()\n'
    user_workload(project, "saxpy", module)
    user_workload(project, "broken", "print('hello from broken')\nimport sys\nsys.exit(1)\n")
    assert main(["list", "--json"]) == 2  # the broken one
    captured = capsys.readouterr()
    docs = {d["workload"]: d for d in json.loads(captured.out)}  # JSON alone
    assert "error" not in docs["saxpy"] and docs["saxpy"]["configurations"] == 2
    assert "hello\n" in captured.err and "hello from broken\n" in captured.err
    assert sys.stdout is not sys.stderr  # put back


# ---- installed packages (entry points) ----------------------------------------------------------------------
def test_an_installed_packages_wrong_hooks_are_refused(project, monkeypatch):
    package = installed(project, monkeypatch, "scan", WRONG_HOOKS)
    with pytest.raises(TunerError) as e:
        registry.get_workload("scan")
    assert str(e.value).startswith(f"{package / 'workload.py'}: W.parse_size(self) (line 8) cannot be called as")


@pytest.mark.parametrize(
    "module, said",
    [
        ('import sys\n\nsys.exit("bye")\n', "cannot be imported: it calls sys.exit('bye') (line 3)"),
        (
            "import no_such_module_here\n",
            "cannot be imported: ModuleNotFoundError: No module named 'no_such_module_here' (line 1)",
        ),
        ("x = 1\n", "must define WORKLOAD, an instance of a tuner.Workload subclass"),
    ],
)
def test_an_installed_packages_broken_module_is_one_line(project, capsys, monkeypatch, module, said):
    package = installed(project, monkeypatch, "scan", module)
    with pytest.raises(TunerError) as e:
        registry.get_workload("scan")
    assert str(e.value) == f"{package / 'workload.py'}: {said}"
    docs, _ = listed(capsys)
    assert said in docs["scan"]["error"] and "error" not in docs["reduction"]


def test_an_installed_packages_printing_goes_to_stderr(project, capsys, monkeypatch):
    module = 'print("hello")\nfrom tuner.workloads.declared import DeclaredWorkload\n\nWORKLOAD = DeclaredWorkload()\n'
    installed(project, monkeypatch, "scan", module, init='print("hello from __init__")\n')
    assert main(["list", "--json"]) == 0
    captured = capsys.readouterr()
    docs = {d["workload"]: d for d in json.loads(captured.out)}
    assert "error" not in docs["scan"] and docs["scan"]["configurations"] == 2
    assert "hello\n" in captured.err and "hello from __init__\n" in captured.err


@pytest.mark.parametrize(
    "init, said",
    [
        ('import sys\n\nsys.exit("bye")\n', "cannot be imported: it calls sys.exit('bye') ({init}, line 3)"),
        ("raise RuntimeError('no GPU')\n", "cannot be imported: RuntimeError: no GPU ({init}, line 1)"),
    ],
)
def test_an_installed_package_that_cannot_be_found_fails_only_its_own_commands(
    project, capsys, monkeypatch, init, said
):
    """Finding the package imports its parent: what that raises is that workload's error, not every command's."""
    package = installed(project, monkeypatch, "scan", init=init)
    said = said.format(init=package.parent / "__init__.py")
    found = registry.discover()  # does not raise
    assert "reduction" in found and "scan" in found
    with pytest.raises(
        TunerError, match=r"entry point 'scan' of group gpu_tuner.workloads names 'plugin_pkg_\d+\.scan': "
    ):
        registry.get_workload("scan")
    docs, _ = listed(capsys)
    assert said in docs["scan"]["error"] and "error" not in docs["reduction"]
    assert registry.get_workload("reduction").origin == "built-in"


@pytest.mark.parametrize("value", ["plugin_pkg_missing.scan", "string"])
def test_an_entry_point_that_names_no_package_fails_only_its_own_commands(project, capsys, monkeypatch, value):
    point = EntryPoint(name="scan", value=value, group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    with pytest.raises(TunerError, match=rf"entry point 'scan' of group gpu_tuner.workloads names '{value}'"):
        registry.get_workload("scan")
    docs, _ = listed(capsys)
    assert f"names '{value}'" in docs["scan"]["error"] and "error" not in docs["reduction"]
