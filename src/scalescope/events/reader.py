"""Read one rank's event stream, keeping every complete batch of a truncated file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from scalescope.events.schema import ARROW_SCHEMA, known_schema, upgraded


@dataclass(frozen=True)
class StreamRead:
    table: pa.Table
    batches: int
    problem: str | None
    """None when the file ended cleanly; else what was wrong and where reading stopped."""


def read_event_stream(path: Path) -> StreamRead:
    """The rank's rows in the current schema (an ``events/1`` file gets ``peer`` -1)."""
    read = _read_stream(path)
    return StreamRead(upgraded(read.table), read.batches, read.problem)


def _read_stream(path: Path) -> StreamRead:
    opened = _open(path)
    if isinstance(opened, StreamRead):
        return opened
    whole = _read_whole(*opened)
    if whole is not None:
        return whole
    reopened = _open(path)
    return reopened if isinstance(reopened, StreamRead) else _read_batches(*reopened)


Opened = tuple[pa.MemoryMappedFile, pa.ipc.RecordBatchStreamReader]


def _open(path: Path) -> Opened | StreamRead:
    try:
        source = pa.memory_map(str(path))
        reader = pa.ipc.open_stream(source)
    except (pa.ArrowException, OSError) as exc:
        return StreamRead(ARROW_SCHEMA.empty_table(), 0, f"not an event stream ({exc})")
    if not known_schema(reader.schema):
        return StreamRead(ARROW_SCHEMA.empty_table(), 0, "unknown event schema")
    return source, reader


def _read_whole(source: pa.MemoryMappedFile, reader: pa.ipc.RecordBatchStreamReader):
    """The whole stream at once and one full validation of it (about half the cost of
    batch by batch on a 1,024-rank run); None when anything is wrong, to find out where
    batch by batch."""
    try:
        table = reader.read_all()
        table.validate(full=True)
    except (pa.ArrowException, OSError):
        return None
    if source.size() - source.tell() > 0:
        return None
    return StreamRead(table, table.column(0).num_chunks, None)


def _read_batches(source: pa.MemoryMappedFile, reader: pa.ipc.RecordBatchStreamReader):
    """Every complete, valid batch up to the first damage, and what the damage was."""
    batches: list[pa.RecordBatch] = []
    problem = None
    while True:
        try:
            batch = reader.read_next_batch()
            batch.validate(full=True)
            batches.append(batch)
        except StopIteration:
            left = source.size() - source.tell()
            if left > 0:  # an end-of-stream marker where damage zeroed the file
                problem = f"damaged after batch {len(batches)} ({left} bytes past it unread)"
            break
        except (pa.ArrowException, OSError) as exc:
            problem = f"truncated after batch {len(batches)} ({exc})"
            break
    table = pa.Table.from_batches(batches, schema=reader.schema)
    return StreamRead(table, len(batches), problem)
