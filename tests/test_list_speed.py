"""What makes a first `tuner list` quick, kept to the answers it gave before: a space's configs counted group by
group of the parameters its restrictions tie together (errors told as the whole space's search tells them); a
dtype's count kept from the load that counted it; the store's rows read of the columns a listing counts from,
leaving out what a whole read leaves out; and the listing of a workload kept whole, made again when any file it
read changes. No GPU; no timings asserted."""

from __future__ import annotations

import io
import itertools
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tuner import locations
from tuner.cli import main
from tuner.space import configurations
from tuner.space.errors import SpaceError
from tuner.space.expressions import Expression
from tuner.space.model import MAX_THREADS
from tuner.store import coverage, parts
from tuner.store import recordings as recordings_module
from tuner.store.schema import collect
from tuner.workloads import get_workload

GPU_DIR = "nvidia-h100-80gb-hbm3"
SOURCE = locations.BUILTIN_RESULTS / GPU_DIR / "reduction"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed store's H100 reduction rows."""
    if not SOURCE.is_dir():
        pytest.skip("no committed reduction rows in results/")
    root = tmp_path / "store"
    shutil.copytree(SOURCE, root / GPU_DIR / "reduction")
    monkeypatch.setenv("TUNER_RESULTS", str(root))
    return root


# ---- counting a space's configs ------------------------------------------------------------------------------

SPACES = {
    # a group of three tied by two restrictions, a pair tied by one, and two parameters in none
    "groups": (
        {"a": [1, 2, 4, 8], "b": [1, 2, 3], "c": [0, 1], "d": [1, 2, 3, 4, 5], "e": [0, 1], "f": [7, 8, 9], "g": [1]},
        ["a * b <= 8", "b != c + 2", "d % 2 == e"],
        [],
    ),
    # the thread block's product ties its parameters, which no restriction names together
    "block": (
        {"x": [32, 64, 128, 256, 512, 1024], "y": [1, 2, 4, 8], "u": [0, 1, 2], "v": [True, False]},
        ["u < 2 or v"],
        ["x", "y"],
    ),
    # one restriction over every parameter: one group, searched whole as before
    "one group": ({"p": [1, 2, 3], "q": [1, 2, 3], "r": [1, 2]}, ["p + q + r != 5", "p <= q"], []),
    # nothing restricted: the product of the value counts
    "free": ({"s": [1, 2, 3], "t": ["a", "b"], "w": [0.5, 1.0]}, [], []),
}


def _brute_force(params: dict, restrictions: list[str], block: list[str]) -> int:
    exprs = [Expression(r) for r in restrictions]
    count = 0
    for values in itertools.product(*params.values()):
        config = dict(zip(params, values))
        if all(e(config) for e in exprs) and math.prod(config[n] for n in block) <= MAX_THREADS:
            count += 1
    return count


def _solved(params: dict, restrictions: list[str], block: list[str]) -> int:
    exprs = [(["restrictions", i], Expression(r)) for i, r in enumerate(restrictions)]
    return configurations._solve("space.yaml", params, exprs, ["restrictions"], block)


@pytest.mark.parametrize("name", SPACES)
def test_a_count_by_groups_is_the_count_of_every_config(name):
    params, restrictions, block = SPACES[name]
    assert _solved(params, restrictions, block) == _brute_force(params, restrictions, block)


def test_parameters_are_grouped_by_what_ties_them():
    params, restrictions, _ = SPACES["groups"]
    exprs = [([], Expression(r)) for r in restrictions]
    groups = sorted(sorted(g) for g in configurations._groups(params, exprs, []))
    assert groups == [["a", "b", "c"], ["d", "e"], ["f"], ["g"]]
    params, restrictions, block = SPACES["block"]
    groups = configurations._groups(params, [([], Expression(r)) for r in restrictions], block)
    assert sorted(sorted(g) for g in groups) == [["u", "v"], ["x", "y"]]


def _told(monkeypatch: pytest.MonkeyPatch, params: dict, restrictions: list[str], grouped: bool) -> str:
    with monkeypatch.context() as m:
        if not grouped:  # the whole space's search, as every count was made before groups
            m.setattr(configurations, "_groups", lambda params, restrictions, block: [set(params)])
        with pytest.raises(SpaceError) as e:
            configurations.count_configurations("space.yaml", params, [Expression(r) for r in restrictions], None, [])
    return str(e.value)


@pytest.mark.parametrize(
    "restrictions",
    [
        ["a > 5"],  # a group holds no config: the restrictions leave none
        ["b // (a - 2) >= 0"],  # a restriction that cannot be evaluated for a=2
        ["a < 3", "c // (b - 1) >= 0", "b != 3"],  # one that cannot be evaluated, in another group than the first
    ],
)
def test_a_space_that_fails_is_told_as_the_whole_search_tells_it(cache, monkeypatch, restrictions):
    params = {"a": [1, 2, 3], "b": [1, 2, 3], "c": [0, 4], "d": [1, 2]}
    grouped = _told(monkeypatch, params, restrictions, grouped=True)
    assert grouped == _told(monkeypatch, params, restrictions, grouped=False)
    assert "space.yaml" in grouped


