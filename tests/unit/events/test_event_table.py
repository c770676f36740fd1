"""The event table's selections (gathered column by column when read) and its grouping by
kind at load, against plain numpy indexing of the same columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from scalescope.events import EventTable, Kind
from scalescope.events.table import SymbolTable


def table(n: int, seed: int, symbols: SymbolTable | None = None) -> EventTable:
    rng = np.random.default_rng(seed)
    symbols = symbols or SymbolTable()
    names = np.array([symbols.intern(s) for s in ("forward", "all_reduce", "step")], np.int32)
    kind = rng.integers(0, len(Kind), n).astype(np.int8)
    ints = {c: rng.integers(0, 1000, n) for c in ("start_ns", "dur_ns", "nbytes", "count", "seq")}
    zeros = np.zeros(n, dtype=np.int32)
    return EventTable(
        rank=np.full(n, seed, np.int32), step=rng.integers(0, 50, n).astype(np.int32),
        kind=kind, name=names[rng.integers(0, 3, n)], dtype=zeros, group=zeros, tag=zeros,
        symbols=symbols, **ints,
    )  # fmt: skip


def columns(t: EventTable) -> dict[str, np.ndarray]:
    return {c: getattr(t, c) for c in EventTable.COLUMNS}


def test_a_selection_of_a_selection_holds_the_rows_numpy_indexing_gives() -> None:
    t = table(500, 1)
    full = columns(t)
    mask = full["step"] > 20
    once = t.select(mask)
    assert len(once) == mask.sum() and "start_ns" not in vars(once)  # nothing gathered yet
    twice = once.select(once.dur_ns < 300)
    expected = {c: v[mask][full["dur_ns"][mask] < 300] for c, v in full.items()}
    for c, v in expected.items():
        np.testing.assert_array_equal(getattr(twice, c), v)
    by_index = t.select(np.array([4, 2, 2]))
    np.testing.assert_array_equal(by_index.seq, full["seq"][[4, 2, 2]])
    assert t.select(slice(3, 9)).start_ns.base is full["start_ns"]  # a slice is a view
    with pytest.raises(AttributeError):
        _ = once.no_such_column


def test_rows_grouped_by_kind_keep_each_tables_order_within_a_kind() -> None:
    symbols = SymbolTable()
    parts = [table(n, seed, symbols) for seed, n in ((0, 300), (1, 0), (2, 450))]
    expected = {c: np.concatenate([getattr(p, c) for p in parts]) for c in EventTable.COLUMNS}
    joined = EventTable.concat_by_kind(parts)
    order = np.argsort(expected["kind"], kind="stable")
    for c, v in expected.items():
        np.testing.assert_array_equal(getattr(joined, c), v[order])
    for kind in Kind:
        np.testing.assert_array_equal(
            joined.of_kind(kind).start_ns, expected["start_ns"][expected["kind"] == kind]
        )


INT64 = ("start_ns", "dur_ns", "nbytes", "count", "seq")


def test_an_arrow_table_of_many_chunks_converts_as_one() -> None:
    chunks = [
        pa.table({"rank": pa.array([r] * 3, pa.int32()), "step": pa.array([0, 1, 2], pa.int32()),
                  "kind": pa.array([0, 1, 2], pa.int8()), "name": ["forward", None, "step"],
                  **{c: pa.array([1, 2, 3], pa.int64()) for c in INT64},
                  "dtype": ["", "float32", ""], "group": ["", "0", ""], "tag": ["", "user", ""]})
        for r in range(4)
    ]  # fmt: skip
    t = EventTable.from_arrow(pa.concat_tables(chunks), SymbolTable())
    assert t.rank.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert t.strings("name")[:3] == ["forward", "", "step"]
    assert t.strings("group")[1] == "0" and t.kind.dtype == np.int8


def test_ranks_without_rows_group_into_an_empty_table() -> None:
    """Every rank's file held no row (a run stopped before its first step)."""
    symbols = SymbolTable()
    joined = EventTable.concat_by_kind([table(0, 0, symbols), table(0, 1, symbols)])
    assert len(joined) == 0 and len(joined.of_kind(Kind.STEP)) == 0
