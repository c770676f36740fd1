"""Each rank's flight recorder: its last full rows in a fixed-size ring, read back after a
SIGKILL, a crash or a hang.

The event stream is written in batches (every 20 steps or 5 s), so a rank killed between
two flushes loses the rows since the last; a rank that hangs says only its current call in
its live state (events/live_state.py). The probe therefore also writes every row, as it
completes, into ``live/rank-N.ring``: a memory map of a file of fixed size, written in place
with no system call (the writer: probe/flight_ring.py). The page cache holds what was written
when the process dies, however it dies.

Layout (little-endian):

- a header (``HEADER``): magic, the number of record slots, the record's and a string's
  size, the string table's slots, the rank, pid, the offset of its wall clock to its
  ``perf_counter`` (ns), then two counters: strings written and rows written;
- ``slots`` records of ``RECORD`` (80 B): a row of the event table with its strings as ids
  into the string table, and last the row's own index (0, 1, 2, ... as written);
- ``STRINGS`` strings of ``STRING_SIZE`` bytes (NUL-padded UTF-8; id 0 is "").

The writer fills a record, its index last, then raises the rows counter; a string is written
before the counter of strings is raised, and before any record that names it. A reader keeps
the records whose index is the one their slot should hold, among the last ``slots - 1``
written: a record cut short by the process' end (or overwritten while it was read) is never
read, and the slot being written next is never trusted.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from scalescope.events.files import ring_path

MAGIC = b"SSRING01"
HEADER = struct.Struct("<8sqqqqqqqqq")
"""magic, slots, record size, string size, string slots, rank, pid, wall_minus_perf_ns,
strings written, rows written."""
HEADER_SIZE = 128
STRINGS_AT = HEADER.size - 16
"""Where the counter of strings written is (the counter of rows is 8 bytes on)."""
WRITTEN_AT = HEADER.size - 8
RECORD = np.dtype(
    [
        ("start_ns", "<i8"), ("dur_ns", "<i8"), ("nbytes", "<i8"), ("count", "<i8"),
        ("seq", "<i8"), ("step", "<i4"), ("peer", "<i4"), ("name", "<i4"), ("dtype", "<i4"),
        ("group", "<i4"), ("tag", "<i4"), ("kind", "i1"), ("_pad", "V7"), ("index", "<i8"),
    ]
)  # fmt: skip
"""One row; ``index`` (written last) is the row's number among all the rank wrote."""
RECORD_FORMAT = "<qqqqqiiiiiib7xq"
"""The same record as ``struct`` packs it (the writer's hot path)."""
assert struct.calcsize(RECORD_FORMAT) == RECORD.itemsize == 80
STRING_SIZE = 128
STRINGS = 2048
"""The string table's slots: op names, dtypes, group labels, tags (an FSDP2 model of 48
units has ~100 tags). A string once the table is full is written as ``OVERFLOW``."""
OVERFLOW = "?"
"""The string of id 1: what a string is written as once the table is full."""
DEFAULT_ROWS = 65_536
"""Rows a rank's ring holds by default: 5.3 MiB per rank (80 B a row, 256 KiB of strings)."""
STRING_COLUMNS = ("name", "dtype", "group", "tag")


def file_size(rows: int) -> int:
    """The bytes of a ring that holds ``rows`` rows (one slot more: the one written next)."""
    return HEADER_SIZE + (rows + 1) * RECORD.itemsize + STRINGS * STRING_SIZE


class RingError(ValueError):
    """A ring file that is not one: its one-line reason."""


@dataclass(frozen=True)
class RingRead:
    """A rank's ring as read: its rows oldest first, their strings by id."""

    rank: int
    pid: int
    wall_minus_perf_ns: int
    records: np.ndarray
    """RECORD rows, oldest first."""
    strings: list[str]
    written: int
    """Rows the rank wrote in all (the ring holds the last of them)."""
    dropped: int
    """Rows among the last ``slots - 1`` not read: cut short, or overwritten while read."""

    def text(self, column: str) -> list[str]:
        """A string column as text (an id beyond the table reads as ``OVERFLOW``)."""
        strings, last = self.strings, len(self.strings)
        return [strings[i] if 0 <= i < last else OVERFLOW for i in self.records[column]]

    def rows(self) -> list[tuple]:
        """The rows as the probe appends them (events.schema.ROW_FIELDS), oldest first."""
        r = self.records
        name, dtype, group, tag = (self.text(c) for c in STRING_COLUMNS)
        return [
            (int(r["step"][i]), int(r["kind"][i]), name[i], int(r["start_ns"][i]),
             int(r["dur_ns"][i]), int(r["nbytes"][i]), int(r["count"][i]), dtype[i], group[i],
             int(r["seq"][i]), tag[i], int(r["peer"][i]))
            for i in range(len(r))
        ]  # fmt: skip

    def window(self, first_step: int, last_step: int) -> RingRead:
        """The same ring with only the rows of steps ``first_step`` to ``last_step``."""
        step = self.records["step"]
        kept = self.records[(step >= first_step) & (step <= last_step)]
        return RingRead(self.rank, self.pid, self.wall_minus_perf_ns, kept, self.strings,
                        self.written, self.dropped)  # fmt: skip

    def whole_steps(self) -> RingRead:
        """The same ring without its earliest step's rows where the ring had overwritten
        some of them (it wrapped) or some were not read: that step may be cut short."""
        kept = len(self.records)
        if not kept or (self.written <= kept and not self.dropped):
            return self
        step = self.records["step"]
        return replace(self, records=self.records[step != step[0]])

    @property
    def steps(self) -> tuple[int, int] | None:
        """The first and last step of its rows (None: no rows)."""
        if not len(self.records):
            return None
        return int(self.records["step"].min()), int(self.records["step"].max())


