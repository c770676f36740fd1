"""Event streams: round trip, truncation keeps complete batches, garbage is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalescope.events import EventTable, EventWriter, Kind, SymbolTable
from scalescope.events.reader import read_event_stream

ROW = (3, int(Kind.COLLECTIVE), "all_reduce", 1_000, 250, 4096, 1024, "float32", "0", 7, "user")


def _write(path: Path, batches: list[list[tuple]], rank: int = 1, close: bool = True) -> None:
    writer = EventWriter(path, rank)
    for rows in batches:
        writer.write(rows)
    if close:
        writer.close()


def test_round_trip_keeps_every_column(tmp_path):
    path = tmp_path / "e.arrows"
    phase = (4, int(Kind.PHASE), "forward", 2_000, 900, 0, 0, "", "", -1, "")
    _write(path, [[ROW, ROW], [phase]])
    read = read_event_stream(path)
    assert read.problem is None and read.batches == 2
    table = EventTable.from_arrow(read.table, SymbolTable())
    assert len(table) == 3
    assert table.rank.tolist() == [1, 1, 1]
    assert table.strings("name") == ["all_reduce", "all_reduce", "forward"]
    assert table.nbytes.tolist() == [4096, 4096, 0]
    assert table.seq.tolist() == [7, 7, -1]
    assert table.where("tag", "user").sum() == 2
    assert table.where("tag", "never-seen").sum() == 0


def test_unclosed_stream_reads_cleanly(tmp_path):
    path = tmp_path / "e.arrows"
    _write(path, [[ROW], [ROW, ROW]], close=False)
    read = read_event_stream(path)
    assert read.problem is None
    assert read.table.num_rows == 3


@pytest.mark.parametrize("cut", [1, 40, 200])
def test_truncated_stream_keeps_complete_batches(tmp_path, cut):
    path = tmp_path / "e.arrows"
    _write(path, [[ROW] * 5, [ROW] * 7])
    data = path.read_bytes()
    one_batch = tmp_path / "one.arrows"
    _write(one_batch, [[ROW] * 5], close=False)
    assert len(data) - cut > one_batch.stat().st_size
    path.write_bytes(data[: len(data) - 8 - cut])
    read = read_event_stream(path)
    assert read.problem is not None and "truncated after batch 1" in read.problem
    assert read.table.num_rows == 5


def test_garbage_is_not_an_event_stream(tmp_path):
    path = tmp_path / "e.arrows"
    path.write_bytes(b"this is not arrow")
    read = read_event_stream(path)
    assert read.problem.startswith("not an event stream")
    assert read.table.num_rows == 0


def test_concat_requires_shared_symbols():
    a, b = EventTable.empty(), EventTable.empty()
    with pytest.raises(ValueError):
        EventTable.concat([a, b])
    shared = SymbolTable()
    both = EventTable.concat([EventTable.empty(shared), EventTable.empty(shared)])
    assert len(both) == 0 and both.nbytes.dtype == np.int64


def test_corrupted_streams_never_raise_and_keep_what_precedes_the_damage(tmp_path):
    """200 event files with bytes flipped or zeroed somewhere: reading keeps the batches
    before the damage (or says the file is not a stream), never raises."""
    import random

    path = tmp_path / "e.arrows"
    rows = [(s, int(Kind.STEP), "step", s * 1000, 900, 0, 8, "", "", -1, "") for s in range(5)]
    _write(path, [[r] for r in rows])
    clean = path.read_bytes()
    for i in range(200):
        rng = random.Random(i)
        data = bytearray(clean)
        at = rng.randrange(len(data))
        if i % 2:
            data[at : at + rng.randint(1, 64)] = bytes(min(64, len(data) - at))
        else:
            data[at] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        read = read_event_stream(path)
        table = EventTable.from_arrow(read.table, SymbolTable())
        assert read.batches <= 5 and len(table) <= 5
        if read.problem is None:
            assert read.batches == 5
