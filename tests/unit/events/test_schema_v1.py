"""Event files written before the ``peer`` column (schema ``events/1``) still load: every row
gets peer -1, in the whole-file reader, ``load_run`` and the live tail alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from run_builders import coll_row, step_row

from scalescope.events import Kind, RunMeta, load_run
from scalescope.events.reader import read_event_stream
from scalescope.events.run import events_path, write_json_atomic
from scalescope.events.schema import ARROW_SCHEMA, V1_SCHEMA
from scalescope.events.tail import RunTail


def rows() -> list[tuple]:
    return [coll_row(0, "send", 100, 50, 4096, 0, "user"), step_row(0, 0, 1_000, 8)]


def write_v1(path: Path, rank: int, batches: list[list[tuple]]) -> None:
    """A stream as the probe wrote it under ``events/1``: eleven fields, no peer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, V1_SCHEMA) as writer:
        for batch in batches:
            columns = list(zip(*batch, strict=True))
            arrays = [pa.array([rank] * len(batch), pa.int32())]
            arrays += [pa.array(c, V1_SCHEMA.field(i + 1).type) for i, c in enumerate(columns)]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=V1_SCHEMA))


def test_the_v1_schema_is_the_current_one_without_peer() -> None:
    assert V1_SCHEMA.metadata[b"scalescope.schema"] == b"events/1"
    assert ARROW_SCHEMA.metadata[b"scalescope.schema"] == b"events/3"
    assert ARROW_SCHEMA.names == [*V1_SCHEMA.names, "peer"]


def test_a_v1_stream_reads_with_peer_minus_one(tmp_path: Path) -> None:
    path = tmp_path / "rank.arrows"
    write_v1(path, 3, [rows(), rows()])
    read = read_event_stream(path)
    assert read.problem is None and read.batches == 2
    assert read.table.schema.remove_metadata() == ARROW_SCHEMA.remove_metadata()
    assert read.table.column("peer").to_pylist() == [-1] * 4
    assert read.table.column("nbytes").to_pylist() == [4096, 0, 4096, 0]


def test_a_v1_run_loads_and_tails(tmp_path: Path) -> None:
    meta = RunMeta(run_id="old", command=[], script="x.py", world_size=2, status="completed")
    write_json_atomic(tmp_path / "run.json", meta)
    for rank in (0, 1):
        write_v1(events_path(tmp_path, rank), rank, [rows()])
    run = load_run(tmp_path)
    assert run.problems == []
    assert len(run.events) == 4 and (run.events.peer == -1).all()
    sends = run.events.of_kind(Kind.COLLECTIVE)
    assert sends.strings("name") == ["send", "send"] and (sends.peer == -1).all()
    tail = RunTail(tmp_path)
    assert tail.poll() == 4
    assert np.array_equal(tail.window().peer, np.full(4, -1))


def test_a_stream_of_another_schema_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "rank.arrows"
    other = pa.schema([("rank", pa.int32()), ("x", pa.int64())])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, other):
        pass
    read = read_event_stream(path)
    assert read.problem == "unknown event schema" and read.table.num_rows == 0
