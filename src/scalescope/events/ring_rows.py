"""A ring's rows in the events schema: the rows a rank's event stream lacks (a rank killed
between two flushes) for ``load_run``, and a window of steps in files of their own (the
launcher's copy at a slowdown alert: the baseline before the onset and the onset, for the
what-if to replay)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scalescope.events.files import live_dir, window_events_path
from scalescope.events.flight_ring import RingError, RingRead, read_rank_ring, read_ring
from scalescope.events.schema import ARROW_SCHEMA, ROW_FIELDS, Kind
from scalescope.events.writer import EventWriter, rows_batch

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
    return pa.Table.from_batches([rows_batch(rank, rows)])


def missing_rows(ring: RingRead, written: pa.Table) -> list[tuple]:
    """The ring's rows of the steps after the last one the stream (``written``) ended, less
    those it holds already (a flush on request can land inside a step). Earlier steps are
    left as written: at ``--record summary`` their calls are in SUMMARY rows, which full rows
    would count twice. Only those rows become Python rows: a ring is 65,536 rows, and a job
    killed whole has as many rings as ranks."""
    ended = written.filter(pc.equal(written["kind"], int(Kind.STEP)))["step"]
    if len(ended):
        ring = ring.window(pc.max(ended).as_py() + 1, np.iinfo(np.int32).max)
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


@dataclass(frozen=True)
class Windows:
    """What ``write_windows`` kept: rows by rank, and the rings it could not read."""

    rows: dict[int, int]
    notes: list[str]


def write_windows(run_dir: Path, first_step: int, last_step: int, named: int) -> Windows:
    """Each ring of the run's live folder (this node's ranks): its rows of steps
    ``first_step`` to ``last_step`` into ``events/window-<named>-rank-N.arrows``."""
    kept, notes = {}, []
    for path in sorted(live_dir(run_dir).glob("rank-*.ring")):
        try:
            ring = read_ring(path).whole_steps().window(first_step, last_step)
        except RingError as exc:
            notes.append(str(exc))
            continue
        kept[ring.rank] = write_window(run_dir, ring, named)
    return Windows(kept, notes)


def write_window(run_dir: Path, ring: RingRead, named: int) -> int:
    """The rows of ``ring`` into ``events/window-<named>-rank-N.arrows`` (beside a copy of
    that name already there: a flush from the step a slowdown's copy began at); how many."""
    writer = EventWriter(_free(window_events_path(run_dir, named, ring.rank)), ring.rank)
    try:
        writer.write(ring.rows())
    finally:
        writer.close()
    return len(ring.records)


def _free(path: Path) -> Path:
    """``path``, or ``window-<step>.<n>-rank-N.arrows`` for the first n not taken."""
    n, free = 1, path
    while free.exists():
        free = path.with_name(path.name.replace("-rank-", f".{n}-rank-", 1))
        n += 1
    return free
