"""Sends paired with their recvs on a hand-built run with known times (analyze/p2p.py)."""

from __future__ import annotations

import numpy as np
import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import make_run

from scalescope.analyze.layouts.p2p import pair_p2p
from scalescope.analyze.ranks.clocks import align_clocks
from scalescope.analyze.ranks.matching import match_collectives
from scalescope.events import Kind

MS = 1_000_000
NBYTES = 4096


def p2p(step: int, op: str, start_ms: float, dur_ms: float, seq: int, peer: int,
        group: str = "0", kind: Kind = Kind.COLLECTIVE) -> tuple:  # fmt: skip
    """A send or recv row (or with ``kind`` WAIT, the host's wait on one: ``seq`` its n)."""
    start, dur = int(start_ms * MS), int(dur_ms * MS)
    return (step, int(kind), op, start, dur, NBYTES, NBYTES // 4, "float32", group, seq, "user",
            peer)  # fmt: skip


def step(n: int) -> tuple:
    return (n, int(Kind.STEP), "step", n * 20 * MS, 20 * MS, 0, 8, "", "", -1, "", -1)


def forward(n: int, start_ms: float, dur_ms: float) -> tuple:
    start = n * 20 * MS + int(start_ms * MS)
    return (n, int(Kind.PHASE), "forward", start, int(dur_ms * MS), 0, 0, "", "", -1, "", -1)


def rows() -> dict[int, list[list[tuple]]]:
    """Per step s (20 ms long, times below from its start): rank 0 sends to 1 twice on group
    "0" (at 1 and 8 ms, async: each waited for later), rank 1 receives from 0 twice (posted
    at 3 and 5 ms, blocking); rank 2 sends to 1 on group "7" at 2 ms, which rank 1 receives
    at 12 ms (its group numbers its sequence on its own); rank 1 sends back to 0 at 15 ms,
    received at 14 ms. Step 1 adds a send from 0 to 2 that nobody receives."""
    out: dict[int, list[tuple]] = {0: [], 1: [], 2: []}
    for s in range(2):
        t = 20 * s
        out[0] += [step(s), forward(s, 0, 1)]
        out[0] += [p2p(s, "send", t + 1, 6, 3 * s, 1), p2p(s, "send", t + 8, 4, 3 * s + 1, 1)]
        out[0] += [p2p(s, "recv", t + 14, 2, 3 * s + 2, 1)]
        out[0] += [p2p(s, "send", t + 2, 5, 2 * s, 1, kind=Kind.WAIT)]  # n = 2s: 1st of step
        out[0] += [p2p(s, "send", t + 9, 3, 2 * s + 1, 1, kind=Kind.WAIT)]
        out[1] += [
            step(s),
            p2p(s, "recv", t + 3, 4, 4 * s, 0),
            p2p(s, "recv", t + 5, 7, 4 * s + 1, 0),
        ]
        out[1] += [p2p(s, "recv", t + 12, 1, s, 2, group="7")]
        out[1] += [p2p(s, "send", t + 15, 1, 4 * s + 2, 0)]
        out[2] += [step(s), p2p(s, "send", t + 2, 11, s, 1, group="7")]
    out[0].append(p2p(1, "send", 30, 1, 6, 2))
    return {r: [batch] for r, batch in out.items()}


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path, rows(), world_size=3, warmup_steps=0)


