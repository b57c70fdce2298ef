"""YAML spaces: the real ones load; every kind of mistake names the file, the key path and what was expected."""


import pickle
import shutil

import pytest
import yaml

from tuner.errors import TunerError
from tuner.locations import BUILTIN_SPACES as SPACES_DIR
from tuner.measure.kt import searchspace
from tuner.space import load_space
from tuner.space.expressions import Expression
from tuner.workloads import BUILTINS, get_workload

GOOD = yaml.safe_load((SPACES_DIR / "reduction.yaml").read_text())


def write(tmp_path, doc) -> str:
    """The space in tmp_path/space.yaml, with the reduction kernel beside it (a space names its source
    relative to itself)."""
    if isinstance(doc, dict) and doc.get("kernel", {}).get("source") == GOOD["kernel"]["source"]:
        shutil.copy(SPACES_DIR / GOOD["kernel"]["source"], tmp_path / "reduce.cu")
        doc = {**doc, "kernel": {**doc["kernel"], "source": "reduce.cu"}}
    p = tmp_path / "space.yaml"
    p.write_text(yaml.safe_dump(doc) if isinstance(doc, dict) else doc)
    return str(p)


def broken(tmp_path, edit):
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    edit(doc)
    with pytest.raises(TunerError) as e:
        load_space(write(tmp_path, doc))
    return str(e.value)


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_registered_space_loads(name):
    space = get_workload(name).space
    assert space.workload == name
    assert searchspace(space).size > 0


def test_reduction_space_counts_and_restrictions():
    space = get_workload("reduction").space
    ss = searchspace(space)
    # variants 1-3: 6 blocks x 2 finishes; 4-6 likewise; 7: 6 x 7 items x 3 vectors x 2 shuffles x 2 finishes
    assert ss.size == 3 * 12 + 3 * 12 + 6 * 7 * 3 * 2 * 2
    for cfg in ss.list:
        c = dict(zip(space.params, cfg))
        assert space.is_valid(c)
        if c["variant"] <= 3:
            assert c["items_per_thread"] == 1 and c["vector"] == 1
        if c["variant"] != 7:
            assert c["shuffle"] == 0


def test_grid_from_size_and_params():
    space = get_workload("reduction").space
    cfg = {"variant": 7, "block_size_x": 256, "items_per_thread": 4, "vector": 4, "shuffle": 1, "finish": 0}
    assert space.grid_dims(cfg, {"n": 4194304 + 123}) == [1025, 1, 1]  # ceil((2^22+123) / 4096)
    assert space.grid_dims(cfg, {"n": 1}) == [1, 1, 1]


