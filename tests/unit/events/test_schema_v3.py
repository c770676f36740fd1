"""Schema ``events/3``: SUMMARY rows (``--record summary``) in the same columns, in a
zstd-compressed stream, read by the whole-file reader, ``load_run`` and the live tail; an
``events/2`` run recorded before them loads as it did."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from run_builders import step_row

from scalescope.events import EventWriter, Kind, RunMeta, load_run
from scalescope.events.run import events_path, write_json_atomic
from scalescope.events.tail import RunTail

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs"


def summary_row(step: int) -> tuple:
    return (step, int(Kind.SUMMARY), "all_gather", 900, 300, 3072, 3, "float32", "0", 10,
            "unshard:*", -1)  # fmt: skip


def test_summary_rows_in_a_compressed_stream_load_and_tail(tmp_path: Path) -> None:
    meta = RunMeta(run_id="new", command=[], script="x.py", world_size=2, status="completed")
    write_json_atomic(tmp_path / "run.json", meta)
    for rank in (0, 1):
        writer = EventWriter(events_path(tmp_path, rank), rank, compression="zstd")
        for step in range(3):
            writer.write([(*step_row(step, 1_000 * step, 1_000, 8), -1), summary_row(step)])
        writer.close()
    run = load_run(tmp_path)
    assert run.problems == []
    summaries = run.events.of_kind(Kind.SUMMARY)
    assert len(summaries) == 6 and summaries.count.tolist() == [3] * 6
    assert set(summaries.strings("tag")) == {"unshard:*"}
    tail = RunTail(tmp_path)
    tail.poll()
    assert len(tail.window().of_kind(Kind.SUMMARY)) == 6


def test_an_events_2_run_loads_as_recorded() -> None:
    path = events_path(RUNS / "fsdp_tp" / "run", 0)
    with pa.ipc.open_stream(pa.memory_map(str(path))) as reader:
        assert reader.schema.metadata[b"scalescope.schema"] == b"events/2"
    run = load_run(RUNS / "fsdp_tp" / "run")
    assert run.problems == [] and len(run.events.of_kind(Kind.COLLECTIVE)) > 0
    assert len(run.events.of_kind(Kind.SUMMARY)) == 0
