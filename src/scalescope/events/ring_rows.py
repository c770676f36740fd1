"""A ring's rows in the events schema: the rows a rank's event stream lacks (a rank killed
between two flushes) for ``load_run``, and a window of steps for a file of its own (the
launcher's copy at a slowdown alert)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from scalescope.events.flight_ring import RingError, RingRead, read_rank_ring
from scalescope.events.schema import ARROW_SCHEMA, ROW_FIELDS
from scalescope.events.writer import EventWriter

KEY = ("step", "kind", "name", "start_ns", "group", "seq", "tag", "peer")
"""What tells a row apart from every other of its rank (its duration aside: a device's time
replaces the host's in the stream, after the ring took the row)."""
_KEY_AT = [ROW_FIELDS.index(c) for c in KEY]


@dataclass(frozen=True)
class Recovered:
    """The rows a rank's ring held that its stream did not, and the sentence that says so."""

    table: pa.Table
    note: str | None
    """None when the ring added nothing (or there was none)."""


def rows_table(rank: int, rows: list[tuple]) -> pa.Table:
    """Rows as the probe appends them (ROW_FIELDS) as an Arrow table of the events schema."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in ROW_FIELDS]
    arrays = [pa.array([rank] * len(rows), pa.int32())]
    arrays += [pa.array(col, ARROW_SCHEMA.field(i + 1).type) for i, col in enumerate(columns)]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


def missing_rows(ring: RingRead, written: pa.Table) -> list[tuple]:
    """The ring's rows whose key no row of ``written`` (the rank's stream) holds."""
    rows = ring.rows()
    if not rows:
        return []
    first = min(r[3] for r in rows)
    kept = written.filter(pc.greater_equal(written["start_ns"], first))
    seen = set(zip(*(kept[c].to_pylist() for c in KEY), strict=True)) if kept.num_rows else set()
    return [r for r in rows if tuple(r[i] for i in _KEY_AT) not in seen]


def recover(run_dir: Path, rank: int, written: pa.Table) -> Recovered:
    """The rows of the rank's ring that its stream lacks; a ring that cannot be read is said
    in the note and recovers nothing."""
    empty = ARROW_SCHEMA.empty_table()
    try:
        ring = read_rank_ring(run_dir, rank)
    except RingError as exc:
        return Recovered(empty, f"rank {rank}: flight recorder not read ({exc})")
    rows = missing_rows(ring, written) if ring is not None else []
    if not rows:
        return Recovered(empty, None)
    steps = sorted({r[0] for r in rows})
    span = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    note = f"rank {rank}: {len(rows)} rows recovered from its flight recorder ({span})"
    return Recovered(rows_table(rank, rows), note)


def write_window(ring: RingRead, first_step: int, last_step: int, path: Path) -> int:
    """The ring's rows of steps ``first_step`` to ``last_step`` into an event stream at
    ``path``; the rows written."""
    rows = [r for r in ring.rows() if first_step <= r[0] <= last_step]
    writer = EventWriter(path, ring.rank)
    try:
        writer.write(rows)
    finally:
        writer.close()
    return len(rows)