def test_the_count_of_a_dtype_is_kept_by_the_load_that_counted_it(tmp_path, cache, monkeypatch):
    """A space whose dtype has restrictions of its own is counted with them on loading; that count is kept for
    the listing's question (space_size), which then counts nothing."""
    from tests.test_dtype_restrictions import reduction_with
    from tuner.space import load_space

    space = load_space(reduction_with(tmp_path, {"restrictions": ["variant != 7"]}))

    def no_counting(*args: object) -> int:
        raise AssertionError("counted again")

    with monkeypatch.context() as m:
        m.setattr(configurations, "_count", no_counting)
        kept = coverage.space_size(space, "int32")
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "another-cache"))
    assert kept == coverage.space_size(space, "int32") < space.configurations


# ---- reading the store's rows of a few columns ---------------------------------------------------------------


def _row(i: int, **changed: object) -> dict:
    return {
        "workload": "w",
        "size": "s",
        "size_vars": "{}",
        "dtype": "float32",
        "config": f'{{"i": {i}}}',
        "status": "ok",
        "gpu": "Fake GPU",
        "metrics": "{}",
        "timestamp": f"t{i:06d}",
        "objective_value": float(i),
        "time_ms": 1.0 + i,
        "times": [1.0, 2.0],
        "p_i": i,
        "host": "h",
        **changed,
    }