def test_the_nth_send_from_a_to_b_meets_the_nth_recv_on_b_from_a(run):
    sides = pair_p2p(run.events, align_clocks(run))
    assert sides.pairs == 8 and sides.unpaired == 1  # the send to rank 2 found no recv
    n = sides.pairs
    pairs = sorted(
        (int(sides.rank[i]), int(sides.rank[n + i]), int(sides.local_issue_ns[i]) // MS,
         int(sides.local_issue_ns[n + i]) // MS)
        for i in range(n)
    )  # fmt: skip
    assert pairs == sorted(
        [(0, 1, t + 1, t + 3) for t in (0, 20)] + [(0, 1, t + 8, t + 5) for t in (0, 20)]
        + [(2, 1, t + 2, t + 12) for t in (0, 20)] + [(1, 0, t + 15, t + 14) for t in (0, 20)]
    )  # fmt: skip


def test_matching_makes_each_pair_one_instance_whatever_the_sequence_numbers(run):
    """On group "0" rank 0 numbers its send, send, recv 3s..3s+2 and rank 1 its recv, recv,
    send 4s..4s+2: by (group, seq) step 1's rows would meet the wrong partner or none. Each
    instance is one send with its recv (the pairs above, by their issue in ms); the send
    nobody received is on a channel of one rank, not counted as unmatched."""
    m = match_collectives(run.events, align_clocks(run), 0)
    assert m.num_instances == 8 and m.unmatched == 0
    assert (np.diff(np.r_[m.first, len(m.inst)]) == 2).all()
    issue_ms = (m.local_start_ns // MS).tolist()
    got = sorted(
        tuple(sorted(zip(m.rank[f : f + 2].tolist(), issue_ms[f : f + 2], strict=True)))
        for f in m.first
    )  # fmt: skip
    assert got == sorted(
        [((0, t + 1), (1, t + 3)) for t in (0, 20)] + [((0, t + 8), (1, t + 5)) for t in (0, 20)]
        + [((1, t + 12), (2, t + 2)) for t in (0, 20)]
        + [((0, t + 14), (1, t + 15)) for t in (0, 20)]
    )  # fmt: skip


def test_each_side_splits_into_wait_until_the_later_issue_and_transfer(run):
    sides = pair_p2p(run.events, align_clocks(run))
    n = sides.pairs
    got = {
        (int(sides.rank[i]), int(sides.local_issue_ns[i]) // MS): (
            sides.wait_ns[i] / MS, sides.transfer_ns[i] / MS,
            sides.blocked_wait_ns[i] / MS, sides.blocked_transfer_ns[i] / MS,
        )
        for i in range(2 * n)
        if sides.step[i] == 0
    }  # fmt: skip
    assert got == {
        (0, 1): (2, 4, 1, 4),  # later issue at 3; its wait from 2 to 7: 1 before 3
        (1, 3): (0, 4, 0, 4),
        (0, 8): (0, 4, 0, 3),  # waited 9 to 12, the recv posted long before
        (1, 5): (3, 4, 3, 4),  # blocking: posted at 5, the send at 8
        (2, 2): (10, 1, 10, 1),  # no WAIT row: the call is the blocked time
        (1, 12): (0, 1, 0, 1),
        (1, 15): (0, 1, 0, 1),
        (0, 14): (1, 1, 1, 1),
    }
    assert (sides.wait_ns + sides.transfer_ns == sides.dur_ns).all()


def test_waiting_for_the_peer_is_communication_and_the_totals_per_peer(run):
    analysis = analysed(run)
    assert analysis.p2p is not None and analysis.p2p.pairs == 8
    ranks = {r.rank: r for r in analysis.p2p.ranks}
    assert ranks[0].wait_ms_per_step == pytest.approx(1 + 1)  # its first send, its recv
    assert ranks[1].wait_ms_per_step == pytest.approx(3)
    assert ranks[2].wait_ms_per_step == pytest.approx(10)
    assert ranks[0].transfer_ms_per_step == pytest.approx(4 + 3 + 1)
    assert ranks[2].bytes_per_step == NBYTES
    waits = {w.rank: w for w in analysis.cross_rank.ranks}
    for rank, expected in ((0, 2), (1, 3), (2, 10)):
        assert waits[rank].wait_ms_per_step == pytest.approx(expected)
        assert waits[rank].busy_ms_per_step == pytest.approx(20 - expected)
    peers = {(p.rank, p.peer, p.op): p for p in analysis.p2p.peers}
    assert set(peers) == {(0, 1, "send"), (0, 1, "recv"), (1, 0, "recv"), (1, 0, "send"),
                          (1, 2, "recv"), (2, 1, "send")}  # fmt: skip
    send = peers[(0, 1, "send")]
    assert (send.count, send.nbytes, send.group) == (4, 4 * NBYTES, "0")
    assert (send.wait_ms, send.transfer_ms) == pytest.approx((2 * 1, 2 * (4 + 3)))
    assert (send.call_wait_ms, send.call_transfer_ms) == pytest.approx((2 * 2, 2 * (4 + 4)))
    assert peers[(1, 2, "recv")].group == "7"


def test_a_run_without_peers_has_no_pairs(tmp_path):
    """Rows from before the peer column (or another tool's trace): -1, nothing paired."""
    plain = {r: [[row[:-1] for row in b] for b in batches] for r, batches in rows().items()}
    run = make_run(tmp_path, plain, world_size=3, warmup_steps=0)
    assert (run.events.peer == -1).all()
    assert pair_p2p(run.events, align_clocks(run)) is None
    assert analysed(run).p2p is None
    assert (run.events.kind == int(Kind.WAIT)).sum() == 4  # kept, unpaired


def test_the_report_shows_the_pairs_only_where_there_are_some(run, tmp_path):
    from scalescope.report.media.report_json import report_json
    from scalescope.report.views.run import run_document

    analysis = analysed(run)
    sections = {getattr(b, "title", None): b for b in run_document(analysis).blocks}
    tables = {t.title: t for t in sections["Point-to-point"].blocks if hasattr(t, "rows")}
    by_rank = tables["Point-to-point per rank"]
    assert [row[0] for row in by_rank.rows] == ["2", "1", "0"]  # the most waiting first
    assert by_rank.rows[0][1] == "10.00"
    assert tables["Point-to-point per peer"].rows[0][:5] == ("2", "send", "1", "7", "2")
    doc = report_json(analysis, None)
    assert doc["p2p"]["pairs"] == 8 and len(doc["p2p"]["peers"]) == 6
    plain = {r: [[row[:-1] for row in b] for b in batches] for r, batches in rows().items()}
    without = analysed(make_run(tmp_path, plain, world_size=3, warmup_steps=0))
    assert "Point-to-point" not in {getattr(b, "title", None) for b in run_document(without).blocks}
    assert report_json(without, None)["p2p"] is None
