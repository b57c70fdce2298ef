"""A space that would misbehave is refused when it is loaded, with one line naming the file and the key path:
booleans among a parameter's values, grid expressions that are not a whole number of blocks >= 1, size limits
that name no size variable or leave the named sizes out, names that shadow one another, values of the wrong
kind (true is not 1, 2.0 is not 2), metrics that cannot be evaluated, unknown keys, names that are not C
identifiers. The space is the saxpy example `tuner init` writes (block_size_x, WPT; size n; GB/s)."""

from __future__ import annotations

import copy
import dataclasses
import math
import time

import pytest
import yaml

from tuner.errors import TunerError
from tuner.space import load_space, loader
from tuner.space.errors import one_of
from tuner.space.expressions import Expression
from tuner.workloads import BUILTINS, get_workload
from tuner.workloads.scaffold import init_workload


@pytest.fixture(scope="module")
def saxpy(tmp_path_factory) -> tuple:
    """The saxpy example's folder and its space document."""
    folder = init_workload("saxpy", tmp_path_factory.mktemp("workloads"))
    return folder, yaml.safe_load((folder / "space.yaml").read_text())


def write(saxpy, edit) -> str:
    """The example's space with `edit` applied, in a file beside its kernel; its path."""
    folder, doc = saxpy
    doc = copy.deepcopy(doc)
    edit(doc)
    path = folder / "edited.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def refused(saxpy, edit) -> str:
    path = write(saxpy, edit)
    with pytest.raises(TunerError) as e:
        load_space(path)
    message = str(e.value)
    assert message.startswith(f"{path}: at "), message
    assert "\n" not in message, message
    return message


def loaded(saxpy, edit=lambda d: None):
    return load_space(write(saxpy, edit))


def update(key, **values):
    return lambda d: d[key].update(values)


def put(**values):
    return lambda d: d.update(values)


def metrics(**values):
    """Metrics set (the example's GB/s, the objective, kept unless given)."""
    return lambda d: d["metrics"].update(values)


