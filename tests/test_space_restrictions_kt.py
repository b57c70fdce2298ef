"""Restrictions reach Kernel Tuner in a form it evaluates exactly as our checker does, and every count of a space
applies the same thread limit: the load-time count (load_space(...).configurations), Kernel Tuner's Searchspace
(tuner.measure.kt.searchspace) and a brute force over the product agree, for the forms Kernel Tuner's own parser
crashed on or misread and for those it reads right (which stay strings: its fast path)."""

import copy
import itertools
import math
import pickle
import shutil

import pytest
import yaml
from kernel_tuner.util import check_restrictions

from tuner.errors import TunerError
from tuner.locations import BUILTIN_SPACES
from tuner.measure import kt, kt_restrictions
from tuner.space import load_space
from tuner.space.configurations import MAX_THREADS, count_configurations
from tuner.space.expressions import Expression
from tuner.space.model import kt_block_names
from tuner.workloads import BUILTINS, get_workload

REDUCTION = yaml.safe_load((BUILTIN_SPACES / "reduction.yaml").read_text())

PARAMS = {
    "block_size_x": [32, 64, 128, 256],
    "a": [0, 1, 2, 3, 4, 5, 6, 8, 12, 16],
    "b": [1, 2, 3, 4, 8],
    "c": [0, 1, 2, 3, 5, 8, 16],
    "sh": [0, 1, 2, 3],
    "WPT": [1, 2, 4, 8],
}

# what Kernel Tuner 1.5 (python-constraint's parser) crashed on: a NameError, a SyntaxError, a ValueError ("not in
# tune_params"), a TypeError (a function of no parameter called with all of them)
CRASHED = [
    "ceil(block_size_x / 64) * WPT <= 8",
    "floor(a / 3) + b <= 5",
    "abs(a - b) <= 2",
    "log2(b) <= 2",
    "sqrt(a) <= 3",
    "(1 << sh) * b <= 16",
    "a >> sh >= 2",
    "(a > 2) == (b > 2)",
    "(a > 2) + (b > 2) == 1",
    "min(a, b) <= c",
    "2<=a<8",
    "2 <=a < 8",
    "True",
    "1",
    "'abc'",
]
# what it read without a word but wrongly (its shapes see only + - * / ** and rewrite across the comparison)
MISREAD = [
    "a % b == c",  # read as b + c == a
    "a % b <= c",
    "a // 2 <= 3",  # read as a <= 9
    "a // b <= c",
    "a != b != c",  # read as all different
    "a * block_size_x < 32768",  # < read as <= 32768 - 1e-12, which is 32768.0
]
# what it reads right: the same counts, and they stay strings
READ_RIGHT = [
    "a * b <= 16",
    "a*b<16",
    "2 <= a < 8",
    "1 < a < b < c",
    "a <= b <= c <= 16",
    "64 <= block_size_x * WPT <= 1024",
    "a * b * c <= 64",
    "a + b >= 10",
    "a + b == 8",
    "a * b == 16",
    "a * b > 20",
    "a <= b * c",
    "a * b <= c",
    "a == b",
    "b <= a",
    "a > b",
    "a == 3",
    "3 == a",
    "a != 3",
    "a != b",
    "a in (1, 2)",
    "a not in [1, 2]",
    "a % 2",
    "a % 4 == 0",
    "a & b",
    "(a & b) == 0",
    "a | b",
    "a ^ b",
    "a ** 2 <= 16",
    "a ** sh <= 16",
    "(a + b) * c <= 30",
    "a + b * c <= 20",
    "(a)*(b) <= 16",
    "(block_size_x // b) * (block_size_x // WPT) <= 64",
    "a == 0 or b == 1",
    "a == 0 or (b > 2 and c < 5)",
    "(a > 2) == (b > 2) or c == 0",
    "max(a, b) <= c or a == 0",
    "a if b else c",
    "(a if sh else b) <= 3",
    "not a",
    "a < b or 2 <= c < 8",
]

