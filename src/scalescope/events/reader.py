"""Read one rank's event stream, keeping every complete batch of a truncated file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from scalescope.events.schema import ARROW_SCHEMA


@dataclass(frozen=True)
class StreamRead:
    table: pa.Table
    batches: int
    problem: str | None
    """None when the file ended cleanly; else what was wrong and where reading stopped."""


def read_event_stream(path: Path) -> StreamRead:
    batches: list[pa.RecordBatch] = []
    try:
        source = pa.memory_map(str(path))
        reader = pa.ipc.open_stream(source)
    except (pa.ArrowException, OSError) as exc:
        return StreamRead(ARROW_SCHEMA.empty_table(), 0, f"not an event stream ({exc})")
    if reader.schema.remove_metadata() != ARROW_SCHEMA.remove_metadata():
        return StreamRead(ARROW_SCHEMA.empty_table(), 0, "unknown event schema")
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
