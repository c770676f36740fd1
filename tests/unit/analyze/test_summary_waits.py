"""Waiting versus transfer estimated from ``--record summary``'s rows (analyze/ranks/
summary_waits.py), on a hand-built 2-rank run whose waits are known: each step, a buffer
broadcast both ranks issue together, then a gradient all-reduce that rank 1 reaches 3 ms late
(both complete together). Its summaries are folded by the probe's own function; where a cell
holds one call the estimate is exact, so the cross-rank figures of the run recorded as
summaries equal those of the run recorded in full."""

from __future__ import annotations

import numpy as np
import pytest
from analyze_runs import coll_row, make_run, phase_row, step_row

from scalescope.analyze.cross_rank import analyze_cross_rank
from scalescope.analyze.model.whatif import what_if
from scalescope.analyze.ranks.groups import process_groups
from scalescope.analyze.ranks.summary_waits import summarised_steps, summary_waits
from scalescope.analyze.steps.pauses import analyze_pauses
from scalescope.analyze.steps.rank_split import rank_splits
from scalescope.events import Kind
from scalescope.probe.summary import fold_step

MS = 1_000_000
BASE, PERIOD, STEPS = 1_000 * MS, 20 * MS, 6
ARRIVE = {0: 2 * MS, 1: 5 * MS}
"""When each rank issues the all-reduce, from its step's start; both complete at 6 ms."""
WINDOW = (0, 1, 2)


