"""Restrictions of one dtype (`dtypes: {int32: {restrictions: [...]}}`): checked on loading as the space's are,
added to the space's in every campaign of that dtype (search space, replay, warm start), and hashed into the
study's name only where a dtype has some. No GPU."""

import hashlib
import json
import shutil

import pandas as pd
import pytest
import yaml

from tuner.campaign.request import CampaignRequest, resolve
from tuner.errors import TunerError
from tuner.locations import BUILTIN_SPACES
from tuner.measure import kt
from tuner.measure.replay import replay
from tuner.search.strategies import make_strategy
from tuner.search.warmstart import warm_configs
from tuner.space import load_space
from tuner.workloads import BUILTINS, get_workload

REDUCTION = yaml.safe_load((BUILTIN_SPACES / "reduction.yaml").read_text())
GEMM = get_workload("gemm").space


def reduction_with(tmp_path, int32: dict) -> str:
    """The reduction space in tmp_path, its int32 entry updated with `int32`."""
    shutil.copy(BUILTIN_SPACES / REDUCTION["kernel"]["source"], tmp_path / "reduce.cu")
    doc = yaml.safe_load(yaml.safe_dump(REDUCTION))
    doc["kernel"]["source"] = "reduce.cu"
    doc["dtypes"]["int32"].update(int32)
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def old_hash(space) -> str:
    """Space.space_hash as computed before dtypes had restrictions."""
    text = json.dumps({"params": space.params, "restrictions": space.restrictions}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def variants(configs, space=GEMM) -> set:
    return {dict(zip(space.params, c))["variant"] for c in configs}


# ---- loading -----------------------------------------------------------------------------------------------
def test_a_dtype_restriction_is_loaded_and_applies_to_its_dtype_alone(tmp_path):
    space = load_space(reduction_with(tmp_path, {"restrictions": ["variant != 7"]}))
    assert space.dtype_restrictions == {"int32": ["variant != 7"]}
    assert space.restrictions == REDUCTION["restrictions"]  # the space's own, as before
    assert space.restrictions_for("int32") == [*REDUCTION["restrictions"], "variant != 7"]
    assert space.restrictions_for("float32") == space.restrictions_for(None) == space.restrictions
    seven = next(c for c in (dict(zip(space.params, v)) for v in kt.searchspace(space).list) if c["variant"] == 7)
    assert space.is_valid(seven) and space.is_valid(seven, "float32") and not space.is_valid(seven, "int32")
    with pytest.raises(TunerError, match="breaks a restriction of the space for int32"):
        space.checked(seven, "--config", "int32")
    assert variants(kt.searchspace(space, "int32").list, space) == {1, 2, 3, 4, 5, 6}
    assert kt.searchspace(space, "float32").size == space.configurations


@pytest.mark.parametrize(
    "restrictions, where, says",
    [
        (["variant >"], "dtypes.int32.restrictions.0", "not a valid expression"),
        (["varaint != 5"], "dtypes.int32.restrictions.0", "unknown name(s) varaint"),
        (["__import__('os')"], "dtypes.int32.restrictions.0", "only these functions"),
        (["variant != 5", "False"], "dtypes.int32.restrictions.1", "'False' holds for no configuration"),
        (["variant > 7"], "dtypes.int32.restrictions", "the space's restrictions and int32's leave no valid"),
        (["1 // (variant - 3) == 0"], "dtypes.int32.restrictions.0", "ZeroDivisionError"),
        ("variant != 5", "dtypes.int32.restrictions", "expected array"),
    ],
)
def test_a_malformed_dtype_restriction_is_one_clear_line(tmp_path, restrictions, where, says):
    with pytest.raises(TunerError) as e:
        load_space(reduction_with(tmp_path, {"restrictions": restrictions}))
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'space.yaml'}: at {where}: "), message
    assert says in message, message


def test_a_trusted_reference_config_must_meet_every_dtypes_restrictions(tmp_path):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(int n, float *y) {}\n')
    doc = {
        "workload": "k",
        "kernel": {"source": "k.cu", "name": "k"},
        "parameters": {"block_size_x": [64, 128]},
        "launch": {"block": ["block_size_x"], "grid": ["ceil(n / block_size_x)"]},
        "sizes": {"small": {"n": 1000}},
        "dtypes": {"float32": {}, "int32": {"restrictions": ["block_size_x > 64"]}},
        "metrics": {"per_ms": "n / time"},
        "objective": {"metric": "per_ms", "direction": "maximize"},
        "arguments": [{"name": "n", "scalar": "n"}, {"name": "y", "shape": ["n"], "output": True}],
        "reference": {"config": {"block_size_x": 64}},
    }
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(TunerError, match=r"at reference\.config: the config breaks dtype int32's restriction"):
        load_space(tmp_path / "space.yaml")


