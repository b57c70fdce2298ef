"""A first read of the store parses its parts together (tuner.store.parquet_runs.parse_together: one frame a run
of parts read alike, then sliced), not one frame a part: every part must come out exactly as pd.read_parquet makes
it alone, and a read as the part-by-part read made it, what it left out, remembered and kept included."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tuner import locations
from tuner.store import parquet_runs, parts
from tuner.store.schema import Degraded, schema_for, unreadable
from tuner.store.schema_check import check

REPO = Path(__file__).resolve().parents[1]
ROOTS = [Path(locations.BUILTIN_RESULTS), REPO / "results" / "store"]
Committed = dict[Path, list[tuple[Path, bytes]]]  # by folder: each part and its bytes
COLUMNS = ["config", "status", "times", "objective_value", "gpu", "size", "dtype", "workload"]


def _folders() -> dict[Path, list[Path]]:
    """Every committed part, evaluations, baselines, confirmations and simulated ones alike, by folder, in the
    order a read of its folder reads them (parts._in_order)."""
    found: dict[Path, set[Path]] = defaultdict(set)
    for root in ROOTS:
        for part in root.glob("**/*.parquet"):
            found[part.resolve().parent].add(part.resolve())
    return {folder: sorted(found[folder], key=parts._in_order) for folder in sorted(found)}


@pytest.fixture(scope="module")
def committed() -> Committed:
    """Each folder's parts: path and bytes."""
    return {folder: [(p, p.read_bytes()) for p in found] for folder, found in _folders().items()}


def _same(got: pd.DataFrame | str, want: pd.DataFrame, what: str) -> None:
    assert isinstance(got, pd.DataFrame), f"{what}: {got}"  # read, not said unreadable
    assert list(got.columns) == list(want.columns), what
    assert list(got.dtypes) == list(want.dtypes), what
    assert got.attrs == want.attrs, what
    pd.testing.assert_frame_equal(got, want, check_exact=True, obj=what)


def _runs(read: list[tuple[Path, bytes]]) -> list[list[Path]]:
    """The runs the reader makes of these parts (all readable as tables), by path."""
    items = [(p, data, pq.ParquetFile(io.BytesIO(data)).read(use_pandas_metadata=True)) for p, data in read]
    return [[p for p, _, _ in run] for run in parquet_runs.runs(items)]


@pytest.mark.parametrize("columns", [None, COLUMNS], ids=["whole", "narrow"])
def test_every_committed_part_is_parsed_as_read_alone(committed: Committed, columns: list[str] | None) -> None:
    """Every part parsed together with the others of its folder; compared with pd.read_parquet of it alone at the
    edges of each run (its first two parts and its last: where a slice one row off, or a dtype the run's frame made
    for another part, shows), and by length everywhere (every part compared took 10 s more on 2 cores)."""
    assert sum(len(found) for found in committed.values()) > 900  # the whole store, not a sample
    assert any("confirmations" in str(f) for f in committed) and any("baselines" in str(f) for f in committed)
    assert any("simulated" in str(f) for f in committed)
    batched = compared = 0
    for folder, read in committed.items():
        got = dict(parts.parse_together(read, columns))
        assert list(got) == [p for p, _ in read]  # each part once, in order
        data = dict(read)
        for n, run in enumerate(_runs(read)):
            batched += len(run) if len(run) > 1 else 0
            assert [len(got[p]) for p in run] == [pq.ParquetFile(io.BytesIO(data[p])).metadata.num_rows for p in run]
            for p in dict.fromkeys([*run[:2], run[-1]]):
                alone = pd.read_parquet(io.BytesIO(data[p]))
                want = alone if columns is None else alone[[c for c in alone.columns if c in columns]]
                _same(got[p], want, f"{p} (run {n} of {folder}, {len(run)} parts)")
                compared += 1
    assert batched > 800 and compared > 100  # most parts were made frames together, and sliced


