"""The steps the what-if's model holds are matched by their collectives' groups, ops and
sizes in issue order (analyze/model/step_match.py), not by their number: a step of the same
count in another order is left out in one line, and where most steps share another sequence
that one is modelled. Hand-built runs through the real writer and ``load_run``."""

from __future__ import annotations

import pytest
from analyze_runs import make_run
from run_builders import Row, coll_row, step_row

from scalescope.analyze.model.step_grid import build_grid
from scalescope.analyze.model.whatif import what_if

MS = 1_000_000
BIG, SMALL = 4 * 1024 * 1024, 1024
"""The all-reduce on group "0" and the one on group "1" of every step."""
STEPS = 8


def collective(step: int, at: int, nbytes: int, group: str, seq: int) -> Row:
    row = coll_row(step, "all_reduce", at, 2 * MS if nbytes == BIG else MS, nbytes, seq)
    return (*row[:8], group, *row[9:])


def rows(swapped: set[int]) -> list[Row]:
    """Per step: 10 ms of work, the big all-reduce, 5 ms, the small one, the step's end at
    25 ms; in the steps ``swapped``, the small one first."""
    out: list[Row] = []
    for step in range(STEPS):
        t0 = step * 30 * MS
        first, second = (
            ((SMALL, "1"), (BIG, "0")) if step in swapped else ((BIG, "0"), (SMALL, "1"))
        )
        out.append(collective(step, t0 + 10 * MS, *first, step))
        out.append(collective(step, t0 + 17 * MS, *second, step))
        out.append(step_row(step, t0, 25 * MS, 16))
    return out


def run_of(tmp_path, swapped_by_rank: dict[int, set[int]]):
    return make_run(tmp_path, {r: [rows(s)] for r, s in swapped_by_rank.items()}, world_size=2)


def test_a_step_of_the_same_count_in_another_order_is_left_out_in_one_line(tmp_path):
    run = run_of(tmp_path, {0: {5}, 1: {5}})
    grid, left = build_grid(run)
    assert grid.steps.tolist() == [0, 1, 2, 3, 4, 6, 7]
    assert left == [
        "1 step(s) whose collectives come in another order or differ in group, op or size "
        "from the 7 modelled steps'"
    ]
    assert grid.nbytes.tolist() == [[BIG, SMALL]] * 2
    result = what_if(run, run.meta.warmup_steps, causes=[])
    assert result.left_out == tuple(left) and result.steps == 6
    assert result.replayed.step_ms == pytest.approx(result.measured_step_ms, rel=0.01)


def test_a_step_where_one_rank_issues_them_in_another_order_is_left_out(tmp_path):
    """Same count on both ranks; rank 1's order differs in step 3: its n-th collective there
    is not rank 0's n-th."""
    grid, left = build_grid(run_of(tmp_path, {0: set(), 1: {3}}))
    assert 3 not in grid.steps.tolist() and len(grid.steps) == STEPS - 1
    assert left and left[0].startswith("1 step(s) whose collectives come in another order")


def test_where_most_steps_share_another_sequence_that_one_is_modelled(tmp_path):
    swapped = {1, 2, 4, 5, 7}
    grid, left = build_grid(run_of(tmp_path, {0: swapped, 1: swapped}))
    assert grid.steps.tolist() == sorted(swapped)
    assert grid.nbytes.tolist() == [[SMALL, BIG]] * 2
    assert left == [
        "3 step(s) whose collectives come in another order or differ in group, op or size "
        "from the 5 modelled steps'"
    ]


def test_steps_of_another_count_keep_their_own_line(tmp_path):
    """A step with a collective more (as a DDP job's first, with its parameter broadcast) is
    counted apart from the reordered ones."""
    by_rank = {r: [rows({6})] for r in (0, 1)}
    for r in (0, 1):
        by_rank[r][0].append(collective(0, 1 * MS, SMALL, "1", 99))
    grid, left = build_grid(make_run(tmp_path, by_rank, world_size=2))
    assert grid.steps.tolist() == [1, 2, 3, 4, 5, 7]
    assert left == [
        "1 step(s) whose collectives differ between ranks or never completed",
        "1 step(s) whose collectives come in another order or differ in group, op or size "
        "from the 6 modelled steps'",
    ]