# ---- GEMM: variant 5 is float32 only ------------------------------------------------------------------------
def test_gemm_int32_leaves_out_the_tensor_core_variant_and_float32_keeps_it():
    float32, int32 = resolve(CampaignRequest("gemm", dtype="float32")), resolve(CampaignRequest("gemm", dtype="int32"))
    assert float32.searchspace.size == kt.searchspace(GEMM).size == GEMM.configurations == 2384
    assert 5 in variants(float32.searchspace.list)
    assert variants(int32.searchspace.list) == {1, 2, 3, 4} and int32.searchspace.size == 2384 - 151
    restrictions = kt.tuning_options(GEMM, GEMM.sizes["256x256x256"], "int32").restrictions
    assert restrictions == [*GEMM.restrictions, "variant != 5"]  # what Kernel Tuner checks too


def recording(path, configs) -> None:
    """A Kernel Tuner cache of GEMM holding `configs` (made-up times), as a campaign would have written it."""
    cache = {}
    for i, c in enumerate(configs):
        time = 1.0 + i / 100
        cache[",".join(str(c[k]) for k in GEMM.params)] = {
            **c, "time": time, "times": [time] * 3, "compile_time": 1.0, "verification_time": 0,
            "benchmark_time": 3 * time, "timestamp": "2026-11-28 00:00:00+00:00",
        }
    doc = {"device_name": "NVIDIA H200", "kernel_name": "gemm", "problem_size": "callable",
           "tune_params_keys": list(GEMM.params), "tune_params": GEMM.params, "objective": "time", "cache": cache}
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("strategy", ["brute_force", "tpe"])
def test_an_int32_replay_never_evaluates_variant_5(tmp_path, strategy):
    """A recording holding variant 5 (as an int32 campaign's held its compile failures) replayed for float32 and
    int32: the int32 replay, and the Optuna sampler's valid configs, hold the other variants alone."""
    configs = [dict(zip(GEMM.params, c)) for c in kt.searchspace(GEMM).list]
    held = [c for v in (1, 3, 4, 5) for c in [c for c in configs if c["variant"] == v][:6]]
    recording(tmp_path / "1024x1024x1024_int32.cache.json", held)
    results = {}
    for dtype in ("float32", "int32"):
        out, _ = replay(GEMM, GEMM.sizes["1024x1024x1024"], dtype, tmp_path / "1024x1024x1024_int32.cache.json",
                        make_strategy(strategy, seed=0), max_evals=100)
        results[dtype] = {tuple(r[k] for k in GEMM.params) for r in out if r is not None}
    assert results["float32"] == {tuple(c.values()) for c in held}  # every config held, variant 5 too
    assert results["int32"] == {tuple(c.values()) for c in held if c["variant"] != 5}


def test_a_stored_config_invalid_for_the_dtype_is_never_a_warm_start():
    configs = [dict(zip(GEMM.params, c)) for c in kt.searchspace(GEMM).list]
    tensor, tiled = (next(c for c in configs if c["variant"] == v) for v in (5, 4))
    rows = pd.DataFrame(
        [
            {"workload": "gemm", "status": "ok", "gpu": "G", "dtype": "float32", "config": json.dumps(c),
             "size_vars": json.dumps({"m": 512, "n": 512, "k": 512}), "objective_value": v}
            for c, v in ((tensor, 200.0), (tiled, 100.0))
        ]
    )
    target = {"m": 1024, "n": 1024, "k": 1024}
    assert warm_configs(rows, GEMM, target, "float32", "G") == [tensor, tiled]
    assert warm_configs(rows, GEMM, target, "int32", "G") == [tiled]


# ---- the space hash ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_the_hash_of_a_dtype_without_restrictions_is_the_old_one(name):
    space = get_workload(name).space
    for dtype in space.dtypes:
        if dtype not in space.dtype_restrictions:
            assert space.space_hash_for(dtype) == old_hash(space), dtype
    if not space.dtype_restrictions:
        assert space.space_hash == old_hash(space)


def test_a_dtype_restriction_changes_its_dtypes_hash_alone(tmp_path):
    plain = load_space(reduction_with(tmp_path, {}))
    seven = load_space(reduction_with(tmp_path, {"restrictions": ["variant != 7"]}))
    six = load_space(reduction_with(tmp_path, {"restrictions": ["variant != 6"]}))
    assert seven.space_hash_for("float32") == six.space_hash_for("float32") == plain.space_hash_for("int32")
    assert len({plain.space_hash_for("int32"), seven.space_hash_for("int32"), six.space_hash_for("int32")}) == 3
    assert GEMM.space_hash_for("float32") == old_hash(GEMM) != GEMM.space_hash_for("int32")