def test_parts_whose_values_decide_their_dtypes_are_parsed_alone(tmp_path: Path) -> None:
    """Tables of one schema that one to_pandas would not make the same frames of as one each: integers (or lists
    of them) with a null in some parts only, dictionaries of other categories, an index of pandas' (a named one,
    or a RangeIndex not from 0), attrs. Each still comes out as pd.read_parquet makes it alone."""
    written: list[Path] = []

    def arrow(**columns: list) -> None:  # no note of pandas' dtypes: pyarrow's own, decided by the values
        written.append(tmp_path / f"{len(written):02d}.parquet")
        pq.write_table(pa.table(columns), written[-1])

    def frame(df: pd.DataFrame, index: bool | None = False) -> None:
        written.append(tmp_path / f"{len(written):02d}.parquet")
        df.to_parquet(written[-1], index=index)

    arrow(a=[1, 2], b=[True, False], l=[[1, 2], [3]], x=[0.5, 1.5])
    arrow(a=[3, None], b=[True, False], l=[[1], [2]], x=[0.5, None])
    arrow(a=[4, 5], b=[True, None], l=[[1], [2]], x=[0.5, 1.5])
    arrow(a=[6, 7], b=[True, False], l=[[1, None], None], x=[0.5, 1.5])
    alone = list(written)
    arrow(a=[8, 9], b=[False, False], l=[[4], []], x=[2.5, None])
    arrow(a=[10], b=[True], l=[[5, 6]], x=[3.5])
    together = [written[-2:]]
    for values in (["a", "b"], ["c", "d"]):
        frame(pd.DataFrame({"c": pd.Categorical(values), "v": [1, 2]}))
        alone.append(written[-1])
    for names in (["p", "q"], ["r", "s"]):
        frame(pd.DataFrame({"v": [1, 2]}, index=pd.Index(names, name="k")), index=True)
        alone.append(written[-1])
    for numbers in ([1, 2, 3, 4], [5, 6, 7, 8]):
        frame(pd.DataFrame({"v": numbers}).iloc[2:], index=None)
        alone.append(written[-1])
    for note in ("one", "two"):
        df = pd.DataFrame({"v": [1, 2], "w": note})
        df.attrs = {"note": "the same"}
        frame(df)
    together.append(written[-2:])
    for note in ("three", "four"):
        frame(pd.DataFrame({"v": [3, 4, 5], "w": note}))
    together.append(written[-2:])
    read = [(p, p.read_bytes()) for p in written]
    got = list(parts.parse_together(read, None))
    assert [p for p, _ in got] == written
    for p, frame_of in got:
        _same(frame_of, pd.read_parquet(p), str(p))
    runs = _runs(read)
    assert all([p] in runs for p in alone) and all(run in runs for run in together), runs


# ---- a read of a store: as part by part -----------------------------------------------------------------------

PATTERN = "evaluations/*.parquet"


