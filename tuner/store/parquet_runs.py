"""Many Parquet parts' bytes made frames at once, each exactly as pd.read_parquet makes it alone (the store's
reads, tuner.store.parts: a first read of GEMM's store parses 713 small parts). pandas' setting up of a frame was
most of the time of parsing a part of a few rows, so parts read alike (one Arrow schema, pandas' note of its
dtypes included, and the same nulls where those decide a dtype) are concatenated, made one frame and sliced; a
part that cannot be read so is read alone, and one that cannot be read at all is said (tuner.store.schema's
unreadable)."""

from __future__ import annotations

import functools
import io
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tuner.store.schema import unreadable


def parse_together(
    read: list[tuple[Path, bytes]], columns: list[str] | None
) -> Iterator[tuple[Path, pd.DataFrame | str]]:
    """For each part of `read` (path, bytes), in order: its frame as pd.read_parquet makes it (of `columns` only,
    where given), or why it cannot be read (unreadable). Parts read alike (runs) are made one frame at once, then
    sliced part by part: pandas' setting up of a frame was most of the time of parsing a part of a few rows."""
    items: list[tuple[Path, bytes, pa.Table | pd.DataFrame | str]] = []
    for part, data in read:
        try:
            parquet = pq.ParquetFile(io.BytesIO(data))
            names = None if columns is None else [c for c in parquet.schema_arrow.names if c in columns]
            items.append((part, data, parquet.read(columns=names, use_pandas_metadata=True)))
        except Exception:  # noqa: BLE001  (damaged: read as every read reads it, to be said as it says it)
            items.append((part, data, read_alone(data, columns)))
    for run in runs(items):
        tables = [table for _, _, table in run if isinstance(table, pa.Table)]
        if not tables:  # read as a frame, or not at all: a run of its own
            for part, _, item in run:
                assert not isinstance(item, pa.Table)
                yield part, item
            continue
        try:
            whole = _to_pandas(pa.concat_tables(tables) if len(tables) > 1 else tables[0])
        except Exception:  # noqa: BLE001  (pandas' note of its dtypes damaged, say: each read as every read reads it)
            yield from ((part, read_alone(data, columns)) for part, data, _ in run)
            continue
        if len(tables) == 1:
            yield run[0][0], whole
            continue
        for (part, _, _), table, end in zip(run, tables, itertools.accumulate(t.num_rows for t in tables)):
            yield part, whole.iloc[end - table.num_rows : end].reset_index(drop=True)


def read_alone(data: bytes, columns: list[str] | None) -> pd.DataFrame | str:
    """A part's frame, read as every read reads one (pd.read_parquet), or what pyarrow said of it (unreadable)."""
    try:
        frame = pd.read_parquet(io.BytesIO(data))
    except Exception as e:  # noqa: BLE001  (pyarrow's errors: truncated, not Parquet at all)
        # one damaged file (copied in half from another host, say) must not take every query down with it
        return unreadable(e)
    return frame if columns is None else frame[[c for c in frame.columns if c in columns]]


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """`table`'s frame as pd.read_parquet makes the one it reads (with the attrs its metadata holds)."""
    frame = table.to_pandas()
    attrs = (table.schema.metadata or {}).get(b"PANDAS_ATTRS")
    if attrs is not None:
        frame.attrs = json.loads(attrs)
    return frame


Item = tuple[Path, bytes, pa.Table | pd.DataFrame | str]  # a part, its bytes, and its table (else frame, or error)


def runs(items: list[Item]) -> Iterator[list[Item]]:
    """`items` in order, in runs of Arrow tables that one to_pandas makes the same frames of, sliced, as one each
    would: of one schema (its metadata too: pandas' dtypes) and the same nulls where those make a dtype (_nulls);
    anything else a run of its own."""
    run: list[Item] = []
    first: tuple[pa.Table, tuple[bool, ...]] | None = None  # the run's table and its nulls, where others may join
    for item in items:
        table = item[2]
        alike = (table, nulls) if isinstance(table, pa.Table) and (nulls := _nulls(table)) is not None else None
        if run and not (
            first is not None
            and alike is not None
            and alike[1] == first[1]
            and alike[0].schema.equals(first[0].schema, check_metadata=True)
        ):
            yield run
            run = []
        if not run:
            first = alike
        run.append(item)
    if run:
        yield run


def _nulls(table: pa.Table) -> tuple[bool, ...] | None:
    """Whether each column of `table` whose pandas dtype its values decide holds a null: integers or booleans
    (or lists of them) holding one become floats or objects, so a part without one is not made one frame with a
    part with one. None for a table to be made a frame alone: one with an index of pandas' (a run's slices leave
    it out), a dictionary (its categories) or integers nested otherwise."""
    if not _indexless((table.schema.metadata or {}).get(b"pandas")):
        return None
    nulls = []
    for column in table.columns:
        while pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            column = _list_values(column)
        kind = column.type
        if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
            nulls.append(column.null_count > 0)
        elif pa.types.is_dictionary(kind) or _nests_numbers(kind):
            return None
    return tuple(nulls)


def _list_values(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A list column's values, as to_pandas converts them (together, those behind a null list too)."""
    chunks = [c.values.slice(c.offsets[0].as_py(), c.offsets[-1].as_py() - c.offsets[0].as_py()) for c in column.chunks]
    return pa.chunked_array([c for c in chunks if len(c)], column.type.value_type)


def _nests_numbers(kind: pa.DataType) -> bool:
    """Whether integers or booleans are nested in `kind` (a struct's, a map's, a fixed size list's)."""
    inner = [kind.field(i).type for i in range(kind.num_fields)]
    return any(pa.types.is_integer(t) or pa.types.is_boolean(t) or _nests_numbers(t) for t in inner)


@functools.lru_cache(maxsize=64)
def _indexless(pandas_note: bytes | None) -> bool:
    """Whether pandas' note of a table (its metadata) names no index columns: a frame of it has a RangeIndex."""
    if pandas_note is None:
        return True
    try:
        return json.loads(pandas_note).get("index_columns") == []
    except (ValueError, AttributeError):
        return False