def rank_rows(rank: int, step: int) -> tuple[list, list]:
    """(the step's own rows, its collectives) of one rank."""
    t0 = BASE + step * PERIOD
    own = [
        phase_row(step, "forward", t0, 8 * MS),
        phase_row(step, "backward", t0 + 8 * MS, 10 * MS),
        step_row(step, t0, PERIOD, 8),
    ]
    arrive = t0 + ARRIVE[rank]
    colls = [
        coll_row(step, "broadcast", t0 + MS, MS // 2, 1024, 2 * step, tag="buffers"),
        coll_row(step, "all_reduce", arrive, t0 + 6 * MS - arrive, 4096, 2 * step + 1),
    ]
    return own, colls


def recorded(tmp_path, summary: bool, window: tuple[int, ...] = WINDOW):
    rows = {}
    for rank in (0, 1):
        out = []
        for step in range(STEPS):
            own, colls = rank_rows(rank, step)
            if not summary or step in window:
                out += colls
            if summary:
                out += [r[:11] for r in fold_step(step, BASE + step * PERIOD, [
                    (*c, -1) for c in colls
                ])]  # fmt: skip
            out += own
        rows[rank] = [out]
    return make_run(tmp_path, rows, world_size=2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("summary")
    return recorded(tmp, summary=False), recorded(tmp, summary=True)


def test_steps_without_full_rows_are_the_summarised_ones(runs):
    full, summary = runs
    assert summarised_steps(full.events).tolist() == []
    assert summarised_steps(summary.events).tolist() == [3, 4, 5]


def test_a_group_seen_in_summaries_only_is_a_group(tmp_path):
    run = recorded(tmp_path, summary=True, window=())
    assert len(run.events.of_kind(Kind.COLLECTIVE)) == 0
    assert [(g.label, g.ranks) for g in process_groups(run)] == [("0", (0, 1))]


def test_the_estimate_of_one_call_cells_is_exact(runs):
    _full, summary = runs
    est = summary_waits(summary.events, (), tie_ns=50_000)
    reduce = summary.events.symbols.id_of("gradients")
    rows = est.tag == reduce
    assert sorted(set(est.step[rows].tolist())) == [3, 4, 5]
    wait = {int(r): float(w) for r, w in zip(est.rank[rows], est.wait_ns[rows], strict=True)}
    assert wait == {0: 3 * MS, 1: 0.0}
    transfer = est.transfer_ns[rows & (est.rank == 0)]
    assert np.allclose(transfer, MS)  # 4 ms in the call, 3 of them waiting
    assert np.allclose(est.late_ns[rows & (est.rank == 1)], 3 * MS)
    assert not est.late_ns[rows & (est.rank == 0)].any()
    assert not est.wait_ns[est.tag != reduce].any()  # the broadcast: both arrive together


def test_cross_rank_figures_equal_the_full_runs(runs):
    full, summary = runs
    a, b = analyze_cross_rank(full, 1), analyze_cross_rank(summary, 1)
    for x, y in zip(a.ranks, b.ranks, strict=True):
        assert x.rank == y.rank
        assert x.wait_ms_per_step == pytest.approx(y.wait_ms_per_step)
        assert x.busy_ms_per_step == pytest.approx(y.busy_ms_per_step)
        assert x.lateness_ms_per_step == pytest.approx(y.lateness_ms_per_step)
    assert [w.wait_ms_per_step for w in b.ranks] == pytest.approx([3.0, 0.0])
    assert b.overlap.comm_ms_per_step == pytest.approx(a.overlap.comm_ms_per_step)
    assert b.overlap.hidden_ms_per_step == pytest.approx(a.overlap.hidden_ms_per_step)
    assert a.overlap.comm_ms_per_step > 0


def test_each_ranks_time_in_collectives_counts_the_summarised_steps(runs):
    full, summary = runs
    a, b = rank_splits(full.events, 1), rank_splits(summary.events, 1)
    assert [x.collective_s for x in b] == pytest.approx([x.collective_s for x in a])
    assert [x.collective_s for x in a] == pytest.approx([0.0225, 0.0075])  # 5 steps x 4.5, 1.5 ms


def test_two_calls_of_a_cell_arrive_at_their_mean():
    from scalescope.events import EventTable, SymbolTable

    symbols = SymbolTable()
    rows = []
    for rank, offsets in ((0, (1 * MS, 3 * MS)), (1, (4 * MS, 4 * MS))):
        step = (0, int(Kind.STEP), "step", BASE, PERIOD, 0, 8, "", "", -1, "", -1)
        calls = [
            (0, int(Kind.COLLECTIVE), "all_gather", BASE + o, 6 * MS - o, 512, 128, "float32",
             "0", i, "", -1)
            for i, o in enumerate(offsets)
        ]  # fmt: skip
        for r in (step, *fold_step(0, BASE, calls)):
            rows.append((rank, *r))
    columns = list(zip(*rows, strict=True))
    names = ("rank", "step", "kind", "name", "start_ns", "dur_ns", "nbytes", "count", "dtype",
             "group", "seq", "tag", "peer")  # fmt: skip
    import pyarrow as pa

    from scalescope.events.schema import ARROW_SCHEMA

    table = pa.table(dict(zip(names, columns, strict=True)), schema=ARROW_SCHEMA)
    est = summary_waits(EventTable.from_arrow(table, symbols), (), tie_ns=50_000)
    # rank 0's mean arrival 2 ms, rank 1's 4 ms: 2 calls x 2 ms of waiting on rank 0
    assert dict(zip(est.rank.tolist(), est.wait_ns.tolist(), strict=True)) == {0: 4 * MS, 1: 0}
    assert est.calls.tolist() == [2, 2]
    assert est.late_ns.tolist() == [0, 4 * MS]


def test_the_whatif_replays_the_windows_and_names_them(runs):
    full, summary = runs
    assert what_if(full, 1).windows == ()
    result = what_if(summary, 1)
    assert result.windows == (1, 2)
    assert any("3 step(s) recorded as summaries" in why for why in result.left_out)


def stalled(tmp_path, summary: bool):
    """8 steps of 20 ms but step 6 (2 s): rank 1 stalls in forward, rank 0 waits 1.9 s in
    the all-reduce for it: a straggler's step, not the job's pause; steps 3-7 summarised."""
    rows = {}
    for rank in (0, 1):
        out, t = [], BASE
        for step in range(8):
            long = step == 6
            dur = 2_000 * MS if long else PERIOD
            fwd = (1_950 if long and rank == 1 else 8) * MS
            arrive = t + fwd
            end = t + (1_960 if long else 9) * MS
            call = coll_row(step, "all_reduce", arrive, end - arrive, 4096, step)
            out += [phase_row(step, "forward", t, fwd), step_row(step, t, dur, 8)]
            if not summary or step < 3:
                out.append(call)
            if summary:
                out += [r[:11] for r in fold_step(step, t, [(*call, -1)])]
            t += dur
        rows[rank] = [out]
    return make_run(tmp_path, rows, world_size=2)


def test_a_stall_the_others_waited_for_is_no_pause_in_summaries(tmp_path):
    full, summary = stalled(tmp_path, False), stalled(tmp_path, True)
    assert analyze_pauses(full.events, 1) is None
    assert analyze_pauses(summary.events, 1) is None
