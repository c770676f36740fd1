"""The probe's side of a rank's flight recorder (events/flight_ring.py holds its layout and
reader): every completed row packed into a memory map of the rank's ring file, with no system
call. Rows complete on several threads (the main one, the work callbacks' threads, the live
watch thread that takes the C++ hooks' rows), so an append takes a lock."""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from scalescope.events.files import ring_path
from scalescope.events.flight_ring import (
    DEFAULT_ROWS,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    OVERFLOW,
    RECORD,
    RECORD_FORMAT,
    STRING_SIZE,
    STRINGS,
    STRINGS_AT,
    WRITTEN_AT,
    file_size,
)

_RECORD = struct.Struct(RECORD_FORMAT)
_Q = struct.Struct("<q")


class RingWriter:
    """A rank's ring, appended to in place; ``append`` takes a row as the recorder holds it
    (events.schema.ROW_FIELDS; ``dur_ns`` None: not completed, written -1)."""

    def __init__(self, path: Path, rank: int, rows: int, pid: int, wall_minus_perf_ns: int) -> None:
        if rows < 1:
            raise ValueError(f"a flight recorder ring holds at least 1 row, not {rows}")
        self.path = Path(path).absolute()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.slots = rows + 1
        size = file_size(rows)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, size)
            self._map: mmap.mmap | None = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        HEADER.pack_into(
            self._map, 0, MAGIC, self.slots, RECORD.itemsize, STRING_SIZE, STRINGS, rank, pid,
            wall_minus_perf_ns, 0, 0,
        )  # fmt: skip
        self._strings_at = HEADER_SIZE + self.slots * RECORD.itemsize
        self._ids: dict[str, int] = {}
        self._string("")
        self._string(OVERFLOW)
        self.written = 0
        self._lock = threading.Lock()
        self.errors: list[str] = []
        """Where a row that could not be written is said (the recorder's errors)."""
        self.failed = 0

    def _string(self, text: str) -> int:
        """The id of ``text``, written into the table (and counted) the first time."""
        sid = self._ids.get(text)
        if sid is not None:
            return sid
        sid = len(self._ids)
        if sid >= STRINGS:
            return 1
        raw = text.encode()[:STRING_SIZE]
        at = self._strings_at + sid * STRING_SIZE
        assert self._map is not None
        self._map[at : at + len(raw)] = raw
        self._ids[text] = sid
        _Q.pack_into(self._map, STRINGS_AT, sid + 1)
        return sid

    def append(self, row: Sequence) -> None:
        """One row (the recorder's list or tuple) into the next slot, then counted; a row
        that cannot be packed is left out and said once in ``errors`` (never raised into the
        training loop that completed it)."""
        ids = self._ids
        try:
            with self._lock:
                m = self._map
                if m is None:
                    return
                name, dtype, group, tag = row[2], row[7], row[8], row[10]
                n = ids.get(name)
                if n is None:
                    n = self._string(name)
                d = ids.get(dtype)
                if d is None:
                    d = self._string(dtype)
                g = ids.get(group)
                if g is None:
                    g = self._string(group)
                t = ids.get(tag)
                if t is None:
                    t = self._string(tag)
                i = self.written
                dur = row[4]
                _RECORD.pack_into(
                    m, HEADER_SIZE + (i % self.slots) * 80, row[3], -1 if dur is None else dur,
                    row[5], row[6], row[9], row[0], row[11] if len(row) > 11 else -1, n, d, g,
                    t, row[1], i,
                )  # fmt: skip
                self.written = i + 1
                _Q.pack_into(m, WRITTEN_AT, i + 1)
        except (struct.error, TypeError, ValueError, AttributeError, IndexError) as exc:
            self.failed += 1
            if self.failed == 1:
                self.errors.append(f"flight recorder: a row left out ({exc}): {list(row)!r}")

    def close(self, remove: bool = False) -> None:
        """Unmap; later appends (a collective completing on another thread) go nowhere.
        ``remove``: the rank ended cleanly and its stream holds every row, so the file goes
        (a run directory keeps the rings of the ranks that did not: a kill, a crash, a full
        disk)."""
        with self._lock:
            current, self._map = self._map, None
        if current is not None:
            current.close()
        if remove:
            self.path.unlink(missing_ok=True)


def open_ring(
    run_dir: Path, rank: int, rows: int = DEFAULT_ROWS, errors: list[str] | None = None
) -> RingWriter | None:
    """The rank's ring in the run's live folder; None for ``rows`` 0, or when the file cannot
    be made (said in ``errors``: training goes on without it)."""
    if rows <= 0:
        return None
    offset = time.time_ns() - time.perf_counter_ns()
    try:
        ring = RingWriter(ring_path(run_dir, rank), rank, rows, os.getpid(), offset)
    except (OSError, ValueError) as exc:
        if errors is not None:
            errors.append(f"flight recorder not opened: {exc}")
        return None
    if errors is not None:
        ring.errors = errors
    return ring