# what it may read right, but not in a shape the rule trusts: ours too (the same counts)
UNTRUSTED = [
    "a if b > 2 else c",
    "c - 2 <= 3",
    "a * c * block_size_x < 100000",
    "max(a, b) <= 4",
    "int(a / 3) == 1",
    "a < b == c",
]


def write_space(tmp_path, params, restrictions=(), block=("block_size_x",), dtype_restrictions=None) -> str:
    """A space of the reduction kernel with these parameters, restrictions and launch.block."""
    doc = copy.deepcopy(REDUCTION)
    shutil.copy(BUILTIN_SPACES / doc["kernel"]["source"], tmp_path / "reduce.cu")
    doc["kernel"]["source"] = "reduce.cu"
    doc["parameters"] = params
    doc["restrictions"] = list(restrictions)
    doc["launch"] = {"block": list(block), "grid": [f"ceil(n / {block[0]})"]}
    doc.pop("baselines", None)
    if dtype_restrictions:
        doc["dtypes"]["int32"]["restrictions"] = list(dtype_restrictions)
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def brute_force(params, restrictions, block=("block_size_x",)) -> int:
    """The configs of the product that meet every restriction (our checker's meaning) and launch at most
    MAX_THREADS threads a block."""
    exprs = [Expression(r) for r in restrictions]
    names = [n for n in kt_block_names(list(block)) if n in params]
    count = 0
    for values in itertools.product(*params.values()):
        config = dict(zip(params, values))
        if math.prod(config[n] for n in names) <= MAX_THREADS and all(bool(e(config)) for e in exprs):
            count += 1
    return count


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))


def counts(path, dtype=None):
    space = load_space(path)
    return space, space.configurations, kt.searchspace(space, dtype).size


@pytest.mark.parametrize("restriction", CRASHED + MISREAD)
def test_forms_kernel_tuner_got_wrong_count_the_same_everywhere(tmp_path, restriction):
    space, loaded, searched = counts(write_space(tmp_path, PARAMS, [restriction]))
    assert loaded == searched == brute_force(PARAMS, [restriction])
    assert not isinstance(kt.kt_restrictions(space)[0], str)  # evaluated by our checker


@pytest.mark.parametrize("restriction", UNTRUSTED)
def test_forms_the_rule_does_not_trust_count_the_same(tmp_path, restriction):
    space, loaded, searched = counts(write_space(tmp_path, PARAMS, [restriction]))
    assert loaded == searched == brute_force(PARAMS, [restriction])
    assert not isinstance(kt.kt_restrictions(space)[0], str)


@pytest.mark.parametrize("restriction", READ_RIGHT)
def test_forms_kernel_tuner_reads_right_stay_strings_and_count_the_same(tmp_path, restriction):
    space, loaded, searched = counts(write_space(tmp_path, PARAMS, [restriction]))
    assert loaded == searched == brute_force(PARAMS, [restriction])
    assert kt.kt_restrictions(space) == [restriction]


def test_text_parameters_and_negative_values(tmp_path):
    """A text parameter (compared only) and a parameter with negative values (Kernel Tuner's own eval puts
    str(value) in place of a name: `-2 ** 2` is -4) are ours."""
    params = {"block_size_x": [64, 128, 256], "mode": ["fast", "safe", "exact"], "s": [-2, -1, 0, 3], "a": [0, 1, 2]}
    restrictions = ["mode == 'fast' or a > 0", "mode in ('safe', 'exact')", "s ** 2 <= 4 or a == 2", "s < a"]
    space = load_space(write_space(tmp_path, params, restrictions))
    assert not any(isinstance(r, str) for r in kt.kt_restrictions(space))
    options = kt.tuning_options(space, {"n": 1 << 20}, "float32", metrics=False)
    exprs = [Expression(r) for r in restrictions]
    for values in itertools.product(*params.values()):
        config = dict(zip(params, values))
        assert bool(check_restrictions(options.restrictions, config, False)) == all(e(config) for e in exprs)
    for r in restrictions:
        _, loaded, searched = counts(write_space(tmp_path, params, [r]))
        assert loaded == searched == brute_force(params, [r]), r
    _, loaded, searched = counts(write_space(tmp_path, params, restrictions))
    assert loaded == searched == brute_force(params, restrictions)


