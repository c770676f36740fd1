"""Follow a run directory while its ranks write: only what was appended since the last look.

The ranks' Arrow IPC streams grow one self-contained message per flush. ``StreamTail`` keeps
the byte offset after the last complete message and, on ``read_new``, reads only the bytes
past it, parsing every complete message and leaving a half-written one for the next call.
The run's writers are never touched or locked: the reader opens, reads and closes.

``RunTail`` does that for every rank and keeps a bounded window of each rank's last steps
(plus running totals), so watching an hours-long run costs the same every refresh. At many
ranks the work is columnar: the new batches of all ranks are converted together (one Arrow
table, rows older than each rank's window dropped before their strings are interned), and the
window is one table of all ranks. A file that did not grow is not read; a long file is read in
chunks of READ_CHUNK_BYTES and converted every FLUSH_BYTES, so the first look at an hours-long
run of 1,024 ranks holds the window, not the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from scalescope.events.run import RunMeta, events_path, load_meta, read_rank_meta
from scalescope.events.schema import Kind, known_schema
from scalescope.events.table import EventTable, SymbolTable

END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"
READ_CHUNK_BYTES = 8 * 2**20
"""At most this much of one file is read at a time (more only for one larger message)."""
FLUSH_BYTES = 32 * 2**20
"""Record batches of this many bytes (of all ranks) are converted into the window at once."""


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
        self.more = False
        """The last ``read_new`` stopped at its ``max_bytes`` with more of the file to read."""

    def read_new(self, max_bytes: int | None = None) -> list[pa.RecordBatch]:
        """The record batches completed since the last call (none while nothing changed: the
        file's size alone tells, nothing is read). With ``max_bytes``, those of the next
        ``max_bytes`` of the file (``more`` then says whether to call again); a message longer
        than that is read whole."""
        self.more = False
        if self.ended or self.problem:
            return []
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return []
        size, self.mtime = stat.st_size, stat.st_mtime
        available = size - self.offset
        if available <= 0:
            return []
        want = available if max_bytes is None else min(max_bytes, available)
        with open(self.path, "rb") as f:
            while True:
                f.seek(self.offset)
                data = f.read(want)
                self.bytes_read += len(data)
                before = self.offset
                batches = self._parse(data)
                if batches or self.offset > before or want >= available or self.problem:
                    break
                want = min(2 * want, available)  # one message longer than the chunk
        self.more = want < available and not (self.ended or self.problem)
        return batches

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
                if not known_schema(self.schema):
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


def kept_rows(table: pa.Table, kept: np.ndarray) -> pa.Table:
    """The rows of ``table`` where ``kept``. Each rank keeps the end of what it wrote (its
    last steps), a few runs of rows: those are sliced (no copy) rather than gathered, which
    on the first look at a long run of 1,024 ranks is most of the conversion's time."""
    edges = np.flatnonzero(np.diff(kept.view(np.int8), prepend=0, append=0))
    starts, ends = edges[0::2], edges[1::2]
    if len(starts) == 0:
        return table.slice(0, 0)
    if len(starts) > 64 + len(table) // 64:  # scattered rows: one gather
        return table.take(pa.array(np.flatnonzero(kept)))
    return pa.concat_tables([table.slice(a, b - a) for a, b in zip(starts, ends, strict=True)])


MAX_KEEP = 2**62
"""``keep_steps`` beyond this is taken as "every step" (no overflow of the step arithmetic)."""


@dataclass
class RunTail:
    """Every rank's stream of one run directory, read incrementally into a window."""

    run_dir: Path
    keep_steps: int = 50
    """Steps of each rank kept for the live figures; older rows are dropped."""
    symbols: SymbolTable = field(default_factory=SymbolTable)
    meta: RunMeta | None = None
    tails: dict[int, StreamTail] = field(default_factory=dict)
    totals: dict[int, RankTotals] = field(default_factory=dict)
    _window: EventTable | None = field(default=None, repr=False)
    """The kept rows of all ranks, by rank (each rank's rows in the order read)."""
    _owner: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    """Per row of the window, the rank whose file it came from."""
    _last_step: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    """Per rank, the highest step read (-1: none yet)."""

    def poll(self) -> int:
        """Read what every rank appended; the number of new rows. Raises RunDirError when
        the directory holds no run."""
        self.meta = load_meta(self.run_dir)
        world = self.meta.world_size
        if len(self._last_step) < world:
            grown = np.full(world, -1, np.int64)
            grown[: len(self._last_step)] = self._last_step
            self._last_step = grown
        pending: list[tuple[int, list[pa.RecordBatch]]] = []
        fresh: list[tuple[EventTable, np.ndarray]] = []
        pending_bytes, new_rows = 0, 0
        for rank in range(world):
            tail = self.tails.get(rank)
            if tail is None:
                tail = self.tails[rank] = StreamTail(events_path(self.run_dir, rank))
            while True:
                before = tail.bytes_read
                batches = tail.read_new(READ_CHUNK_BYTES)
                if batches:
                    pending.append((rank, batches))
                    new_rows += sum(b.num_rows for b in batches)
                    pending_bytes += tail.bytes_read - before
                    if pending_bytes >= FLUSH_BYTES:
                        fresh.append(self._convert(pending))
                        pending, pending_bytes = [], 0
                if not tail.more:
                    break
        if pending:
            fresh.append(self._convert(pending))
        if fresh:
            self._merge(fresh)
        return new_rows

    def _convert(
        self, pending: list[tuple[int, list[pa.RecordBatch]]]
    ) -> tuple[EventTable, np.ndarray]:
        """The new batches of some ranks (ascending): their totals counted, the rows their
        ranks' windows keep (so far) converted; with the rank of each row's file."""
        batches = [b for _, bs in pending for b in bs]
        table = pa.Table.from_batches(batches)
        owner = np.repeat(
            np.array([r for r, bs in pending for _ in bs], np.int64),
            [b.num_rows for b in batches],
        )
        for rank, _ in pending:
            self.totals.setdefault(rank, RankTotals())
        step = table.column("step").to_numpy().astype(np.int64)
        kind = table.column("kind").to_numpy()
        self._add_totals(table, owner, step, kind == int(Kind.STEP))
        kept = step >= self._keep_from()[owner]
        if not kept.all():
            table = kept_rows(table, kept)
        return EventTable.from_arrow(table, self.symbols), owner[kept]

    def _keep_from(self) -> np.ndarray:
        """Per rank, the first step its window keeps."""
        return self._last_step - min(self.keep_steps, MAX_KEEP) + 1

    def _merge(self, fresh: list[tuple[EventTable, np.ndarray]]) -> None:
        """The window and the new rows, less what fell out of each rank's window, by rank."""
        parts = [(self._window, self._owner)] if self._window is not None else []
        parts += fresh
        keep_from = self._keep_from()
        masks = [t.step >= keep_from[o] for t, o in parts]
        owner = np.concatenate([o[m] for (_, o), m in zip(parts, masks, strict=True)])
        order = None
        if len(owner) > 1 and (owner[1:] < owner[:-1]).any():
            order = np.argsort(owner, kind="stable")  # sorted runs: a merge
            owner = owner[order]
        cols = {}
        for c in EventTable.COLUMNS:  # one column at a time: one copy of the window at most
            column = np.concatenate(
                [getattr(t, c)[m] for (t, _), m in zip(parts, masks, strict=True)]
            )
            cols[c] = column if order is None else column[order]
        self._window, self._owner = EventTable(**cols, symbols=self.symbols), owner

    def _add_totals(
        self, table: pa.Table, owner: np.ndarray, step: np.ndarray, is_step: np.ndarray
    ) -> None:
        """Each rank's running totals over its new step rows, all ranks at once (``owner``
        ascends: each rank's rows are one run of them)."""
        if not is_step.any():
            return
        where = np.flatnonzero(is_step)
        ranks = owner[where]
        cuts = np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1]])
        touched = ranks[cuts]

        def per_rank(name: str) -> np.ndarray:
            return table.column(name).to_numpy()[where].astype(np.int64)

        start, dur = per_rank("start_ns"), per_rank("dur_ns")
        last = np.maximum.reduceat(step[where], cuts)
        samples = np.add.reduceat(per_rank("count"), cuts)
        first = np.minimum.reduceat(start, cuts)
        end = np.maximum.reduceat(start + dur, cuts)
        steps = np.diff(np.r_[cuts, len(ranks)])
        self._last_step[touched] = np.maximum(self._last_step[touched], last)
        for i, rank in enumerate(touched.tolist()):
            totals = self.totals[rank]
            totals.steps += int(steps[i])
            totals.last_step = max(totals.last_step, int(last[i]))
            totals.samples += int(samples[i])
            f, e = int(first[i]), int(end[i])
            old = totals.first_start_ns
            totals.first_start_ns = f if old is None else min(f, old)
            totals.last_end_ns = max(e, totals.last_end_ns or 0)

    def window(self) -> EventTable:
        """The kept rows of all ranks, one table (by rank, each rank's rows in file order)."""
        if self._window is None:
            return EventTable.empty(self.symbols)
        return EventTable(**{c: getattr(self._window, c) for c in EventTable.COLUMNS},
                          symbols=self.symbols)  # fmt: skip

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