@dataclass(frozen=True)
class _Header:
    slots: int
    rank: int
    pid: int
    offset: int
    strings: int
    written: int

    @property
    def strings_at(self) -> int:
        return HEADER_SIZE + self.slots * RECORD.itemsize


def _header(head: bytes, name: str, size: int) -> _Header:
    """The header of a file of ``size`` bytes, checked; ``RingError`` when it is not one."""
    if size < HEADER_SIZE or len(head) < HEADER_SIZE:
        raise RingError(f"{name}: {size} bytes, shorter than its {HEADER_SIZE}-byte header")
    magic, slots, rec, ssize, nstrings, rank, pid, offset, strings, written = HEADER.unpack_from(
        head
    )
    if magic != MAGIC:
        raise RingError(f"{name}: not a flight recorder ring (magic {magic!r})")
    if rec != RECORD.itemsize or ssize != STRING_SIZE or slots < 2 or nstrings < 2:
        raise RingError(f"{name}: unknown layout (record {rec} B, string {ssize} B)")
    whole = HEADER_SIZE + slots * rec + nstrings * ssize
    if size < whole:
        raise RingError(f"{name}: {size} bytes, its header says {whole} (truncated)")
    if not 0 <= strings <= nstrings or written < 0:
        raise RingError(f"{name}: counters out of range ({strings} strings, {written} rows)")
    return _Header(slots, rank, pid, offset, strings, written)


def _ring(h: _Header, expected: np.ndarray, taken: np.ndarray, table: bytes) -> RingRead:
    """The records ``taken`` from the slots of the rows ``expected``: those whose index is
    the expected one (the others were cut short or overwritten)."""
    kept = taken[taken["index"] == expected]
    names = np.frombuffer(table, f"S{STRING_SIZE}", count=h.strings).tolist()
    texts = [t.rstrip(b"\0").decode("utf-8", "replace") for t in names]
    return RingRead(
        rank=h.rank, pid=h.pid, wall_minus_perf_ns=h.offset, records=kept, strings=texts,
        written=h.written, dropped=len(expected) - len(kept),
    )  # fmt: skip


def parse_ring(raw: bytes, name: str = "ring", written_after: int | None = None) -> RingRead:
    """A ring from its bytes; ``RingError`` (one line, naming ``name``) when they are not one.
    ``written_after``: the rows counter read again once the bytes were read (a live writer
    may have overwritten the oldest records meanwhile: those are dropped)."""
    h = _header(raw, name, len(raw))
    after = max(h.written, written_after or 0)
    expected = np.arange(max(0, h.written - h.slots + 1), h.written, dtype=np.int64)
    records = np.frombuffer(raw, RECORD, count=h.slots, offset=HEADER_SIZE)
    taken = records[expected % h.slots]
    taken["index"][expected < after - h.slots + 1] = -1  # overwritten while read
    table = raw[h.strings_at : h.strings_at + h.strings * STRING_SIZE]
    return _ring(h, expected, taken, table)


def read_ring(path: Path) -> RingRead:
    """A rank's ring file; ``RingError`` when it cannot be read or is not one."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
            again = os.pread(f.fileno(), 8, WRITTEN_AT)
    except OSError as exc:
        raise RingError(f"{Path(path).name}: {exc.strerror or exc}") from None
    after = struct.unpack("<q", again)[0] if len(again) == 8 else None
    return parse_ring(raw, Path(path).name, after)


def read_ring_tail(path: Path, count: int) -> RingRead:
    """The last ``count`` rows of a ring, read alone (a few reads of the file, whatever its
    size: what a hang's report reads of each rank); ``RingError`` as ``read_ring``."""
    name = Path(path).name
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            h = _header(os.pread(fd, HEADER_SIZE, 0), name, os.fstat(fd).st_size)
            first = max(0, h.written - h.slots + 1, h.written - count)
            expected = np.arange(first, h.written, dtype=np.int64)
            at, n = first % h.slots, len(expected)
            size = RECORD.itemsize
            raw = os.pread(fd, min(n, h.slots - at) * size, HEADER_SIZE + at * size)
            raw += os.pread(fd, max(0, at + n - h.slots) * size, HEADER_SIZE)
            table = os.pread(fd, h.strings * STRING_SIZE, h.strings_at)
            (after,) = struct.unpack("<q", os.pread(fd, 8, WRITTEN_AT))
    except OSError as exc:
        raise RingError(f"{name}: {exc.strerror or exc}") from None
    taken = np.frombuffer(raw, RECORD).copy()
    taken["index"][expected < after - h.slots + 1] = -1
    return _ring(h, expected, taken, table)


def read_rank_ring(run_dir: Path, rank: int) -> RingRead | None:
    """The rank's ring in a run directory; None when it wrote none."""
    path = ring_path(run_dir, rank)
    return read_ring(path) if path.is_file() else None