def test_a_mixed_list_and_a_dtypes_own(tmp_path):
    restrictions = [
        "a * b <= 32",  # a string python-constraint makes a MaxProdConstraint of
        "ceil(block_size_x / 64) * WPT <= 8",  # ours
        "a == 0 or b < 8",  # a string: a function of the text
        "(a > 2) == (b > 2)",  # ours
        "64 <= block_size_x * WPT <= 512",  # a string: a chain
        "a % b <= c",  # ours (misread)
        "a * b <= 32",  # the same twice
    ]
    dtype_own = ["abs(a - c) <= 4", "sh <= 2"]
    path = write_space(tmp_path, PARAMS, restrictions, dtype_restrictions=dtype_own)
    space, loaded, searched = counts(path)
    assert loaded == searched == brute_force(PARAMS, restrictions) > 0
    given = kt.kt_restrictions(space)
    assert [isinstance(r, str) for r in given] == [True, False, True, False, True, False, True]
    assert kt.searchspace(space, "int32").size == brute_force(PARAMS, restrictions + dtype_own) > 0
    assert kt.searchspace(space, "float32").size == loaded


def test_tuning_options_get_the_same_restrictions_and_mean_them(tmp_path):
    """The tuning options Kernel Tuner's runners read (a simulation checks a config its cache lacks with
    kernel_tuner.util.check_restrictions) get the same conversion, and it means what our checker does."""
    restrictions = ["a * b <= 32", "ceil(block_size_x / 64) * WPT <= 8", "a == 0 or b < 8", "a % b <= c"]
    space = load_space(write_space(tmp_path, PARAMS, restrictions))
    options = kt.tuning_options(space, {"n": 1 << 20}, "float32", metrics=False)
    assert [type(r) for r in options.restrictions] == [type(r) for r in kt.kt_restrictions(space, "float32")]
    assert [type(r) for r in options.restrictions_unmodified] == [type(r) for r in options.restrictions]
    exprs = [Expression(r) for r in restrictions]
    for values in itertools.islice(itertools.product(*PARAMS.values()), 0, None, 3):
        config = dict(zip(PARAMS, values))
        assert bool(check_restrictions(options.restrictions, config, False)) == all(e(config) for e in exprs)


