"""``comm:dropped@tag:NAME`` (call_drop.py): a tag's calls taken out of the step, on a step
model written by hand whose answer is worked out by hand. 2 ranks in step, three blocking
calls a step: the script's own all-reduce (tag ``user``), then two gradient buckets. The own
time before the user's call is 1 ms: 0.4 ms of it in the optimizer phase, 0.6 ms outside every
phase (the host work that builds its message); 2 ms of forward before the first bucket, 1 ms of
backward before the second; the user's transfer 3 ms, each bucket's 1 ms; 0.5 ms after the
last. The step as measured: 4 ms own + 5 ms of transfers + 0.5 ms = 9.5 ms. Dropped: the 3 ms
transfer and the 0.6 ms host work go, the optimizer's 0.4 ms moves to the first bucket: 5.9
ms. ``comm:hidden@tag:user`` takes the transfer only: 6.5 ms."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scalescope.analyze.model.call_drop import ALL_PHASES, DROPPED
from scalescope.analyze.model.causes import apply_fix, candidate_causes, phases_named
from scalescope.analyze.model.replay import predict
from scalescope.analyze.model.step_grid import StepGrid

MS = 1e6
STEPS, RANKS = 3, 2
TAGS = ["user", "gradients", "gradients"]
HOSTS = {0: "vm", 1: "vm"}
DROP_USER = f"{DROPPED}@tag:user"


def parts(place: int, ms: float) -> np.ndarray:
    """A phase's parts (steps, ranks, collectives + 2): ``ms`` before the call at ``place``."""
    out = np.zeros((STEPS, RANKS, len(TAGS) + 2))
    out[:, :, place] = ms * MS
    return out


def grid_of(work_ms: list[list[float]]) -> StepGrid:
    """The step model with each rank's own time before each call (``work_ms[rank]``)."""
    k = len(TAGS)
    shape = (STEPS, RANKS, k)
    work = np.broadcast_to(np.array(work_ms) * MS, shape).copy()
    transfer = np.broadcast_to(np.array([3.0, 1.0, 1.0]) * MS, shape).copy()
    return StepGrid(
        steps=np.arange(STEPS), ranks=np.arange(RANKS), group=np.zeros((RANKS, k), dtype=int),
        work_ns=work, blocking=np.ones(shape, dtype=bool), transfer_ns=transfer,
        prejoin_ns=np.zeros((STEPS, RANKS)), post_ns=np.full((STEPS, RANKS), 0.5 * MS),
        joins=np.zeros((STEPS, RANKS), dtype=bool), gap_ns=np.zeros((STEPS, RANKS)),
        step_ns=work.sum(axis=2) + transfer.sum(axis=2) + 0.5 * MS,
        samples=np.ones((STEPS, RANKS)), ops=("all_reduce",) * k,
        op_names=np.full((RANKS, k), "all_reduce"), nbytes=np.array([[3_152_000, 2048, 10280]] * 2),
        tags=np.array([TAGS] * RANKS), waits_with=np.full((RANKS, k), -1),
        phase_ns={"optimizer": parts(0, 0.4), "forward": parts(1, 2.0), "backward": parts(2, 1.0)},
    )  # fmt: skip


@pytest.fixture
def grid() -> StepGrid:
    return grid_of([[1.0, 2.0, 1.0]] * RANKS)


def test_the_step_as_measured_replays_as_worked_out(grid):
    assert predict(grid, "as measured").mean_ms == pytest.approx(9.5)


def test_a_dropped_call_takes_its_transfer_and_the_host_work_that_builds_it(grid):
    fixed, note, _ = apply_fix(grid, DROP_USER, HOSTS)
    assert fixed.shape == (STEPS, RANKS, 2)
    assert fixed.tags[0].tolist() == ["gradients", "gradients"]
    assert fixed.work_ns[0, 0].tolist() == pytest.approx([2.4 * MS, 1.0 * MS])
    assert fixed.phase_ns["optimizer"][0, 0, 0] == pytest.approx(0.4 * MS)
    assert fixed.phase_ns["forward"].shape == (STEPS, RANKS, 4)
    assert predict(fixed, DROP_USER).mean_ms == pytest.approx(5.9)
    assert note == "1 call(s) a step dropped (tag user), 0.60 ms of host work a step"
    hidden, _, _ = apply_fix(grid, "comm:hidden@tag:user", HOSTS)
    assert predict(hidden, "hidden").mean_ms == pytest.approx(6.5)


def test_without_forward_and_backward_phases_no_host_work_is_taken(grid):
    """The time outside phases may then be the step's compute: only the call goes."""
    bare = replace(grid, phase_ns={"optimizer": grid.phase_ns["optimizer"]})
    fixed, note, _ = apply_fix(bare, DROP_USER, HOSTS)
    assert predict(fixed, DROP_USER).mean_ms == pytest.approx(6.5)
    assert note.endswith("0.00 ms of host work a step")


def test_a_dropped_call_is_no_longer_a_point_the_ranks_meet():
    """Rank 0 is 1 ms slower before the user's call, rank 1 1 ms slower after it: with the
    call kept (its transfer hidden) each waits for the other once (user's call at 2 ms, first
    bucket at 4 ms, second at 6: 7.5 ms); dropped, their own times add up alike (3 ms to the
    first bucket: 6.5 ms). No phase is recorded, so no host work is taken."""
    uneven = replace(grid_of([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0]]), phase_ns={})
    hidden, _, _ = apply_fix(uneven, "comm:hidden@tag:user", HOSTS)
    assert predict(hidden, "hidden").mean_ms == pytest.approx(7.5)
    fixed, _, _ = apply_fix(uneven, DROP_USER, HOSTS)
    assert predict(fixed, DROP_USER).mean_ms == pytest.approx(6.5)


@pytest.mark.parametrize(
    ("cause", "message"),
    [
        (DROPPED, "comm:dropped@tag:NAME"),
        (f"{DROPPED}@dim:world", "comm:dropped@tag:NAME"),
        (f"{DROPPED}@tag:gradients", "gradient buckets cannot be dropped"),
        (f"{DROPPED}@tag:metrics", "no replayed collective has the tag 'metrics'"),
    ],
)
def test_a_drop_it_cannot_make_is_refused(grid, cause, message):
    with pytest.raises(ValueError, match=message):
        apply_fix(grid, cause, HOSTS)


def test_calls_at_other_places_on_the_ranks_or_every_call_are_refused(grid):
    swapped = replace(grid, tags=np.array([TAGS, ["gradients", "user", "gradients"]]))
    with pytest.raises(ValueError, match="at other places"):
        apply_fix(swapped, DROP_USER, HOSTS)
    mine = replace(grid, tags=np.full(grid.tags.shape, "user"))
    with pytest.raises(ValueError, match="no call would be left"):
        apply_fix(mine, DROP_USER, HOSTS)


def test_the_grid_holds_every_phase_for_it_and_the_default_causes_leave_it(grid):
    assert set(ALL_PHASES) <= set(phases_named([f"{DROP_USER}+comm:hidden"]))
    assert "forward" not in phases_named(["comm:hidden@tag:user"])
    assert not any(c.startswith(DROPPED) for c in candidate_causes(grid, HOSTS))
