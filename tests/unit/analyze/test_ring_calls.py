"""A hang's last calls of each rank from its flight recorder, and their words."""

from __future__ import annotations

from scalescope.analyze.watch.hang import HangReport, RankHang
from scalescope.analyze.watch.ring_calls import last_calls
from scalescope.events.flight_ring import read_ring
from scalescope.events.schema import Kind
from scalescope.probe.flight_ring import RingWriter
from scalescope.report.views.hang import ring_lines


def _ring(tmp_path):
    ring = RingWriter(tmp_path / "r.ring", rank=1, rows=8, pid=5, wall_minus_perf_ns=10**9)
    for seq in range(7):
        ring.append([seq // 2, Kind.PHASE, "forward", 100 * seq, 5, 0, 0, "", "", -1, "", -1])
        dur = None if seq == 6 else 2_000_000
        ring.append([seq // 2, Kind.COLLECTIVE, "all_reduce", 100 * seq + 50, dur, 16, 4,
                     "float32", "0", seq, "user", -1])  # fmt: skip
    return read_ring(tmp_path / "r.ring")


def test_last_calls_are_the_collectives_latest_first(tmp_path):
    calls = last_calls(_ring(tmp_path), count=3)
    assert [(c.op, c.group, c.seq, c.step) for c in calls] == [
        ("all_reduce", "0", 6, 3), ("all_reduce", "0", 5, 2), ("all_reduce", "0", 4, 2)
    ]  # fmt: skip
    assert calls[0].dur_s is None and calls[1].dur_s == 0.002
    assert calls[1].started_s == (550 + 10**9) / 1e9
    assert len(last_calls(_ring(tmp_path))) == 4, "the ring of 8 rows kept 4 collectives"


def test_the_hang_text_lists_them_and_a_ring_not_read(tmp_path):
    ranks = (
        RankHang(rank=0, pid=1, alive=True, ring_note="rank-00000.ring: 12 bytes, shorter"),
        RankHang(rank=1, pid=2, alive=True, last_calls=last_calls(_ring(tmp_path), count=2)),
    )
    report = HangReport(detected_at=0.0, idle_s=40.0, hang_after_s=30.0, source="live",
                        ranks=ranks)  # fmt: skip
    assert ring_lines(report) == [
        "  rank 0: flight recorder not read (rank-00000.ring: 12 bytes, shorter)",
        "  rank 1's last calls (flight recorder, latest first): all_reduce #6 (group 0, 16 B, "
        "step 3, not completed); all_reduce #5 (group 0, 16 B, step 2, 2.00 ms)",
    ]