def _damaged_store(root: Path) -> None:
    """Parts of every kind a read meets: alike ones (read as one frame), one with a column more, rows the schema
    leaves out, a column missing, one of the wrong type, an empty part, one without pandas' note of its dtypes,
    one with a column of nothing but nulls, one truncated, and one not Parquet at all."""
    folder = root / "evaluations"
    folder.mkdir(parents=True)
    frame = pd.DataFrame
    parts.write_parquet(frame([_row(1), _row(2)]), folder / "a1.parquet")
    parts.write_parquet(frame([_row(3)]), folder / "a2.parquet")
    parts.write_parquet(frame([_row(4, timing="delayed"), _row(5, timing="delayed")]), folder / "b.parquet")
    bad = [_row(6, objective_value=math.inf), _row(7, status="compile_error", time_ms=math.nan), _row(8)]
    parts.write_parquet(frame(bad), folder / "c.parquet")
    parts.write_parquet(frame([_row(9)]).drop(columns=["time_ms"]), folder / "d.parquet")
    parts.write_parquet(frame([_row(10, time_ms=True)]), folder / "e.parquet")
    parts.write_parquet(frame([_row(11)]).iloc[:0], folder / "f.parquet")
    pq.write_table(pa.Table.from_pylist([_row(12), _row(13)]), folder / "g.parquet")
    parts.write_parquet(frame([_row(14, timing=None), _row(15, timing=None)]), folder / "h.parquet")
    whole = io.BytesIO()
    frame([_row(16)]).to_parquet(whole, index=False)
    (folder / "i.parquet").write_bytes(whole.getvalue()[: len(whole.getvalue()) // 2])
    (folder / "j.parquet").write_bytes(b"not parquet at all")
    parts.write_parquet(frame([_row(17), _row(18)]), folder / "k.parquet")


COLUMNS = ["config", "status", "times", "timing", "gpu", "size", "size_vars", "dtype", "timestamp", "workload"]


def test_a_read_of_a_few_columns_is_the_whole_read_of_them(tmp_path, cache, monkeypatch):
    _damaged_store(tmp_path / "store")
    whole = parts.read_store("evaluations/*.parquet", tmp_path / "store", shipped=False)
    monkeypatch.setattr(parts, "_PARSED", {})
    few = parts.read_store("evaluations/*.parquet", tmp_path / "store", shipped=False, columns=COLUMNS)
    assert "p_i" not in few.frame and "host" not in few.frame and "objective_value" in few.frame  # the schema's
    pd.testing.assert_frame_equal(few.frame, whole.frame[list(few.frame.columns)], check_exact=True)
    assert few.degraded == whole.degraded
    assert set(few.degraded.parts) == {str(tmp_path / "store" / "evaluations" / f"{p}.parquet") for p in "deij"}
    assert sum(n for by in few.degraded.rows.values() for n in by.values()) == 1  # the infinite value's row
    for p in "deij":  # what was left out whole is read again each time (the error may pass); the rest is kept
        (tmp_path / "store" / "evaluations" / f"{p}.parquet").unlink()
    few = parts.read_store("evaluations/*.parquet", tmp_path / "store", shipped=False, columns=COLUMNS)
    with monkeypatch.context() as m:
        m.setattr(parts, "_narrow_read", None)
        again = parts.read_store("evaluations/*.parquet", tmp_path / "store", shipped=False, columns=COLUMNS)
    pd.testing.assert_frame_equal(again.frame, few.frame)
    assert again.degraded == few.degraded and few.degraded.rows


# ---- a listing kept whole -----------------------------------------------------------------------------------


def _forbidden(*args: object, **kwargs: object) -> None:
    raise AssertionError("read the store's rows again")


def test_a_listing_is_kept_and_said_again_as_it_was_made(store, cache, monkeypatch):
    """The second listing of unchanged files reads no Parquet and gives the same recordings, with the same rows
    said left out; a part changed since makes it again, as a fresh cache would."""
    space = get_workload("reduction").space
    part = sorted((store / GPU_DIR / "reduction" / "evaluations").glob("*.parquet"))[0]
    rows = pd.read_parquet(part)
    rows.loc[rows.index[0], "objective_value"] = math.inf  # a row the schema leaves out, said in the listing
    rows.to_parquet(part, index=False)
    with collect() as first_left_out:
        first = coverage.recordings(store, "reduction", space)
    assert first_left_out.rows and all(r.held is not None for r in first)
    with monkeypatch.context() as m:
        m.setattr(parts, "read_store", _forbidden)  # read where a listing is made (coverage._recordings)
        m.setattr(recordings_module, "scan", _forbidden)
        with collect() as left_out:
            assert coverage.recordings(store, "reduction", space) == first
        assert left_out == first_left_out

    part.unlink()  # its recordings are gone from the store
    changed = coverage.recordings(store, "reduction", space)
    monkeypatch.setenv("TUNER_CACHE", str(cache.parent / "fresh-cache"))
    fresh = coverage.recordings(store, "reduction", space)
    assert changed != first and [r.as_dict() | {"path": None} for r in changed] == [
        r.as_dict() | {"path": None} for r in fresh
    ]


def test_a_listing_with_a_part_it_cannot_read_is_not_kept(store, cache, monkeypatch):
    space = get_workload("reduction").space
    part = sorted((store / GPU_DIR / "reduction" / "evaluations").glob("*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:100])
    reads = []
    real = parts.read_store
    monkeypatch.setattr(parts, "read_store", lambda *a, **k: reads.append(a) or real(*a, **k))
    for _ in range(2):
        with collect() as left_out:
            coverage.recordings(store, "reduction", space)
        assert list(left_out.parts) == [str(part)]
    assert len(reads) == 2


def test_a_kept_listing_says_a_cache_folder_no_longer_writable(store, cache, monkeypatch):
    space = get_workload("reduction").space
    first = coverage.recordings(store, "reduction", space)

    def not_writable(path: Path, workload: str, source: recordings_module.Source) -> Path:
        raise recordings_module.CacheNotWritable("cannot write", cache / "recordings", "Read-only file system")

    monkeypatch.setattr(coverage, "derivable", not_writable)
    listed = coverage.recordings(store, "reduction", space)
    assert [(r.gpu, r.size, r.dtype) for r in listed] == [(r.gpu, r.size, r.dtype) for r in first]
    assert all(r.held is None and r.path is None and r.unwritable == cache / "recordings" for r in listed)
    assert all(r.coverage == coverage.NOT_DERIVED for r in listed)


def test_tuner_list_says_the_same_whether_made_or_kept(store, cache, capsys):
    said = []
    for _ in range(2):
        for args in (["list", "reduction"], ["list", "reduction", "--json"]):
            capsys.readouterr()
            assert main(["--results", str(store), *args]) == 0
            said.append(capsys.readouterr().out)
    assert said[:2] == said[2:] and json.loads(said[1])["recordings"]


def test_a_listing_says_what_it_is_reading(store, cache):
    from tuner.cli.listing import describe

    said: list[str] = []
    doc = describe("reduction", "built-in", store, said.append)
    assert doc["recordings"] and said == [
        "its space (counting its valid configs)",
        "its recordings (reading the store's rows of it)",
    ]


def test_a_kept_listing_is_answered_without_pandas(store, cache):
    """A listing answered from what was kept imports neither pandas nor pyarrow (half a warm `tuner list`'s time,
    0.5 s): its key names the code it depends on without importing it (tuner.kept.code_digest), and what only says
    what a read left out (tuner.store.schema) is apart from the checking of rows (tuner.store.schema_check)."""
    assert main(["--results", str(store), "list", "reduction"]) == 0  # made, and kept
    script = (
        "import sys; from tuner.cli import main; "
        f"code = main(['--results', {str(store)!r}, 'list', 'reduction']); "
        "print(code, sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "0 []", done.stdout + done.stderr
