"""A campaign's Parquet part grows in chunks: a row costs a bounded rewrite however long the campaign (counted
in rows written, not timed), every row is on disk as soon as it is appended, and no kill -- in a chunk's
write, between a merge and the chunks' deletion, or a real SIGKILL at any moment -- loses a written row,
counts one twice or leaves half a file."""

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tuner.store import parts
from tuner.store.parts import PartWriter, read_parts


def row(i: int) -> dict:
    return {"workload": "w", "size": "s", "size_vars": "{}", "dtype": "float32", "config": f'{{"i": {i}}}',
            "status": "ok", "gpu": "Fake GPU", "metrics": "{}", "timestamp": f"t{i:06d}",
            "objective_value": float(i), "time_ms": 1.0 + i, "times": [1.0, 2.0]}


def stored(folder: Path) -> pd.DataFrame:
    return read_parts("evaluations/*.parquet", folder)


def test_a_row_costs_at_most_one_chunk_however_long_the_campaign(tmp_path):
    writer = PartWriter(tmp_path / "evaluations" / "c.parquet", chunk_rows=50)
    costs = []
    for i in range(1000):
        before = writer.rows_written
        writer.append(row(i))
        costs.append(writer.rows_written - before)
        if i in (0, 49, 50, 777):  # on disk as soon as appended, every row once, in order
            assert list(stored(tmp_path)["objective_value"]) == [float(j) for j in range(i + 1)]
    assert max(costs) <= 50 and sum(costs[-100:]) == sum(costs[100:200])  # flat: the 1000th costs as the 100th
    assert len(list((tmp_path / "evaluations").glob("*.chunk*.parquet"))) == 19
    writer.flush()  # merged: one part, the chunks gone
    assert [p.name for p in (tmp_path / "evaluations").iterdir()] == ["c.parquet"]
    assert list(stored(tmp_path)["objective_value"]) == [float(j) for j in range(1000)]
    for i in range(1000, 1010):  # appends after a merge go on in new chunks
        writer.append(row(i))
    assert list(stored(tmp_path)["objective_value"]) == [float(j) for j in range(1010)]
    writer.flush()
    assert len(list((tmp_path / "evaluations").iterdir())) == 1 and len(stored(tmp_path)) == 1010


def test_a_short_campaign_is_one_part_as_before(tmp_path):
    writer = PartWriter(tmp_path / "evaluations" / "c.parquet")
    for i in range(10):
        writer.append(row(i))
    writer.flush()
    assert [p.name for p in (tmp_path / "evaluations").iterdir()] == ["c.parquet"]
    assert writer.rows_written == sum(range(1, 11))  # each append rewrote the part's (one) chunk


def test_a_kill_between_the_merge_and_the_chunks_deletion_counts_no_row_twice(tmp_path, monkeypatch):
    writer = PartWriter(tmp_path / "evaluations" / "c.parquet", chunk_rows=10)
    for i in range(35):
        writer.append(row(i))

    def killed(self, missing_ok=False):
        raise KeyboardInterrupt  # the merged part is written; no chunk is deleted yet

    monkeypatch.setattr(Path, "unlink", killed)
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    monkeypatch.undo()
    assert len(list((tmp_path / "evaluations").glob("*.chunk*.parquet"))) == 3  # left behind
    assert sorted(stored(tmp_path)["objective_value"]) == [float(j) for j in range(35)]


def test_a_kill_in_a_chunks_write_leaves_the_rows_written_before(tmp_path, monkeypatch):
    writer = PartWriter(tmp_path / "evaluations" / "c.parquet", chunk_rows=10)
    for i in range(15):
        writer.append(row(i))

    def killed(table, where, **kw):
        Path(where).write_bytes(b"PAR1 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(parts.pq, "write_table", killed)
    with pytest.raises(KeyboardInterrupt):
        writer.append(row(15))
    monkeypatch.undo()
    assert [p.name for p in sorted((tmp_path / "evaluations").iterdir())] == ["c.chunk0001.parquet", "c.parquet"]
    assert list(stored(tmp_path)["objective_value"]) == [float(j) for j in range(15)]


_APPENDER = """
import sys
from tuner.store.parts import PartWriter
sys.path.insert(0, {tests!r})
from test_part_writer import row
writer = PartWriter({path!r}, chunk_rows=7)
for i in range(100000):
    writer.append(row(i))
    print(i, flush=True)
"""


def test_a_sigkill_at_any_moment_leaves_whole_files_and_each_row_once(tmp_path):
    path = tmp_path / "evaluations" / "c.parquet"
    code = _APPENDER.format(tests=str(Path(__file__).parent), path=str(path))
    for appended, wait_s in ((20, 0.013), (45, 0.031)):
        for leftover in path.parent.glob("*") if path.parent.exists() else []:
            leftover.unlink()
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                cwd=Path(__file__).parent.parent)
        printed = [proc.stdout.readline() for _ in range(appended)]  # under way, then killed at some moment
        time.sleep(wait_s)
        os.kill(proc.pid, signal.SIGKILL)
        printed += proc.stdout.read().split()
        proc.wait()
        got = list(stored(tmp_path)["objective_value"])
        assert got == [float(j) for j in range(len(got))]  # a prefix, each row once
        assert len(got) >= len(printed) > 0  # every row it said was appended is on disk


