"""The flight recorder's layout: rows written and read back, wrap-around, the string table,
a torn write, and files that are not rings."""

from __future__ import annotations

import struct

import pytest

from scalescope.events.flight_ring import (
    HEADER_SIZE,
    OVERFLOW,
    RECORD,
    STRINGS,
    WRITTEN_AT,
    RingError,
    file_size,
    parse_ring,
    read_rank_ring,
    read_ring,
    read_ring_tail,
)
from scalescope.events.schema import Kind
from scalescope.probe.flight_ring import RingWriter, open_ring


def _row(i: int, group: str = "g0", tag: str = "gradients") -> list:
    return [i // 3, Kind.COLLECTIVE, "allreduce", 1000 * i, 10 + i, 4 * i, i, "float32", group,
            i, tag, -1]  # fmt: skip


def _ring(tmp_path, rows: int) -> RingWriter:
    return RingWriter(tmp_path / "r.ring", rank=3, rows=rows, pid=42, wall_minus_perf_ns=7)


def test_rows_read_back_exactly(tmp_path):
    ring = _ring(tmp_path, 16)
    written = [_row(i) for i in range(5)]
    written.append([5, Kind.PHASE, "forward", 77, 8, 0, 0, "", "", -1, "", -1])
    for row in written:
        ring.append(row)
    read = read_ring(tmp_path / "r.ring")
    assert read.rows() == [tuple(r) for r in written]
    assert (read.rank, read.pid, read.wall_minus_perf_ns) == (3, 42, 7)
    assert (read.written, read.dropped, read.steps) == (6, 0, (0, 5))


def test_wrap_around_keeps_the_last_rows_oldest_first(tmp_path):
    ring = _ring(tmp_path, 4)
    for i in range(11):
        ring.append(_row(i))
    read = read_ring(tmp_path / "r.ring")
    assert [r[9] for r in read.rows()] == [7, 8, 9, 10]
    assert read.written == 11 and read.dropped == 0


def test_a_torn_last_record_is_not_read(tmp_path):
    """The process died while writing record 6 over slot 6 % 5 (which held record 1): its
    fields half written, its index and the counter not yet."""
    ring = _ring(tmp_path, 4)
    for i in range(6):
        ring.append(_row(i))
    raw = bytearray((tmp_path / "r.ring").read_bytes())
    at = HEADER_SIZE + (6 % ring.slots) * RECORD.itemsize
    raw[at : at + 16] = struct.pack("<qq", 999, 999)
    read = parse_ring(bytes(raw))
    assert [r[9] for r in read.rows()] == [2, 3, 4, 5]
    raw[at + RECORD.itemsize - 8 : at + RECORD.itemsize] = struct.pack("<q", 6)  # index, no counter
    assert [r[9] for r in parse_ring(bytes(raw)).rows()] == [2, 3, 4, 5]


def test_a_record_overwritten_while_read_is_dropped(tmp_path):
    ring = _ring(tmp_path, 4)
    for i in range(8):
        ring.append(_row(i))
    raw = (tmp_path / "r.ring").read_bytes()
    read = parse_ring(raw, written_after=10)  # two more written while the bytes were read
    assert [r[9] for r in read.rows()] == [6, 7]
    assert read.dropped == 2


def test_strings_by_id_and_a_full_table(tmp_path):
    ring = _ring(tmp_path, 4)
    for i in range(STRINGS + 3):
        ring.append(_row(0, group=f"group-{i}"))
    read = read_ring(tmp_path / "r.ring")
    assert len(read.strings) == STRINGS
    assert read.strings[:2] == ["", OVERFLOW]
    assert [r[8] for r in read.rows()] == [OVERFLOW] * 4  # the last groups found no id
    long_tag = "t" * 300
    ring.append(_row(1, tag=long_tag))
    assert read_ring(tmp_path / "r.ring").rows()[-1][10] == OVERFLOW


def test_a_long_string_is_cut_to_its_slot(tmp_path):
    ring = _ring(tmp_path, 4)
    ring.append(_row(1, tag="unshard:" + "x" * 300))
    tag = read_ring(tmp_path / "r.ring").rows()[0][10]
    assert tag.startswith("unshard:x") and len(tag.encode()) == 128


