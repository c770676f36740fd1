"""Follow a run directory while its ranks write: only what was appended since the last look.

The ranks' Arrow IPC streams grow one self-contained message per flush. ``StreamTail`` keeps
the byte offset after the last complete message and, on ``read_new``, reads only the bytes
past it, parsing every complete message and leaving a half-written one for the next call.
The run's writers are never touched or locked: the reader opens, reads and closes.

``RunTail`` does that for every rank and keeps a bounded window of each rank's last steps
(plus running totals), so watching an hours-long run costs the same every refresh.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from scalescope.events.run import RunMeta, events_path, load_meta, read_rank_meta
from scalescope.events.schema import ARROW_SCHEMA, Kind
from scalescope.events.table import EventTable, SymbolTable

END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"


class StreamTail:
    """Incremental reader of one rank's event stream."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset = 0
        self.schema: pa.Schema | None = None
        self.ended = False
        """True once the writer closed the stream (its end-of-stream marker was read)."""
        self.problem: str | None = None
        self.bytes_read = 0
        """Bytes read from the file over all calls (what reading cost)."""
        self.mtime: float | None = None
        """When the writer last wrote (the file's mtime); None before the file exists."""

    def read_new(self) -> list[pa.RecordBatch]:
        """The record batches completed since the last call (none while nothing changed)."""
        if self.ended or self.problem:
            return []
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return []
        size, self.mtime = stat.st_size, stat.st_mtime
        if size <= self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(size - self.offset)
        self.bytes_read += len(data)
        return self._parse(data)

    def _parse(self, data: bytes) -> list[pa.RecordBatch]:
        reader = pa.BufferReader(pa.py_buffer(data))
        batches: list[pa.RecordBatch] = []
        while True:
            start = reader.tell()
            try:
                message = pa.ipc.read_message(reader)
            except EOFError:
                self.ended = data[start:] == END_OF_STREAM
                break
            except (pa.ArrowInvalid, OSError):
                break  # a message still being written: read it next time
            if message.type == "schema":
                self.schema = pa.ipc.read_schema(message)
                if self.schema.remove_metadata() != ARROW_SCHEMA.remove_metadata():
                    self.problem = "unknown event schema"
                    break
            elif self.schema is not None:
                batches.append(pa.ipc.read_record_batch(message, self.schema))
            self.offset += reader.tell() - start
        return batches


@dataclass
class RankTotals:
    """Running figures of one rank over everything read, not only the window."""

    steps: int = 0
    last_step: int = -1
    samples: int = 0
    first_start_ns: int | None = None
    last_end_ns: int | None = None


@dataclass
class RunTail:
    """Every rank's stream of one run directory, read incrementally into a window."""

    run_dir: Path
    keep_steps: int = 50
    """Steps of each rank kept for the live figures; older rows are dropped."""
    symbols: SymbolTable = field(default_factory=SymbolTable)
    meta: RunMeta | None = None
    tails: dict[int, StreamTail] = field(default_factory=dict)
    windows: dict[int, EventTable] = field(default_factory=dict)
    totals: dict[int, RankTotals] = field(default_factory=dict)

    def poll(self) -> int:
        """Read what every rank appended; the number of new rows. Raises RunDirError when
        the directory holds no run."""
        self.meta = load_meta(self.run_dir)
        new_rows = 0
        for rank in range(self.meta.world_size):
            tail = self.tails.setdefault(rank, StreamTail(events_path(self.run_dir, rank)))
            batches = tail.read_new()
            if not batches:
                continue
            table = EventTable.from_arrow(pa.Table.from_batches(batches), self.symbols)
            self._add(rank, table)
            new_rows += len(table)
        return new_rows

    def _add(self, rank: int, table: EventTable) -> None:
        totals = self.totals.setdefault(rank, RankTotals())
        steps = table.of_kind(Kind.STEP)
        if len(steps):
            totals.steps += len(steps)
            totals.last_step = max(totals.last_step, int(steps.step.max()))
            totals.samples += int(steps.count.sum())
            first = int(steps.start_ns.min())
            totals.first_start_ns = min(first, totals.first_start_ns or first)
            totals.last_end_ns = max(int((steps.start_ns + steps.dur_ns).max()),
                                     totals.last_end_ns or 0)  # fmt: skip
        old = self.windows.get(rank)
        window = table if old is None else EventTable.concat([old, table])
        keep_from = totals.last_step - self.keep_steps + 1
        if len(window) and int(window.step.min()) < keep_from:
            window = window.select(window.step >= keep_from)
        self.windows[rank] = window

    def window(self) -> EventTable:
        """The kept rows of all ranks, one table."""
        tables = [self.windows[r] for r in sorted(self.windows)]
        return EventTable.concat(tables) if tables else EventTable.empty(self.symbols)

    def rank_meta(self, rank: int):  # noqa: ANN201
        return read_rank_meta(self.run_dir, rank)

    def silent_for(self, rank: int, now: float) -> float | None:
        """Seconds since the rank last wrote its event file; None before it exists."""
        tail = self.tails.get(rank)
        if tail is None or tail.mtime is None:
            return None
        return max(now - tail.mtime, 0.0)

    def bytes_read(self) -> int:
        return sum(t.bytes_read for t in self.tails.values())