def _store(root: Path) -> list[Path]:
    """A store of a few committed GEMM evaluation parts of two schemas (as the reader tells them apart), so laid
    that they make runs of several parts, with a truncated part among them and a row the schema leaves out."""
    by_schema: list[tuple[pa.Schema, list[Path]]] = []
    for folder, found in _folders().items():
        if folder.parts[-2:] != ("gemm", "evaluations"):
            continue
        for p in found:
            schema = pq.read_schema(p)
            same = next((ps for s, ps in by_schema if s.equals(schema, check_metadata=True)), None)
            if same is None:
                by_schema.append((schema, [p]))
            elif len(same) < 3:
                same.append(p)
    assert len(by_schema) >= 2 and all(len(ps) == 3 for _, ps in by_schema[:2])
    (a, b) = (ps for _, ps in by_schema[:2])
    order = [a[0], a[1], None, b[0], b[1], b[2], a[2]]  # None: the truncated one
    folder = root / "evaluations"
    folder.mkdir(parents=True)
    laid = []
    for n, source in enumerate(order):
        path = folder / f"{n:02d}.parquet"
        data = (a[0] if source is None else source).read_bytes()
        path.write_bytes(data[: len(data) // 2] if source is None else data)
        laid.append(path)
    rows = pd.read_parquet(laid[1])
    rows.loc[0, "objective_value"] = float("inf")  # a row left out, said in what was left out
    rows.to_parquet(laid[1], index=False)
    return laid


def _part_by_part(part: Path, rules: dict[str, str] | None) -> tuple[pd.DataFrame | None, Degraded]:
    """A part's answer as the reader gave it before it parsed parts together (its _read_part)."""
    left_out = Degraded()
    try:
        frame = pd.read_parquet(io.BytesIO(part.read_bytes()))
    except Exception as e:  # noqa: BLE001
        left_out.add_part(part, unreadable(e))
        return None, left_out
    return check(frame, rules, part, left_out), left_out


def _old_read(root: Path) -> tuple[pd.DataFrame, Degraded]:
    """read_store's answer before, of a store without chunks (its loop over _read_part)."""
    rules = schema_for(PATTERN)
    frames, degraded = [], Degraded()
    for part in sorted(root.glob(PATTERN), key=parts._in_order):
        checked, left = _part_by_part(part, rules)
        degraded.merge(left)
        if checked is not None and len(checked):
            frames.append(checked)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), degraded


READ_IN_A_NEW_PROCESS = """
import pickle, sys
from pathlib import Path
from tuner.store import parts
parsed = []
whole = parts.parse_together
parts.parse_together = lambda read, columns: parsed.append(len(read)) or whole(read, columns)
found = parts.read_store({pattern!r}, Path({root!r}), shipped=False)
Path({out!r}).write_bytes(pickle.dumps((found.frame, found.degraded.as_dict(), parsed)))
"""


def test_a_read_answers_as_part_by_part_now_again_and_in_a_new_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(parts, "_PARSED", {})
    root = tmp_path / "store"
    laid = _store(root)
    rules = schema_for(PATTERN)
    want, want_left_out = _old_read(root)
    assert set(want_left_out.parts) == {str(laid[2])} and want_left_out.rows  # the truncated part; the row

    parsed: list[int] = []
    whole = parts.parse_together

    def counted(read: list[tuple[Path, bytes]], columns: list[str] | None) -> Iterator[tuple[Path, object]]:
        parsed.append(len(read))
        return whole(read, columns)

    monkeypatch.setattr(parts, "parse_together", counted)
    first = parts.read_store(PATTERN, root, shipped=False)
    pd.testing.assert_frame_equal(first.frame, want, check_exact=True)
    assert first.degraded.as_dict() == want_left_out.as_dict() and parsed == [len(laid)]  # all at once
    for part in laid:  # each part remembered, and kept unless it could not be read, as read alone
        checked, left = _part_by_part(part, rules)
        digest, remembered, remembered_left = parts._PARSED[(part, id(rules))]
        kept = parts._kept("part", [str(part.resolve())], rules).get(digest.hex(), parts._is_parsed)
        assert remembered_left.as_dict() == left.as_dict()
        if checked is None:
            assert remembered is None and kept is None
            continue
        assert remembered is not None
        pd.testing.assert_frame_equal(remembered, checked, check_exact=True)
        pd.testing.assert_frame_equal(kept[0], checked, check_exact=True)
        assert kept[1].as_dict() == left.as_dict()

    again = parts.read_store(PATTERN, root, shipped=False)  # remembered: nothing parsed again
    pd.testing.assert_frame_equal(again.frame, want, check_exact=True)
    assert again.degraded.as_dict() == want_left_out.as_dict() and parsed == [len(laid), 0]

    out = tmp_path / "read.pickle"
    code = READ_IN_A_NEW_PROCESS.format(pattern=PATTERN, root=str(root), out=str(out))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
    frame, left_out, parsed_there = pickle.loads(out.read_bytes())
    pd.testing.assert_frame_equal(frame, want, check_exact=True)
    assert left_out == want_left_out.as_dict()
    assert parsed_there == [1]  # the truncated part alone (tried again each time); the others kept
    assert json.dumps(left_out)  # as `--json` says it