def test_not_completed_is_minus_one_and_appends_after_close_go_nowhere(tmp_path):
    ring = _ring(tmp_path, 4)
    row = _row(1)
    row[4] = None
    ring.append(row)
    ring.close()
    ring.append(_row(2))
    assert [r[4] for r in read_ring(tmp_path / "r.ring").rows()] == [-1]


def test_file_size_and_open_ring(tmp_path):
    assert file_size(65_536) == 5_505_232  # 5.3 MiB
    ring = open_ring(tmp_path, 2, rows=8)
    assert ring is not None and ring.path.stat().st_size == file_size(8)
    ring.append(_row(0))
    assert read_rank_ring(tmp_path, 2).rows() == [tuple(_row(0))]
    assert read_rank_ring(tmp_path, 5) is None
    assert open_ring(tmp_path, 2, rows=0) is None
    errors: list[str] = []
    (tmp_path / "blocked").write_text("")
    assert open_ring(tmp_path / "blocked", 2, rows=8, errors=errors) is None
    assert errors and errors[0].startswith("flight recorder not opened:")


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda raw: raw[:40], "shorter than its 128-byte header"),
        (lambda raw: b"NOTARING" + raw[8:], "not a flight recorder ring"),
        (lambda raw: raw[:-100], "(truncated)"),
        (lambda raw: raw[:16] + struct.pack("<q", 12) + raw[24:], "unknown layout"),
        (
            lambda raw: raw[:WRITTEN_AT] + struct.pack("<q", -5) + raw[WRITTEN_AT + 8 :],
            "counters out of range",
        ),
    ],
)
def test_a_file_that_is_not_a_ring_is_one_line(tmp_path, damage, says):
    ring = _ring(tmp_path, 4)
    ring.append(_row(0))
    bad = tmp_path / "rank-00001.ring"
    bad.write_bytes(damage((tmp_path / "r.ring").read_bytes()))
    with pytest.raises(RingError) as err:
        read_ring(bad)
    assert says in str(err.value) and str(err.value).startswith("rank-00001.ring: ")
    assert "\n" not in str(err.value)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(RingError, match=r"^gone.ring: No such file"):
        read_ring(tmp_path / "gone.ring")


def test_the_tail_is_the_last_rows_read_alone(tmp_path):
    ring = _ring(tmp_path, 6)
    for i in range(10):
        ring.append(_row(i, group=f"g{i % 3}"))
    path = tmp_path / "r.ring"
    whole = read_ring(path).rows()
    for count in (1, 3, 6, 50):  # slot 10 % 7 = 3: the last 3 rows wrap around the end
        assert read_ring_tail(path, count).rows() == whole[-count:]
    raw = bytearray(path.read_bytes())
    at = HEADER_SIZE + (9 % ring.slots) * RECORD.itemsize
    raw[at + RECORD.itemsize - 8 : at + RECORD.itemsize] = struct.pack("<q", 2)  # not row 9
    path.write_bytes(bytes(raw))
    tail = read_ring_tail(path, 3)
    assert [r[9] for r in tail.rows()] == [7, 8] and tail.dropped == 1
    path.write_bytes(bytes(raw[:500]))
    with pytest.raises(RingError, match="truncated"):
        read_ring_tail(path, 3)


def test_a_row_that_cannot_be_packed_is_left_out_and_said_once(tmp_path):
    errors: list[str] = []
    ring = open_ring(tmp_path, 0, rows=4, errors=errors)
    ring.append(_row(0))
    bad = _row(1)
    bad[5] = 1 << 70  # bytes beyond int64
    ring.append(bad)
    ring.append(bad)
    ring.append(_row(2))
    assert [r[9] for r in read_rank_ring(tmp_path, 0).rows()] == [0, 2]
    assert ring.failed == 2 and len(errors) == 1
    assert errors[0].startswith("flight recorder: a row left out (")


def test_a_clean_end_removes_the_file(tmp_path):
    kept, gone = open_ring(tmp_path, 0, rows=4), open_ring(tmp_path, 1, rows=4)
    kept.close()
    gone.close(remove=True)
    assert kept.path.exists() and not gone.path.exists()
