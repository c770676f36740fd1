"""The flight recorders' kept windows (events/window-*) read beside streams recorded as
summaries (events/kept_windows.py): a summarised step every rank's windows hold whole gets
its full rows back; a step one rank's windows lack, a step the stream holds in full, and the
earliest step of a ring that wrapped do not."""

from __future__ import annotations

from scalescope.events.files import events_path, ring_path
from scalescope.events.flight_ring import read_ring
from scalescope.events.kept_windows import read_kept_windows
from scalescope.events.reader import read_event_stream
from scalescope.events.ring_rows import write_window
from scalescope.events.schema import Kind
from scalescope.events.writer import EventWriter
from scalescope.probe.flight_ring import RingWriter
from scalescope.probe.summary import StepSummaries
from scalescope.probe.windows import Windows

STEPS = 6
WINDOWS = Windows(first=2, every=100, width=0)
"""Steps 0-1 in full, 2-5 as summaries."""


def step_rows(step: int) -> list[tuple]:
    """A step of two all_reduces, a phase and the step's end (ROW_FIELDS)."""
    t = 1_000_000 * step
    return [
        (step, Kind.PHASE, "forward", t, 500, 0, 0, "", "", -1, "", -1),
        (step, Kind.COLLECTIVE, "all_reduce", t + 10, 100, 64, 16, "float32", "0", 2 * step,
         "gradients", -1),
        (step, Kind.COLLECTIVE, "all_reduce", t + 20, 100, 64, 16, "float32", "0", 2 * step + 1,
         "gradients", -1),
        (step, Kind.STEP, "step", t, 900, 0, 8, "", "", -1, "", -1),
    ]  # fmt: skip


def record(run_dir, rank: int, ring_rows: int = 1000) -> None:
    """The rank's stream at --record summary and its ring of every row."""
    ring = RingWriter(ring_path(run_dir, rank), rank, ring_rows, 1, 0)
    rows = [r for s in range(STEPS) for r in step_rows(s)]
    for row in rows:
        ring.append(row)
    ring.close()
    writer = EventWriter(events_path(run_dir, rank), rank)
    writer.write(StepSummaries(WINDOWS)(rows, final=True))
    writer.close()


def kept(run_dir, ranks=(0, 1)):
    found = read_kept_windows(run_dir, list(ranks))
    if found is None:
        return None
    out = {}
    for rank in ranks:
        added = found.added(rank, read_event_stream(events_path(run_dir, rank)).table)
        out[rank] = [] if added is None else sorted(set(added["step"].to_pylist()))
    return out


def test_summarised_steps_every_rank_kept_whole_come_back_in_full(tmp_path):
    for rank in (0, 1):
        record(tmp_path, rank)
        write_window(tmp_path, read_ring(ring_path(tmp_path, rank)).whole_steps(), 0)
    assert kept(tmp_path) == {0: [2, 3, 4, 5], 1: [2, 3, 4, 5]}, "steps 0-1 were full"
    found = read_kept_windows(tmp_path, [0, 1])
    stream = read_event_stream(events_path(tmp_path, 0)).table
    added = found.added(0, stream)
    assert set(added["kind"].to_pylist()) == {int(Kind.COLLECTIVE)}
    assert added["seq"].to_pylist() == list(range(4, 2 * STEPS)), "each call once"


def test_a_step_one_rank_did_not_keep_stays_summarised_on_every_rank(tmp_path):
    for rank in (0, 1):
        record(tmp_path, rank)
    write_window(tmp_path, read_ring(ring_path(tmp_path, 0)), 0)
    write_window(tmp_path, read_ring(ring_path(tmp_path, 1)).window(4, 5), 4)
    assert kept(tmp_path) == {0: [4, 5], 1: [4, 5]}
    assert kept(tmp_path, ranks=(0, 1, 2)) is None, "rank 2 kept nothing"


def test_a_wrapped_rings_earliest_step_is_left_out(tmp_path):
    record(tmp_path, 0, ring_rows=4 * 3 + 2)  # the last 3 steps and 2 rows of step 2
    ring = read_ring(ring_path(tmp_path, 0))
    assert ring.steps == (2, 5) and ring.whole_steps().steps == (3, 5)
    write_window(tmp_path, ring.whole_steps(), 3)
    assert kept(tmp_path, ranks=(0,)) == {0: [3, 4, 5]}


def test_a_second_copy_from_the_same_step_goes_beside_the_first(tmp_path):
    """A flush from the step a slowdown's copy began at (both name their file by it) keeps
    both files; the steps are read once."""
    for rank in (0, 1):
        record(tmp_path, rank)
        ring = read_ring(ring_path(tmp_path, rank))
        write_window(tmp_path, ring.window(2, 3), 2)
        write_window(tmp_path, ring.window(2, 5), 2)
    names = sorted(p.name for p in (tmp_path / "events").glob("window-*"))
    assert names == [f"window-000002{n}-rank-{r:05d}.arrows" for n in ("", ".1") for r in (0, 1)]
    assert kept(tmp_path) == {0: [2, 3, 4, 5], 1: [2, 3, 4, 5]}
    assert read_kept_windows(tmp_path, [0, 1]).added(
        0, read_event_stream(events_path(tmp_path, 0)).table
    )["seq"].to_pylist() == list(range(4, 2 * STEPS)), "each call once"