def test_a_part_rewritten_in_place_is_read_again_however_soon(tmp_path):
    """Parts parsed once are kept per process (tuner.store.parts._PARSED), by their content: a part rewritten
    at once, to the same size and within the file clock's tick, reads as it is now; one damaged in place
    too, and again once mended."""
    path = tmp_path / "evaluations" / "c.parquet"
    path.parent.mkdir()
    parts.write_parquet(pd.DataFrame([row(1)]), path)
    assert list(stored(tmp_path)["objective_value"]) == [1.0]
    first = path.read_bytes()
    parts.write_parquet(pd.DataFrame([row(2)]), path)
    assert len(path.read_bytes()) == len(first)  # same size: only the content tells the two apart
    assert list(stored(tmp_path)["objective_value"]) == [2.0]
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.warns(UserWarning, match="not a readable Parquet file"):
        assert stored(tmp_path).empty
    path.write_bytes(good)
    assert list(stored(tmp_path)["objective_value"]) == [2.0]


def test_a_read_is_kept_in_the_users_cache_for_the_next_process(tmp_path, monkeypatch):
    """Each part parsed and each read merged are kept in the user's cache (tuner.locations.user_cache("parts")),
    one file each, with the digests of the bytes they were made from: a later process reads them back exactly,
    rows left out and all, without parsing; a part changed or added since is parsed (that one alone) and the
    cache does not grow; a damaged or unwritable cache, or a part that cannot be parsed, is parsed again."""
    from tuner.store.schema import collect

    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "parts"
    path = tmp_path / "evaluations" / "c.parquet"
    path.parent.mkdir()
    bad = {**row(3), "objective_value": float("inf")}  # a row the schema leaves out, said in the answer
    parts.write_parquet(pd.DataFrame([row(1), bad, row(2)]), path)
    with collect() as first_left_out:
        first = stored(tmp_path)
    assert first_left_out and len(first) == 2
    made_from = sorted(type(pickle.loads(p.read_bytes())[0]).__name__ for p in cache.glob("*.pickle"))
    assert made_from == ["list", "str"]  # the part (its digest) and the read (each part's path and digest)

    parsed: list = []  # the parts parsed (together, in runs: parts.parse_together), one entry a part
    parse = parts.parse_together
    monkeypatch.setattr(parts, "parse_together", lambda read, columns: parsed.extend(read) or parse(read, columns))
    monkeypatch.setattr(parts, "_PARSED", {})  # as a new process starts
    with collect() as left_out:
        again = stored(tmp_path)
    pd.testing.assert_frame_equal(again, first)
    assert left_out == first_left_out and not parsed
    parts.write_parquet(pd.DataFrame([row(1)]), path)  # rewritten: another content
    parts.write_parquet(pd.DataFrame([row(5)]), path.with_name("d.parquet"))  # and a part added
    monkeypatch.setattr(parts, "_PARSED", {})
    assert list(stored(tmp_path)["objective_value"]) == [1.0, 5.0] and len(parsed) == 2
    parts.write_parquet(pd.DataFrame([row(4)]), path)
    monkeypatch.setattr(parts, "_PARSED", {})
    assert list(stored(tmp_path)["objective_value"]) == [4.0, 5.0] and len(parsed) == 3  # d's part kept
    assert len(list(cache.glob("*.pickle"))) == 3  # a file a part and one a read, however often rewritten
    for damaged in cache.glob("*.pickle"):
        damaged.write_bytes(b"not a pickle")
    monkeypatch.setattr(parts, "_PARSED", {})
    assert list(stored(tmp_path)["objective_value"]) == [4.0, 5.0] and len(parsed) == 5
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # a part that cannot be parsed is not kept: tried again each time
    for _ in range(2):
        monkeypatch.setattr(parts, "_PARSED", {})
        with pytest.warns(UserWarning, match="not a readable Parquet file"):
            assert list(stored(tmp_path)["objective_value"]) == [5.0]
    assert len(parsed) == 7
    path.write_bytes(good)
    (tmp_path / "blocked").write_text("a file where the cache folder would be")
    monkeypatch.setenv("TUNER_CACHE", str(tmp_path / "blocked"))
    monkeypatch.setattr(parts, "_PARSED", {})
    assert list(stored(tmp_path)["objective_value"]) == [4.0, 5.0]