def test_a_checked_restriction_copies_and_pickles():
    params = {"a": [1, 2, 3], "b": [1, 2]}
    (r,) = kt_restrictions.restrictions_for_kernel_tuner(["ceil(a / 2) == b"], params)
    assert isinstance(r, kt_restrictions.CheckedRestriction) and "ceil(a / 2) == b" in repr(r)
    want = [(a + 1) // 2 == b for a, b in itertools.product([1, 2, 3], [1, 2])]
    for other in (copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
        assert [other.holds_for_values(a, b) for a, b in itertools.product([1, 2, 3], [1, 2])] == want


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_the_builtin_spaces_restrictions_stay_strings(name):
    """Kernel Tuner's fast path (python-constraint's own constraints, functions it compiles itself) for every
    built-in space: Floyd-Warshall's 1.45M configs count in seconds."""
    space = get_workload(name).space
    for dtype in [None, *space.dtypes]:
        assert kt.kt_restrictions(space, dtype) == space.restrictions_for(dtype)


# ---- the thread limit ---------------------------------------------------------------------------------------


def test_the_thread_limit_with_kernel_tuners_names(tmp_path):
    params = {"block_size_x": [256, 512, 1024, 2048], "block_size_y": [1, 2], "a": [1, 2]}
    space, loaded, searched = counts(write_space(tmp_path, params))
    assert loaded == searched == brute_force(params, []) == 10  # of 16: 256 x {1, 2}, 512 x {1, 2}, 1024 x 1
    space, loaded, searched = counts(write_space(tmp_path, params, ["a * block_size_x <= 1024"]))
    assert loaded == searched == brute_force(params, ["a * block_size_x <= 1024"]) == 9


@pytest.mark.parametrize("block", [["bx"], ["bx", "by"], ["bx", "by", "bz"]])
def test_the_thread_limit_with_the_spaces_own_block_names(tmp_path, block):
    params = {"bx": [256, 512, 1024, 2048], "by": [1, 2], "bz": [1, 2], "block_size_x": [1024, 2048], "a": [1, 2]}
    path = write_space(tmp_path, params, ["a * bx <= 4096"], block=block)
    space, loaded, searched = counts(path)
    assert loaded == searched == brute_force(params, ["a * bx <= 4096"], block)
    names = kt_block_names(block)
    for values in kt.searchspace(space).list:
        config = dict(zip(space.params, values))
        assert math.prod(config.get(n, 1) for n in names) <= MAX_THREADS  # never bx = 2048, mid-campaign


def test_a_given_config_over_the_thread_limit_is_refused(tmp_path):
    """A config given by hand (--config, a reference, a campaign's first configs) is checked as the count is:
    one the space cannot launch is one line, not a launch failure on the GPU."""
    params = {"bx": [256, 512, 1024, 2048], "by": [1, 2], "block_size_x": [1024, 2048]}
    space = load_space(write_space(tmp_path, params, block=["bx", "by"]))
    assert space.checked({"bx": 512, "by": 2, "block_size_x": 2048}) == {"bx": 512, "by": 2, "block_size_x": 2048}
    with pytest.raises(TunerError, match=r"--config launches 2048 threads a block, more than 1024"):
        space.checked({"bx": 1024, "by": 2, "block_size_x": 1024}, "--config")


def test_count_configurations_takes_the_block_names(tmp_path):
    """The loader may give launch.block itself (None: the count reads it from the space file)."""
    params = {"bx": [256, 512, 1024, 2048], "by": [1, 2], "block_size_x": [1024, 2048]}
    path = write_space(tmp_path, params, block=["bx", "by"])
    assert count_configurations(path, params, []) == 5 * 2  # (bx, by) <= 1024 threads: 5 of 8
    assert count_configurations(path, params, [], None, ["bx", "by"]) == 5 * 2
    assert count_configurations(path, params, [], None, []) == 4 * 2 * 1  # Kernel Tuner's names: block_size_x alone


@pytest.mark.parametrize(
    "params, restrictions, block, at",
    [
        ({"block_size_x": [2048, 4096], "a": [1, 2]}, [], ["block_size_x"], "launch.block"),
        ({"block_size_x": [512, 2048], "a": [1, 2]}, ["block_size_x > 1024"], ["block_size_x"], "launch.block"),
        ({"bx": [64, 128], "by": [16, 32], "a": [1, 2]}, ["bx * by >= 2048 or a == 5"], ["bx", "by"], "launch.block"),
    ],
)
def test_a_space_with_no_launchable_config_is_refused_at_load(tmp_path, params, restrictions, block, at):
    path = write_space(tmp_path, params, restrictions, block=block)
    with pytest.raises(TunerError) as e:
        load_space(path)
    said = str(e.value)
    assert said.startswith(f"{path}: at {at}: no configuration can be launched"), said
    assert f"more than {MAX_THREADS} threads a block ({' * '.join(block)})" in said and "\n" not in said


def test_restrictions_that_leave_nothing_are_still_said_as_such(tmp_path):
    path = write_space(tmp_path, {"block_size_x": [2048, 4096], "a": [1, 2]}, ["a > 2"])
    with pytest.raises(TunerError, match=r"at restrictions: the restrictions leave no valid configuration of 4"):
        load_space(path)
