"""A ring's rows in the events schema: those a stream lacks, and windows of steps."""

from __future__ import annotations

from scalescope.events.files import live_dir, ring_path, window_events_path
from scalescope.events.reader import read_event_stream
from scalescope.events.ring_rows import recover, rows_table, write_windows
from scalescope.events.schema import ARROW_SCHEMA, Kind
from scalescope.probe.flight_ring import open_ring


def _rows(steps: range) -> list[list]:
    out = []
    for step in steps:
        out.append([step, Kind.PHASE, "forward", 100 * step, 40, 0, 0, "", "", -1, "", -1])
        out.append([step, Kind.COLLECTIVE, "all_reduce", 100 * step + 50, 9, 16, 4, "float32",
                    "0", step, "gradients", -1])  # fmt: skip
        out.append([step, Kind.STEP, "step", 100 * step, 99, 0, 8, "", "", -1, "", -1])
    return out


def _ring(tmp_path, rank: int, steps: range) -> None:
    ring = open_ring(tmp_path, rank, rows=64)
    for row in _rows(steps):
        ring.append(row)
    ring.close()


def test_recover_keeps_only_the_rows_the_stream_lacks(tmp_path):
    _ring(tmp_path, 1, range(10))
    written = [tuple(r) for r in _rows(range(7))] + [tuple(_rows(range(7, 8))[0])]
    got = recover(tmp_path, 1, rows_table(1, written))  # step 7's forward written already
    assert got.note == "rank 1: 8 rows recovered from its flight recorder (steps 7-9)"
    assert got.table.schema == ARROW_SCHEMA
    assert got.table["step"].to_pylist() == [7, 7, 8, 8, 8, 9, 9, 9]
    assert recover(tmp_path, 1, rows_table(1, [tuple(r) for r in _rows(range(10))])).note is None
    assert recover(tmp_path, 4, ARROW_SCHEMA.empty_table()).note is None, "no ring: nothing"


def test_steps_written_as_summaries_get_no_full_rows(tmp_path):
    """At --record summary a step's calls are in a SUMMARY row: the ring's full rows of the
    steps the stream ended would count them twice."""
    _ring(tmp_path, 1, range(10))
    summarised = []
    for row in _rows(range(6)):
        if row[1] == Kind.COLLECTIVE:
            row = [row[0], Kind.SUMMARY, "all_reduce", row[3], row[4], 16, 1, "float32", "0",
                   -1, "", -1]  # fmt: skip
        summarised.append(tuple(row))
    got = recover(tmp_path, 1, rows_table(1, summarised))
    assert got.note == "rank 1: 12 rows recovered from its flight recorder (steps 6-9)"


def test_a_device_time_in_the_stream_is_still_the_same_row(tmp_path):
    _ring(tmp_path, 0, range(3))
    rows = [tuple(r[:4]) + (r[4] * 3,) + tuple(r[5:]) for r in _rows(range(3))]
    assert recover(tmp_path, 0, rows_table(0, rows)).note is None


def test_a_damaged_ring_recovers_nothing_and_says_why(tmp_path):
    _ring(tmp_path, 2, range(3))
    ring_path(tmp_path, 2).write_bytes(b"SSRING01")
    got = recover(tmp_path, 2, ARROW_SCHEMA.empty_table())
    assert got.table.num_rows == 0
    assert got.note == (
        "rank 2: flight recorder not read (rank-00002.ring: 8 bytes, shorter than its "
        "128-byte header)"
    )


def test_windows_of_each_ring_and_a_note_for_a_bad_one(tmp_path):
    _ring(tmp_path, 0, range(30))
    _ring(tmp_path, 1, range(30))
    (live_dir(tmp_path) / "rank-00002.ring").write_bytes(b"junk")
    kept = write_windows(tmp_path, 10, 14, named=12)
    assert kept.rows == {0: 15, 1: 15}
    assert kept.notes == ["rank-00002.ring: 4 bytes, shorter than its 128-byte header"]
    table = read_event_stream(window_events_path(tmp_path, 12, 1)).table
    assert table["step"].to_pylist() == [s for s in range(10, 15) for _ in (0, 1, 2)]
    assert set(table["rank"].to_pylist()) == {1}
