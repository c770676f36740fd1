"""The incremental reader: only appended bytes are read, a half-written message waits."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from run_builders import phase_row, step_row, write_run_dir

from scalescope.events import EventWriter, RunMeta
from scalescope.events.reader import read_event_stream
from scalescope.events.run import events_path
from scalescope.events.tail import RunTail, StreamTail


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
