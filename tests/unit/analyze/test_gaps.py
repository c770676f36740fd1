"""A straggler whose extra time lies outside every recorded phase, on hand-built runs.

Two ranks on one clock, 40 ms steps (5, 1 warm-up). Rank 0: data 0-1 ms, forward 1-10,
1 ms of loss outside the phases, backward 11-20 (its gradient bucket issued at 19),
comm_wait 20-37, optimizer 37-40. Rank 1 does ``HOST`` ms of host work at the start of
each step, before the batch (after the previous optimizer step), then the same phases
``HOST`` later: the others wait for it at the bucket. In the ``metrics`` variant both
ranks first all_reduce a metric outside the phases, so rank 0 waits there instead, in
its own gap before the batch.
"""

from __future__ import annotations

import numpy as np
import pytest
from analyze_runs import coll_row, make_run, phase_row, step_row

from scalescope.analyze.cross_rank import TIE_FLOOR_NS, analyze_cross_rank
from scalescope.analyze.ranks.clocks import align_clocks
from scalescope.analyze.ranks.matching import match_collectives
from scalescope.analyze.steps.gaps import describe, gap_ms_per_step
from scalescope.analyze.steps.step_slots import measured_slots, sync_waits

MS = 1_000_000
BASE, PERIOD, STEPS, WARMUP = 1_000 * MS, 40 * MS, 5, 1
HOST = 8 * MS
METRIC_MS = 0.2 * MS
"""Transfer of the metric's all_reduce."""


def rank_rows(rank: int, metrics: bool) -> list[tuple]:
    rows, seq = [], 0
    for s in range(STEPS):
        t0 = BASE + s * PERIOD
        late = HOST if rank == 1 else 0
        lead = HOST + METRIC_MS if metrics else late  # where the batch starts
        issue = late or MS // 10  # rank 0: just after the previous optimizer step
        rows.append(step_row(s, t0, PERIOD, 8))
        if metrics:
            rows.append(coll_row(s, "all_reduce", t0 + issue, lead - issue, 4, seq, "metrics"))
            seq += 1
        shift = t0 + lead
        bucket_issue = shift + 18 * MS
        rows += [
            phase_row(s, "data", shift, 1 * MS),
            phase_row(s, "forward", shift + 1 * MS, 9 * MS),
            phase_row(s, "backward", shift + 11 * MS, 9 * MS),
            coll_row(s, "all_reduce", bucket_issue, t0 + 37 * MS - bucket_issue, 4096, seq),
            phase_row(s, "comm_wait", shift + 20 * MS, 17 * MS - lead),
            phase_row(s, "optimizer", t0 + 37 * MS, 3 * MS),
        ]
        seq += 1
    return rows


def _run(tmp_path, metrics: bool):
    rows = {r: [rank_rows(r, metrics)] for r in range(2)}
    return make_run(tmp_path, rows, world_size=2, warmup_steps=WARMUP)


@pytest.mark.parametrize(
    ("metrics", "late_ms", "busy_ms"),
    [(False, 8.0, (23.0, 31.0)), (True, 7.9, (23.3, 31.2))],
    ids=["bucket", "metrics"],
)
def test_the_straggler_outside_the_phases_is_named_with_where(tmp_path, metrics, late_ms, busy_ms):
    """Own time: the phases but comm_wait (23 ms) and the time outside them: rank 1's host
    work, and with ``metrics`` rank 0's 0.1 ms before it issues the metric and both ranks'
    0.2 ms of its transfer; rank 0's 7.9 ms of waiting for rank 1 there is not its work."""
    cross = analyze_cross_rank(_run(tmp_path, metrics), WARMUP)
    s = cross.straggler
    assert (s.rank, s.phase, s.between) == (1, "other", ("optimizer", "data"))
    assert s.phase_excess_ms == pytest.approx(late_ms)
    assert s.lateness_ms_per_step == pytest.approx(late_ms)
    busy = {w.rank: w.busy_ms_per_step for w in cross.ranks}
    assert (busy[0], busy[1]) == pytest.approx(busy_ms)
    mean = sum(busy_ms) / 2
    assert cross.load_imbalance_pct == pytest.approx(100 * (busy_ms[1] - mean) / mean)


def test_gaps_per_phase_pair_and_waits_taken_out(tmp_path):
    run = _run(tmp_path, metrics=True)
    gaps = gap_ms_per_step(run.events, measured_slots(run.events, WARMUP))
    assert set(gaps) == {("optimizer", "data"), ("forward", "backward")}
    assert list(gaps["forward", "backward"]) == [pytest.approx(1.0)] * 2
    # rank 0's 8.2 ms gap before the batch holds its 7.9 ms wait for the metric
    assert list(gaps["optimizer", "data"]) == [pytest.approx(8.2)] * 2
    m = match_collectives(run.events, align_clocks(run), TIE_FLOOR_NS)
    slots = measured_slots(run.events, WARMUP)
    sync = sync_waits(run.events, slots, m, np.ones(m.num_instances, dtype=bool))
    gaps = gap_ms_per_step(run.events, slots, sync)
    assert list(gaps["optimizer", "data"]) == [pytest.approx(0.3), pytest.approx(8.2)]


def test_words():
    assert describe(("optimizer", "data")) == "between the optimizer step and the next batch"
    assert describe(("data", "forward")) == "between the batch and forward"
    assert describe(("forward", "backward")) == "between forward and backward"
