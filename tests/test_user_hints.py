"""A user audit's mistakes (2026-11-30), each answered with one line that says what to do: C's spellings in an
expression, a TUNER_RESULTS folder that is not there, a misspelt workload or size, a check without a GPU or
baselines, a comparison on no processes, a results table cut above the config `tuner best` answers."""

import json

import pytest

from tuner.cli import main
from tuner.errors import TunerError
from tuner.space.expressions import Expression
from tuner.workloads import get_workload


def error_of(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    return " ".join(err.split())  # rich wraps long lines


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a <= 4 && b >= 1", "'and' for C's '&&'"),
        ("a == 1 || b == 2", "'or' for C's '||'"),
        ("!(a > 2)", "'not' for C's '!'"),
        ("a ? 1 : 2", "'b if a else c' for C's 'a ? b : c'"),
        ("a = 1", "'==' to compare"),
    ],
)
def test_cs_spellings_in_an_expression_get_pythons(text, says):
    with pytest.raises(ValueError, match="not a valid expression") as e:
        Expression(text)
    assert says in str(e.value)


def test_python_spellings_get_no_c_hint_and_cs_true_is_named():
    with pytest.raises(ValueError) as e:
        Expression("a != 1 and (b <= 1 +")
    assert "C's" not in str(e.value)
    with pytest.raises(ValueError, match=r"\(true is True in Python\)"):
        Expression("a and true").check_names(["a"])


def test_a_c_spelling_in_a_space_file_says_so_with_its_key(tmp_path):
    from tuner.space import load_space

    text = get_workload("reduction").space.path.read_text()
    space = tmp_path / "reduction.yaml"
    space.write_text(text.replace('"variant == 7 or shuffle == 0"', '"variant == 7 || shuffle == 0"'))
    with pytest.raises(TunerError, match=r"restrictions\.2.*'or' for C's '\|\|'"):
        load_space(space, sources_within=tmp_path.parent)


def test_a_tuner_results_folder_that_is_not_there_is_refused_as_results_is(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TUNER_RESULTS", str(tmp_path / "nowhere"))
    said = error_of(capsys, "best", "reduction")
    assert said.startswith("error: TUNER_RESULTS") and said.endswith(
        "no such folder (a campaign, `tuner tune`, creates it)"
    )
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TUNER_RESULTS", str(tmp_path / "file"))
    assert error_of(capsys, "best", "reduction").endswith("not a folder")


def test_list_of_a_misspelt_workload_suggests_the_name(capsys):
    assert "did you mean 'reduction'" in error_of(capsys, "list", "reductoin")


@pytest.mark.parametrize(
    ("size", "says"),
    [
        ("16m", "did you mean '16M'?"),
        ("larg", "did you mean 'large'?"),
        ("n=1e6", "n=1e6 is not a whole number"),
        ("n=abc", "n=abc is not a whole number"),
    ],
)
def test_a_misspelt_size_gets_the_name_or_the_rule(size, says, capsys):
    assert says in error_of(capsys, "best", "reduction", "--size", size)


def test_many_sizes_are_listed_in_part_with_no_misleading_guess(capsys):
    said = error_of(capsys, "results", "gemm", "--size", "2048x2048")
    assert "more (`tuner list gemm` lists them)" in said and "did you mean" not in said
    assert len(said) < 400


def test_a_check_without_a_gpu_or_baselines_points_to_the_demo(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("tuner.answers.check.gpu_info", lambda device: {"gpu": "unknown"})
    results = tmp_path / "results"
    results.mkdir()
    assert "`tuner check --simulate --demo`" in error_of(capsys, "--results", str(results), "check")


def test_compare_strategies_refuses_no_processes(capsys):
    assert "--jobs must be at least 1" in error_of(capsys, "compare-strategies", "reduction", "--jobs", "0")


def test_results_cut_above_the_answer_says_which_row_tuner_best_answers(capsys):
    """reduction seed float32 on the H100: the confirmation chose the third of three near-ties; --top 2 leaves it out."""
    argv = ["results", "reduction", "--size", "seed", "--dtype", "float32", "--gpu", "h100"]
    rows = json.loads(_out(capsys, *argv, "--json"))
    at = [i for i, r in enumerate(rows) if r["chosen"]][0] + 1
    assert at > 1
    assert f"the config `tuner best` answers is row {at} (--top {at})" in " ".join(
        _out(capsys, *argv, "--top", str(at - 1)).split()
    )
    assert "answers is row" not in _out(capsys, *argv, "--top", str(at))


def _out(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_a_nearest_size_answer_names_the_devices_that_measured_the_size_itself():
    """A small campaign on this machine's CPU answers a size it never measured from its nearest one (the documented
    order: this device first); the note names the device that measured the size itself."""
    import pandas as pd

    from tuner.answers.selection import select
    from tuner.store import load_evaluations

    df = load_evaluations("gemm-cpu")
    xeon = str(df["gpu"].iloc[0])
    here = df[df["size"] == "1024x1024x1024"].assign(gpu="Fake CPU 64-Core")
    sel = select("gemm-cpu", "2048x2048x2048", "int32", gpu="Fake CPU 64-Core", evaluations=pd.concat([df, here]))
    assert sel.fallback == ["nearest-size"] and set(sel.rows["gpu"]) == {"Fake CPU 64-Core"}
    assert f"size 2048x2048x2048 itself was measured on {xeon} (choose with --gpu)" in sel.notes