def test_metrics_use_median_of_repeats():
    space = get_workload("reduction").space
    cfg = {"variant": 7, "block_size_x": 256, "items_per_thread": 4, "vector": 4, "shuffle": 1, "finish": 0}
    m = space.compute_metrics({**cfg, "times": [1.0, 9.0, 2.0]}, {"n": 10**9 // 4}, "float32")
    assert m["GB/s"] == pytest.approx(500.0)  # 1 GB in the median 2 ms


def test_invalid_yaml_names_line(tmp_path):
    with pytest.raises(TunerError, match=r"space.yaml: not valid YAML \(line"):
        load_space(write(tmp_path, "workload: [unclosed\n"))


def test_missing_file(tmp_path):
    with pytest.raises(TunerError, match="no such space file"):
        load_space(tmp_path / "nope.yaml")


@pytest.mark.parametrize("edit, where, what", [
    (lambda d: d.pop("kernel"), "(top level)", "missing key 'kernel'"),
    (lambda d: d["parameters"].update(block_size_x="abc"), "parameters.block_size_x", "expected array"),
    (lambda d: d["parameters"].update(block_size_x=[]), "parameters.block_size_x", "non-empty list"),
    (lambda d: d["parameters"].update(vector=[1, 1]), "parameters.vector", "unique"),
    (lambda d: d.update(colour="red"), "(top level)", "unknown key 'colour'"),
    (lambda d: d["objective"].update(direction="up"), "objective.direction", "expected one of maximize, minimize"),
    (lambda d: d["restrictions"].append("varaint > 2"), "restrictions.3", "unknown name(s) varaint"),
    (lambda d: d["restrictions"].append("variant >"), "restrictions.3", "not a valid expression"),
    (lambda d: d["restrictions"].append("__import__('os')"), "restrictions.3", "only these functions"),
    (lambda d: d["launch"].update(block=["threads"]), "launch.block.0", "'threads' is not a parameter"),
    (lambda d: d["launch"].update(grid=["ceil(m / block_size_x)"]), "launch.grid.0", "unknown name(s) m"),
    (lambda d: d["metrics"].update({"GB/s": "n / tim"}), "metrics.GB/s", "unknown name(s) tim"),
    (lambda d: d["objective"].update(metric="GFLOP/s"), "objective.metric", "neither 'time' nor one of the metrics"),
    (lambda d: d["sizes"].update(odd={"m": 3}), "sizes.odd", "same variables"),
    (lambda d: d.update(default_size="huge"), "default_size", "'huge' is not one of the sizes"),
    (lambda d: d["kernel"].update(source="kernels/none.cu"), "kernel.source", "does not exist"),
    (lambda d: d["dtypes"].update(complex64={}), "dtypes", "complex64"),
    (lambda d: d.update(defaults={"varaint": 7}), "defaults.varaint", "'varaint' is not a parameter"),
    (lambda d: d.update(defaults={"vector": 3}), "defaults.vector", "3 is not one of its values"),
])
def test_errors_name_file_key_and_expectation(tmp_path, edit, where, what):
    msg = broken(tmp_path, edit)
    assert msg.startswith(str(tmp_path / "space.yaml")), msg
    assert f"at {where}:" in msg, msg
    assert what in msg, msg


def test_an_expression_too_long_is_quoted_in_part(tmp_path):
    """An expression of thousands of characters is refused in one line that quotes only its start."""
    long = " and ".join(["block_size_x >= 32"] * 120)  # 2,635 characters
    msg = broken(tmp_path, lambda d: d["restrictions"].append(long))
    assert "at restrictions.3:" in msg and f"this one {len(long)}" in msg, msg
    assert "'block_size_x >= 32 and" in msg and "...'" in msg and len(msg) < 300, msg


def test_sizes_named_adhoc_and_impossible():
    w = get_workload("reduction")
    space = w.space
    assert space.resolve_size("large") == ("large", {"n": 268435456})
    assert space.resolve_size(None) == ("large", {"n": 268435456})
    assert space.resolve_size("n=4194304") == ("seed", {"n": 4194304})  # an ad-hoc size equal to a named one
    assert space.resolve_size("n=1000") == ("n=1000", {"n": 1000})
    with pytest.raises(TunerError, match="impossible size"):
        space.resolve_size("n=0")
    with pytest.raises(TunerError, match="unknown size 'huge'"):
        space.resolve_size("huge")
    with pytest.raises(TunerError, match="must set exactly n"):
        space.resolve_size("m=5")
    with pytest.raises(TunerError, match="has no dtype 'float64'"):
        space.resolve_dtype("float64")


def test_unknown_workload():
    with pytest.raises(TunerError, match="unknown workload 'reduce'; known: .*reduction"):
        get_workload("reduce")


def test_expressions_are_sandboxed():
    assert Expression("ceil(n / 256)")({"n": 1000}) == 4
    with pytest.raises(ValueError):
        Expression("n.__class__")
    with pytest.raises(ValueError):
        Expression("open('x')")
    with pytest.raises(ValueError):
        Expression("[x for x in y]")


def test_defaults_let_older_recordings_keep_counting(tmp_path):
    """A parameter added with a default: stored rows and Kernel Tuner caches recorded without it read as
    configs with that value (store.complete_configs, kt.align_cache); a cache missing a parameter that has
    no default is left alone for Kernel Tuner to refuse."""
    import json

    import pandas as pd
    from kernel_tuner import util

    from tuner.measure.kt import align_cache
    from tuner.store import canonical_config, complete_configs

    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    doc["parameters"]["unroll"] = [1, 2]
    doc["defaults"] = {"unroll": 1}
    space = load_space(write(tmp_path, doc))
    old = {"variant": 7, "block_size_x": 256, "items_per_thread": 16, "vector": 4, "shuffle": 1, "finish": 1}
    assert space.complete(old) == {**old, "unroll": 1} and space.complete({**old, "unroll": 2})["unroll"] == 2

    rows = pd.DataFrame([{"config": canonical_config(old), "p_variant": 7},
                         {"config": canonical_config({**old, "unroll": 2}), "p_variant": 7, "p_unroll": 2}])
    done = complete_configs(rows, space)
    assert [json.loads(c)["unroll"] for c in done.config] == [1, 2] and list(done.p_unroll) == [1, 2]

    def cache(path, keys):  # a Kernel Tuner cache as a worker leaves it: open, entries appended
        header = {"device_name": "G", "kernel_name": "reduce", "problem_size": [1], "tune_params_keys": keys,
                  "tune_params": {k: space.params[k] for k in keys}, "objective": "time", "cache": {}}
        path.write_text(json.dumps(header, indent="")[:-3])
        util.store_cache(",".join(str(old[k]) for k in keys), {**{k: old[k] for k in keys}, "time": 1.5}, str(path), {})
        return path

    before_unroll = [k for k in space.params if k in old]  # the space's order, as Kernel Tuner keyed it
    recorded = cache(tmp_path / "a.cache.json", before_unroll)
    align_cache(recorded, space)
    data = util.read_cache(str(recorded), open_cache=False)
    assert data["tune_params_keys"] == list(space.params)
    key = ",".join(str({**old, "unroll": 1}[k]) for k in space.params)
    assert data["cache"] == {key: {**old, "unroll": 1, "time": 1.5}}
    align_cache(recorded, space)  # aligned already: unchanged
    assert util.read_cache(str(recorded), open_cache=False) == data
    util.read_cache(str(recorded))  # what a worker's process_cache does: reopen it for appending
    util.store_cache(key[:-1] + "2", {**old, "unroll": 2, "time": 1.2}, str(recorded), {})
    assert len(util.read_cache(str(recorded), open_cache=False)["cache"]) == 2

    doc.pop("defaults")
    strict = load_space(write(tmp_path, doc))
    other = cache(tmp_path / "b.cache.json", before_unroll)
    before = other.read_text()
    align_cache(other, strict)
    assert other.read_text() == before


def test_a_key_given_twice_is_an_error_not_a_silent_overwrite(tmp_path):
    """PyYAML keeps the last of two equal keys: reduction's space once lost half its configs that way."""
    text = (SPACES_DIR / "reduction.yaml").read_text().replace("parameters:\n", "parameters:\n  variant: [1, 2]\n", 1)
    doc = yaml.safe_load(text)  # what the plain loader makes of it: the later `variant` silently wins
    assert len(doc["parameters"]["variant"]) > 2
    with pytest.raises(TunerError, match=r"space.yaml: not valid YAML \(line \d+, column \d+\): the key 'variant' is given twice"):
        load_space(write(tmp_path, text))


# ---- bounded and strict (issue 22) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, said",
    [
        ("variant < 9**9**9", "exponent"),  # would hang (uninterruptibly) if evaluated
        ("variant < 2**(vector * 100)", "exponent"),
        ("(variant * variant)**100 > 1", "bits"),  # a chain of big multiplications: bounded by bits
        ("variant * variant * variant * variant * variant * variant * variant * variant * variant" * 1, None),
        ("variant << 5000 > 1", "left shift"),
        ("variant << vector << 4 > 1", None),
        ("'ab' * variant == 'x'", "string"),
        ("[1] * variant == [1]", "list"),
        ("variant == 1j", "literal"),
        ("variant < " + "+".join(["1"] * 400), "syntax nodes"),
        ("variant < 1" + " " * 3000, "characters"),
    ],
)
def test_expressions_are_bounded_before_evaluation(text, said):
    if said is None:
        Expression(text)  # within the bounds
        return
    with pytest.raises(ValueError, match=said):
        Expression(text)


def test_a_variable_exponent_is_checked_against_its_values(tmp_path):
    assert Expression("2**k")({"k": 5}) == 32
    with pytest.raises(ValueError, match="at most 64"):
        Expression("2**k")({"k": 10**9})
    msg = broken(
        tmp_path, lambda d: (d["parameters"].update(big=[1, 100]), d["restrictions"].append("2**big > variant"))
    )
    assert "restrictions.3" in msg and "'big'" in msg and "at most 64" in msg


def test_a_text_parameter_is_only_compared(tmp_path):
    msg = broken(tmp_path, lambda d: (d["parameters"].update(mode=["fast", "safe"]), d["restrictions"].append("mode * 3 == 'x'")))
    assert "restrictions.3" in msg and "'mode' has text values" in msg
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    doc["parameters"]["mode"] = ["fast", "safe"]
    doc["restrictions"].append("mode == 'fast' or variant > 3")
    assert load_space(write(tmp_path, doc)).configurations > 0


@pytest.mark.parametrize(
    "edit, where, said",
    [
        (lambda d: d["parameters"].update(finish=[0, 1, True]), "parameters.finish", "true is not 1"),
        (lambda d: d["parameters"].update(vector=[1, "2#56"]), "parameters.vector", "all numbers"),
        (lambda d: d["parameters"].update(vector=["2#56"]), "parameters.vector", "all names"),
        (lambda d: d["parameters"].update(vector=[1, 2**70]), "parameters.vector", "all numbers"),
        (lambda d: d["parameters"].update(vector=[1, float("nan")]), "parameters.vector", "not a value"),
        (lambda d: d["sizes"].update(huge={"n": 2**64}), "sizes.huge.n", "out of range"),
        (lambda d: d["restrictions"].append("variant > 100"), "restrictions", "no valid configuration"),
        (
            lambda d: (d["parameters"].update(block_size_y=[0, 16])),
            "parameters.block_size_y",
            "thread block dimension",
        ),
        (lambda d: d["restrictions"].append("variant / (vector - 1) > 0"), "restrictions.3", "ZeroDivisionError"),
        (lambda d: d["restrictions"].append("variant < 'a'"), "restrictions.3", "TypeError"),
    ],
)
def test_strict_values_one_clear_line(tmp_path, edit, where, said):
    msg = broken(tmp_path, edit)
    assert f"at {where}:" in msg and said in msg and "\n" not in msg


def test_a_space_too_large_to_list_is_refused_with_its_count(tmp_path):
    def huge(d):
        d["parameters"].update({f"x{i}": list(range(1, 11)) for i in range(9)})  # 10^9 times the reduction's

    import time

    start = time.monotonic()
    msg = broken(tmp_path, huge)
    assert "more than 1,000,000 valid configurations" in msg and "before the restrictions" in msg
    assert time.monotonic() - start < 10


def test_counting_is_bounded_in_time(tmp_path, monkeypatch):
    from tuner.space import configurations

    monkeypatch.setattr(configurations, "MAX_EVALUATIONS", 1000)

    def sparse(d):  # one restriction over every parameter: nothing prunes, every config is evaluated
        d["parameters"].update({f"x{i}": list(range(1, 11)) for i in range(4)})
        d["restrictions"].append("x0 + x1 + x2 + x3 == 40 and variant + block_size_x == 0")

    assert "took more than 1,000 evaluations" in broken(tmp_path, sparse)


def test_a_count_is_kept_and_read_back_only_for_the_same_space(tmp_path, monkeypatch):
    """A space's count of valid configs is kept in the user's cache (GEMM's takes seconds) and read back on the
    next load; a change to a value or a restriction counts again; a damaged or unwritable cache only counts
    again; a space that fails its checks fails them on every load."""
    from tuner.space import configurations

    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    path = write(tmp_path, GOOD)
    first = load_space(path).configurations
    kept = list((tmp_path / "cache" / "space-counts").glob("*.pickle"))
    assert len(kept) == 1

    def no_counting(*args):
        raise AssertionError("counted again")

    with monkeypatch.context() as m:
        m.setattr(configurations, "_count", no_counting)
        assert load_space(path).configurations == first  # read back, not counted
        fewer = yaml.safe_load(yaml.safe_dump(GOOD))
        fewer["restrictions"].append("block_size_x >= 64")
        with pytest.raises(AssertionError, match="counted again"):
            load_space(write(tmp_path, fewer))
        floats = yaml.safe_load(yaml.safe_dump(GOOD))
        floats["parameters"]["shuffle"] = [0.0, 1.0]
        with pytest.raises(AssertionError, match="counted again"):  # 0.0 is not 0: another key
            load_space(write(tmp_path, floats))
    write(tmp_path, GOOD)
    kept[0].write_text("not a pickle")
    assert load_space(path).configurations == first  # counted again, and kept again
    assert pickle.loads(kept[0].read_bytes()) == (None, first)
    assert load_space(path).configurations == first
    (tmp_path / "blocked").write_text("a file where the cache folder would be")
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "blocked"))
    assert load_space(path).configurations == first
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    for _ in range(2):
        assert "leave no valid configuration" in broken(tmp_path, lambda d: d["restrictions"].append("variant < 0"))


def test_only_checked_restrictions_reach_kernel_tuner():
    import dataclasses

    space = get_workload("reduction").space
    with pytest.raises(TunerError, match="not allowed|only these functions"):
        dataclasses.replace(space, restrictions=["__import__('os').system('true') or True"])
    assert searchspace(space).size == space.configurations
