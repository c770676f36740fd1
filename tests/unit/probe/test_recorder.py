"""The recorder's step and flush logic, and the batch-size rule of the data phase."""

from __future__ import annotations

import contextlib

import torch

from scalescope.events import EventTable, Kind, SymbolTable
from scalescope.events.reader import read_event_stream
from scalescope.probe.memory import MemoryPeak
from scalescope.probe.phases import batch_size_of
from scalescope.probe.recorder import Recorder


def _load(path) -> EventTable:
    return EventTable.from_arrow(read_event_stream(path).table, SymbolTable())


def test_batch_size_of_common_batch_shapes():
    x = torch.zeros(12, 3)
    assert batch_size_of((x, torch.zeros(12))) == 12
    assert batch_size_of([[x]]) == 12
    assert batch_size_of({"input_ids": torch.zeros(5, 7)}) == 5
    assert batch_size_of(torch.tensor(3.0)) == 0
    assert batch_size_of("text") == 0


def test_pending_collective_waits_for_completion_then_final_marks_it(tmp_path):
    path = tmp_path / "e.arrows"
    rec = Recorder(path, rank=0, flush_every_steps=1)
    done = rec.collective("all_reduce", 64, 16, "float32", "0", "user", 100)
    pending = rec.collective("all_reduce", 32, 8, "float32", "0", "user", 200)
    done[4] = 50
    rec.phase("forward", 150, 400)
    rec.end_step(500)
    first = _load(path)
    assert first.strings("name") == ["all_reduce", "forward", "step", "rss_peak"]
    assert first.seq[0] == 0
    rec.close()
    table = _load(path)
    assert pending[4] is None
    last = table.select(table.nbytes == 32)
    assert last.dur_ns.tolist() == [-1] and last.seq.tolist() == [1]


def test_steps_tile_time_and_count_samples(tmp_path):
    rec = Recorder(tmp_path / "e.arrows", rank=2)
    rec.phase("data", 1_000, 1_100)
    rec.loader_samples += 32
    rec.forward_samples += 16  # the loader's count wins when a step has one
    rec.end_step(2_000)
    rec.phase("data", 2_100, 2_200)
    rec.end_step(3_500)
    rec.forward_samples += 8
    rec.forward_samples += 8  # two forwards of one step (gradient accumulation)
    rec.end_step(4_000)
    rec.close()
    table = _load(tmp_path / "e.arrows")
    steps = table.of_kind(Kind.STEP)
    assert steps.start_ns.tolist() == [1_000, 2_000, 3_500]
    assert steps.dur_ns.tolist() == [1_000, 1_500, 500]
    assert steps.count.tolist() == [32, 0, 16]
    assert set(table.rank.tolist()) == {2}


def test_sequence_numbers_are_per_group(tmp_path):
    rec = Recorder(tmp_path / "e.arrows", rank=0)
    rows = [rec.collective("broadcast", 4, 1, "float32", g, "user", 0) for g in "0101"]
    assert [r[9] for r in rows] == [0, 0, 1, 1]


def test_memory_peak_sees_a_large_allocation():
    peak = MemoryPeak()
    peak.read_and_reset()
    block = bytearray(200 * 2**20)
    block[::4096] = b"x" * len(block[::4096])
    kind, nbytes = peak.read_and_reset()
    assert kind == "rss_peak"
    assert nbytes >= 200 * 2**20
    del block


class _SignalInEndStep:
    """A memory reader that raises as SIGTERM's handler would, after the step row went in."""

    def read_and_reset(self):
        raise KeyboardInterrupt


def test_a_signal_inside_end_step_still_counts_the_written_step(tmp_path):
    rec = Recorder(tmp_path / "e.arrows", rank=0)
    rec.end_step(1_000)
    rec.end_step(2_000)
    rec.memory = _SignalInEndStep()
    with contextlib.suppress(KeyboardInterrupt):
        rec.end_step(3_000)
    rec.close()
    steps = _load(tmp_path / "e.arrows").of_kind(Kind.STEP)
    assert steps.step.tolist() == [0, 1, 2]
    assert rec.step == 3


def test_a_stop_signal_during_a_flush_is_raised_once_the_rows_are_written(tmp_path, monkeypatch):
    """A SIGTERM whose handler ran while the main thread wrote a batch out once lost the
    batch (20 steps): the rows were taken, then the exception left before the write."""
    import signal

    import pytest

    from scalescope.probe import bootstrap

    for name in ("_ending", "_received", "_deferred", "_flushing"):
        monkeypatch.setattr(bootstrap, name, [])
    path = tmp_path / "e.arrows"
    rec = Recorder(path, rank=0, flush_every_steps=2)
    bootstrap.defer_signals_while_flushing(rec)
    write = rec.writer.write

    def signalled_then_written(rows):
        if not bootstrap._received:
            signal.raise_signal(signal.SIGTERM)
        write(rows)

    monkeypatch.setattr(rec.writer, "write", signalled_then_written)
    before = signal.signal(signal.SIGTERM, bootstrap._on_signal)
    try:
        rec.end_step(100)
        with pytest.raises(bootstrap.Interrupted) as stopped:
            rec.end_step(200)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert stopped.value.signum == signal.SIGTERM
    rec.close()
    table = _load(path)
    assert table.step[table.kind == Kind.STEP].tolist() == [0, 1]


def test_the_sink_gets_each_row_as_it_completes(tmp_path):
    """The flight recorder's feed: phases, waits, steps at once; a collective at its
    completion, never before; the C++ hooks' rows as ``collect`` takes them (finished ones)."""
    rec = Recorder(tmp_path / "e.arrows", rank=0, flush_every_steps=100)
    sunk: list[tuple] = []
    rec.sink = lambda row: sunk.append(tuple(row))
    native = [
        [0, Kind.COLLECTIVE, "broadcast", 10, 5, 8, 2, "float32", "1", 0, "user", -1],
        [0, Kind.COLLECTIVE, "broadcast", 20, None, 8, 2, "float32", "1", 1, "user", -1],
    ]
    rec.row_sources.append(lambda final: native if not final else [])
    row = rec.collective("all_reduce", 64, 16, "float32", "0", "user", 100)
    assert sunk == []
    rec.phase("forward", 150, 400)
    rec.completed(row, 450)
    rec.collect()
    rec.end_step(500)
    names = [(r[2], r[4]) for r in sunk]
    assert names[:4] == [("forward", 250), ("all_reduce", 350), ("broadcast", 5), ("step", 350)]
    assert ("broadcast", None) not in names
    rec.close()
    written = _load(tmp_path / "e.arrows")
    assert set(written.strings("name")) == {r[2] for r in sunk}, "every name the file holds"
