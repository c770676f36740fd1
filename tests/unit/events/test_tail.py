"""The incremental reader: only appended bytes are read, a half-written message waits."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from run_builders import phase_row, step_row, write_run_dir

from scalescope.events import EventWriter, RunMeta
from scalescope.events import tail as tail_module
from scalescope.events.reader import read_event_stream
from scalescope.events.run import events_path
from scalescope.events.tail import RunTail, StreamTail, kept_rows


def rows(first_step: int, n: int) -> list:
    return [step_row(s, s * 1_000, 900, 8) for s in range(first_step, first_step + n)]


def test_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "rank.arrows"
    writer = EventWriter(path, 0)
    tail = StreamTail(path)
    assert tail.read_new() == []  # the schema alone: no batch yet
    writer.write(rows(0, 5))
    first = tail.read_new()
    assert [b.num_rows for b in first] == [5]
    size_after_first = os.path.getsize(path)
    assert tail.bytes_read == size_after_first
    assert tail.read_new() == []  # nothing new: nothing read
    assert tail.bytes_read == size_after_first
    writer.write(rows(5, 3))
    second = tail.read_new()
    assert [b.num_rows for b in second] == [3]
    assert second[0].column("step").to_pylist() == [5, 6, 7]
    assert tail.bytes_read == os.path.getsize(path)  # each byte read once
    assert not tail.ended
    writer.close()
    assert tail.read_new() == [] and tail.ended


def test_half_written_message_is_read_when_complete(tmp_path: Path) -> None:
    whole = tmp_path / "whole.arrows"
    writer = EventWriter(whole, 3)
    for first in (0, 4, 8):
        writer.write(rows(first, 4))
    writer.close()
    data = whole.read_bytes()
    growing = tmp_path / "growing.arrows"
    tail = StreamTail(growing)
    got = []
    for cut in range(0, len(data) + 1, 97):  # the file grows in odd pieces
        growing.write_bytes(data[:cut])
        got += tail.read_new()
    growing.write_bytes(data)
    got += tail.read_new()
    steps = [s for b in got for s in b.column("step").to_pylist()]
    assert steps == read_event_stream(whole).table.column("step").to_pylist() == list(range(12))
    assert tail.ended and tail.problem is None


def test_run_tail_keeps_a_window_and_totals(tmp_path: Path) -> None:
    meta = RunMeta(run_id="t", command=[], script="x.py", world_size=2)
    batches = {
        r: [rows(0, 60), [*rows(60, 40), phase_row(99, "data", 99_000, 300)]] for r in (0, 1)
    }
    write_run_dir(tmp_path, meta, batches)
    tail = RunTail(tmp_path, keep_steps=10)
    assert tail.poll() == 2 * 101
    window = tail.window()
    assert sorted(np.unique(window.step)) == list(range(90, 100))
    assert tail.totals[0].steps == 100 and tail.totals[1].samples == 800
    assert tail.totals[0].first_start_ns == 0 and tail.totals[0].last_end_ns == 99_900
    assert tail.poll() == 0


def test_a_rank_not_started_yet_is_skipped(tmp_path: Path) -> None:
    meta = RunMeta(run_id="t", command=[], script="x.py", world_size=2)
    write_run_dir(tmp_path, meta, {0: [rows(0, 3)]})
    tail = RunTail(tmp_path)
    assert tail.poll() == 3
    assert not events_path(tmp_path, 1).exists()
    assert tail.silent_for(1, 0.0) is None


def window_by_rank(tail: RunTail) -> dict[int, list[int]]:
    window = tail.window()
    found: dict[int, list[int]] = {}
    for rank, step in zip(window.rank.tolist(), window.step.tolist(), strict=True):
        found.setdefault(rank, []).append(step)
    return found


def test_an_unchanged_file_is_not_read_again_and_a_grown_one_adds_its_rows(
    tmp_path: Path,
) -> None:
    """Ranks 0 and 2 write more, rank 1 does not: only the grown files are read, their new
    rows join the window in their rank's place, and steps older than the window leave it."""
    meta = RunMeta(run_id="t", command=[], script="x.py", world_size=3)
    write_run_dir(tmp_path, meta, {})
    writers = {r: EventWriter(events_path(tmp_path, r), r) for r in range(3)}
    for writer in writers.values():
        writer.write(rows(0, 8))
    tail = RunTail(tmp_path, keep_steps=5)
    assert tail.poll() == 3 * 8
    assert window_by_rank(tail) == {r: [3, 4, 5, 6, 7] for r in range(3)}
    read = {r: t.bytes_read for r, t in tail.tails.items()}
    assert tail.poll() == 0
    assert {r: t.bytes_read for r, t in tail.tails.items()} == read  # nothing read again
    writers[0].write(rows(8, 2))
    writers[2].write(rows(8, 4))
    assert tail.poll() == 6
    assert tail.tails[1].bytes_read == read[1]
    assert window_by_rank(tail) == {0: [5, 6, 7, 8, 9], 1: [3, 4, 5, 6, 7],
                                    2: [7, 8, 9, 10, 11]}  # fmt: skip
    assert [tail.totals[r].steps for r in range(3)] == [10, 8, 12]
    assert [tail.totals[r].last_step for r in range(3)] == [9, 7, 11]
    assert tail.totals[2].last_end_ns == 11_000 + 900
    for writer in writers.values():
        writer.close()


def test_a_long_file_read_in_chunks_gives_the_same_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read a few hundred bytes at a time and converted every few batches (as a long run's
    first look is, to bound its memory): the same window and totals as one read."""
    meta = RunMeta(run_id="t", command=[], script="x.py", world_size=2)
    batches = {r: [rows(s, 10) for s in range(0, 100, 10)] for r in (0, 1)}
    write_run_dir(tmp_path / "a", meta, batches)
    whole = RunTail(tmp_path / "a", keep_steps=15)
    whole.poll()
    monkeypatch.setattr(tail_module, "READ_CHUNK_BYTES", 300)
    monkeypatch.setattr(tail_module, "FLUSH_BYTES", 1000)
    chunked = RunTail(tmp_path / "a", keep_steps=15)
    assert chunked.poll() == 2 * 100
    assert chunked.tails[0].bytes_read > os.path.getsize(events_path(tmp_path / "a", 0)) // 2
    assert window_by_rank(chunked) == window_by_rank(whole) == {r: list(range(85, 100))
                                                                for r in (0, 1)}  # fmt: skip
    assert chunked.totals == whole.totals


def test_kept_rows_slices_or_gathers_the_same_rows() -> None:
    table = pa.table({"x": np.arange(1000)})
    for kept in (np.arange(1000) >= 900, np.arange(1000) % 3 == 0, np.zeros(1000, bool)):
        assert kept_rows(table, kept).column("x").to_pylist() == np.flatnonzero(kept).tolist()