# ---- the one-line refusals, item by item -------------------------------------------------------------------
CASES = {
    # 1. booleans among a parameter's values
    "booleans": (update("parameters", FAST=[True, False]), "parameters.FAST", "use 0 and 1"),
    "a boolean among numbers": (update("parameters", FAST=[0, 1, True]), "parameters.FAST", "true is not 1"),
    # 2. grid expressions, evaluated with the first valid config for every named size
    "grid divides by zero": (
        update("launch", grid=["ceil(n / (block_size_x - 32))"]),
        "launch.grid.0",
        "for {'block_size_x': 32, 'WPT': 1} at size n=1048576 cannot be evaluated: ZeroDivisionError",
    ),
    "grid is text": (update("launch", grid=["'abc'"]), "launch.grid.0", "is 'abc', not a number of blocks"),
    "grid exponent too large": (update("launch", grid=["2 ** n"]), "launch.grid.0", "'n' is an exponent"),
    "grid is a fraction": (
        update("launch", grid=["n / (block_size_x * WPT * 3)"]),
        "launch.grid.0",
        "is 10922.666666666666, not a whole number of blocks (use ceil() or //)",
    ),
    "grid of no blocks": (update("launch", grid=["n // 100000000"]), "launch.grid.0", "is 0, fewer than 1 block"),
    "grid below zero": (update("launch", grid=["0 - n"]), "launch.grid.0", "is -1048576, fewer than 1 block"),
    "grid of a boolean": (update("launch", grid=["n > 0"]), "launch.grid.0", "is True, not a number of blocks"),
    "grid at the large size only": (
        update("launch", grid=["ceil(n / block_size_x) if n < 2**22 else 0"]),
        "launch.grid.0",
        "at size n=67108864 is 0",
    ),
    "grid with the last values": (  # the second sample: each parameter's values tried last to first
        update("launch", grid=["ceil(n / (4096 - block_size_x * WPT))"]),
        "launch.grid.0",
        "ZeroDivisionError",
    ),
    "grid with too many entries": (
        update("launch", grid=["1", "1", "1", "1"]),
        "launch.grid",
        "at most 3 entries, got 4",
    ),
    # 3. size_limits
    "limit of no size variable": (
        put(size_limits={"m": {"min": 1}, "n": {"min": 1}}),
        "size_limits.m",
        "'m' is not a size variable; expected one of n",
    ),
    "limit min above max": (
        put(size_limits={"n": {"min": 100000, "max": 10}}),
        "size_limits.n",
        "no size is allowed: min 100000 is above max 10",
    ),
    "limit max 0": (put(size_limits={"n": {"max": 0}}), "size_limits.n", "min 1 (the default) is above max 0"),
    "named size above its limit": (
        put(size_limits={"n": {"max": 4194304}}),
        "sizes.large.n",
        "67108864 is outside size_limits.n (1..4194304)",
    ),
    "named size below its limit": (
        put(size_limits={"n": {"min": 2**21}}),
        "sizes.small.n",
        "1048576 is outside size_limits.n (2097152..9223372036854775807)",
    ),
    "unknown key of a limit": (put(size_limits={"n": {"mn": 1}}), "size_limits.n", "did you mean 'min'?"),
    # 4. names that shadow one another
    "metric named like a size variable": (
        metrics(n="time * 2", **{"GB/s": "n / time"}),
        "metrics.n",
        "metrics read 'n' as n, which is already the size variable n",
    ),
    "metric named like a parameter": (
        metrics(WPT="time * 2"),
        "metrics.WPT",
        "which is already the parameter WPT",
    ),
    "metric named time": (metrics(time="n / time"), "metrics.time", "already the measured time"),
    "two metrics read as one name": (
        metrics(**{"GB/s": "n / time", "GB_s": "2 * n / time"}),
        "metrics.GB_s",
        "metrics read 'GB_s' as GB_s, which is already the metric 'GB/s'",
    ),
    "size variable named time": (
        lambda d: d.update(sizes={"small": {"time": 5}}, default_size="small", size_limits={}),
        "sizes.small.time",
        "'time' is what metrics read as the measured time",
    ),
    "size variable named itemsize": (
        lambda d: d.update(sizes={"small": {"itemsize": 5}}, default_size="small", size_limits={}),
        "sizes.small.itemsize",
        "the dtype's size in bytes",
    ),
    "parameter a dtype defines": (
        update("parameters", T=["float", "double"]),
        "dtypes.float32.defines.T",
        "'T' is also a parameter: the dtype's #define would override its values",
    ),
    # 5. true is not 1, 2.0 is not 2
    "default true": (put(defaults={"WPT": True}), "defaults.WPT", "use 0 and 1"),
    "default 2.0": (put(defaults={"WPT": 2.0}), "defaults.WPT", "2.0 is not one of its values (1, 2, 4, 8, 16)"),
    "reference config true": (
        put(reference={"config": {"block_size_x": 32, "WPT": True}}),
        "reference.config.WPT",
        "use 0 and 1",
    ),
    "reference config 2.0": (
        put(reference={"config": {"block_size_x": 32, "WPT": 2.0}}),
        "reference.config.WPT",
        "2.0 is not one of its values",
    ),
    # 6. metrics that cannot be evaluated
    "metric of a math error": (
        metrics(**{"GB/s": "log2(0) + 3 * n * itemsize / (time / 1e3) / 1e9"}),
        "metrics.GB/s",
        "cannot be evaluated: ValueError: math domain error",
    ),
    "metric of time as an exponent": (
        metrics(**{"GB/s": "n ** time"}),
        "metrics.GB/s",
        "time 1000.0 ms cannot be evaluated: ValueError: 'time' is an exponent",
    ),
    "metric that divides by zero": (metrics(x="n / (WPT - 1)"), "metrics.x", "ZeroDivisionError"),
    "metric that overflows": (metrics(x="n * 1e308"), "metrics.x", "is inf, not a finite number"),
    "metric of text": (metrics(x="'fast'"), "metrics.x", "cannot be evaluated: ValueError"),
    "metric for one dtype": (
        metrics(x="n / (itemsize - 8)"),
        "metrics.x",
        "float64 (itemsize 8), time 0.001 ms cannot be evaluated: ZeroDivisionError",
    ),
    # 7. keys, names, the objective, methods in a reference
    "unknown top-level key": (
        put(verfy={"atol": 1e-5}),
        "(top level)",
        "unknown key 'verfy' (known: workload, description,",
    ),
    "unknown key with a line break": (put(**{"ver\nfy": 1}), "(top level)", "unknown key 'ver\\nfy'"),
    "unknown key of a block": (update("objective", direcion="minimize"), "objective", "did you mean 'direction'?"),
    "define not an identifier": (
        update("dtypes", float32={"defines": {"T Y": "float"}}),
        "dtypes.float32.defines",
        "'T Y' is not a C identifier",
    ),
    "define starting with a digit": (
        update("dtypes", float32={"defines": {"1X": "float"}}),
        "dtypes.float32.defines",
        "'1X' is not a C identifier",
    ),
    "size variable not an identifier": (
        lambda d: d.update(sizes={"small": {"n-2": 5}}, default_size="small", size_limits={}),
        "sizes.small",
        "'n-2' is not a C identifier",
    ),
    "time maximized": (
        put(objective={"metric": "time", "direction": "maximize"}),
        "objective.direction",
        "'time' is minimized",
    ),
    "method in a reference": (
        put(reference={"expression": {"y": "a * x.reshape(n) + y"}}),
        "reference.expression.y",
        "methods cannot be called (x.reshape(...)): write reshape(x, ...)",
    ),
    "method that is no function": (
        put(reference={"expression": {"y": "a * x.copy() + y"}}),
        "reference.expression.y",
        "only these functions may be called: abs,",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_space_that_would_misbehave_is_refused_in_one_line(saxpy, case):
    edit, where, said = CASES[case]
    message = refused(saxpy, edit)
    assert f": at {where}: " in message, message
    assert said in message, message


def test_the_example_and_its_fixed_variants_load(saxpy):
    assert loaded(saxpy).configurations > 0
    for edit in (
        update("parameters", FAST=[0, 1]),  # 0 and 1 where booleans were
        update("launch", grid=["ceil(n / (block_size_x * WPT * 3))"]),
        update("launch", grid=["n // (block_size_x * WPT)"]),  # the sizes are powers of two: whole numbers
        update("launch", grid=["n / block_size_x / WPT"]),  # a float that is whole: as many blocks
        put(size_limits={"n": {"min": 1024, "max": 2**26}}),
        put(defaults={"WPT": 2}),
        put(reference={"config": {"block_size_x": 32, "WPT": 2}}),
        metrics(**{"GB/s": "3 * n * itemsize / (time / 1e3) / 1e9", "TB/s": "GB_s / 1e3"}),
        put(objective={"metric": "time", "direction": "minimize"}),
        put(reference={"expression": {"y": "a * reshape(x, (n,)) + y"}}),
        update("dtypes", float32={"defines": {"T": "float", "ACC_1": "double"}}),
    ):
        assert loaded(saxpy, edit).configurations > 0


# ---- the fixed behaviour of a loaded space ------------------------------------------------------------------
@pytest.mark.parametrize(
    "grid, said",
    [
        ("ceil(n / (block_size_x - 64))", "cannot be evaluated: ZeroDivisionError: division by zero"),
        ("n / (block_size_x * WPT * 3)", f"is {4096 / 192}, not a whole number of blocks (use ceil() or //)"),
        ("n // 100000", "is 0, fewer than 1 block"),
        ("0 - n", "is -4096, fewer than 1 block"),
        ("2 ** n", "'n' is an exponent or a shift here and holds 4096"),
        ("'many'", "is 'many', not a number of blocks"),
    ],
)
def test_grid_dims_refuses_a_grid_that_is_not_a_count_of_blocks(saxpy, grid, said):
    """A config or a size the load did not sample: one TunerError naming launch.grid.<i>, the config and the
    size, never a traceback or a truncated grid."""
    space = dataclasses.replace(loaded(saxpy), grid=[Expression("1"), Expression(grid)])
    with pytest.raises(TunerError) as e:
        space.grid_dims({"block_size_x": 64, "WPT": 1}, {"n": 4096})
    message = str(e.value)
    assert message.startswith(
        f"{space.path}: at launch.grid.1: '{grid}' for {{'block_size_x': 64, 'WPT': 1}} at size n=4096 "
    )
    assert said in message and "\n" not in message, message


def test_grid_dims_of_whole_numbers(saxpy):
    space = dataclasses.replace(loaded(saxpy), grid=[Expression("n / block_size_x"), Expression("2.0")])
    assert space.grid_dims({"block_size_x": 64, "WPT": 1}, {"n": 4096}) == [64, 2, 1]
    assert all(type(d) is int for d in space.grid_dims({"block_size_x": 64, "WPT": 1}, {"n": 4096}))


def test_size_limits_apply_to_every_size_and_say_the_range(saxpy):
    space = loaded(saxpy)
    with pytest.raises(TunerError, match=r"impossible size for saxpy: n=2147483648 \(allowed 1\.\.2147483647\)"):
        space.resolve_size("n=2147483648")
    capped = dataclasses.replace(space, size_limits={"n": {"max": 0}})  # once said "allowed 1..any"
    with pytest.raises(TunerError, match=r"n=7 \(allowed 1\.\.0\)"):
        capped.resolve_size("n=7")
    narrow = dataclasses.replace(space, size_limits={"n": {"min": 10, "max": 2**20}})
    assert narrow.resolve_size("small") == ("small", {"n": 1048576})
    with pytest.raises(TunerError, match=r"impossible size for saxpy: n=67108864 \(allowed 10\.\.1048576\)"):
        narrow.resolve_size("large")  # a named size too (a space made without the loader)
    unlimited = dataclasses.replace(space, size_limits={})
    with pytest.raises(TunerError, match=r"n=0 \(allowed 1\.\.9223372036854775807\)"):
        unlimited.resolve_size("n=0")


@pytest.mark.parametrize(
    "config, ok",
    [
        ({"block_size_x": 32, "WPT": 2}, True),
        ({"block_size_x": 32, "WPT": True}, False),
        ({"block_size_x": 32, "WPT": 2.0}, False),
        ({"block_size_x": 32.0, "WPT": 2}, False),
        ({"block_size_x": 32, "WPT": "2"}, False),
    ],
)
def test_checked_config_values_are_of_the_same_kind(saxpy, config, ok):
    space = loaded(saxpy)
    if ok:
        assert space.checked(config, "--config") == config
    else:
        with pytest.raises(TunerError, match=r"--config: values outside the space: "):
            space.checked(config, "--config")


def test_one_of_is_strict_about_kinds():
    import numpy as np

    assert one_of(2, [1, 2, 4]) and one_of(np.int64(2), [1, 2, 4]) and one_of(2.5, [0.5, 2.5])
    assert one_of(np.float32(0.5), [0.5]) and one_of("float", ["float", "double"])
    assert not one_of(True, [0, 1]) and not one_of(1, [True, False]) and not one_of(np.bool_(True), [1])
    assert not one_of(2.0, [1, 2, 4]) and not one_of(2, [2.0]) and not one_of("2", [2])


def test_a_metric_undefined_for_one_config_is_still_nan_at_run_time(saxpy):
    """The load evaluates the metrics with a sample; a config it did not sample where a metric is undefined is
    NaN for that config, as before (only the strict check, on loading, refuses)."""
    space = loaded(saxpy, metrics(**{"GB/s": "3 * n * itemsize / (time / 1e3) / 1e9", "x": "n / (WPT - 2)"}))
    values = space.compute_metrics({"block_size_x": 32, "WPT": 2, "time": 1.0}, {"n": 1024}, "float32")
    assert math.isnan(values["x"]) and values["GB/s"] > 0
    with pytest.raises(TunerError, match=r"at metrics\.x: 'n / \(WPT - 2\)' for .* ZeroDivisionError"):
        space.compute_metrics({"block_size_x": 32, "WPT": 2, "time": 1.0}, {"n": 1024}, "float32", strict=True)


def test_the_samples_are_found_without_listing_the_space(saxpy, monkeypatch):
    """Two valid configs, each parameter's values tried first to last and last to first; a search that runs
    out of restriction tests gives up (no sample, nothing refused) rather than make the load slow."""
    params = {"a": [1, 2, 3, 4], "b": [1, 2, 3, 4], "c": list(range(100))}
    restrictions = [Expression("a * b >= 6"), Expression("c % 7 == 3")]
    assert loader._sample_configs(params, restrictions) == [{"a": 2, "b": 3, "c": 3}, {"a": 4, "b": 4, "c": 94}]
    assert loader._sample_configs({"a": [1, 2]}, [Expression("a > 5")]) == []
    monkeypatch.setattr(loader, "SAMPLE_EVALUATIONS", 3)
    assert loader._sample_configs(params, restrictions) == []
    # a broken grid the samples do not reach is found when it is used, not on loading
    space = loaded(saxpy, update("launch", grid=["ceil(n / abs(block_size_x - 64))"]))
    with pytest.raises(TunerError, match=r"launch\.grid\.0: .* ZeroDivisionError"):
        space.grid_dims({"block_size_x": 64, "WPT": 1}, {"n": 4096})


def test_each_dtype_is_sampled_under_its_own_restrictions(saxpy):
    """A grid undefined only where a dtype's own restrictions rule a config out is not refused for it; a
    dtype without them is sampled with the space's restrictions alone."""

    def grid(*dtypes):
        def edit(d):
            d["launch"]["grid"] = ["ceil(n / (block_size_x * (WPT - 1)))"]
            for dtype in dtypes:
                d["dtypes"][dtype]["restrictions"] = ["WPT > 1"]

        return edit

    assert loaded(saxpy, grid("float32", "float64")).configurations > 0
    assert "ZeroDivisionError" in refused(saxpy, grid("float32"))  # float64's campaigns would run WPT=1
    assert "ZeroDivisionError" in refused(saxpy, grid("float64"))


def test_every_builtin_space_loads_and_is_sampled_quickly():
    for name in BUILTINS:
        space = get_workload(name).space
        for dtype in space.dtypes:
            start = time.monotonic()
            configs = loader._sample_configs(space.params, [Expression(r) for r in space.restrictions_for(dtype)])
            assert time.monotonic() - start < 2, name
            assert configs and all(space.is_valid(c, dtype) for c in configs), name
            for config in configs:
                for size in space.sizes.values():
                    assert all(d >= 1 for d in space.grid_dims(config, size))
