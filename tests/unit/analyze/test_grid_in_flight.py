"""DDP's buffer broadcasts in the what-if's model (analyze/model/step_grid.py): c10d's
``broadcast_coalesced`` keeps two buckets in flight and waits for them in C++ after issuing
both, so the first is asynchronous (the rank issues the second before it completes) and the
wait for a late peer lies in the second. The case of tests/data/faultbench/ddp-data-marginal
(step 6): rank 1 sleeps ~5 ms in its DataLoader; rank 0 issues its second broadcast 3.8 ms
after its first, on a loaded 2-core machine, yet before rank 1 has even arrived: that time
cannot be a wait for rank 1 and stays rank 0's own. Hand-built runs through the real writer
and ``load_run``."""

from __future__ import annotations

import numpy as np
import pytest
from analyze_runs import make_run
from run_builders import Row, coll_row, phase_row, step_row

from scalescope.analyze.model.step_grid import build_grid

US = 1_000
MS = 1_000 * US
STEP = 20 * MS
STEPS = 6

RANK_0 = {"b1": (1 * MS, 6_900 * US), "b2": (4_800 * US, 13 * MS)}
"""Issue and completion (from the step's start) of rank 0's broadcasts: the first is issued
at once and completes once rank 1 arrives; the second is issued before that."""
RANK_1 = {"b1": (6_600 * US, 12_800 * US), "b2": (7 * MS, 13 * MS)}
"""Rank 1's, after ~5 ms of data: it arrives last, at 6.6 ms."""


def rank_rows(times: dict[str, tuple[int, int]], data_ns: int) -> list[Row]:
    """Per step: data, the two buffer broadcasts, a gradient all-reduce from 15 to 17 ms,
    the step's end at 20 ms."""
    out: list[Row] = []
    for step in range(STEPS):
        t0 = step * STEP
        out.append(phase_row(step, "data", t0 + 300 * US, data_ns))
        for k, name in enumerate(("b1", "b2")):
            issue, done = times[name]
            out.append(
                coll_row(step, "broadcast", t0 + issue, done - issue, 1024, 3 * step + k, "buffers")
            )
        out.append(coll_row(step, "all_reduce", t0 + 15 * MS, 2 * MS, 4096, 3 * step + 2))
        out.append(step_row(step, t0, STEP, 16))
    return out


def test_a_broadcast_in_flight_when_the_rank_issues_the_next_is_asynchronous(tmp_path):
    run = make_run(
        tmp_path, {0: [rank_rows(RANK_0, 200 * US)], 1: [rank_rows(RANK_1, 5 * MS)]}, world_size=2
    )
    grid, left = build_grid(run)
    assert left == [] and grid.ops == ("broadcast", "broadcast", "all_reduce")
    assert grid.blocking[0].tolist() == [[False, True, True]] * 2
    work_ms = grid.work_ns[0] / MS
    assert work_ms[0] == pytest.approx([1.0, 3.8, 2.0])
    assert work_ms[1] == pytest.approx([6.6, 0.4, 2.0])


def test_the_wait_for_the_last_arrival_lies_in_the_second_broadcast(tmp_path):
    """Rank 0 arrives at its second broadcast when its first completes (6.9 ms, as
    matching.py arrives a rank at a group's next collective), rank 1 at 12.8 ms: the second
    broadcast ends 0.2 ms after the last arrival, and what rank 0 waited lies before that."""
    run = make_run(
        tmp_path, {0: [rank_rows(RANK_0, 200 * US)], 1: [rank_rows(RANK_1, 5 * MS)]}, world_size=2
    )
    grid, _ = build_grid(run)
    assert np.allclose(grid.transfer_ns[:, :, 1], 200 * US)
    own_ms = grid.own_ns()[0] / MS
    assert own_ms == pytest.approx([1.0 + 3.8 + 2.0 + 3.0, 6.6 + 0.4 + 2.0 + 3.0])
