"""Per-rank split of a run's time: collectives (union of intervals), data wait, window."""

from __future__ import annotations

import numpy as np
import pytest
from analyze_runs import make_run
from run_builders import coll_row, phase_row, step_row

from scalescope.analyze.steps.rank_split import rank_splits, union_ns

MS = 1_000_000


def brute_union(intervals: list[tuple[int, int]]) -> int:
    covered = set()
    for start, end in intervals:
        covered.update(range(start, end))
    return len(covered)


@pytest.mark.parametrize("seed", range(5))
def test_union_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 200, 30)
    ends = starts + rng.integers(0, 40, 30)
    expected = brute_union(list(zip(starts.tolist(), ends.tolist(), strict=True)))
    assert union_ns(starts, ends) == expected


def test_union_of_nothing_is_zero():
    assert union_ns(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) == 0.0


def test_steps_window_counts_overlapping_collectives_once(tmp_path):
    """Rank 0: warm-up step 0, measured steps 1-2 (200 ms); two overlapping allreduces in
    step 1 (10-40 ms and 30-60 ms: 50 ms together), one in warm-up left out; data 5 ms."""
    rows = [
        step_row(0, 0, 100 * MS, 4),
        coll_row(0, "all_reduce", 50 * MS, 20 * MS, 64, 0),
        step_row(1, 100 * MS, 100 * MS, 4),
        phase_row(1, "data", 100 * MS, 5 * MS),
        coll_row(1, "all_reduce", 110 * MS, 30 * MS, 64, 1),
        coll_row(1, "all_reduce", 130 * MS, 30 * MS, 64, 2),
        step_row(2, 200 * MS, 100 * MS, 4),
        coll_row(2, "all_reduce", 290 * MS, 30 * MS, 64, 3),  # runs 10 ms past the window
    ]
    run = make_run(tmp_path, {0: [rows]}, world_size=1, warmup_steps=1)
    (split,) = rank_splits(run.events, 1)
    assert split.steps == 2
    assert split.window_s == pytest.approx(0.2)
    assert split.collective_s == pytest.approx(0.06)
    assert split.data_s == pytest.approx(0.005)
    assert split.collective_pct == pytest.approx(30.0)
    assert split.data_pct == pytest.approx(2.5)


def test_loop_without_steps_uses_the_span_of_its_events(tmp_path):
    """PCA-like: data phases then one allreduce; rank 1 has a collective that never ended."""
    rank0 = [
        phase_row(0, "data", 0, 10 * MS),
        phase_row(0, "data", 20 * MS, 10 * MS),
        coll_row(0, "all_reduce", 40 * MS, 60 * MS, 64, 0, tag="user"),
    ]
    rank1 = [phase_row(0, "data", 0, 50 * MS), coll_row(0, "all_reduce", 50 * MS, -1, 64, 0)]
    run = make_run(tmp_path, {0: [rank0], 1: [rank1]}, world_size=2, warmup_steps=0)
    first, second = rank_splits(run.events, 0)
    assert (first.rank, first.steps, first.window_s) == (0, 0, pytest.approx(0.1))
    assert first.collective_pct == pytest.approx(60.0)
    assert first.data_pct == pytest.approx(20.0)
    assert second.window_s == pytest.approx(0.05) and second.collective_s == 0.0
