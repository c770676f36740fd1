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
        reader = pa.ipc.open_stream(pa.memory_map(str(path)))
    except (pa.ArrowInvalid, OSError) as exc:
        return StreamRead(ARROW_SCHEMA.empty_table(), 0, f"not an event stream ({exc})")
    if reader.schema.remove_metadata() != ARROW_SCHEMA.remove_metadata():
        return StreamRead(ARROW_SCHEMA.empty_table(), 0, "unknown event schema")
    problem = None
    while True:
        try:
            batches.append(reader.read_next_batch())
        except StopIteration:
            break
        except (pa.ArrowInvalid, OSError) as exc:
            problem = f"truncated after batch {len(batches)} ({exc})"
            break
    table = pa.Table.from_batches(batches, schema=reader.schema)
    return StreamRead(table, len(batches), problem)
