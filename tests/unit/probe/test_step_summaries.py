"""``--record summary`` in the probe: a step's calls folded into SUMMARY rows (probe/summary.py),
the window steps also written in full (probe/windows.py), through the recorder's flush."""

from __future__ import annotations

import pytest

from scalescope.events import EventTable, Kind, SymbolTable
from scalescope.events.reader import read_event_stream
from scalescope.probe.recorder import Recorder
from scalescope.probe.summary import StepSummaries, fold_step, joined, size_class
from scalescope.probe.windows import WINDOWS_VARIABLE, Windows, parse_windows, windows_from_env

C, W = int(Kind.COLLECTIVE), int(Kind.WAIT)


def call(step, start, dur, nbytes, op="all_gather", group="0", tag="unshard:a", peer=-1, kind=C):
    return (step, kind, op, start, dur, nbytes, nbytes // 4, "float32", group, 0, tag, peer)


def test_size_class_is_floor_log2_of_a_calls_bytes():
    assert [size_class(n) for n in (0, 1, 2, 3, 4, 1023, 1024, 1025)] == [-1, 0, 1, 1, 2, 9, 10, 10]


def test_a_differing_tag_keeps_its_common_prefix():
    assert joined({"gradients"}) == "gradients"
    assert joined({"unshard:blocks.0", "unshard:blocks.1"}) == "unshard:*"
    assert joined({"unshard:a", "reduce_grads:a"}) == "*"
    assert joined({"unshard:a", "user"}) == "*"


def test_fold_sums_each_key_and_offsets_from_the_step_start():
    rows = [
        call(3, 1_100, 40, 1024, tag="unshard:a"),
        call(3, 1_300, 60, 1500, tag="unshard:b"),  # same class (10) as 1024
        call(3, 1_200, 10, 4096, op="reduce_scatter", tag="reduce_grads:a"),
        call(3, 1_500, 7, 64, op="send", group="1", tag="", peer=1),
        call(3, 1_510, 5, 64, op="send", group="1", tag="", peer=1, kind=W),
        call(3, 1_600, -1, 1024, tag="unshard:c"),  # never completed: no time
    ]
    got = {(r[2], r[9], r[11]): r for r in fold_step(3, 1_000, rows)}
    assert set(got) == {("all_gather", 10, -1), ("reduce_scatter", 12, -1), ("send", 6, 1),
                        ("wait:send", 6, 1)}  # fmt: skip
    gather = got[("all_gather", 10, -1)]
    assert gather[:2] == (3, int(Kind.SUMMARY))
    assert gather[3] == 100 + 300 + 600  # arrival offsets, summed
    assert gather[4] == 40 + 60  # time in the call
    assert (gather[5], gather[6]) == (1024 + 1500 + 1024, 3)  # bytes, calls
    assert (gather[7], gather[8], gather[10]) == ("float32", "0", "unshard:*")
    assert got[("send", 6, 1)][8] == "1"


def test_windows_are_the_first_steps_and_width_every_k():
    w = Windows(first=3, every=10, width=2)
    assert [s for s in range(25) if w.full(s)] == [0, 1, 2, 10, 11, 20, 21]
    assert parse_windows("10:100:4") == Windows(10, 100, 4)


def test_the_first_window_reaches_past_a_long_warm_up(monkeypatch):
    monkeypatch.delenv(WINDOWS_VARIABLE, raising=False)
    assert windows_from_env(1) == Windows(10, 100, 4)
    assert windows_from_env(20) == Windows(28, 100, 4)
    monkeypatch.setenv(WINDOWS_VARIABLE, "3:10:2")
    assert windows_from_env(20) == Windows(3, 10, 2)


@pytest.mark.parametrize("text", ["10:100", "a:b:c", "1:0:0", "1:4:5", "-1:4:1"])
def test_bad_windows_are_one_line(text):
    with pytest.raises(ValueError, match="FIRST:EVERY:WIDTH|record windows need"):
        parse_windows(text)


def step_row(step, start, end):
    return (step, int(Kind.STEP), "step", start, end - start, 0, 8, "", "", -1, "", -1)


def test_calls_wait_for_their_steps_start_and_late_ones_add_a_row():
    fold = StepSummaries(Windows(first=1, every=100, width=0))
    out = fold([call(1, 1_050, 5, 64)])  # step 1 has not ended: held
    assert out == []
    out = fold([step_row(1, 1_000, 2_000), call(1, 1_900, 5, 64)])
    summary = [r for r in out if r[1] == Kind.SUMMARY]
    assert [(r[3], r[6]) for r in summary] == [(50 + 900, 2)]
    late = fold([call(1, 1_950, 30, 64)])  # completed a step later: its own row, same key
    assert [(r[1], r[3], r[6]) for r in late] == [(int(Kind.SUMMARY), 950, 1)]


def test_a_window_step_is_written_in_full_and_summarised():
    fold = StepSummaries(Windows(first=1, every=100, width=0))
    rows = [call(0, 10, 5, 64), call(0, 20, 5, 64), step_row(0, 0, 100)]
    out = fold(rows)
    assert [r[1] for r in out].count(C) == 2
    assert [r[1] for r in out].count(Kind.SUMMARY) == 1


def test_a_step_that_never_ended_is_written_in_full_at_the_end():
    fold = StepSummaries(Windows(first=0, every=100, width=0))
    assert fold([call(5, 10, 5, 64)]) == []
    assert fold([], final=True) == [call(5, 10, 5, 64)]


def test_a_call_that_never_completed_is_written_in_full_not_summarised():
    fold = StepSummaries(Windows(first=0, every=100, width=0))
    hung = call(5, 60, -1, 64)
    out = fold([step_row(5, 0, 100), call(5, 10, 5, 64), hung], final=True)
    assert hung in out
    (summary,) = [r for r in out if r[1] == Kind.SUMMARY]
    assert summary[6] == 1  # the completed call alone


def test_the_recorder_writes_summaries_outside_the_windows(tmp_path):
    path = tmp_path / "e.arrows"
    rec = Recorder(path, rank=0, flush_every_steps=2, compression="zstd")
    rec.fold = StepSummaries(Windows(first=1, every=100, width=0))
    for step in range(3):
        t = 1_000 * step
        for i in range(4):
            row = rec.collective("all_reduce", 256, 64, "float32", "0", "gradients", t + 10 * i)
            rec.completed(row, t + 10 * i + 5)
        rec.phase("forward", t, t + 900)
        rec.end_step(t + 1_000)
    rec.close()
    table = EventTable.from_arrow(read_event_stream(path).table, SymbolTable())
    full = table.select(table.kind == C)
    assert sorted(set(full.step.tolist())) == [0]
    summary = table.select(table.kind == int(Kind.SUMMARY))
    assert summary.step.tolist() == [0, 1, 2]
    assert summary.count.tolist() == [4, 4, 4] and summary.nbytes.tolist() == [1024] * 3
    assert summary.dur_ns.tolist() == [20, 20, 20]
    assert summary.start_ns.tolist() == [60, 60, 60]  # 0 + 10 + 20 + 30 from each step's start
    assert summary.seq.tolist() == [8, 8, 8]
    assert table.select(table.kind == int(Kind.STEP)).step.tolist() == [0, 1, 2]
